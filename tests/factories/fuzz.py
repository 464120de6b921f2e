"""Mutation fuzzing of the files rooflab reads besides GGUF: config.json, safetensors headers,
llama-bench output (JSON, JSONL, CSV, markdown) and rooflab's own stored files.

A surface is a set of seed files (real inputs, written the way the tools and rooflab write them)
and the readers that take them. Each case mutates one seed, either structurally (a field of the
parsed JSON replaced by a hostile value, deleted, wrapped, or a known key added) or as bytes (a
byte flipped, a hostile token inserted, a range cut or repeated, the file truncated), writes it
and runs the readers. What a reader may do: return, or raise a RooflabError whose message is one
line. Anything else is a crash. Used by the fuzz tests (a few hundred cases each) and by
``benchmarks/robustness/fuzz_inputs.py`` (10,000)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import random
import shutil
import signal
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflab.core.errors import RooflabError

# --- hostile values ---------------------------------------------------------------------------

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\r\n\x9b"
# JSON text a serialiser would not write, inserted verbatim
RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "1" * 5000, "-" + "9" * 400,
              "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000, "10" + "0" * 399]
VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2, 3, 7, 64, 1_000, 10_001, 65_536, 1 << 24, (1 << 24) + 1, 1 << 31, 1 << 63,
    10**18, -(10**18), 10**300, 1.5, -0.0, 1e300, -1e300, 1e-300, "", "a", "5", "-1", "nan", "1e400", ESCAPES,
    "x" * 70_000, "\ufeff", [], {}, [1, 2, 3], [None], ["a"], [-4, 2], [0, 32, 64], [1.5], [[1]], {"a": 1},
    list(range(200)), [ESCAPES], {"": ESCAPES},
]
KEYS = [
    # config.json
    "model_type", "architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "vocab_size", "intermediate_size", "text_config", "sliding_window",
    "use_sliding_window", "layer_types", "mlp_only_layers", "first_k_dense_replace", "decoder_sparse_step",
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "kv_lora_rank",
    "qk_rope_head_dim", "rope_scaling", "tie_word_embeddings", "_name_or_path", "torch_dtype",
    # safetensors
    "dtype", "shape", "data_offsets", "__metadata__",
    # llama-bench / llama-batched-bench
    "n_prompt", "n_gen", "n_depth", "samples_ns", "avg_ns", "avg_ts", "pp", "tg", "pl", "n_kv", "t_pp", "t_tg",
    "is_pp_shared", "model_filename", "build_number", "build_commit", "backends", "flash_attn", "type_k",
    "n_threads", "n_gpu_layers",
    # rooflab's records and profiles
    "format", "runs", "points", "prompt", "context", "batch", "seconds", "median", "repeats", "settings",
    "calibration", "efficiency", "prior", "before", "after", "profile", "measurement", "bandwidth",
    "peak_flops", "memory", "default_dtype", "offload", "name", "key", "source", "engine",
]
# bytes a text mutation inserts
TOKENS = [t.encode() for t in RAW_TOKENS] + [
    b"\xef\xbb\xbf", b"\x00", b"\xff\xfe", b"\x1b[2J", ESCAPES.encode(), b"x" * 200_000, b'"', b",", b"|",
    b"\n", b"\r", b"[", b"{", b"}", b"]", b":", b"\\", b"1" * 5000, b"| pp" + b"9" * 5000 + b" |",
]


def hostile(rng: random.Random, raws: list[str]) -> Any:
    """A hostile value: JSON a serialiser writes, or a placeholder for a raw token."""
    if rng.random() < 0.25:
        raws.append(rng.choice(RAW_TOKENS))
        return f"\x00RAW{len(raws) - 1}\x00"
    return copy.deepcopy(rng.choice(VALUES))


def _nodes(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node[:50]):
            yield from _nodes(value, (*path, i))


def _at(root: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        root = root[part]
    return root


def mutate_structure(value: Any, rng: random.Random) -> str:
    """JSON text of ``value`` with one to three fields replaced, deleted, wrapped or added."""
    root = copy.deepcopy(value)
    raws: list[str] = []
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(list(_nodes(root)))
        op = rng.randrange(5)
        if not path:
            if op == 0:
                root = hostile(rng, raws)
            elif isinstance(root, dict):
                root[rng.choice(KEYS)] = hostile(rng, raws)
            continue
        parent, key = _at(root, path[:-1]), path[-1]
        if op == 0:
            parent[key] = hostile(rng, raws)
        elif op == 1:
            del parent[key]
        elif op == 2 and isinstance(parent[key], dict):
            parent[key][rng.choice(KEYS)] = hostile(rng, raws)
        elif op == 2 and isinstance(parent[key], list):
            parent[key].append(hostile(rng, raws))
        elif op == 3:
            parent[key] = [parent[key]] if rng.random() < 0.5 else {rng.choice(KEYS): parent[key]}
        elif isinstance(parent, dict):
            parent[rng.choice(KEYS)] = hostile(rng, raws)
        else:
            parent.insert(key, hostile(rng, raws))
    text = json.dumps(root)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00RAW{i}\x00"), raw)
    return text


def mutate_bytes(data: bytes, rng: random.Random, *, keep: int = 0) -> bytes:
    """``data`` with one to three byte-level changes, the first ``keep`` bytes left alone."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(keep, max(len(out), keep + 1))
        op = rng.randrange(7)
        if op == 0 and at < len(out):
            out[at] = rng.randrange(256)
        elif op == 1:
            out[at:at] = rng.choice(TOKENS)
        elif op == 2:
            del out[at:at + rng.randrange(1, 64)]
        elif op == 3:
            del out[at:]
        elif op == 4:
            out[at:at] = out[at:at + rng.randrange(1, 256)] * rng.randrange(2, 8)
        elif op == 5 and at < len(out):
            out[at] = rng.choice(b'\x00\x1b\xff"[{,|\n:0-')
        else:
            lines = bytes(out).split(b"\n")
            if len(lines) > 2:
                i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
                out = bytearray(b"\n".join(lines))
    return bytes(out)


