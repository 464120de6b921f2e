"""Each operation of a torch pass timed by torch's profiler, under the names ``predict.ops``
gives the same operations: q/k/v/o projections, norms, RoPE, attention scores, softmax and
weighted sum, the feed-forward's gate, up, activation and down, the router and experts, the
output head and sampling.

Every module that does one operation (a projection, a norm, the head) runs inside a profiler
range named for it (a forward pre-hook opens it, a forward hook closes it); so do the blocks
that hold several (attention, the feed-forward, the decoder layer). A range's time less its
inner ranges' is its own: a leaf's is the operation's; an attention block's own time is split
by the aten ops it ran (its first matrix product the scores, the second the weighted sum, the
softmax, the elementwise ops before them RoPE; the rest "attn_other"), a feed-forward's own is
its activation and gate product, a layer's own its residual adds. The profiler records each
op's shapes and FLOPs in one more run of each pass (recording them costs at every op: the timed
runs leave them out). Attention runs eagerly (transformers' "eager"), so scores, softmax and
weighted sum are apart; where it cannot, the fused kernel is one "attention" row.

CPU only: on a CPU the profiler's range times are wall time. torch is imported inside
functions only."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.io.roles import layer_of
from rooflab.core.jobs import CancelFlag, Progress, check_cancel
from rooflab.core.measure.engines.budget import check_fits, run_memory
from rooflab.core.measure.engines.op_times import MeasuredOperation, OpsMeasurement, PassTiming
from rooflab.core.measure.engines.torch import backend
from rooflab.core.measure.engines.torch.models import (
    ModelSource,
    build_model,
    meta_model,
    resolve_source,
    spec_from_torch,
)
from rooflab.core.measure.engines.torch.passes import Runner
from rooflab.core.measure.machine.sysinfo import free_and_total_memory
from rooflab.core.predict.ops import DECODE, EMBEDDING, HEAD, PREFILL, SAMPLING, layer_kinds
from rooflab.core.values.model import ModelSpec

PREFIX = "rooflab:"
MAX_PROMPT = 1 << 16
#: module names (the last part) -> the operation they do
LEAVES: dict[str, str] = {
    "q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "o_proj", "qkv_proj": "qkv_proj",
    "q_norm": "qk_norm", "k_norm": "qk_norm", "input_layernorm": "attn_norm", "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_norm", "embed_tokens": "embedding", "lm_head": "output_head",
    "act_fn": "ffn_act", "gate": "router",
}
_FFN = {"gate_proj": "gate", "w1": "gate", "up_proj": "up", "w3": "up", "down_proj": "down", "w2": "down"}
ATTENTION_BLOCKS = frozenset({"self_attn", "attention", "attn"})
FFN_BLOCKS = frozenset({"mlp", "feed_forward", "block_sparse_moe"})
#: what the own time of each kind of block is
REMAINDER = {"attention": "attn_other", "ffn": "ffn_act", "moe": "moe_dispatch", "experts": "moe_dispatch",
             "layer": "residual", "model": "other", "pass": SAMPLING}
#: measured rows that time several predicted ones together
GROUPS: dict[str, tuple[str, ...]] = {"attention": ("attn_scores", "softmax", "attn_weighted_sum"),
                                      "experts": ("expert_gate", "expert_up", "expert_down")}
_PRODUCTS = frozenset({"aten::matmul", "aten::bmm", "aten::mm", "aten::baddbmm", "aten::einsum"})
_SOFTMAX = frozenset({"aten::softmax", "aten::_softmax", "aten::_safe_softmax"})
_ROPE = frozenset({"aten::mul", "aten::add", "aten::neg", "aten::cat", "aten::slice", "aten::sub"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OpsPlan:
    """What to time: a prefill of each prompt and the decode step after it, ``repeats`` times
    each without the profiler (the pass's own time, best kept) and with it (the run whose ops
    sum least kept)."""

    prompts: tuple[int, ...] = (256,)
    repeats: int = 3
    dtype: str = "fp32"
    device: str = "cpu"
    threads: int | None = None
    random_weights: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        backend.dtype_bytes(self.dtype)
        if not self.prompts or any(not isinstance(n, int) or not 1 <= n <= MAX_PROMPT for n in self.prompts):
            raise MeasurementError(f"prompts must be whole numbers in [1, {MAX_PROMPT}], got {self.prompts!r}")
        if not 1 <= self.repeats <= 50:
            raise MeasurementError(f"repeats must be in [1, 50], got {self.repeats}")
        if self.device.split(":")[0] != "cpu":
            raise MeasurementError("operations are timed on the CPU only (the profiler's ranges are wall time "
                                   f"there), not on {self.device!r}")


def module_operation(name: str, module_names: frozenset[str]) -> tuple[str, str] | None:
    """(kind, operation) a module of ``name`` is timed as: ("leaf", "q_proj"), ("attention",
    ""), ("ffn", ""), ("moe", ""), ("experts", ""), ("layer", ""); None for a module not timed
    by itself (its time stays with the block around it). ``module_names``: every module's name,
    to tell a block's parts."""
    last = name.rsplit(".", 1)[-1]
    parent = name.rsplit(".", 1)[0] if "." in name else ""
    if re.search(r"(?:^|\.)(?:layers|h|blocks)\.\d+$", name):
        return ("layer", "")
    if last in ATTENTION_BLOCKS:
        return ("attention", "")
    if last in FFN_BLOCKS:
        return ("moe", "") if f"{name}.gate" in module_names or f"{name}.experts" in module_names else ("ffn", "")
    if last in ("experts", "shared_expert", "shared_experts"):
        fused = not any(n.startswith(f"{name}.") for n in module_names)
        if last == "experts":
            return ("leaf", "experts") if fused else ("experts", "")
        return ("ffn", "")
    if last in _FFN:
        part = _FFN[last]
        where = "expert" if ".experts." in f"{name}." else "shared" if "shared_expert" in parent else "ffn"
        return ("leaf", f"{where}_{part}")
    if last == "post_attention_layernorm":
        gemma = f"{parent}.pre_feedforward_layernorm" in module_names
        return ("leaf", "post_norm" if gemma else "ffn_norm")
    if last == "norm" and layer_of(name) is None:
        return ("leaf", "output_norm")
    if last == "rotary_emb":
        return ("leaf", "rope_tables")
    if last in LEAVES:
        return ("leaf", LEAVES[last])
    return None


