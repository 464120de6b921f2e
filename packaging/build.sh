#!/usr/bin/env bash
# Build the one-folder desktop app into dist/rooflab/ from this checkout, reproducibly:
#   packaging/build.sh               check the host, build, smoke-test
#   packaging/build.sh --check-host  only check that the host has the declared system packages
# The host must have the system packages of packaging/build-system-packages.txt (checked with
# dpkg-query; the folder's system libraries come from them, see packaging/bundle_filter.py).
# Makes (once) a separate build venv with the pinned packages of packaging/build-requirements.txt
# (no torch), runs PyInstaller on packaging/rooflab.spec from scratch, then smoke-tests the
# result: --version, the catalogue, a prediction and an offscreen window screenshot.
# PYTHON picks the interpreter (3.10+, 3.11 recommended); ROOFLAB_BUILD_VENV the venv folder.
set -euo pipefail
cd "$(dirname "$0")/.."

system_list=packaging/build-system-packages.txt
system_packages=$(sed -e 's/#.*//' "$system_list" | tr -s ' \t' '\n' | grep -v '^$')
if command -v dpkg-query >/dev/null; then
    missing=()
    for package in $system_packages; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "build.sh: this host lacks system packages the build declares ($system_list):" >&2
        echo "  sudo apt-get install ${missing[*]}" >&2
        exit 1
    fi
else
    echo "build.sh: no dpkg-query: cannot check $system_list on this host; the folder will" \
        "carry whatever versions of those libraries this host has" >&2
fi
if [ "${1:-}" = "--check-host" ]; then
    echo "build.sh: the host has every package of $system_list"
    exit 0
fi

python=${PYTHON:-python3}
venv=${ROOFLAB_BUILD_VENV:-build/pyi-venv}
requirements=packaging/build-requirements.txt

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
stamp="$venv/.rooflab-build-installed"
if [ ! -f "$stamp" ] || [ "$requirements" -nt "$stamp" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    if "$venv/bin/python" -c "import tomllib" 2>/dev/null; then :; else
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check tomli
    fi
    touch "$stamp"
fi

rm -rf dist/rooflab
"$venv/bin/pyinstaller" --noconfirm --clean --log-level WARN \
    --distpath dist --workpath build packaging/rooflab.spec

# Smoke test in a bare environment, away from the checkout, so nothing leaks in from either.
app=$(pwd)/dist/rooflab
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
run() { (cd "$home" && env -i HOME="$home" PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"); }
run "$app/rooflab" --version
run "$app/rooflab" models >/dev/null
run "$app/rooflab" predict --model qwen3-8b-q4_k_m --machine rtx-4090 >/dev/null
run QT_QPA_PLATFORM=offscreen "$app/rooflab-gui" --screenshot "$home/window.png" >/dev/null 2>&1
test -s "$home/window.png"
if find "$app" -name 'libqgtk3*' -o -name 'libgtk-3*' | grep -q .; then
    echo "build.sh: the folder carries GTK (see packaging/bundle_filter.py)" >&2
    exit 1
fi
if command -v dpkg-query >/dev/null; then
    # shellcheck disable=SC2086  # one word a package
    dpkg-query -W -f='${Package} ${Version}\n' $system_packages >"$app/BUILD-PACKAGES.txt"
fi
echo "built $app ($(du -sh "$app" | cut -f1)); smoke test passed"