def mutate_cells(text: str, rng: random.Random, separator: str) -> str:
    """A CSV or markdown table with a random cell replaced by a hostile one."""
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    cells = lines[i].split(separator)
    j = rng.randrange(len(cells))
    choice = rng.choice(RAW_TOKENS[:8] + [ESCAPES, "x" * 140_000, "", "-5", "1e300", '"', "pp512 @ d" + "9" * 40,
                                          "tg0", str(1 << 40), "[1e400]", "[" + "9" * 400 + "]"])
    cells[j] = f" {choice} " if separator == "|" else choice
    lines[i] = separator.join(cells)
    return "\n".join(lines)


# --- seeds ------------------------------------------------------------------------------------

QWEN3 = {"model_type": "qwen3", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1024,
         "tie_word_embeddings": True, "torch_dtype": "bfloat16", "architectures": ["Qwen3ForCausalLM"],
         "_name_or_path": "Qwen/Qwen3-tiny", "max_position_embeddings": 4096}
CONFIGS: list[dict[str, Any]] = [
    QWEN3,
    {**QWEN3, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
     "mlp_only_layers": [0], "decoder_sparse_step": 1, "tie_word_embeddings": False},
    {"model_type": "deepseek_v2", "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
     "kv_lora_rank": 128, "q_lora_rank": None, "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64,
     "intermediate_size": 512, "moe_intermediate_size": 128, "n_routed_experts": 8, "num_experts_per_tok": 2,
     "n_shared_experts": 1, "first_k_dense_replace": 1, "vocab_size": 512, "topk_method": "noaux_tc"},
    {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
     "text_config": {"model_type": "gemma3_text", "hidden_size": 256, "num_hidden_layers": 6, "num_attention_heads": 4,
                     "num_key_value_heads": 1, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1024,
                     "sliding_window": 512, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}},
    {"model_type": "gpt_oss", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
     "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 256, "vocab_size": 1024, "num_local_experts": 8,
     "experts_per_token": 2, "sliding_window": 128, "attention_bias": True,
     "layer_types": ["sliding_attention", "full_attention"] * 2},
]

ST_CONFIG = {**QWEN3, "num_hidden_layers": 1, "tie_word_embeddings": False}


