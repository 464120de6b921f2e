"""The documentation, run: a doctest for README.md and docs/*.md.

Every fenced block tagged ``console`` (or ``sh``) holds commands, each on a line that starts
with ``$ ``; the lines after a command, up to the next command or the end of the block, are
what it prints on stdout. This test runs each command and compares:

- ``$ rooflab ...`` runs the ``rooflab`` entry point beside this interpreter (the venv's);
  ``$ python SCRIPT ...`` runs this interpreter on SCRIPT. No shell: a pipe, a redirection or
  any other program fails the test, so a page cannot show a command nobody ran.
- A page is one session: its commands run in order, in a scratch folder that links the
  checkout's benchmarks/, docs/, packaging/ and resources/, with ROOFLAB_CONFIG_DIR,
  ROOFLAB_DATA_DIR and ROOFLAB_CACHE_DIR pointed at empty folders (the user's settings,
  measurements and calibrations are never read or written).
- A quoted output matches line for line (trailing spaces aside). A line ``...`` matches any
  number of lines, ``...`` inside a line any text on that line. A command that should fail
  ends its output with ``[exit N]``; the text before it is then compared with stdout + stderr.
  No quoted output: only the exit status is checked.
- ``<!-- machine: DESCRIPTION, YYYY-MM-DD, SCRIPT -->`` before a block marks figures that
  depend on the machine, and SCRIPT must be the command the block runs. Such a block is run
  (``console``): either it prints a run's record, committed under docs/runs/ (the command names
  the file, e.g. ``--from-record docs/runs/X.json``), and is compared line for line like any
  other, or it measures afresh and is checked for shape only (the same lines, the same words,
  any numbers). A machine's figures in a block that is not run, or in a table, have no record
  to be checked against and are refused; so is a record no page prints.
- ``<!-- generated: architecture tree -->`` or ``<!-- generated: json keys of: COMMAND -->``
  before a ``text`` block: the block is what this file generates (the layer-ordered tree of
  core/ and gui/ from tests/test_architecture.py's LAYERS and the real files; the key tree of
  COMMAND's JSON output) and must equal it.
- A ``text`` block may show commands that are not run (a calibration takes minutes, an
  install changes the machine) only after ``<!-- not run: WHY -->``.
- ``<!-- snapshot: YYYY-MM-DD, COMMAND -->`` before a ``text`` block: what COMMAND printed on
  that date, for output that does not depend on the machine but takes too long for every run
  (the published-benchmark scores). With ROOFLAB_DOCS_SLOW=1 these run and are compared too.

Not run here: the README's two set-up commands, ``packaging/dev.sh run`` (creates .venv, then
opens the window) and ``packaging/dev.sh test`` (the same set-up, then this whole suite). This
file checks instead that the README shows exactly those two and that ``.ci/run`` runs exactly
the README's test command, and it runs dev.sh's set-up against a stand-in Python to check what
a first set-up prints while it works.

When a command's output changes on purpose, rewrite the quoted outputs from what the commands
print now (blocks with ``...`` or a machine marker are left for a person):

    python tests/test_docs.py --update [--slow] [README.md docs/PAGE.md ...]

(--slow also reruns the snapshot blocks and sets their date to today.)
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RUNS = DOCS / "runs"                # the records of machine-dependent runs the pages print
PAGES = (README, *sorted(DOCS.glob("*.md")))
README_MAX_LINES = 150
RUN_TAGS = frozenset({"console", "sh"})
SHELL_TAGS = RUN_TAGS | {"bash", "shell", "shell-session", "zsh"}
SETUP_COMMANDS = ("packaging/dev.sh run", "packaging/dev.sh test")
LINKED = ("benchmarks", "docs", "packaging", "resources")
SHELL_WORDS = frozenset({"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "2>&1"})
# a hang guard, never a speed check: the slowest command a page runs (bench_public_accuracy.py over
# 1,602 rows) takes 3-4 minutes with both cores busy, and no test may depend on the machine's load
COMMAND_TIMEOUT_S = 900
EXIT = re.compile(r"^\[exit (\d+)\]$")
MARKER = re.compile(r"^<!--\s*([a-z][a-z ]*?)\s*:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^```([\w+-]*)\s*$")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
TREE_WIDTH = 100
SLOW = os.environ.get("ROOFLAB_DOCS_SLOW") == "1"


# --- reading a page ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    """One ``$ `` line and the output quoted under it."""

    text: str                       # the command, without "$ "
    line: int                       # 1-based line of the "$ " in the page
    expected: tuple[str, ...]       # the quoted lines, [exit N] included


@dataclass(frozen=True)
class Block:
    """One fenced block with the marker comments just above it."""

    page: Path
    line: int                       # 1-based line of the opening fence
    tag: str
    body: tuple[str, ...]
    markers: dict[str, str]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[Command]:
        out: list[Command] = []
        for i, text in enumerate(self.body):
            if text.startswith("$ "):
                out.append(Command(text[2:].strip(), self.line + 1 + i, ()))
            elif out:
                last = out[-1]
                out[-1] = dataclasses.replace(last, expected=(*last.expected, text))
        return out


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        if end is None:
            raise AssertionError(f"{page.name}:{i + 1}: a fence that is never closed")
        markers, k = {}, i - 1
        while k >= 0 and (MARKER.match(lines[k]) or not lines[k].strip()):
            found = MARKER.match(lines[k])
            if found:
                markers[found.group(1)] = found.group(2)
            k -= 1
        blocks.append(Block(page, i + 1, opened.group(1), tuple(lines[i + 1:end]), markers))
        i = end + 1
    return blocks


# --- running a command ------------------------------------------------------------------------

def rooflab_program() -> str:
    beside = Path(sys.executable).with_name("rooflab")
    found = str(beside) if beside.exists() else shutil.which("rooflab")
    if found is None:
        raise AssertionError("no rooflab entry point beside this Python or on PATH: install the checkout first")
    return found


def argv(command: str) -> list[str]:
    """What runs for a documented command, or AssertionError saying why it cannot."""
    words = shlex.split(command)
    shell = SHELL_WORDS.intersection(words)
    if shell or any(w.startswith((">", "<", "$")) for w in words):
        raise AssertionError(f"`{command}`: no shell here (pipes, redirections, variables); show a plain command")
    if words[0] == "rooflab":
        return [rooflab_program(), *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    raise AssertionError(f"`{command}`: only `rooflab ...` and `python SCRIPT ...` commands are run; "
                         "show anything else in a text block after <!-- not run: WHY -->")


@dataclass
class Session:
    """The scratch folder and user folders one page's commands share."""

    cwd: Path
    env: dict[str, str]

    @classmethod
    def make(cls, folder: Path) -> Session:
        cwd = folder / "work"
        cwd.mkdir(parents=True)
        for name in LINKED:
            (cwd / name).symlink_to(ROOT / name, target_is_directory=True)
        env = dict(os.environ)
        for var, sub in (("ROOFLAB_CONFIG_DIR", "config"), ("ROOFLAB_DATA_DIR", "data"),
                         ("ROOFLAB_CACHE_DIR", "cache")):
            (folder / sub).mkdir()
            env[var] = str(folder / sub)
        env.update(COLUMNS="80", LC_ALL="C.UTF-8", PYTHONUNBUFFERED="1")
        return cls(cwd, env)

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv(command), cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)