def _label_modules(model: Any) -> list[Any]:
    """Profiler ranges around every timed module: "rooflab:<kind>:<operation>:<layer>"."""
    torch = backend.require_torch()
    names = frozenset(n for n, _ in model.named_modules())
    handles = []
    for name, module in model.named_modules():
        found = module_operation(name, names) if name else ("model", "")
        if found is None:
            continue
        layer = layer_of(name)
        label = f"{PREFIX}{found[0]}:{found[1]}:{'' if layer is None else layer}"
        stack: list[Any] = []

        def enter(_module: Any, _args: Any, label: str = label, stack: list[Any] = stack) -> None:
            ctx = torch.profiler.record_function(label)
            ctx.__enter__()
            stack.append(ctx)

        def leave(_module: Any, _args: Any, _out: Any, stack: list[Any] = stack) -> None:
            if stack:
                stack.pop().__exit__(None, None, None)

        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    return handles


def _owner(event: Any) -> Any:
    parent = event.cpu_parent
    while parent is not None and not parent.name.startswith(PREFIX):
        parent = parent.cpu_parent
    return parent


@dataclass(slots=True)
class TimedRow:
    """One operation's running sums while a pass's events are read: seconds, the profiler's
    FLOPs, calls, the shapes of its first call."""

    seconds: float = 0.0
    flops: float = 0.0
    calls: int = 0
    shapes: str = ""

    def add(self, seconds: float, flops: float = 0.0, shapes: str = "", calls: int = 1) -> None:
        self.seconds += seconds
        self.flops += flops
        self.calls += calls
        self.shapes = self.shapes or shapes


