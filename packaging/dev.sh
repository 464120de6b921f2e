#!/usr/bin/env bash
# One-step set-up and launch for a checkout:
#   packaging/dev.sh run  [rooflab arguments]   create .venv on first use, then start rooflab
#   packaging/dev.sh test [pytest arguments]    same set-up, then the whole test suite
# torch is installed first and pinned (ROOFLAB_TORCH overrides, e.g. for a CUDA build), so pip
# never resolves an unpinned torch, which on Linux means a multi-GB CUDA download.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=${ROOFLAB_VENV:-.venv}
torch_spec=${ROOFLAB_TORCH:-torch==2.13.0}

setup() {
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    local stamp="$venv/.rooflab-installed"
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
            "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$torch_spec"
        fi
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[llamacpp,test]"
        touch "$stamp"
    fi
}

command=${1:-run}
[ $# -gt 0 ] && shift
case "$command" in
    run)
        setup
        exec "$venv/bin/rooflab" "$@"
        ;;
    test)
        setup
        export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
        exec "$venv/bin/python" -m pytest "$@"
        ;;
    *)
        echo "usage: packaging/dev.sh run|test [arguments]" >&2
        exit 2
        ;;
esac