def safetensors_bytes(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A .safetensors file of zeros: name -> (dtype, torch shape)."""
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "U8": 1}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = math.prod(shape) * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + bytes(offset)


ST_SEED = safetensors_bytes({
    "model.embed_tokens.weight": ("F16", [1024, 256]), "model.layers.0.self_attn.q_proj.weight": ("BF16", [256, 256]),
    "model.layers.0.mlp.up_proj.weight": ("F16", [512, 256]), "model.layers.0.input_layernorm.weight": ("F32", [256]),
    "lm_head.weight": ("F16", [1024, 256]),
})

_ROW = {"build_commit": "8cf427ff", "build_number": 5163, "cpu_info": "AMD Ryzen 7 7800X3D", "backends": "CUDA",
        "model_filename": "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "model_type": "qwen2 7B Q4_K - Medium",
        "n_batch": 2048, "n_ubatch": 512, "n_threads": 8, "type_k": "f16", "type_v": "f16", "n_gpu_layers": -1,
        "flash_attn": 1, "n_prompt": 0, "n_gen": 0, "n_depth": 0}
BENCH_ROWS = [
    {**_ROW, "n_prompt": 512, "avg_ns": 72135640, "avg_ts": 7100.0, "stddev_ts": 140.3,
     "samples_ns": [74601900, 71632900, 71745200]},
    {**_ROW, "n_gen": 128, "avg_ns": 1076767880, "avg_ts": 118.88, "samples_ns": [1075361300, 1065089400]},
    {**_ROW, "n_gen": 128, "n_depth": 4096, "avg_ns": 1280000000, "avg_ts": 100.0},
]
BATCHED_ROWS = [{"n_kv_max": 4096, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 0, "is_pp_shared": 0, "pp": 256,
                 "tg": 64, "pl": b, "n_kv": b * 320, "t_pp": 0.2 * b, "speed_pp": 1280.0, "t_tg": 1.6,
                 "speed_tg": 40.0 * b, "t": 0.2 * b + 1.6, "speed": 1.0} for b in (1, 4)]
MARKDOWN = """| model                  |       size |     params | backend | ngl |         test |             t/s |
| ---------------------- | ---------: | ---------: | ------- | --: | -----------: | --------------: |
| qwen2 7B Q4_K - Medium |   4.36 GiB |     7.62 B | CUDA    |  -1 |        pp512 | 7340.20 ± 23.45 |
| qwen2 7B Q4_K - Medium |   4.36 GiB |     7.62 B | CUDA    |  -1 |        tg128 |   120.60 ± 0.59 |
| qwen2 7B Q4_K - Medium |   4.36 GiB |     7.62 B | CUDA    |  -1 | tg128 @ d512 |   116.71 ± 0.60 |

build: 8cf427ff (5163)
"""
BATCHED_MARKDOWN = """main: n_kv_max = 16384, n_batch = 2048, n_ubatch = 512, flash_attn = 0, is_pp_shared = 0

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   128 |    128 |    1 |    256 |    0.108 |  1186.64 |    3.079 |    41.57 |    3.187 |    80.32 |
|   128 |    128 |    8 |   2048 |    0.751 |  1363.27 |    7.344 |   139.43 |    8.095 |   252.99 |
"""


def bench_csv(rows: list[dict[str, Any]] = BENCH_ROWS) -> str:
    """``rows`` as llama-bench -o csv writes them (every field quoted, samples left out)."""
    keys = [k for k in rows[0] if k != "samples_ns"]
    lines = [",".join(keys)] + [",".join(f'"{row.get(k, "")}"' for k in keys) for row in rows]
    return "\n".join(lines) + "\n"


# --- cases ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Seed:
    """One input file: where it goes (relative to the case folder), its bytes, and how it may
    be mutated ("json", "jsonl", "csv", "markdown", "safetensors" or "bytes")."""

    name: str
    data: bytes
    kind: str


def mutate(seed: Seed, rng: random.Random) -> bytes:
    """One mutation of ``seed`` suited to its kind."""
    structural = rng.random() < 0.6
    if seed.kind == "json" and structural:
        return mutate_structure(json.loads(seed.data), rng).encode()
    if seed.kind == "jsonl" and structural:
        lines = seed.data.decode().splitlines()
        i = rng.choice([n for n, line in enumerate(lines) if line.startswith("{")])
        lines[i] = mutate_structure(json.loads(lines[i]), rng)
        return "\n".join(lines).encode()
    if seed.kind in ("csv", "markdown") and structural:
        return mutate_cells(seed.data.decode(), rng, "," if seed.kind == "csv" else "|").encode()
    if seed.kind == "safetensors":
        (length,) = struct.unpack("<Q", seed.data[:8])
        header, data = seed.data[8:8 + length], seed.data[8 + length:]
        if structural:
            text = mutate_structure(json.loads(header), rng).encode()
            prefix = struct.pack("<Q", len(text) if rng.random() < 0.9 else rng.choice([0, 1 << 40, len(text) + 9]))
            return prefix + text + data
        return mutate_bytes(seed.data, rng, keep=0 if rng.random() < 0.2 else 8)
    return mutate_bytes(seed.data, rng)


@dataclass
class Tally:
    """What the cases of one surface did."""

    surface: str
    accepted: int = 0
    errors: int = 0
    crashes: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    slowest: float = 0.0
    peak: int = 0            # bytes of Python heap, the largest one case took

    @property
    def cases(self) -> int:
        return self.accepted + self.errors + len(self.crashes) + len(self.hangs)


class Hang(BaseException):
    """A case ran past its time limit (BaseException: no reader's ``except Exception`` eats it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise Hang in the block after ``seconds`` (main thread on POSIX; elsewhere no limit)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise Hang()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _empty(folder: Path) -> None:
    """Remove every file under ``folder`` but keep its folders (removing folders is slow on some
    file systems); a folder a case put where a file belongs goes too."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_dir() and not path.is_symlink():
            if path.suffix in (".json", ".safetensors", ".jsonl", ".csv", ".md") or ".corrupt-" in path.name:
                shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Surface:
    """Seeds and the readers that take them. ``read(folder)`` runs every reader on the case in
    ``folder``; ``prepare(folder)`` writes what the case needs besides the mutated file."""

    name: str
    seeds: tuple[Seed, ...]
    read: Callable[[Path], None]
    prepare: Callable[[Path], None] = lambda folder: None


def run_surface(surface: Surface, cases: int, root: Path, *, seed: int = 1, limit: float = 10.0) -> Tally:
    """Run ``cases`` mutations of ``surface`` in folders under ``root``; tracemalloc must not be
    running already (this starts and stops it)."""
    rng = random.Random(f"{surface.name}:{seed}")
    tally = Tally(surface.name)
    tracemalloc.start()
    try:
        folder = root / "case"
        for number in range(cases):
            _empty(folder)
            surface.prepare(folder)
            chosen = rng.choice(surface.seeds)
            data = mutate(chosen, rng)
            (folder / chosen.name).parent.mkdir(parents=True, exist_ok=True)
            (folder / chosen.name).write_bytes(data)
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            start = time.perf_counter()
            label = f"case {number} ({chosen.name}, {len(data):,} bytes)"
            try:
                with time_limit(limit):
                    surface.read(folder)
                tally.accepted += 1
            except RooflabError as exc:
                message = str(exc)
                if "\n" in message or "\x1b" in message or len(message) > 2000:
                    tally.crashes.append(f"{label}: not one clean line: {message[:200]!r}")
                else:
                    tally.errors += 1
            except Hang:
                tally.hangs.append(label)
            except Exception as exc:  # a crash is what is being counted
                tally.crashes.append(f"{label}: {type(exc).__name__}: {str(exc)[:200]}")
            tally.slowest = max(tally.slowest, time.perf_counter() - start)
            tally.peak = max(tally.peak, tracemalloc.get_traced_memory()[1] - before)
    finally:
        tracemalloc.stop()
    return tally


# --- the surfaces -----------------------------------------------------------------------------

def _spec_is_sane(spec: Any) -> None:
    """What is done with an accepted model: totals, bytes per token, the CLI's JSON."""
    from rooflab.core.cli.output import inspect_dict
    from rooflab.core.predict.work import weight_bytes_read_per_token

    json.dumps(inspect_dict(spec), allow_nan=False)
    weight_bytes_read_per_token(spec)
    for text in (spec.name, spec.architecture, *spec.warnings):
        if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text):
            raise AssertionError(f"control character in {text!r}")


def _read_config(folder: Path) -> None:
    from rooflab.core.io import load_model

    _spec_is_sane(load_model(folder / "config.json"))


def _read_folder(folder: Path) -> None:
    from rooflab.core.io import load_model

    _spec_is_sane(load_model(folder))


def _write_st_config(folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps(ST_CONFIG))


def _read_bench(folder: Path) -> None:
    from rooflab.core.io.llamabench import read_benchmark

    for path in folder.iterdir():
        bench = read_benchmark(path)
        for text in (*bench.series, *bench.models, *bench.warnings, *bench.metadata.values()):
            if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text):
                raise AssertionError(f"control character in {text!r}")
        fit_points(bench.points)


