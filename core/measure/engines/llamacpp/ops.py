"""llama.cpp's graph timed node by node on the CPU back end, each node mapped to the operation
``predict.ops`` names it by: a prefill of each prompt and the decode step after it.

How: the context is made with the scheduler's evaluation callback (``cb_eval``, llama.cpp's
``ggml_backend_sched_eval_callback``). The scheduler asks it of every node whether the node's
output is wanted; answered yes for every node, it computes the graph one node at a time (a
one-node view of the graph each) and calls back after each with ``ask`` false: the time from
a node's question to its answer is that node's compute (llama.cpp's eval-callback example reads
each tensor this way). The callback stamps both moments and reads the node's name and op
(``ggml_get_name``, ``ggml_op_desc`` of libggml-base) after the answer's stamp.

What it costs: two calls into Python a node (a few microseconds each, several hundred nodes a
token) and a graph computation per node (the threads meet at its end, as they do between nodes
of a whole graph). The nodes' sum leaves the callbacks out; the pass timed with them in is kept
beside the plain pass in the run's notes. The same passes are timed plainly first, in a context
without the callback, as ``timing.py`` times a prompt (best of ``repeats``).

Node names are the ones llama.cpp's model builders give (``cb(cur, "Qcur", il)`` makes
"Qcur-0"): a matrix product "Qcur-3" is layer 3's q_proj, its ROPE node (also "Qcur-3") the
RoPE; an unnamed node ("node_41") is read by the one before it (``unnamed_operation``: the
output projection of a Qwen3 graph has no name); an RMS_NORM node ("norm-3") is the
normalisation whose weight multiply follows it ("attn_norm-3", "ffn_norm-3", "Qcur_normed-3");
views, reshapes and permutes (no work) are one "layout" row; the cache writes "kv_write";
residual adds "residual". Flash attention's one node is an "attention" row (scores, softmax and
weighted sum together): timed by operation, flash attention is off unless asked for."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rooflab.core.errors import MeasurementError
from rooflab.core.io.gguf import read_gguf
from rooflab.core.jobs import CancelFlag, Progress, check_cancel
from rooflab.core.measure.engines.child_job import packed, run_in_child, unpacked
from rooflab.core.measure.engines.llamacpp.binding import Engine, default_threads, engine_version, require_llama_cpp
from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan, llamacpp_memory
from rooflab.core.measure.engines.llamacpp.timing import check_memory
from rooflab.core.measure.engines.op_times import MeasuredOperation, OpsMeasurement, PassTiming
from rooflab.core.measure.machine.sysinfo import system_memory_available
from rooflab.core.predict.ops import DECODE, EMBEDDING, HEAD, PREFILL, layer_kinds
from rooflab.core.values.model import ModelSpec

ENGINE = "llamacpp-ops"          # its name among child_job.CHILD_ENGINES
MAX_PROMPT = 1 << 15
UBATCH = 512                     # llama-bench's default micro-batch
#: node names (less the layer) -> the operation
NAMES: dict[str, str] = {
    "embd": "embedding", "inp_embd": "embedding", "attn_norm": "attn_norm", "ffn_norm": "ffn_norm",
    "Qcur": "q_proj", "Kcur": "k_proj", "Vcur": "v_proj", "wqkv": "qkv_proj", "Qcur_normed": "qk_norm",
    "Kcur_normed": "qk_norm", "kq": "attn_scores", "kq_soft_max": "softmax", "kq_soft_max_ext": "softmax",
    "kqv": "attn_weighted_sum", "kqv_out": "attn_other", "attn_out": "o_proj", "attn_post_norm": "post_norm",
    "ffn_gate": "ffn_gate", "ffn_up": "ffn_up", "ffn_out": "ffn_down", "ffn_post_norm": "post_norm",
    "ffn_swiglu": "ffn_act", "ffn_silu": "ffn_act", "ffn_gelu": "ffn_act", "ffn_geglu": "ffn_act",
    "ffn_relu": "ffn_act", "ffn_gate_par": "ffn_act", "ffn_moe_logits": "router", "ffn_moe_probs": "router",
    "ffn_moe_argsort": "router", "ffn_moe_topk": "router", "ffn_moe_weights": "router",
    "ffn_moe_weights_norm": "router", "ffn_moe_weights_sum": "router", "ffn_moe_weights_scaled": "router",
    "ffn_moe_gate": "expert_gate", "ffn_moe_up": "expert_up", "ffn_moe_down": "expert_down",
    "ffn_moe_swiglu": "ffn_act", "ffn_moe_silu": "ffn_act", "ffn_moe_gelu": "ffn_act",
    "ffn_moe_weighted": "moe_dispatch", "ffn_moe_out": "moe_dispatch", "ffn_shexp": "shared_up",
    "ffn_inp": "residual", "l_out": "residual", "attn_residual": "residual", "ffn_residual": "residual",
    "result_norm": "output_norm", "result_output": "output_head",
}
_LAYOUT = frozenset({"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE", "NONE"})
_NORMS = frozenset({"RMS_NORM", "NORM", "L2_NORM"})
_LAYERED = re.compile(r"^(.*?)-(\d+)$")
_CACHE = re.compile(r"^cache_[kv]_l(\d+)$")
_UNNAMED = re.compile(r"^node_\d+$")
#: measured rows that time several predicted ones together
GROUPS: dict[str, tuple[str, ...]] = {"attention": ("attn_scores", "softmax", "attn_weighted_sum")}


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePlan:
    """What to time: a prefill of each prompt and the decode step after it, ``repeats`` times
    each plainly and node by node; flash attention off unless asked for (its one node hides
    the scores, softmax and weighted sum)."""

    prompts: tuple[int, ...] = (256,)
    repeats: int = 3
    threads: int | None = None
    flash_attention: bool = False
    kv_type: str = "f16"

    def __post_init__(self) -> None:
        if not self.prompts or any(not isinstance(n, int) or not 1 <= n <= MAX_PROMPT for n in self.prompts):
            raise MeasurementError(f"prompts must be whole numbers in [1, {MAX_PROMPT}], got {self.prompts!r}")
        if not 1 <= self.repeats <= 50:
            raise MeasurementError(f"repeats must be in [1, 50], got {self.repeats}")


def node_operation(name: str, op: str) -> tuple[str, int | None]:
    """(operation, layer) of a graph node named ``name`` whose op is ``op`` ("MUL_MAT", "ROPE",
    ...); operation "norm" for a normalisation whose weight multiply, next, names it."""
    base = name.split(" (", 1)[0]
    cache = _CACHE.match(base)
    if cache:
        return ("layout" if op in _LAYOUT else "kv_write", int(cache.group(1)))
    found = _LAYERED.match(base)
    stem, layer = (found.group(1), int(found.group(2))) if found else (base, None)
    if op in _LAYOUT:
        return "layout", layer
    if op in _NORMS:
        return "norm", layer
    if op == "ROPE":
        return "rope", layer
    if op.startswith("FLASH_ATTN"):
        return "attention", layer
    if op in ("SET_ROWS", "CPY") and stem.startswith("cache_"):
        return "kv_write", layer
    if stem.startswith("ffn_moe_weights"):
        return "router", layer
    return NAMES.get(stem, "other"), layer


def unnamed_operation(op: str, previous: str) -> str | None:
    """What an unnamed node ("node_41": a builder left it without a name) is, by the node
    before it: a matrix product after the attention's output is the output projection (where
    a builder names it, "attn_out"); an add after the weighted experts sums them. None: other."""
    if op == "MUL_MAT" and previous in ("attn_other", "attention"):
        return "o_proj"
    if op == "ADD" and previous == "moe_dispatch":
        return "moe_dispatch"
    return None


class NodeClock:
    """The scheduler's evaluation callback: says yes to every node (so each is computed by
    itself) and stamps each node's question and answer; ``take`` hands over the nodes timed
    since the last call as (name, op, seconds)."""

    def __init__(self, lib: Any) -> None:
        base = ctypes.CDLL(os.path.join(os.path.dirname(lib.__file__), "lib", _library("ggml-base")))
        self._name = base.ggml_get_name
        self._op = base.ggml_op_desc
        for fn in (self._name, self._op):
            fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
        self._asked = 0
        self._nodes: list[tuple[str, str, float]] = []
        self.callback = lib.ggml_backend_sched_eval_callback(self._on_eval)    # kept: C holds the pointer

    def _on_eval(self, tensor: Any, ask: bool, _data: Any) -> bool:
        now = time.perf_counter_ns()
        if ask:
            self._asked = now
            return True
        seconds = (now - self._asked) * 1e-9
        self._nodes.append((self._name(tensor).decode(errors="replace"), self._op(tensor).decode(errors="replace"),
                            seconds))
        return True

    def take(self) -> list[tuple[str, str, float]]:
        nodes, self._nodes = self._nodes, []
        return nodes


def _library(stem: str) -> str:
    return {"darwin": f"lib{stem}.dylib", "win32": f"{stem}.dll"}.get(sys.platform, f"lib{stem}.so")


def tally_nodes(nodes: list[tuple[str, str, float]], spec: ModelSpec, phase: str,
                prompt: int) -> list[MeasuredOperation]:
    """The nodes of one pass as operation rows, summed over the layers of each kind
    (``predict.ops.layer_kinds``); a normalisation's time goes to the weight multiply after it."""
    kinds = layer_kinds(spec)
    edge = {"embedding": EMBEDDING, "output_norm": HEAD, "output_head": HEAD}
    rows: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    carried = 0.0
    previous, previous_layer = "", None
    for name, op, seconds in nodes:
        operation, layer = node_operation(name, op)
        if _UNNAMED.match(name) and (known := unnamed_operation(op, previous)) is not None:
            operation, layer = known, previous_layer
        if operation != "layout":
            previous, previous_layer = operation, layer
        if operation == "norm":
            carried += seconds
            continue
        if operation in ("attn_norm", "ffn_norm", "output_norm", "qk_norm", "post_norm"):
            seconds, carried = seconds + carried, 0.0
        kind = kinds[layer] if layer is not None and layer < len(kinds) else edge.get(operation, "other")
        row = rows[(kind, operation)]
        row[0] += seconds
        row[1] += 1
    if carried:
        rows[("other", "norm")][0] += carried
    return [MeasuredOperation(name=name, layer_kind=kind, phase=phase, prompt=prompt, seconds=float(s), flops=0.0,
                              calls=int(c)) for (kind, name), (s, c) in rows.items()]