# --- comparing what it printed ----------------------------------------------------------------

def _lines(text: str | tuple[str, ...]) -> list[str]:
    lines = [line.rstrip() for line in (text.splitlines() if isinstance(text, str) else text)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def record_of(command: str) -> Path | None:
    """The run's record under docs/runs/ that ``command`` prints, if it names one."""
    return next((ROOT / w for w in shlex.split(command) if w.startswith("docs/runs/")), None)


def shape_only(block: Block, command: Command) -> bool:
    """A machine's block measured afresh: its numbers are free. One that prints a committed
    record is compared exactly."""
    return "machine" in block.markers and record_of(command.text) is None


def shape(line: str) -> str:
    """A line with every number a ``#`` and runs of spaces one: what a machine leaves alone."""
    return " ".join(NUMBER.sub("#", line).split())


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` against ``expected``, ``...`` a wildcard (a line: any lines; in a line: any text)."""
    pattern = []
    for line in expected:
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            # within its line only: a wildcard free to cross lines made a quoted block that no
            # longer matched backtrack for tens of minutes instead of failing
            pattern.append(r"[^\n]*?".join(re.escape(part) for part in line.split("...")) + r"\n")
    return re.fullmatch("".join(pattern), "".join(f"{line}\n" for line in actual)) is not None


@dataclass(frozen=True)
class Outcome:
    command: Command
    block: Block
    printed: list[str]
    problem: str            # empty when the output matches

    def rewritten(self) -> list[str] | None:
        """The quoted lines made to say what was printed, keeping each line with ``...`` that
        still matches; None when a person must do it (a machine marker, a ``...`` line, a failed
        command, a different number of lines around a ``...``)."""
        if not self.problem or shape_only(self.block, self.command) or self.problem.startswith("!"):
            return None
        expected = _lines(self.command.expected)
        if not any("..." in line for line in expected):
            return self.printed
        if any(line.strip() == "..." for line in expected) or len(expected) != len(self.printed):
            return None
        return [e if "..." in e and matches([e], [p]) else p for e, p in zip(expected, self.printed, strict=True)]


def check_command(session: Session, block: Block, command: Command) -> Outcome:
    expected = _lines(command.expected)
    want_exit = 0
    if expected and EXIT.match(expected[-1]):
        want_exit = int(EXIT.match(expected[-1]).group(1))
        expected = expected[:-1]
    done = session.run(command.text)
    printed = _lines(done.stdout + (done.stderr if want_exit else ""))
    if done.returncode != want_exit:
        return Outcome(command, block, printed, f"!exit status {done.returncode}, not {want_exit}:\n"
                                                f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    if not command.expected:
        return Outcome(command, block, printed, "")
    machine = shape_only(block, command)
    ok = matches([shape(x) for x in expected], [shape(x) for x in printed]) if machine else matches(expected, printed)
    if ok:
        return Outcome(command, block, printed, "")
    diff = "\n".join(difflib.unified_diff(expected, printed, "quoted", "printed now", lineterm="", n=1))
    how = "shape (lines, words; numbers free)" if machine else "output"
    return Outcome(command, block, [*printed, *([f"[exit {want_exit}]"] if want_exit else [])],
                   f"{how} differs:\n{diff}")


# --- generated blocks -------------------------------------------------------------------------

def _wrapped(head: str, words: list[str], indent: int) -> list[str]:
    body = textwrap.wrap("  ".join(words), TREE_WIDTH - indent, break_long_words=False) or [""]
    return [f"{head:<{indent}}{body[0]}".rstrip(), *(" " * indent + rest for rest in body[1:])]


def tree_rows() -> list[list[tuple[str, list[Path]]]]:
    """core/ and gui/ by layer, top first: per layer, (folder or module, its files) rows, each
    file where tests/test_architecture.py's checker puts it (``module_files``, ``unit_of``)."""
    from tests.test_architecture import LAYERS, module_files, unit_of

    by_unit: dict[str, list[tuple[str, Path]]] = {}
    for module, path in module_files(ROOT).items():
        by_unit.setdefault(unit_of(module) or "(no layer)", []).append((module, path.relative_to(ROOT)))
    layers = [*(list(layer) for layer in reversed(LAYERS)), ["(no layer)"]]
    rows = []
    for layer in layers:
        folders: dict[str, list[Path]] = {}
        for unit in layer:
            for module, path in by_unit.get(unit, []):
                key = str(path) if module == unit and path.name != "__init__.py" else f"{path.parent}/"
                folders.setdefault(key, []).append(path)
        if folders:
            rows.append([(key, sorted(paths)) for key, paths in sorted(folders.items())])
    return rows


def architecture_tree() -> str:
    """The listing docs/architecture.md shows: one line per folder (or module a layer names on its
    own) with its modules, a blank line between layers, the top layer first."""
    lines: list[str] = []
    for layer in tree_rows():
        for label, paths in layer:
            names = [] if label.endswith(".py") else [p.name for p in paths]
            lines.extend(_wrapped(label, names, 28))
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def json_keys(value: object, path: str = "") -> list[str]:
    """Every object in a JSON document, one line each: its path and its keys in order; a list of
    objects is ``path[]`` with the keys its items use."""
    if isinstance(value, list):
        items = [v for v in value if isinstance(v, dict)]
        if not items:
            return []
        merged: dict[str, list[object]] = {}
        for item in items:
            for key, sub in item.items():
                merged.setdefault(key, []).append(sub)
        return _object_lines(f"{path}[]", {k: v[0] for k, v in merged.items()}, merged)
    if isinstance(value, dict):
        return _object_lines(path or ".", value, {k: [v] for k, v in value.items()})
    return []


def _object_lines(path: str, first: dict[str, object], every: dict[str, list[object]]) -> list[str]:
    lines = _wrapped(path, list(first) or ["(empty)"], 28) if len(path) < 27 else [path, *_wrapped("", list(first), 28)]
    for key, values in every.items():
        child = f"{'' if path == '.' else path}.{key}"
        sub = next((v for v in values if isinstance(v, (dict, list)) and v), None)
        if isinstance(sub, list):
            flat = [item for v in values if isinstance(v, list) for item in v]
            lines.extend(json_keys(flat, child))
        elif isinstance(sub, dict):
            lines.extend(json_keys(sub, child))
    return lines


def generate(block: Block, session: Session) -> tuple[str, str]:
    """(what the block should hold, a problem when it cannot be made)."""
    what = block.markers["generated"]
    if what == "architecture tree":
        return architecture_tree(), ""
    if what.startswith("json keys of:"):
        command = what.split(":", 1)[1].strip()
        done = session.run(command)
        if done.returncode != 0:
            return "", f"`{command}` exited {done.returncode}: {done.stderr[-2000:]}"
        return "\n".join(json_keys(json.loads(done.stdout))), ""
    return "", f"unknown generated block {what!r}"


# --- one page, run --------------------------------------------------------------------------

def run_page(page: Path, folder: Path, slow: bool = SLOW) -> list[tuple[Block, Command | None, list[str], str]]:
    """(block, command or None for a generated block, what it printed or generated, problem)
    for every run or generated block of ``page``, in order."""
    session = Session.make(folder)
    results: list[tuple[Block, Command | None, list[str], str]] = []
    for block in read_blocks(page):
        if "generated" in block.markers:
            made, problem = generate(block, session)
            if not problem and _lines(made) != _lines(block.body):
                diff = difflib.unified_diff(_lines(block.body), _lines(made), "in the page", "generated", lineterm="")
                problem = "the generated block differs:\n" + "\n".join(diff)
            results.append((block, None, _lines(made), problem))
        elif block.tag in RUN_TAGS or (slow and "snapshot" in block.markers):
            for command in block.commands():
                if command.text in SETUP_COMMANDS:
                    continue
                outcome = check_command(session, block, command)
                results.append((block, command, outcome.printed, outcome.problem))
    return results


def test_the_accuracy_page_quotes_what_the_public_benchmark_script_prints(tmp_path):
    """The published-benchmark scores on docs/accuracy.md are what the script prints today: it
    reads no machine (the fit and the held-out runs are deterministic), so unlike the other
    snapshots this one is rerun in every suite run (about half a minute)."""
    page = ROOT / "docs" / "accuracy.md"
    ran = [(block, command, problem) for block, command, _printed, problem in run_page(page, tmp_path, slow=True)
           if command is not None and "bench_public_accuracy" in command.text]
    assert ran, "docs/accuracy.md shows no run of benchmarks/accuracy/bench_public_accuracy.py"
    failures = [f"{block.where}: {problem.lstrip('!')}" for block, _command, problem in ran if problem]
    assert not failures, ("\n\n".join(failures)
                          + "\n\n(refresh: python tests/test_docs.py --update --slow docs/accuracy.md)")


def _summary(text: str) -> list[str]:
    """The out-of-sample summary lines of a quoted bench_public_accuracy.py run."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("out of sample, median over machines"))
    return lines[start:start + 5]


def test_the_readme_quotes_the_summary_the_accuracy_page_checks():
    """The README's accuracy table is the summary the script prints: the same lines as the
    accuracy page's run, which the test above reruns every suite run."""
    readme, page = (_summary((ROOT / name).read_text(encoding="utf-8")) for name in ("README.md", "docs/accuracy.md"))
    assert readme == page and len(readme) == 5 and "leave one machine out" in readme[2]     # the headline first


def test_a_wildcard_in_a_line_stays_in_its_line():
    """``...`` in a line is any text of that line; a line of its own is any lines. A wildcard that
    crossed lines let "a...b" quote two lines, and made a 300-line table that no longer matched its
    quote backtrack for tens of minutes instead of failing."""
    assert matches(["a...b"], ["a and b"]) and not matches(["a...b"], ["a", "b"])
    assert matches(["a", "...", "b"], ["a", "x", "y", "b"]) and matches(["a", "...", "b"], ["a", "b"])
    table = [f"{i:4d}  model {i}  ... tok/s ..." for i in range(40)]
    printed = ["head"] + [f"{i:4d}  model {i}  1 tok/s x" for i in range(300)]
    assert not matches(["head", *table[:3], "...", *table[3:]], printed)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_on_the_page_prints_what_the_page_quotes(page, tmp_path):
    failures = [f"{block.where} `{command.text if command else block.markers['generated']}`: {problem.lstrip('!')}"
                for block, command, _printed, problem in run_page(page, tmp_path) if problem]
    assert not failures, ("\n\n".join(failures)
                          + "\n\n(output changed on purpose? python tests/test_docs.py --update rewrites it)")


# --- the rules of a page --------------------------------------------------------------------

def _machine_marker_problem(block: Block) -> str:
    parts = [p.strip() for p in block.markers["machine"].split(",")]
    if len(parts) < 3 or not parts[0]:
        return "machine marker must read <!-- machine: DESCRIPTION, YYYY-MM-DD, SCRIPT -->"
    try:
        datetime.date.fromisoformat(parts[-2])
    except ValueError:
        return f"machine marker's date {parts[-2]!r} is not YYYY-MM-DD"
    if block.tag not in RUN_TAGS:
        return ("a machine's figures in a block that is not run: commit the run's record under docs/runs/ and "
                "show the script printing it (`console`), or leave the figures out")
    missing = [str(r.relative_to(ROOT)) for c in block.commands() if (r := record_of(c.text)) and not r.is_file()]
    if missing:
        return f"the block prints {missing}, which are not in the checkout"
    return _script_problem(parts[-1], block, "machine")


def _script_problem(script: str, block: Block, marker: str) -> str:
    """Why ``script`` (a marker's command) is not what ``block`` shows, or ""."""
    words = shlex.split(script)
    if not words or words[0] not in ("python", "rooflab"):
        return f"{marker} marker's command {script!r} is neither `python SCRIPT` nor `rooflab ...`"
    if words[0] == "python" and (len(words) < 2 or not (ROOT / words[1]).is_file()):
        return f"{marker} marker names {script!r}, whose script is not in the checkout"
    shown = [c.text for c in block.commands()]
    if shown and not any(c.startswith(script) for c in shown):
        return f"{marker} marker names `{script}`, but the block shows {shown}"
    return ""


def _snapshot_marker_problem(block: Block) -> str:
    date, _, script = (part.strip() for part in block.markers["snapshot"].partition(","))
    try:
        datetime.date.fromisoformat(date)
    except ValueError:
        return "snapshot marker must read <!-- snapshot: YYYY-MM-DD, COMMAND -->"
    if block.tag != "text" or not block.commands():
        return "a snapshot is a `text` block that shows its command"
    return _script_problem(script, block, "snapshot")


def block_problems(block: Block) -> list[str]:
    """What breaks the rules of the module docstring in one block."""
    problems = []
    has_prompt = any(line.startswith("$ ") for line in block.body)
    if block.tag in SHELL_TAGS - RUN_TAGS:
        problems.append(f"tag `{block.tag}` is not run: tag it `console` (run) or `text` (not run, say why)")
    if not block.tag:
        problems.append("a block without a tag: tag it `console`, `text`, `json`, ...")
    if block.tag in RUN_TAGS and "generated" not in block.markers:
        first = next((line for line in block.body if line.strip()), "")
        if not first.startswith("$ "):
            problems.append(f"a `{block.tag}` block starts with a command: `$ ...` (found {first!r})")
    if block.tag not in RUN_TAGS and has_prompt and not (block.markers.get("not run") or "snapshot" in block.markers):
        problems.append("commands in a block that is not run: put <!-- not run: WHY --> above it")
    if "snapshot" in block.markers and (problem := _snapshot_marker_problem(block)):
        problems.append(problem)
    if "machine" in block.markers and (problem := _machine_marker_problem(block)):
        problems.append(problem)
    if "generated" in block.markers and block.tag != "text":
        problems.append("a generated block is tagged `text`")
    return [f"{block.where}: {p}" for p in problems]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_block_is_run_or_says_why_not(page):
    problems = [p for block in read_blocks(page) for p in block_problems(block)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_machine_marker_stands_above_a_block(page):
    """A marker above a Markdown table (or prose) marks figures no test can reach: a machine's
    table is a run's record, printed in a block."""
    lines = page.read_text(encoding="utf-8").splitlines()
    stray = []
    for i, line in enumerate(lines):
        found = MARKER.match(line)
        if found and found.group(1) == "machine":
            k = next((j for j in range(i + 1, len(lines)) if lines[j].strip() and not MARKER.match(lines[j])), None)
            if k is None or not FENCE.match(lines[k]):
                stray.append(f"{page.name}:{i + 1}")
    assert not stray, f"machine markers above no fenced block: {stray}"


def test_every_run_record_is_printed_by_a_page():
    """A record under docs/runs/ backs a block; one no page prints is a run the docs dropped."""
    printed = {record_of(c.text) for page in PAGES for block in read_blocks(page) for c in block.commands()}
    orphans = sorted(str(p.relative_to(ROOT)) for p in RUNS.glob("*") if p.is_file() and p not in printed)
    assert not orphans, f"no page prints {orphans}"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    text = page.read_text(encoding="utf-8")
    missing = [target for target in LINK.findall(text)
               if "://" not in target and not (page.parent / target).exists()]
    assert not missing, f"{page.name} links to {missing}, which are not in the checkout"


CODE_PATH = re.compile(r"`((?:core|gui|benchmarks|tests|packaging|resources|docs|\.ci)/[\w./-]*)`")
PREDICT_NAME = re.compile(r"`(\w+)\.(\w+)`")
FILE_EXTENSIONS = frozenset({"csv", "png", "json", "md", "py", "txt", "gguf", "toml"})


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_and_function_the_page_names_exists(page):
    """The tree moved once under the old README (``measure/transfer.py``, ``predict/fit.py``);
    a path in backquotes, or a ``module.function`` of core/predict/, must exist today."""
    import importlib

    text = page.read_text(encoding="utf-8")
    missing = [path for path in CODE_PATH.findall(text) if not (ROOT / path.rstrip("/")).exists()]
    for module, name in PREDICT_NAME.findall(text):
        if (ROOT / "core" / "predict" / f"{module}.py").is_file() and name not in FILE_EXTENSIONS:
            if not hasattr(importlib.import_module(f"rooflab.core.predict.{module}"), name):
                missing.append(f"{module}.{name}")
    assert not missing, f"{page.name} names {missing}, which do not exist"
    assert "shared/reference" not in text, "the lessons are not in the repository: describe the formulas instead"


def test_the_readme_is_short_and_links_every_docs_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; depth goes in docs/"
    linked = set(LINK.findall("\n".join(lines)))
    pages = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert pages, "no docs/ pages"
    assert pages <= linked, f"README.md does not link {sorted(pages - linked)}"


def test_the_readme_sets_up_with_two_commands_and_ci_runs_its_test_command():
    shown = [c.text for b in read_blocks(README) if b.tag in RUN_TAGS for c in b.commands()]
    assert [c for c in shown if c.startswith("packaging/")] == list(SETUP_COMMANDS)
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == f"exec {SETUP_COMMANDS[1]}", f".ci/run ends with {ci[-1]!r}, not the README's test command"
    assert os.access(ROOT / "packaging" / "dev.sh", os.X_OK) and os.access(ROOT / ".ci" / "run", os.X_OK)


def test_the_architecture_tree_lists_every_module_once():
    """The tree docs/architecture.md shows (generated, and compared above) holds every .py file
    under core/ and gui/ (``find core gui -name '*.py'``) once, and none outside a layer."""
    listed = [path for layer in tree_rows() for _label, paths in layer for path in paths]
    on_disk = sorted(p.relative_to(ROOT) for folder in ("core", "gui") for p in (ROOT / folder).rglob("*.py"))
    assert sorted(listed) == on_disk
    assert "(no layer)" not in architecture_tree(), "a module outside every layer of tests/test_architecture.py"


def test_the_architecture_table_has_a_row_per_layer_in_order():
    """docs/architecture.md's table of layers (the role of each) names the packages of each
    layer of tests/test_architecture.py's LAYERS, top first, one row per layer."""
    from tests.test_architecture import INIT_ONLY, LAYERS

    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    table = text[text.index("| layer, top first |"):].split("\n\n")[0]      # the layer table, not the glossary
    rows = [line for line in table.splitlines() if line.startswith("| ") and "`" in line.split("|")[2]]
    shown = [{"rooflab." + path.rstrip("/").removesuffix(".py").replace("/", ".")
              for path in re.findall(r"`([^`]+)`", row.split("|")[2])} for row in rows]
    assert shown == [set(layer) - INIT_ONLY for layer in reversed(LAYERS)]


# --- the set-up script, against a stand-in Python ------------------------------------------

STAND_IN = """#!/bin/sh
# A stand-in for python3 and the venv's python: records what it was asked, sleeps for pip.
echo "$0 $*" >> "$ROOFLAB_STAND_IN_LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
if [ "$1" = "-c" ]; then exit 1; fi                       # import torch: not yet
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
    sleep "$ROOFLAB_STAND_IN_PIP_S"
    while [ $# -gt 0 ]; do                                  # pip wheel -w DIR: a wheel in DIR
        if [ "$1" = "-w" ]; then mkdir -p "$2" && : > "$2/llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"; fi
        shift
    done
    exit 0
fi
exit 0                                                      # the probe, pytest: they pass
"""


def _dev_sh(tmp_path: Path, *args: str, pip_s: str = "0") -> subprocess.CompletedProcess[str]:
    python = tmp_path / "python3"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": str(python),
           "ROOFLAB_VENV": str(tmp_path / "venv"), "ROOFLAB_STAND_IN_LOG": str(tmp_path / "log"),
           "ROOFLAB_STAND_IN_PIP_S": pip_s, "ROOFLAB_PROGRESS_S": "0.4", "ROOFLAB_SKIP_TOOLS": "1"}
    return subprocess.run(["bash", str(ROOT / "packaging" / "dev.sh"), *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_first_set_up_says_what_it_does_while_pip_works(tmp_path):
    done = _dev_sh(tmp_path, "test", "-q", pip_s="0.9")
    assert done.returncode == 0, done.stderr
    said = done.stderr
    assert "first set-up" in said and "compiling llama.cpp" in said and "5-14 minutes" in said, said
    assert re.search(r"still (installing|compiling)", said), f"no progress line while pip ran:\n{said}"
    calls = (tmp_path / "log").read_text().splitlines()
    pips = [c for c in calls if " -m pip install" in c]
    assert "torch==2.13.0" in pips[0], "torch is installed first, pinned"
    # no extra index unless asked: a machine that reaches only PyPI (CI) would wait on it
    assert "--extra-index-url" not in pips[0]
    assert any(".[llamacpp,test]" in c for c in pips) and calls[-1].endswith("-m pytest -q")
    # llama.cpp is built for named instruction sets, bypassing pip's wheel cache, then probed
    (build,) = [c for c in calls if " -m pip wheel" in c]
    assert "--no-cache-dir" in build and "llama-cpp-python==0.3.36" in build
    assert any(c.endswith("packaging/probe_llamacpp.py") for c in calls)
    assert "a tiny model ran on this processor" in said
    again = _dev_sh(tmp_path, "test")
    assert again.returncode == 0 and "first set-up" not in again.stderr, "a set-up already made stays quiet"


# --- the screenshot script ----------------------------------------------------------------

def test_make_screenshot_leaves_the_tracked_screenshot_alone_by_default(tmp_path, monkeypatch):
    """It overwrote the README's picture when run without arguments; now only --replace-tracked
    does. (docs/window.md runs the script itself, with --out.)"""
    import importlib.util

    script = ROOT / "packaging" / "screenshots" / "make_screenshot.py"
    spec = importlib.util.spec_from_file_location("make_screenshot", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    tracked = ROOT / "packaging" / "screenshots" / "main-window.png"
    assert module.output_path(None, False) == tmp_path / "rooflab-main-window.png"
    assert module.output_path("shot.png", False) == Path("shot.png")
    assert module.output_path(None, True) == tracked


# --- rewriting quoted outputs -----------------------------------------------------------------

def _redate_snapshot(lines: list[str], block: Block) -> None:
    """Set the date of the snapshot marker above ``block`` to today."""
    for k in range(block.line - 2, -1, -1):
        if lines[k].lstrip().startswith("<!-- snapshot:"):
            lines[k] = re.sub(r"\d{4}-\d{2}-\d{2}", datetime.date.today().isoformat(), lines[k], count=1)
            return


def update(pages: list[Path], slow: bool = False) -> int:
    """Write what the commands print now over the quoted outputs that differ; 1 when some
    difference needs a person (a whole-line ``...``, a machine marker, a failing command)."""
    left = 0
    for page in pages:
        with tempfile.TemporaryDirectory() as folder:
            results = run_page(page, Path(folder), slow=slow)
        lines = page.read_text(encoding="utf-8").splitlines()
        for block, command, printed, problem in reversed(results):
            if not problem:
                continue
            if command is None and problem.startswith("the generated block differs"):
                lines[block.line:block.line + len(block.body)] = printed
            elif command is not None and (new := Outcome(command, block, printed, problem).rewritten()) is not None:
                quoted = list(command.expected)
                blank_tail = len(quoted) - len(_lines(tuple(quoted)))      # blank lines before the next command
                lines[command.line:command.line + len(quoted)] = [*new, *[""] * blank_tail]
                if "snapshot" in block.markers:
                    _redate_snapshot(lines, block)
            else:
                left += 1
                print(f"{block.where}: left for you: {problem.lstrip('!')}", file=sys.stderr)
                continue
            print(f"{block.where}: updated", file=sys.stderr)
        page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 1 if left else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    arguments = sys.argv[1:]
    if arguments[:1] != ["--update"]:
        raise SystemExit("usage: python tests/test_docs.py --update [--slow] [PAGE.md ...]  (pytest runs the checks)")
    slow_too = "--slow" in arguments
    chosen = [Path(p).resolve() for p in arguments[1:] if p != "--slow"] or list(PAGES)
    raise SystemExit(update(chosen, slow=slow_too or SLOW))