_FIT_EVERY = [0]


def fit_points(points: Any) -> None:
    """Every 8th accepted import is fitted too: imported points must never break the fit."""
    _FIT_EVERY[0] += 1
    if _FIT_EVERY[0] % 8:
        return
    from rooflab.core.calibration.calibrate import calibrate
    from rooflab.core.values.machine import MachineProfile
    from tests.conftest import build_spec

    machine = MachineProfile(name="fuzz", bandwidth=1e12, peak_flops={"fp16": 1e14}, memory=1e12)
    cal = calibrate(build_spec(layers=2), machine, points)
    json.dumps(cal.to_dict(), allow_nan=False)


def config_surface() -> Surface:
    return Surface("config.json", tuple(Seed("config.json", json.dumps(c, indent=2).encode(), "json")
                                        for c in CONFIGS), _read_config)


def safetensors_surface() -> Surface:
    return Surface("safetensors", (Seed("model.safetensors", ST_SEED, "safetensors"),), _read_folder,
                   _write_st_config)


def bench_surface() -> Surface:
    seeds = (
        Seed("bench.json", json.dumps(BENCH_ROWS, indent=2).encode(), "json"),
        Seed("bench.jsonl", "\n".join(json.dumps(r) for r in BENCH_ROWS).encode(), "jsonl"),
        Seed("batched.jsonl", ("log line\n" + "\n".join(json.dumps(r) for r in BATCHED_ROWS)).encode(), "jsonl"),
        Seed("bench.csv", bench_csv().encode(), "csv"),
        Seed("bench.md", MARKDOWN.encode(), "markdown"),
        Seed("batched.md", BATCHED_MARKDOWN.encode(), "markdown"),
    )
    return Surface("llama-bench", seeds, _read_bench)