def _context(engine: Engine, plan: NodePlan, n: int, threads: int, callback: Any) -> None:
    engine.new_context(n_ctx=n + 16, n_seq_max=1, n_batch=n, n_ubatch=min(n, UBATCH), threads=threads,
                       flash_attention=plan.flash_attention, type_k=plan.kv_type, type_v=plan.kv_type, capacity=n,
                       eval_callback=callback)


Nodes = list[tuple[str, str, float]]


def _passes(engine: Engine, n: int, rng: np.random.Generator,
            clock: NodeClock | None = None) -> tuple[tuple[float, float], tuple[Nodes, Nodes]]:
    """((prefill, decode step) seconds, (their nodes)) of one prompt of ``n`` tokens into an
    empty cache, and the step after it; nodes only with ``clock`` attached to the context."""
    engine.clear()
    tokens = rng.integers(0, engine.n_vocab, size=n, dtype=np.int32)
    if clock is not None:
        clock.take()
    start = time.perf_counter()
    engine.decode(tokens, np.arange(n, dtype=np.int32))
    prefill = time.perf_counter() - start
    prefill_nodes = clock.take() if clock is not None else []
    start = time.perf_counter()
    engine.decode(tokens[-1:], np.array([n], dtype=np.int32))
    step = time.perf_counter() - start
    return (prefill, step), (prefill_nodes, clock.take() if clock is not None else [])


