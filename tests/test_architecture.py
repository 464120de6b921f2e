"""The layers, enforced: a checker reads the import graph of core/ and gui/ with ``ast`` (imports
at module level and inside functions alike) and reports

- an upward import (a module may import its own layer or any lower one, never a higher one);
- an import cycle between modules, or between the packages that make up the layers;
- an import of another module's private (underscore) name, or ``module._name`` on an import;
- Qt anywhere in core; in core at module level anything beyond the standard library, numpy,
  gguf, platformdirs and rooflab itself (torch, transformers, safetensors, llama_cpp: inside
  the functions that use them);
- a window module importing the command line: the window and ``core/cli`` are two front ends
  over ``core/app``, and only the entry point (``gui/main.py``) starts the command line.

The same checker runs on a copy of the tree with violations planted in it, to show that it
fails when someone breaks a rule. A subprocess test checks the runtime side: importing all of
core loads no Qt and no torch."""

from __future__ import annotations

import ast
import pkgutil
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import rooflab.core

ROOT = Path(__file__).resolve().parents[1]

# source folder -> the package it installs as (pyproject.toml's package-dir)
PACKAGE_DIRS = {"core": "rooflab.core", "gui": "rooflab.gui"}

# Bottom first. A module belongs to the longest entry that is the module or a package above
# it; entries on one line share a layer. "rooflab.core" stands for the package's __init__ only
# (it re-exports the errors), so a new package under core has no layer until it is given one.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("rooflab.core", "rooflab.core.errors", "rooflab.core.jobs", "rooflab.core.files"),
    ("rooflab.core.values",),
    ("rooflab.core.io",),
    ("rooflab.core.predict",),
    ("rooflab.core.calibration",),
    ("rooflab.core.report",),
    ("rooflab.core.measure",),
    # what the front ends ask: names resolved, the scenario placed and summarised once
    ("rooflab.core.app",),
    ("rooflab.core.cli",),
    # the window, by role, bottom first: shared widgets and the worker thread; the state; the
    # plots; the panels; the dialogs; the controllers that drive panels; files written from the
    # screen; the application shell; the entry point
    ("rooflab.gui", "rooflab.gui.widgets", "rooflab.gui.workers"),
    ("rooflab.gui.state",),
    ("rooflab.gui.plots",),
    ("rooflab.gui.panels",),
    ("rooflab.gui.dialogs",),
    ("rooflab.gui.controllers",),
    ("rooflab.gui.export",),
    ("rooflab.gui.shell",),
    ("rooflab.gui.main",),
)
INIT_ONLY = frozenset({"rooflab.core", "rooflab.gui"})
DYNAMIC_IMPORTS = frozenset({"importlib.import_module", "import_module", "__import__"})

QT = frozenset({"PySide6", "pyqtgraph", "shiboken6"})
COMMAND_LINE = "rooflab.core.cli"
ENTRY_POINT = "rooflab.gui.main"        # the one window module that may start the command line
CORE_MODULE_LEVEL = frozenset({"numpy", "gguf", "platformdirs", "rooflab"}) | frozenset(sys.stdlib_module_names)


@dataclass(frozen=True, order=True)
class Violation:
    path: str       # relative to the scanned root, "/"-separated
    line: int
    rule: str       # upward, cycle, private, qt, module-level, no-layer, front-end
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.detail}"


@dataclass(frozen=True)
class Edge:
    """One import: ``importer`` names ``target`` (a module, or the package holding ``name``)."""

    importer: str
    target: str
    path: str
    line: int
    lazy: bool                  # inside a function: runs when called, not at import


# --- reading the graph ----------------------------------------------------------------------

