"""Packaging as a user and a builder meet it: the desktop entry of a frozen folder (its Exec line
read back by the Desktop Entry spec's rules, and run by xdg-open in a scratch HOME), the options
the files document, the frozen build's declared inputs (system packages, the GTK theme plugin
left out), and the licence the wheel ships. No PyInstaller build here: it takes minutes."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGING = ROOT / "packaging"
INSTALL = PACKAGING / "install-desktop-entry.sh"


# -- the Desktop Entry specification's reading of an Exec value ----------------------------------

def _string_value(raw: str) -> str:
    """A string value as the spec reads it: \\s \\n \\t \\r \\\\ are escapes."""
    out, i = [], 0
    escapes = {"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw) and raw[i + 1] in escapes:
            out.append(escapes[raw[i + 1]])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def exec_arguments(raw: str) -> list[str]:
    """The arguments of an Exec value: the string unescaped, then split on spaces, an argument
    either plain (no reserved character) or quoted in whole with \\", \\`, \\$, \\\\ inside;
    "%%" is a literal %. Raises ValueError where the spec forbids what it reads."""
    text, args, i = _string_value(raw), [], 0
    while i < len(text):
        if text[i] == " ":
            i += 1
            continue
        if text[i] == '"':
            i, arg = i + 1, []
            while text[i] != '"':
                if text[i] == "\\":
                    if text[i + 1] not in '"`$\\':
                        raise ValueError(f"bad escape in {raw!r}")
                    i += 1
                arg.append(text[i])
                i += 1
            i += 1
        else:
            end = text.find(" ", i)
            end = len(text) if end < 0 else end
            arg = list(text[i:end])
            if RESERVED & set(arg):
                raise ValueError(f"unquoted reserved character in {raw!r}")
            i = end
        args.append("".join(arg).replace("%%", "%"))
    return args


def test_the_spec_reader_reads_the_spec_examples():
    assert exec_arguments('"/opt/my apps/rooflab-gui" %f') == ["/opt/my apps/rooflab-gui", "%f"]
    assert exec_arguments(r'"/a\\"b" x') == ['/a"b', "x"]
    with pytest.raises(ValueError):
        exec_arguments("/opt/my$app %f")


# -- the desktop entry of a frozen folder ----------------------------------------------------------

def _frozen_folder(parent: Path, name: str) -> Path:
    """A stand-in for dist/rooflab: a rooflab-gui that writes down what it was asked to open."""
    app = parent / name
    (app / "_internal" / "rooflab" / "resources").mkdir(parents=True)
    shutil.copytree(ROOT / "resources" / "icons", app / "_internal" / "rooflab" / "resources" / "icons")
    gui = app / "rooflab-gui"
    gui.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$HOME/opened.txt"\n')
    gui.chmod(0o755)
    return app


def _install(home: Path, *args: str, script: Path = INSTALL) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, timeout=60)


def _entry(home: Path) -> dict[str, str]:
    lines = (home / ".local/share/applications/rooflab.desktop").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@pytest.mark.parametrize("name", ["rooflab", "my apps", "odd \"quote\" $HOME `x` back\\slash 100%", "tilde~"])
def test_frozen_entry_quotes_the_path_only_when_the_spec_requires_it(tmp_path, name):
    app = _frozen_folder(tmp_path, name)
    home = tmp_path / "home"
    home.mkdir()
    done = _install(home, "--frozen", str(app))
    assert done.returncode == 0, done.stderr
    entry = _entry(home)
    assert exec_arguments(entry["Exec"]) == [str(app / "rooflab-gui"), "%f"]
    assert _string_value(entry["TryExec"]) == str(app / "rooflab-gui")
    if not RESERVED & set(str(app)):
        # xdg-open's fallback runs the first word as it stands: quotes there broke it
        assert entry["Exec"] == f"{app}/rooflab-gui %f"
    if shutil.which("desktop-file-validate"):
        check = subprocess.run(["desktop-file-validate", str(home / ".local/share/applications/rooflab.desktop")],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr


def test_the_script_inside_a_frozen_folder_installs_that_folder(tmp_path):
    app = _frozen_folder(tmp_path, "dist-rooflab")
    for name in ("install-desktop-entry.sh", "rooflab.desktop", "rooflab-gguf.xml"):
        shutil.copy2(PACKAGING / name, app / name)
    home = tmp_path / "home"
    home.mkdir()
    done = _install(home, script=app / "install-desktop-entry.sh")
    assert done.returncode == 0, done.stderr
    assert _entry(home)["Exec"] == f"{app}/rooflab-gui %f"
    assert (home / ".local/share/icons/hicolor/scalable/apps/rooflab.svg").is_file()
    assert (home / ".local/share/mime/packages/rooflab-gguf.xml").is_file()
    gone = _install(home, "--uninstall", script=app / "install-desktop-entry.sh")
    assert gone.returncode == 0 and not (home / ".local/share/applications/rooflab.desktop").exists()


def test_frozen_option_refuses_a_folder_without_rooflab_gui(tmp_path):
    done = _install(tmp_path, "--frozen", str(tmp_path))
    assert done.returncode == 2 and "no rooflab-gui" in done.stderr
    assert _install(tmp_path, "--bogus").returncode == 2


def test_every_option_the_packaging_files_mention_exists():
    """rooflab.desktop mentioned 'install-desktop-entry.sh --frozen DIR', which did not exist."""
    script = INSTALL.read_text()
    for doc in (PACKAGING / "rooflab.desktop", PACKAGING / "README.md", INSTALL):
        for option in re.findall(r"install-desktop-entry\.sh[^\n`]*?(--[a-z-]+)", doc.read_text()):
            assert f"    {option})" in script, f"{doc.name} mentions {option}, which the script lacks"


@pytest.mark.skipif(shutil.which("xdg-open") is None, reason="xdg-utils is not installed")
def test_xdg_open_opens_a_gguf_with_the_frozen_entry(tmp_path):
    """On a bare window manager (no desktop environment detected) xdg-open falls back to reading
    the entry itself: with the path quoted it failed with ': Permission denied'."""
    app = _frozen_folder(tmp_path, "rooflab")
    home = tmp_path / "home"
    home.mkdir()
    assert _install(home, "--frozen", str(app)).returncode == 0
    model = home / "model.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(16))
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "DISPLAY": ":99", "LANG": "C.UTF-8"}
    subprocess.run(["xdg-mime", "default", "rooflab.desktop", "application/x-gguf"], env=env, check=True,
                   timeout=60)
    mime = subprocess.run(["xdg-mime", "query", "filetype", str(model)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert mime.stdout.strip() == "application/x-gguf"
    done = subprocess.run(["xdg-open", str(model)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    opened = home / "opened.txt"
    deadline = time.monotonic() + 10
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened.read_text().splitlines() == [str(model)]


# -- the frozen build's declared inputs ------------------------------------------------------------

def _bundle_filter():
    spec = importlib.util.spec_from_file_location("bundle_filter", PACKAGING / "bundle_filter.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bundle_filter"] = module
    spec.loader.exec_module(module)
    return module


def _declared_packages() -> list[str]:
    text = (PACKAGING / "build-system-packages.txt").read_text()
    return [word for line in text.splitlines() for word in line.split("#", 1)[0].split()]


def test_the_build_declares_its_system_packages_and_no_gtk():
    packages = _declared_packages()
    assert len(packages) == len(set(packages))
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", p) for p in packages), packages
    # what Qt's xcb platform needs, the install page's list for a bare machine included
    page = (ROOT / "docs" / "install-and-backends.md").read_text()
    window = re.search(r"sudo apt-get install ([^\n]*)", page)
    assert window is not None
    assert set(window.group(1).split()) <= set(packages)
    assert not [p for p in packages if re.search(r"gtk|pango|cairo|gdk|atk", p)]


def _fake_dpkg(folder: Path, installed: set[str]) -> None:
    folder.mkdir()
    tool = folder / "dpkg-query"
    # dpkg-query -W -f='${Status}' PACKAGE: the package is the last argument
    tool.write_text("#!/bin/sh\nfor last; do :; done\ncase \" " + " ".join(sorted(installed)) + " \" in\n"
                    "  *\" $last \"*) printf 'install ok installed' ;;\n  *) exit 1 ;;\nesac\n")
    tool.chmod(0o755)


@pytest.mark.parametrize("missing", [(), ("libxcb-cursor0", "binutils")])
def test_build_sh_checks_the_declared_packages_before_building(tmp_path, missing):
    packages = set(_declared_packages())
    _fake_dpkg(tmp_path / "bin", packages - set(missing))
    env = {"HOME": str(tmp_path), "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = subprocess.run(["bash", str(PACKAGING / "build.sh"), "--check-host"], env=env, capture_output=True,
                          text=True, timeout=60)
    if missing:
        assert done.returncode == 1
        assert f"sudo apt-get install {' '.join(p for p in _declared_packages() if p in missing)}" in done.stderr
    else:
        assert done.returncode == 0, done.stderr


def test_the_spec_filters_its_binaries_through_bundle_filter():
    spec = (PACKAGING / "rooflab.spec").read_text()
    assert "a.binaries = keep(a.binaries)" in spec
    assert spec.index("a.binaries = keep(a.binaries)") < spec.index("pyz = PYZ(")


def test_bundle_filter_drops_the_gtk_theme_plugin_and_what_only_it_needs():
    bundle_filter = _bundle_filter()
    venv = "/build/pyi-venv/lib/python3.11/site-packages"
    system = "/usr/lib/x86_64-linux-gnu"
    entries = [
        ("PySide6/Qt/lib/libQt6Gui.so.6", f"{venv}/PySide6/Qt/lib/libQt6Gui.so.6", "BINARY"),
        ("PySide6/Qt/plugins/platformthemes/libqgtk3.so", f"{venv}/PySide6/Qt/plugins/platformthemes/libqgtk3.so",
         "BINARY"),
        ("PySide6/Qt/plugins/platformthemes/libqxdgdesktopportal.so",
         f"{venv}/PySide6/Qt/plugins/platformthemes/libqxdgdesktopportal.so", "BINARY"),
        ("lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
         "/usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so", "EXTENSION"),
        ("libpython3.11.so.1.0", f"{system}/libpython3.11.so.1.0", "BINARY"),
        ("libgtk-3.so.0", f"{system}/libgtk-3.so.0", "BINARY"),
        ("libpango-1.0.so.0", f"{system}/libpango-1.0.so.0", "BINARY"),
        ("libglib-2.0.so.0", f"{system}/libglib-2.0.so.0", "BINARY"),
        ("libpcre2-8.so.0", f"{system}/libpcre2-8.so.0", "BINARY"),
        ("libssl.so.3", f"{system}/libssl.so.3", "BINARY"),
    ]
    links = {"libQt6Gui.so.6": ["libglib-2.0.so.0"], "libqgtk3.so": ["libgtk-3.so.0", "libglib-2.0.so.0"],
             "libgtk-3.so.0": ["libpango-1.0.so.0"], "libglib-2.0.so.0": ["libpcre2-8.so.0"],
             "_ssl.cpython-311-x86_64-linux-gnu.so": ["libssl.so.3"]}
    kept = bundle_filter.keep(entries, needed=lambda path: links.get(Path(path).name, []))
    names = {Path(name).name for name, _src, _kind in kept}
    assert names == {"libQt6Gui.so.6", "libqxdgdesktopportal.so", "_ssl.cpython-311-x86_64-linux-gnu.so",
                     "libpython3.11.so.1.0", "libglib-2.0.so.0", "libpcre2-8.so.0", "libssl.so.3"}


def test_bundle_filter_reads_what_a_real_library_links_against():
    import PySide6

    bundle_filter = _bundle_filter()
    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platformthemes" / "libqgtk3.so"
    if not plugin.is_file():
        pytest.skip("this PySide6 has no GTK 3 theme plugin")
    needed = bundle_filter.needed_libraries(plugin)
    assert "libgtk-3.so.0" in needed and "libQt6Gui.so.6" in needed
    assert bundle_filter.needed_libraries(ROOT / "README.md") == []


# -- the licence ----------------------------------------------------------------------------------

#: The Apache License 2.0 as published at https://www.apache.org/licenses/LICENSE-2.0.txt
#: (11,358 bytes; the same file as Debian's /usr/share/common-licenses/Apache-2.0).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_the_licence_pyproject_declares_is_shipped():
    tomllib = pytest.importorskip("tomllib")            # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    licence = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(licence).hexdigest() == APACHE_2_SHA256


@pytest.mark.skipif(os.environ.get("ROOFLAB_SKIP_SLOW") == "1", reason="builds the wheel's metadata")
def test_the_wheel_metadata_names_the_licence_file(tmp_path):
    """The metadata a wheel gets, built from a copy of the checkout (egg-info stays out of it)."""
    for name in ("pyproject.toml", "LICENSE", "README.md"):
        shutil.copy2(ROOT / name, tmp_path / name)
    for folder in ("core", "gui", "resources"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "meta"
    out.mkdir()
    code = ("import sys; from setuptools import build_meta as b; "
            "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    metadata = (out / done.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata


# -- the set-up's llama.cpp probe ------------------------------------------------------------------

PROBE = PACKAGING / "probe_llamacpp.py"


@pytest.mark.skipif(os.name != "posix", reason="signals and #! scripts")
@pytest.mark.parametrize("signal_name", ["SIGILL", "SIGSEGV"])
def test_the_probe_names_the_signal_that_killed_llama_cpp(tmp_path, signal_name):
    # on a Xeon VM whose CPUID reports AMX that faults, a -march=native llama.cpp dies with
    # SIGILL at its first multiply: the set-up must see it, say so, and build with fewer sets
    dying = tmp_path / "llama-bench"
    dying.write_text(f"#!/bin/sh\nkill -{signal_name.removeprefix('SIG')} $$\n")
    dying.chmod(0o755)
    done = subprocess.run([sys.executable, str(PROBE), "--bench", str(dying)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip() == f"probe: llama.cpp was killed by {signal_name} running a tiny model on this processor"


def test_the_probe_passes_the_llama_cpp_the_set_up_installed():
    from tests.factories import needs

    needs.llama_cpp()
    done = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_the_set_up_never_builds_llama_cpp_for_the_native_processor():
    # -march=native takes every instruction CPUID reports, AMX included where it faults
    script = (PACKAGING / "dev.sh").read_text(encoding="utf-8")
    sets = subprocess.run(["bash", "-c", f"source <(sed -n '/^cpu_flag_sets()/,/^}}/p' {PACKAGING / 'dev.sh'}); "
                           "cpu_flag_sets"], capture_output=True, text=True, timeout=30)
    lines = [line for line in sets.stdout.splitlines() if line.strip()]
    assert lines, sets.stderr
    if os.uname().machine == "x86_64":
        assert all("-DGGML_NATIVE=OFF" in line and "-DGGML_AMX_TILE=OFF" in line for line in lines)
        assert "-DGGML_AVX2=OFF" in lines[-1]              # the last resort runs on any x86-64
    assert "--no-cache-dir" in script                     # pip's wheel cache keys by version, not flags