class _Tally:
    """Rows of one profiled pass by (layer, operation)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int | None, str], TimedRow] = defaultdict(TimedRow)

    def add(self, layer: int | None, name: str, seconds: float, flops: float = 0.0, shapes: str = "") -> None:
        self.rows[(layer, name)].add(seconds, flops, shapes)


def _attention_name(event: Any, state: dict[str, int]) -> str:
    """The operation an aten op run by an attention block itself is part of."""
    name = event.name
    if "scaled_dot_product" in name or "flash_attention" in name:
        state["products"] += 2
        return "attention"
    if name in _PRODUCTS:
        state["products"] += 1
        return "attn_scores" if state["products"] == 1 else "attn_weighted_sum" if state["products"] == 2 \
            else "attn_other"
    if name in _SOFTMAX:
        return "softmax"
    return "rope" if name in _ROPE and state["products"] == 0 else "attn_other"


def _flops_below(event: Any) -> float:
    return float(event.flops or 0) + sum(_flops_below(c) for c in event.cpu_children
                                          if not c.name.startswith(PREFIX))


def tally_events(events: Any) -> _Tally:
    """Each range's own time and FLOPs, by operation and layer (see the module's docstring)."""
    labels = [e for e in events if e.name.startswith(PREFIX)]
    inner: dict[int, float] = defaultdict(float)
    for e in labels:
        owner = _owner(e)
        if owner is not None:
            inner[id(owner)] += e.cpu_time_total
    tally = _Tally()
    for e in labels:
        kind, operation, layer_text = e.name[len(PREFIX):].split(":")
        layer = int(layer_text) if layer_text else None
        own = (e.cpu_time_total - inner[id(e)]) * 1e-6
        atens = sorted((c for c in e.cpu_children if not c.name.startswith(PREFIX)), key=lambda c: c.time_range.start)
        if kind == "leaf":
            shapes = str(atens[0].input_shapes) if atens else ""
            tally.add(layer, operation, own, sum(_flops_below(c) for c in atens), shapes[:200])
            continue
        if kind == "attention":
            state = {"products": 0}
            for c in atens:
                seconds = c.cpu_time_total * 1e-6
                tally.add(layer, _attention_name(c, state), seconds, _flops_below(c), str(c.input_shapes)[:200])
                own -= seconds
        tally.add(layer, REMAINDER[kind], max(own, 0.0), 0.0 if kind == "attention" else
                  sum(_flops_below(c) for c in atens))
    return tally


def _rows(tally: _Tally, spec: ModelSpec, phase: str, prompt: int) -> list[MeasuredOperation]:
    """The pass's rows summed over the layers of each kind (``predict.ops.layer_kinds``)."""
    kinds = layer_kinds(spec)
    edge = {"embedding": EMBEDDING, "output_norm": HEAD, "output_head": HEAD, SAMPLING: SAMPLING}
    merged: dict[tuple[str, str], TimedRow] = defaultdict(TimedRow)
    for (layer, name), row in tally.rows.items():
        kind = kinds[layer] if layer is not None and layer < len(kinds) else edge.get(name, "other")
        merged[(kind, name)].add(row.seconds, row.flops, row.shapes, row.calls)
    return [MeasuredOperation(name=name, layer_kind=kind, phase=phase, prompt=prompt, seconds=r.seconds,
                              flops=r.flops, calls=r.calls, shapes=r.shapes) for (kind, name), r in merged.items()]


def _profiled(run: Any, *, detailed: bool = False) -> tuple[Any, Any]:
    """(the profiler's events, ``run``'s result) of one call inside a "pass" range;
    ``detailed``: with each op's shapes and FLOPs recorded (a cost of its own at every op, so
    the timed runs leave them out and one more run records them)."""
    torch = backend.require_torch()
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities, record_shapes=detailed, with_flops=detailed) as prof:
        with torch.profiler.record_function(f"{PREFIX}pass::"):
            result = run()
    return prof.events(), result


def _eager(model: Any) -> tuple[str, list[str]]:
    """Switch the model to transformers' eager attention where it can (scores, softmax and
    weighted sum as separate ops); (the attention it runs, notes)."""
    try:
        model.set_attn_implementation("eager")
    except (AttributeError, ValueError, TypeError) as exc:
        current = str(getattr(model.config, "_attn_implementation", "") or "")
        return current, [f"attention timed as it runs ({current or 'unknown'}): its scores, softmax and weighted "
                         f"sum are one 'attention' row ({exc})"]
    return "eager", []


def _best(runs: list[tuple[float, list[MeasuredOperation]]]) -> tuple[float, list[MeasuredOperation]]:
    return min(runs, key=lambda r: r[0])