def module_files(root: Path) -> dict[str, Path]:
    """rooflab module name -> source file, for every .py under the scanned folders."""
    modules = {}
    for folder, package in PACKAGE_DIRS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an ImportFrom names, relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it sits inside a function."""
    def walk(node: ast.AST, lazy: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, lazy
            yield from walk(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    yield from walk(tree, False)


def _dynamic_imports(tree: ast.Module) -> Iterator[tuple[str, int, bool]]:
    """(module, line, lazy) for each ``importlib.import_module("rooflab...")`` or
    ``__import__("rooflab...")`` whose name is a string constant: an import all the same."""
    def walk(node: ast.AST, lazy: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.Call) and _dotted(child.func) in DYNAMIC_IMPORTS and child.args
                    and isinstance(child.args[0], ast.Constant) and isinstance(child.args[0].value, str)):
                yield child.args[0].value, child.lineno, lazy
            yield from walk(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    yield from walk(tree, False)


def _attribute_chains(tree: ast.Module) -> Iterator[tuple[ast.Attribute, str, bool]]:
    """Each outermost ``a.b.c`` chain of attributes with its dotted text and whether it sits
    inside a function (``rooflab.gui`` after ``import rooflab`` reaches the module all the same)."""
    def walk(node: ast.AST, lazy: bool) -> Iterator[tuple[ast.Attribute, str, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Attribute):
                chain = _dotted(child)
                if chain:
                    yield child, chain, lazy
                    continue
            yield from walk(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    yield from walk(tree, False)


def _known_prefix(dotted: str, known: set[str]) -> str | None:
    """The longest module in ``known`` that ``dotted`` names or lies inside."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return None


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_module(target: str, importer: str) -> bool:
    """Whether ``target`` lies inside a private module or package of another package (a
    package may use its own private modules; nobody else may)."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        owner = ".".join(parts[:i])
        if _is_private(part) and not (importer == owner or importer.startswith(owner + ".")):
            return True
    return False


def read_module(module: str, path: Path, root: Path, known: set[str]) -> tuple[list[Edge], list[Violation]]:
    """The edges out of one module, and the private-name and third-party violations in it."""
    rel = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    in_core = module == "rooflab.core" or module.startswith("rooflab.core.")
    edges: list[Edge] = []
    problems: list[Violation] = []
    bound: dict[str, str] = {}          # local name -> the rooflab module it is bound to

    def external(name: str, line: int, lazy: bool) -> None:
        top = name.split(".")[0]
        if in_core and top in QT:
            problems.append(Violation(rel, line, "qt", f"core imports {name}"))
        elif in_core and not lazy and top not in CORE_MODULE_LEVEL:
            problems.append(Violation(rel, line, "module-level",
                                      f"core imports {name} at module level (import it inside the function)"))

    for node, lazy in _imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                external(alias.name, node.lineno, lazy)
                if alias.name == "rooflab":
                    bound[alias.asname or "rooflab"] = "rooflab"
                if alias.name.startswith("rooflab."):
                    edges.append(Edge(module, alias.name, rel, node.lineno, lazy))
                    if _private_module(alias.name, module):
                        problems.append(Violation(rel, node.lineno, "private", f"imports private module {alias.name}"))
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound.setdefault("rooflab", "rooflab")
            continue
        source = _absolute(node, module, is_package)
        external(source, node.lineno, lazy)
        if not source.startswith("rooflab"):
            continue
        for alias in node.names:
            full = f"{source}.{alias.name}"
            target = full if full in known else source
            edges.append(Edge(module, target, rel, node.lineno, lazy))
            if target == full:
                bound[alias.asname or alias.name] = full
            elif _is_private(alias.name):
                problems.append(Violation(rel, node.lineno, "private", f"imports {source}.{alias.name}"))
            if _private_module(target, module):
                problems.append(Violation(rel, node.lineno, "private", f"imports private module {target}"))

    for name, line, lazy in _dynamic_imports(tree):
        external(name, line, lazy)
        if name.startswith("rooflab."):
            edges.append(Edge(module, _known_prefix(name, known) or name, rel, line, lazy))
    for attr, chain, lazy in _attribute_chains(tree):   # rooflab.gui after "import rooflab"
        head, _, rest = chain.partition(".")
        if head in bound and rest:
            # only a chain that reaches further than the import itself (rooflab -> rooflab.gui)
            # is a new edge; "app.run" on an imported module is that import's edge already
            target = _known_prefix(f"{bound[head]}.{rest}", known)
            if target is not None and target not in (module, bound[head]):
                edges.append(Edge(module, target, rel, attr.lineno, lazy))

    for node in ast.walk(tree):                 # x._y on a name bound to an imported module
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            chain = _dotted(node.value)
            if chain and chain.split(".")[0] in bound:
                head, _, rest = chain.partition(".")
                owner = bound[head] + ("." + rest if rest else "")
                if owner in known and owner != module:
                    problems.append(Violation(rel, node.lineno, "private", f"uses {owner}.{node.attr}"))
    return edges, problems


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


# --- the rules ------------------------------------------------------------------------------

def unit_of(module: str) -> str | None:
    """The LAYERS entry ``module`` belongs to (None: no layer)."""
    best = None
    for layer in LAYERS:
        for unit in layer:
            inside = module == unit or (unit not in INIT_ONLY and module.startswith(unit + "."))
            if inside and (best is None or len(unit) > len(best)):
                best = unit
    return best


def layer_of(module: str) -> int | None:
    unit = unit_of(module)
    return next((i for i, layer in enumerate(LAYERS) if unit in layer), None)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _upward(edge: Edge) -> bool:
    mine, theirs = layer_of(edge.importer), layer_of(edge.target)
    return mine is not None and theirs is not None and theirs > mine


def _window_asks_the_command_line(edge: Edge) -> bool:
    """A gui module other than the entry point importing ``core/cli``: both are front ends."""
    window = edge.importer == "rooflab.gui" or edge.importer.startswith("rooflab.gui.")
    cli = edge.target == COMMAND_LINE or edge.target.startswith(COMMAND_LINE + ".")
    return window and cli and edge.importer != ENTRY_POINT


def check_layering(root: Path) -> list[Violation]:
    """Every layering violation in the core/ and gui/ folders under ``root``, sorted."""
    files = module_files(root)
    known = set(files)
    edges: list[Edge] = []
    problems: list[Violation] = []
    for module, path in files.items():
        more_edges, more_problems = read_module(module, path, root, known)
        edges += more_edges
        problems += more_problems
        if layer_of(module) is None:
            problems.append(Violation(path.relative_to(root).as_posix(), 1, "no-layer",
                                      f"{module} is in no layer (add it to LAYERS)"))
    for edge in filter(_upward, edges):
        problems.append(Violation(edge.path, edge.line, "upward",
                                  f"{edge.importer} (layer {layer_of(edge.importer)}) imports {edge.target} "
                                  f"(layer {layer_of(edge.target)})"))
    for edge in filter(_window_asks_the_command_line, edges):
        problems.append(Violation(edge.path, edge.line, "front-end",
                                  f"{edge.importer} imports {edge.target}: the window asks core/app, "
                                  f"not the command line (only {ENTRY_POINT} starts it)"))
    level = [e for e in edges if not _upward(e)]
    problems += _cycle_violations(level, lambda m: m, "modules")
    problems += _cycle_violations(level, lambda m: unit_of(m) or m, "packages")
    return sorted(set(problems))


def _cycle_violations(edges: list[Edge], node_of: Callable[[str], str], what: str) -> list[Violation]:
    """Each import that closes a loop in the graph whose nodes are ``node_of`` each module (the
    module itself, or its LAYERS entry), with the way back. Upward imports are left out: they
    are reported as such, so what remains are loops inside one layer."""
    inside = [e for e in edges if node_of(e.importer) != node_of(e.target)]
    graph: dict[str, set[str]] = {}
    for e in inside:
        graph.setdefault(node_of(e.importer), set()).add(node_of(e.target))
    problems = []
    for component in cycles(graph):
        members = set(component)
        for e in inside:
            a, b = node_of(e.importer), node_of(e.target)
            if a in members and b in members:
                loop = " -> ".join([a, *_path(graph, b, a, members)])
                problems.append(Violation(e.path, e.line, "cycle", f"{what}: {loop}"))
    return problems


def _path(graph: dict[str, set[str]], start: str, goal: str, allowed: set[str]) -> list[str]:
    """The shortest path from ``start`` to ``goal`` through ``allowed`` nodes (breadth first)."""
    previous: dict[str, str] = {start: start}
    queue = [start]
    for node in queue:
        if node == goal:
            break
        for nxt in sorted(graph.get(node, ()) & allowed):
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    path = [goal]
    while path[-1] != start:
        path.append(previous[path[-1]])
    return path[::-1]


# --- the tree as it is ----------------------------------------------------------------------

def test_every_module_has_a_layer_and_the_graph_is_read():
    files = module_files(ROOT)
    assert "rooflab.core.io.hf" in files and "rooflab.gui.main" in files and "rooflab.core" in files
    edges, _ = read_module("rooflab.core.io.hf", files["rooflab.core.io.hf"], ROOT, set(files))
    assert any(e.target == "rooflab.core.io.roles" and not e.lazy for e in edges)
    assert all(layer_of(m) is not None for m in files), [m for m in files if layer_of(m) is None]


def test_layering_holds():
    problems = check_layering(ROOT)
    assert not problems, "\n" + "\n".join(map(str, problems))


def test_core_imports_no_qt_or_torch():
    """The runtime side of the rules above: importing every core module loads none of them."""
    modules = [m.name for m in pkgutil.walk_packages(rooflab.core.__path__, "rooflab.core.")]
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            "    importlib.import_module(name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('PySide6', 'pyqtgraph', 'shiboken6', 'torch', 'transformers', 'safetensors', 'llama_cpp'))\n"
            "print(','.join(bad))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
    assert len(modules) > 10


def test_core_tests_touch_no_qt():
    """tests/core checks the engine alone: no Qt, no pytest-qt fixtures' module."""
    for path in sorted((ROOT / "tests" / "core").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, _ in _imports(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                qt = name.split(".")[0] in QT | {"pytestqt"} or name.startswith("rooflab.gui")
                assert not qt, f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"


# --- the checker catches what it should ------------------------------------------------------

def _plant(path: Path, code: str) -> int:
    """Append ``code`` to ``path`` (existing line numbers stay put); the line it starts on."""
    text = path.read_text(encoding="utf-8")
    if not text.endswith("\n"):
        text += "\n"
    path.write_text(text + code, encoding="utf-8")
    return text.count("\n") + 1


def test_the_checker_finds_planted_violations(tmp_path: Path):
    for folder in PACKAGE_DIRS:
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    before = set(check_layering(tmp_path))
    core = tmp_path / "core"
    expected: set[tuple[str, int, str]] = set()

    def plant(rel: str, code: str, *rules: str, offset: int = 0) -> None:
        line = _plant(core / rel, code) + offset
        expected.update((f"core/{rel}", line, rule) for rule in rules)

    plant("predict/roofline.py", "from rooflab.core.cli import main\n", "upward")
    plant("report/charts.py", "def later():\n    from rooflab.gui.main import main\n", "upward", offset=1)
    plant("report/tables.py", "from rooflab.core.predict.work import _secret\n", "private")
    plant("predict/work.py", "import rooflab.core.values._hidden\n", "private")
    plant("report/summary.py", "from ..values import quant\nquant._TABLE\n", "private", offset=1)
    plant("io/gguf.py", "def show():\n    import PySide6.QtWidgets\n", "qt", offset=1)
    plant("measure/machine/sysinfo.py", "import torch\n", "module-level")
    plant("measure/engines/torch/backend.py", "def fine():\n    import torch\n")          # lazy: allowed
    plant("values/quant.py", "import requests\n", "module-level")
    (core / "values" / "loop_a.py").write_text("from rooflab.core.values import loop_b\n")
    (core / "values" / "loop_b.py").write_text("def f():\n    from rooflab.core.values.loop_a import x\n")
    expected |= {("core/values/loop_a.py", 1, "cycle"), ("core/values/loop_b.py", 2, "cycle")}
    plant("jobs.py", "import rooflab.core.files.paths\n", "cycle")
    files_line = _plant(core / "files" / "atomic.py", "from rooflab.core import jobs\n")
    expected.add(("core/files/atomic.py", files_line, "cycle"))
    # imports that do not look like imports: by name at run time, or through a package's attributes
    plant("predict/sweep.py", 'import importlib\nimportlib.import_module("rooflab.core.cli.main")\n', "upward",
          offset=1)
    plant("report/text.py", '__import__("rooflab.core.measure.engines.engine")\n', "upward")
    plant("io/roles.py", "import rooflab\nrooflab.gui\n", "upward", offset=1)
    plant("values/defaults.py", "from rooflab import core as _c\n_c.measure\n", "upward", offset=1)
    (core / "plugins").mkdir()
    (core / "plugins" / "__init__.py").write_text('"""A package nobody placed."""\n')
    expected.add(("core/plugins/__init__.py", 1, "no-layer"))

    gui = tmp_path / "gui"  # the same rules inside the window
    line = _plant(gui / "widgets" / "theme.py", "def later():\n    from rooflab.gui.shell import app\n") + 1
    expected.add(("gui/widgets/theme.py", line, "upward"))
    line = _plant(gui / "plots" / "axis.py", "from rooflab.gui.panels import numbers_panel\n")
    expected.add(("gui/plots/axis.py", line, "upward"))
    # the window asking the command line (a layer below it, so no upward import): only the entry point may
    line = _plant(gui / "panels" / "fit_panel.py", "def hook():\n    from rooflab.core.cli import compare\n")
    expected.add(("gui/panels/fit_panel.py", line + 1, "front-end"))
    _plant(gui / "main.py", "def fine():\n    from rooflab.core.cli import compare\n")      # the entry point: allowed

    found = set(check_layering(tmp_path)) - before
    assert {(v.path, v.line, v.rule) for v in found} == expected, "\n".join(map(str, sorted(found)))


MAX_MODULE_LINES = 600      # a module past ~400 lines asks whether it holds two concepts (a smell, not a
                            # wall: see docs/architecture.md); past 600 it does, and this test says so


def test_no_module_is_past_600_lines():
    """No module of core/ or gui/ is past 600 lines. Length alone is a smell: a module is split
    by concern, never cut to get under a number (twins that only hold moved lines are worse)."""
    long = {str(path.relative_to(ROOT)): n for folder in PACKAGE_DIRS for path in sorted((ROOT / folder).rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, long


# Roles several modules play alike, each looked up by its module (docs/architecture.md, Glossary):
# the two entry points, and what each timing engine's child process runs and plans.
SHARED_NAMES = {"main", "child_job", "planned_points"}


def public_definitions(root: Path = ROOT) -> dict[str, list[str]]:
    """Each public top-level function or class name of core/ and gui/ -> the modules defining it."""
    found: dict[str, list[str]] = {}
    for folder in PACKAGE_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                defines = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                if defines and not node.name.startswith("_"):
                    found.setdefault(node.name, []).append(str(path.relative_to(root)))
    return found


def test_a_public_name_is_defined_once():
    """One word, one meaning: a public name defined in two modules is two meanings for a reader
    who meets it imported; only the roles of ``SHARED_NAMES`` are defined alike on purpose."""
    twice = {name: where for name, where in public_definitions().items() if len(where) > 1 and name not in SHARED_NAMES}
    assert not twice, twice


def test_the_duplicate_check_finds_a_planted_twin(tmp_path: Path):
    for folder in PACKAGE_DIRS:
        (tmp_path / folder).mkdir()
    (tmp_path / "core" / "a.py").write_text("def render():\n    pass\n\n\ndef _private():\n    pass\n")
    (tmp_path / "gui" / "b.py").write_text("class render:\n    pass\n\n\ndef _private():\n    pass\n")
    assert public_definitions(tmp_path) == {"render": ["core/a.py", "gui/b.py"]}