# stored files, relative to a case folder that is both the data and the config folder
MEASUREMENT = "measurements/qwen3-abc/measured.json"
CALIBRATION = "calibrations/qwen3-abc/measured.json"
MEASURED = "machines/measured.json"
PROFILE = "machines/my-box.json"


def store_seeds(root: Path) -> tuple[Seed, ...]:
    """The files rooflab keeps, written by rooflab itself into ``root`` (data and config dir)."""
    import os

    from rooflab.core.calibration import store
    from rooflab.core.calibration.calibrate import calibrate
    from rooflab.core.io import presets
    from rooflab.core.values.machine import MachineProfile
    from rooflab.core.values.measured import EngineSettings, MeasuredPoint
    from tests.conftest import build_spec

    saved = {k: os.environ.get(k) for k in ("ROOFLAB_DATA_DIR", "ROOFLAB_CONFIG_DIR")}
    os.environ["ROOFLAB_DATA_DIR"] = os.environ["ROOFLAB_CONFIG_DIR"] = str(root)
    try:
        machine = MachineProfile(name="This machine, measured", bandwidth=40e9, peak_flops={"fp32": 2e11},
                                 memory=16e9, default_dtype="fp32", kind="cpu", key="measured",
                                 sources={"bandwidth": "measured"})
        settings = EngineSettings(engine="llama.cpp", version="b5163", threads=2)
        points = [MeasuredPoint(kind="prefill", prompt=64, context=0, batch=1, seconds=0.2, median=0.21, repeats=3,
                                settings=settings),
                  MeasuredPoint(kind="decode", prompt=1, context=70, batch=1, seconds=0.01, settings=settings),
                  MeasuredPoint(kind="batch", prompt=1, context=512, batch=4, seconds=0.02, settings=settings,
                                disturbed="load rose")]
        cal = calibrate(build_spec(layers=2), machine, points, kv_type="f16", dtype="fp32", include_disturbed=True)
        store.save_measurement("qwen3-abc", "measured", points, {"tool": "llama.cpp"}, label="tiny", source="x")
        store.save_calibration("qwen3-abc", "measured", cal, source="/models/tiny.gguf")
        presets.save_measured_machine(machine, {"device": "cpu", "bandwidth": [], "roofline": []})
        presets.save_user_profile(dataclasses.replace(machine, name="My box", key=""), key="my-box")
        store.save_engine_calibration(_engine_calibration())
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return tuple(Seed(name, (root / name).read_bytes(), "json") for name in (MEASUREMENT, CALIBRATION, MEASURED,
                                                                              PROFILE))