def measure_ops(ref: str | Mapping[str, Any] | ModelSpec | ModelSource, plan: OpsPlan | None = None,
                cancel: CancelFlag = None) -> Generator[Progress, None, OpsMeasurement]:
    """Time ``ref``'s prefill of each planned prompt and the decode step after it, operation by
    operation (a job: yields Progress, returns an ``OpsMeasurement``). MeasurementError before
    anything is built when the run would not fit in memory."""
    plan = plan or OpsPlan()
    yield Progress(step="prepare", message="reading the model", fraction=0.0)
    torch = backend.require_torch()
    source = ref if isinstance(ref, ModelSource) else resolve_source(ref, random_weights=plan.random_weights)
    sized = spec_from_torch(meta_model(source), name=source.label, source=source.label, dtype=plan.dtype)
    estimate = run_memory(sized, elt=backend.dtype_bytes(plan.dtype), kv_type=backend.KV_TYPE_OF[plan.dtype],
                          prompts=plan.prompts, decode_steps=2 * plan.repeats, contexts=(), batches=(1,))
    check_fits(estimate, free_and_total_memory(plan.device)[0], plan.device)
    rows: list[MeasuredOperation] = []
    passes: list[PassTiming] = []
    with backend.torch_threads(plan.threads) as threads, torch.inference_mode():
        model = yield from build_model(source, plan.dtype, plan.device, cancel)
        spec = spec_from_torch(model, name=source.label, source=source.label)
        attention, notes = _eager(model)
        runner = Runner(model, plan.device, cancel, seed=plan.seed)
        handles = _label_modules(model)
        try:
            runner.prefill(min(16, max(plan.prompts)))                         # warm-up
            for i, n in enumerate(plan.prompts):
                yield Progress(step="ops", message=f"prompt of {n:,} tokens: prefill and a decode step, by operation",
                               fraction=i / len(plan.prompts))
                got = _time_prompt(runner, spec, n, plan.repeats, cancel)
                for phase, (plain, (total, ops)) in got.items():
                    rows += ops
                    passes.append(PassTiming(phase=phase, prompt=n, seconds=plain, seconds_ops=total))
        finally:
            for handle in handles:
                handle.remove()
            runner.close()
    return OpsMeasurement(label=source.label, spec=spec, dtype=plan.dtype, device=plan.device, threads=threads,
                          attention=attention, operations=tuple(rows), passes=tuple(passes),
                          notes=tuple([*source.notes, *runner.notes, *notes]), engine="torch",
                          kv_type=backend.KV_TYPE_OF[plan.dtype],
                          activation_bytes=float(backend.dtype_bytes(plan.dtype)),
                          flash_attention=attention != "eager", compute_dtype=plan.dtype, groups=GROUPS)


def _time_prompt(runner: Runner, spec: ModelSpec, n: int, repeats: int, cancel: CancelFlag,
                 ) -> dict[str, tuple[float, tuple[float, list[MeasuredOperation]]]]:
    """{phase: (best plain seconds, (least profiled sum, its rows))} of a prefill of ``n``
    tokens and the decode step after it (the cache one token longer each repeat)."""
    plain: dict[str, list[float]] = {PREFILL: [], DECODE: []}
    profiled: dict[str, list[tuple[float, list[MeasuredOperation]]]] = {PREFILL: [], DECODE: []}
    cache = token = None
    for _ in range(repeats):
        check_cancel(cancel)
        seconds, cache, token = runner.prefill(n)
        plain[PREFILL].append(seconds)
        events, _ = _profiled(partial(runner.prefill, n))
        ops = _rows(tally_events(events), spec, PREFILL, n)
        profiled[PREFILL].append((sum(o.seconds for o in ops), ops))
    for _ in range(repeats):
        check_cancel(cancel)
        seconds, token = runner.step(token, cache)
        plain[DECODE].append(seconds)
        events, (_, token) = _profiled(partial(runner.step, token, cache))
        ops = _rows(tally_events(events), spec, DECODE, n)
        profiled[DECODE].append((sum(o.seconds for o in ops), ops))
    # one more run of each, its shapes and FLOPs recorded (the timed runs leave them out: their cost)
    check_cancel(cancel)
    events, _ = _profiled(partial(runner.prefill, n), detailed=True)
    details = {PREFILL: _rows(tally_events(events), spec, PREFILL, n)}
    events, _ = _profiled(partial(runner.step, token, cache), detailed=True)
    details[DECODE] = _rows(tally_events(events), spec, DECODE, n)
    out = {}
    for phase in (PREFILL, DECODE):
        total, ops = _best(profiled[phase])
        out[phase] = (min(plain[phase]), (total, _with_details(ops, details[phase])))
    return out


def _with_details(rows: list[MeasuredOperation], detailed: list[MeasuredOperation]) -> list[MeasuredOperation]:
    """``rows`` (timed) with the FLOPs and shapes the detailed run recorded for each operation."""
    found = {(o.layer_kind, o.name): o for o in detailed}
    return [dataclasses.replace(o, flops=d.flops, shapes=d.shapes) if (d := found.get((o.layer_kind, o.name)))
            else o for o in rows]
