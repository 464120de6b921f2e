"""llama.cpp's own compute buffer against rooflab's bill of it (``footprint.compute_buffer_bytes``).

For each catalogue model named, a real-size random-weight GGUF is written
(``measure.engines.gguf_synth``; its shape and tensor types are the model's, the weights random)
and loaded by llama-cpp-python on the CPU back end at -ub 512, with and without flash attention,
in a child process; the "CPU compute buffer size" line llama.cpp logs is read and printed beside
rooflab's figure for the same ubatch and cache cells. Needs llama-cpp-python and disk for the
files (1.2 GB for qwen3-0.6b at bf16, 3.8 GB for llama-2-7b at q4_0); no timing, so the machine's
load does not matter.

    python benchmarks/accuracy/bench_compute_buffer.py [--folder DIR] [KEY:WEIGHTS ...]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from rooflab.core.io import load_model
from rooflab.core.measure.engines.gguf_synth import write_synthetic_gguf
from rooflab.core.predict.footprint import compute_buffer_bytes
from rooflab.core.predict.work import padded

MODELS = ("qwen3-0.6b:bf16", "llama-2-7b:q4_0")
LOAD = r"""
import sys, llama_cpp
llama_cpp.Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), n_batch=512, n_ubatch=512, n_gpu_layers=0,
                flash_attn=sys.argv[3] == "1", verbose=True, n_threads=1)
"""
LOGGED = re.compile(r"CPU compute buffer size =\s*([0-9.]+) MiB")


def logged_mib(path: Path, cells: int, flash: bool) -> float | None:
    """The compute buffer llama.cpp logs for ``path`` at ``cells`` context, -ub 512 (MiB)."""
    run = subprocess.run([sys.executable, "-c", LOAD, str(path), str(cells), "1" if flash else "0"],
                         capture_output=True, text=True, timeout=900, check=False)
    found = LOGGED.findall(run.stderr)
    return float(found[-1]) if found else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS), help="catalogue KEY:WEIGHTS")
    ap.add_argument("--folder", type=Path, default=None, help="where the GGUFs are written (default: a temp folder)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or Path(tmp)
        for item in args.models:
            key, _, weights = item.partition(":")
            spec = load_model(key, weights=weights or None)
            path = folder / f"{key}-{weights}.gguf"
            if not path.exists():
                job = write_synthetic_gguf(spec, path)
                for _ in job:
                    pass
            for cells in (1024, 4096):
                for flash in (True, False):
                    got = logged_mib(path, cells, flash)
                    mine = float(compute_buffer_bytes(spec, 512, padded(cells), attention_scores=not flash)) / 2**20
                    shown = "not logged" if got is None else f"{got:8.2f} MiB"
                    ratio = "" if got is None else f"  rooflab / llama.cpp {mine / got:.3f}"
                    print(f"{spec.name:<22} -ub 512, {cells:5d} cells, flash attention {'on ' if flash else 'off'}: "
                          f"llama.cpp {shown}, rooflab {mine:8.2f} MiB{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