def _engine_calibration() -> Any:
    from rooflab.core.values.calibration import Accuracy, EngineCalibration, Rates

    rates = Rates(bandwidth={"k-quant": 30e9, "float": 20e9}, prefill_flops={"k-quant": 2e11, "float": 1e11},
                  decode_flops={"k-quant": 1e11, "float": 1e11}, cache_bandwidth=8e9, pass_seconds=1e-3,
                  layer_seconds=1e-5, overlap=0.0)
    return EngineCalibration(machine_key="measured", machine_name="This machine, measured",
                             engine_key="llama.cpp cpu t2 kv-f16", engine_label="llama.cpp b5163, cpu, 2 threads",
                             settings={"threads": 2}, date="2026-11-30T12:00:00+00:00", models=("a", "b"),
                             machine_bandwidth=40e9, machine_flops=2e11, central=rates, replicates=(rates, rates),
                             accuracy={"leave_one_model_out": {"decode": Accuracy(median=0.1, worst=0.3, count=8)}},
                             points=16, model_keys=("qwen3-abc",))


def _read_store(folder: Path) -> None:
    """Every reader of the stored files; the store itself must never raise for a bad file."""
    import os

    from rooflab.core.calibration import store
    from rooflab.core.io import presets
    from rooflab.core.values.measured import MeasuredPoint

    os.environ["ROOFLAB_DATA_DIR"] = os.environ["ROOFLAB_CONFIG_DIR"] = str(folder)
    store.load_measurements("qwen3-abc", "measured")
    store.load_calibration_record("qwen3-abc", "measured")
    store.load_calibration("qwen3-abc", "measured")
    store.load_calibration("/models/tiny.gguf", "measured")
    presets.load_measured_machine()
    presets.load_machine_measurement()
    presets.list_user_profiles()
    presets.broken_user_profiles()
    store.save_measurement("qwen3-abc", "measured", [MeasuredPoint(kind="decode", prompt=1, context=1, batch=1,
                                                                   seconds=0.01)])
    if len(store.load_measurements("qwen3-abc", "measured")) < 1:
        raise AssertionError("a measurement saved after a bad file was not kept")
    presets.load_machine(str(folder / PROFILE))        # a ResourceError is a clean refusal
    # a machine's calibration: read, and (when it survived) priced for a model, as every window does
    from rooflab.core.calibration.expectations import expected_on
    from tests.conftest import build_spec

    measured = presets.load_measured_machine()
    if measured is not None:
        expected_on(build_spec(layers=2), measured)
    store.engine_calibrations("measured")


def store_surface(root: Path) -> Surface:
    """Stored files; the seeds are written into ``root`` (which must be empty)."""
    seeds = store_seeds(root)

    def prepare(folder: Path) -> None:
        for seed in seeds:
            (folder / seed.name).parent.mkdir(parents=True, exist_ok=True)
            (folder / seed.name).write_bytes(seed.data)

    return Surface("stored files", seeds, _read_store, prepare)


def one_line_error(read: Callable[[Path], Any], path: Path, *words: str) -> str:
    """The message ``read(path)`` refuses ``path`` with: a ModelFileError of one line (under 500
    characters) that names the file and contains each of ``words``."""
    import pytest

    from rooflab.core.errors import ModelFileError

    with pytest.raises(ModelFileError) as info:
        read(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message and len(message) < 500, message
    for word in words:
        assert word in message, message
    return message