def measure_nodes(path: str | os.PathLike[str], plan: NodePlan | None = None,
                  cancel: CancelFlag = None) -> Generator[Progress, None, OpsMeasurement]:
    """Time the GGUF at ``path`` node by node on the CPU (a job: yields Progress, returns an
    ``OpsMeasurement`` whose rows carry ``predict.ops``'s names). MeasurementError before
    loading when the run would not fit in memory."""
    plan = plan or NodePlan()
    path = os.fspath(path)
    yield Progress(step="prepare", message="reading the model", fraction=0.0)
    spec = read_gguf(path)
    lib = require_llama_cpp()
    estimate = llamacpp_memory(spec, LlamaCppPlan(prompts=plan.prompts, depths=(0,), gen_tokens=1,
                                                  experiments=("prefill", "decode"), cache_type_k=plan.kv_type,
                                                  cache_type_v=plan.kv_type))
    check_memory(estimate, system_memory_available())
    threads = plan.threads or default_threads()
    clock = NodeClock(lib)
    rng = np.random.default_rng(0)
    rows: list[MeasuredOperation] = []
    passes: list[PassTiming] = []
    notes: list[str] = []
    with Engine(lib, cancel) as engine:
        yield Progress(step="load", message=f"loading {os.path.basename(path)} into llama.cpp", fraction=0.0)
        engine.load(path, 0)
        for i, n in enumerate(plan.prompts):
            yield Progress(step="ops", message=f"prompt of {n:,} tokens: prefill and a decode step, node by node",
                           fraction=i / len(plan.prompts))
            _context(engine, plan, n, threads, None)
            plain = [_passes(engine, n, rng)[0] for _ in range(plan.repeats + 1)][1:]     # the first warms up
            check_cancel(cancel)
            _context(engine, plan, n, threads, clock.callback)
            timed = [_passes(engine, n, rng, clock) for _ in range(plan.repeats + 1)][1:]
            for k, phase in enumerate((PREFILL, DECODE)):
                # the run whose nodes sum least, as the torch engine keeps its profiled run
                runs = [(walls[k], tally_nodes(nodes[k], spec, phase, n)) for walls, nodes in timed]
                wall, ops = min(runs, key=lambda r: sum(o.seconds for o in r[1]))
                total, best = sum(o.seconds for o in ops), min(p[k] for p in plain)
                rows += ops
                passes.append(PassTiming(phase=phase, prompt=n, seconds=best, seconds_ops=total))
                notes.append(f"{phase} of prompt {n:,}: node by node it took {wall * 1e3:.3g} ms of wall time "
                             f"(plainly {best * 1e3:.3g} ms: the callbacks' own cost is the difference); its "
                             f"nodes sum to {total * 1e3:.3g} ms")
        engine.free_context()
    if plan.flash_attention:
        notes.append("flash attention on: its one node per layer is the 'attention' row (scores, softmax and "
                     "weighted sum together)")
    return OpsMeasurement(label=spec.name, spec=spec, dtype=spec.weights_format or "gguf", device="cpu",
                          threads=threads, attention="flash" if plan.flash_attention else "eager",
                          operations=tuple(rows), passes=tuple(passes),
                          notes=(f"llama.cpp {engine_version(lib)}", *notes), engine="llama.cpp",
                          kv_type=plan.kv_type, activation_bytes=4.0, flash_attention=plan.flash_attention,
                          compute_dtype=None, groups=GROUPS)


