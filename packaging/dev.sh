#!/usr/bin/env bash
# One-step set-up and launch for a checkout:
#   packaging/dev.sh run  [rooflab arguments]   create .venv on first use, then start rooflab
#   packaging/dev.sh test [pytest arguments]    same set-up, then the whole test suite
# torch is installed first and pinned (ROOFLAB_TORCH overrides), so pip never resolves an unpinned
# torch: on Linux that is PyPI's newest CUDA build, a multi-GB download. Where pip's index offers
# only that build and no CPU wheel is at hand, ROOFLAB_TORCH_INDEX=https://download.pytorch.org/whl/cpu
# adds PyTorch's CPU index (not by default: machines with no way out but PyPI would wait on it).
# The first set-up compiles llama.cpp (llama-cpp-python, an sdist): 5-14 minutes on 2 cores.
# pip is quiet meanwhile, so a line every ROOFLAB_PROGRESS_S seconds (default 60) says it still
# works; pip keeps the built wheel, and later set-ups take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
venv=${ROOFLAB_VENV:-.venv}
torch_spec=${ROOFLAB_TORCH:-torch==2.13.0}
torch_index=${ROOFLAB_TORCH_INDEX:-}
every=${ROOFLAB_PROGRESS_S:-60}
ticker=""

say() {
    echo "rooflab: $*" >&2
}

stop_ticker() {
    if [ -n "$ticker" ]; then
        kill "$ticker" 2>/dev/null || true
        wait "$ticker" 2>/dev/null || true
        ticker=""
    fi
}
trap stop_ticker EXIT

# step WHAT COMMAND...: run COMMAND, saying "still WHAT (m:ss)" every $every seconds meanwhile
step() {
    local what=$1 start=$SECONDS
    shift
    (
        trap 'kill "$nap" 2>/dev/null; exit 0' TERM
        while :; do
            sleep "$every" &
            nap=$!
            wait "$nap"
            elapsed=$((SECONDS - start))
            printf 'rooflab: still %s (%d:%02d)\n' "$what" $((elapsed / 60)) $((elapsed % 60)) >&2
        done
    ) &
    ticker=$!
    "$@"
    stop_ticker
}

pip_install() {
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}

setup() {
    local stamp="$venv/.rooflab-installed"
    if [ -f "$stamp" ] && [ ! pyproject.toml -nt "$stamp" ]; then
        return
    fi
    if [ ! -f "$stamp" ]; then
        say "first set-up in $venv: installing $torch_spec${torch_index:+ from $torch_index}, rooflab and" \
            "its test tools, then compiling llama.cpp (5-14 minutes on 2 cores; later set-ups take seconds)..."
    else
        say "pyproject.toml changed: updating $venv..."
    fi
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
        step "installing $torch_spec" pip_install "$torch_spec" ${torch_index:+--extra-index-url "$torch_index"}
    fi
    step "installing rooflab and its test tools" pip_install -e ".[test]"
    if "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
        step "installing the llama.cpp engine" pip_install -e ".[llamacpp,test]"
    else
        say "compiling llama.cpp for llama-cpp-python (the long step; pip keeps the built wheel)..."
        step "compiling llama.cpp" pip_install -e ".[llamacpp,test]"
    fi
    touch "$stamp"
    say "set-up done."
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
