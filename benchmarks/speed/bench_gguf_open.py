"""How fast a GGUF file opens: ``read_gguf`` against gguf-py's ``GGUFReader``.

Writes, to a temporary folder, a Qwen3-8B Q4_K_M tensor table (36 layers, 399 tensors) with a
Gemma-3-sized tokenizer: 262,144 token strings, scores and types, and 150,000 merges. The
tensor data is a sparse hole, so the 5 GB file costs a few MB of disk; only the header matters.
Prints best and median of 20 opens. Target: ``read_gguf`` well under 100 ms.

    python benchmarks/speed/bench_gguf_open.py [--no-reader]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from gguf import GGUFReader
from gguf.constants import GGMLQuantizationType as T

from rooflab.core.io.gguf import read_gguf, read_header
from rooflab.core.predict.work import weight_bytes_read_per_token

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.factories
from timing import timed  # benchmarks/speed/timing.py: the shared timing loop

from tests.factories.gguf_files import Spec, llama_tensors, write_gguf  # noqa: E402

VOCAB = 262_144
MERGES = 150_000


def qwen3_8b_tensors() -> list[Spec]:
    """Qwen3-8B: hidden 4096, 32 heads of 128 (8 KV), ffn 12288, per-head q/k norms."""
    tensors = llama_tensors(layers=36, hidden=4096, ff=12288, heads=32, kv_heads=8, vocab=VOCAB)
    norms = [Spec(f"blk.{i}.attn_{x}_norm.weight", (128,), T.F32) for i in range(36) for x in "qk"]
    return tensors + norms


def write_model(path: Path) -> Path:
    return write_gguf(path, "qwen3", qwen3_8b_tensors(), {
        "general.name": "Qwen3-8B (bench)", "general.file_type": 15,
        "qwen3.block_count": 36, "qwen3.context_length": 40960, "qwen3.embedding_length": 4096,
        "qwen3.feed_forward_length": 12288, "qwen3.attention.head_count": 32,
        "qwen3.attention.head_count_kv": 8, "qwen3.attention.key_length": 128,
        "qwen3.attention.value_length": 128, "qwen3.rope.freq_base": 1e6,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": [f"tok{i:06d}" for i in range(VOCAB)],
        "tokenizer.ggml.scores": [float(-i) for i in range(VOCAB)],
        "tokenizer.ggml.token_type": [1] * VOCAB,
        "tokenizer.ggml.merges": [f"t{i} o{i}" for i in range(MERGES)],
    }, data=False)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write_model(Path(folder) / "qwen3-8b-bench.gguf")
        header = read_header(path)
        spec = read_gguf(path)
        print(f"file: {path.stat().st_size / 1e9:.2f} GB apparent, header {header.data_start / 1e6:.1f} MB, "
              f"{len(spec.tensors)} tensors, {len(header.metadata)} keys; "
              f"W = {weight_bytes_read_per_token(spec) / 1e9:.3f} GB, {spec.weights_format}")
        print(f"{'what':<28} {'best ms':>8} {'median ms':>10}")
        for label, fn in (("read_header", lambda: read_header(path)), ("read_gguf", lambda: read_gguf(path))):
            best, median = timed(fn)
            print(f"{label:<28} {best:8.1f} {median:10.1f}")
        if "--no-reader" not in sys.argv:
            start = time.perf_counter()
            GGUFReader(path)
            print(f"{'gguf.GGUFReader (once)':<28} {(time.perf_counter() - start) * 1e3:8.1f}")


if __name__ == "__main__":
    main()