def measure_nodes_of(spec: ModelSpec, ref: object, plan: NodePlan | None = None, cancel: CancelFlag = None, *,
                     synthetic: bool = False) -> Generator[Progress, None, OpsMeasurement]:
    """``spec`` (opened from ``ref``) timed node by node: the user's own GGUF when ``ref`` is one,
    else a random-weight GGUF of its tensor table (``engine.gguf_for``), in a child process."""
    from rooflab.core.measure.engines.engine import gguf_for

    path = yield from gguf_for(spec, ref, synthetic=synthetic, cancel=cancel)
    run = yield from measure_nodes_in_child(path, plan, cancel)
    return dataclasses.replace(run, label=spec.name)


def child_job(request: Mapping[str, Any]) -> Generator[Progress, None, dict[str, Any]]:
    """In the child: ``measure_nodes`` of the request's path and plan."""
    run = yield from measure_nodes(str(request["path"]), unpacked(request["plan"], NodePlan), None)
    return {"measurement": packed(run)}


def measure_nodes_in_child(path: str | os.PathLike[str], plan: NodePlan | None = None,
                           cancel: CancelFlag = None) -> Generator[Progress, None, OpsMeasurement]:
    """``measure_nodes`` in a child process (``child_job``), as every llama.cpp measurement
    runs: llama.cpp dying mid-run ends the child, not the window or the command line
    (``EngineCrashed``); the same progress and errors otherwise."""
    plan = plan or NodePlan()
    yield Progress(step="prepare", message="starting llama.cpp in a process of its own", fraction=0.0)
    request = {"path": os.fspath(path), "plan": packed(plan)}
    result, _ = yield from run_in_child(ENGINE, request, cancel, name="llama.cpp", planned=0)
    run: OpsMeasurement = unpacked(result.get("measurement"), OpsMeasurement)
    return run
