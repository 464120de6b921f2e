"""What a llama.cpp measurement times and how llama.cpp runs it (``LlamaCppPlan``, its
prompt and generation runs as llama-bench tests, ``BenchTest``), and the memory such a run
needs, checked before the model is loaded (``llamacpp_memory``)."""

from __future__ import annotations

from dataclasses import dataclass

from rooflab.core.errors import MeasurementError
from rooflab.core.measure.engines.budget import MemoryEstimate
from rooflab.core.predict.footprint import compute_buffer_bytes
from rooflab.core.predict.work import kv_cells_held, padded
from rooflab.core.values.measured import MAX_PLAN_REPEATS, MAX_PLAN_STEPS, MAX_THREADS, bench_test
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.quant import KV_TYPES

EXPERIMENTS: tuple[str, ...] = ("prefill", "decode", "batch")
RUNTIME_BYTES = 128 << 20      # llama.cpp's own allocations besides weights, cache, compute buffers
MAX_SEQUENCES = 256            # LLAMA_MAX_SEQ
_FLOAT_CACHES = ("f32", "f16", "bf16")


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchTest:
    """One llama-bench test: a prompt of ``n_prompt`` tokens (ppN) or ``n_gen`` tokens generated
    one by one (tgN), on top of ``n_depth`` cached tokens (@ dD). llama-bench gives each test a
    context of exactly n_prompt + n_gen + n_depth tokens."""

    n_prompt: int = 0
    n_gen: int = 0
    n_depth: int = 0

    @property
    def kind(self) -> str:
        return "prefill" if self.n_prompt else "decode"

    @property
    def label(self) -> str:
        """"pp512", "tg128 @ d4096"."""
        return bench_test(self.kind, self.n_prompt or self.n_gen, self.n_depth)

    @property
    def n_ctx(self) -> int:
        return self.n_prompt + self.n_gen + self.n_depth


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaCppPlan:
    """What to time and how llama.cpp runs (llama-bench's flags in brackets).

    Engine: ``threads`` [-t] (None: the physical cores, as llama-bench), ``gpu_layers`` [-ngl],
    ``flash_attention`` [-fa] (None: llama.cpp decides, "auto"), ``cache_type_k`` /
    ``cache_type_v`` [-ctk/-ctv], ``batch_size`` / ``ubatch_size`` [-b/-ub], tokens.
    Sweep: ``prompts`` [-p] at depth 0; ``gen_tokens`` [-n] generated at each of ``depths``
    [-d]; ``repeats`` [-r] runs of every such test (``tests``); ``contexts`` x ``batches``
    [llama-batched-bench -npp x -npl], ``batch_steps`` steps each. ``warmup``: one untimed run
    per test, as llama-bench's (its prompt, or one generated token)."""

    threads: int | None = None
    gpu_layers: int = 0
    flash_attention: bool | None = None
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    batch_size: int = 2048
    ubatch_size: int = 512
    prompts: tuple[int, ...] = (64, 256, 512)
    depths: tuple[int, ...] = (0, 512, 2048)
    gen_tokens: int = 16
    contexts: tuple[int, ...] = (512,)
    batches: tuple[int, ...] = (1, 2, 4, 8)
    batch_steps: int = 8
    repeats: int = 3
    experiments: tuple[str, ...] = EXPERIMENTS
    warmup: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = set(self.experiments) - set(EXPERIMENTS)
        if unknown:
            raise MeasurementError(f"unknown llama.cpp experiments: {', '.join(sorted(unknown))}")
        for name, low in (("prompts", 1), ("batches", 1), ("depths", 0), ("contexts", 0)):
            values = getattr(self, name)
            if any(not isinstance(v, int) or isinstance(v, bool) or v < low for v in values):
                raise MeasurementError(f"{name} must be whole numbers >= {low}, got {values!r}")
        for experiment, sweeps in (("prefill", ("prompts",)), ("decode", ("depths",)),
                                   ("batch", ("contexts", "batches"))):
            if experiment in self.experiments and not all(getattr(self, name) for name in sweeps):
                raise MeasurementError(f"the {experiment} experiment needs {' and '.join(sweeps)}")
        for name in ("gen_tokens", "batch_steps", "repeats", "batch_size", "ubatch_size"):
            if getattr(self, name) < 1:
                raise MeasurementError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.gpu_layers < 0 or (self.threads is not None and not 1 <= self.threads <= MAX_THREADS):
            raise MeasurementError(f"gpu_layers must be >= 0 and threads in [1, {MAX_THREADS}]")
        if self.repeats > MAX_PLAN_REPEATS or max(self.gen_tokens, self.batch_steps) > MAX_PLAN_STEPS:
            raise MeasurementError(f"repeats must be at most {MAX_PLAN_REPEATS}, gen_tokens and batch_steps "
                                   f"{MAX_PLAN_STEPS}")
        if max(self.batches, default=1) > min(MAX_SEQUENCES, self.ubatch):
            raise MeasurementError(f"a batch of {max(self.batches)} sequences must fit one ubatch "
                                   f"({self.ubatch} tokens) and llama.cpp's {MAX_SEQUENCES} sequences")
        for name in ("cache_type_k", "cache_type_v"):
            if getattr(self, name) not in KV_TYPES:
                raise MeasurementError(f"{name} must be one of {', '.join(KV_TYPES)}, got {getattr(self, name)!r}")
        if self.cache_type_v not in _FLOAT_CACHES and self.flash_attention is False:
            raise MeasurementError(f"llama.cpp needs flash attention for a {self.cache_type_v} V cache")

    @property
    def kv_type(self) -> str:
        """"q8_0" when K and V agree, else "q8_0/f16" (K/V), as the llama-bench reader writes it."""
        k, v = self.cache_type_k, self.cache_type_v
        return k if k == v else f"{k}/{v}"

    @property
    def ubatch(self) -> int:
        """The physical batch llama.cpp uses: never more than the logical one."""
        return min(self.batch_size, self.ubatch_size)

    @property
    def tests(self) -> tuple[BenchTest, ...]:
        """The llama-bench tests of the prefill and decode experiments, in the order they run:
        ppN for each prompt, then tgN @ dD up the depths (a depth's cache is kept for the next
        test at the same depth, as llama-bench keeps it)."""
        out = [BenchTest(n_prompt=n) for n in self.prompts] if "prefill" in self.experiments else []
        if "decode" in self.experiments:
            out += [BenchTest(n_gen=self.gen_tokens, n_depth=d) for d in sorted(self.depths)]
        return tuple(out)

    @property
    def single_context(self) -> int:
        """Tokens the one-sequence context must hold (prompts, depths plus their steps), 0 if unused."""
        need = [max(self.prompts)] if "prefill" in self.experiments else []
        if "decode" in self.experiments:
            need.append(max(self.depths, default=0) + self.gen_tokens)
        return max(need) + 1 if need else 0

    @property
    def batch_context(self) -> int:
        """Tokens each sequence of the batched context holds, 0 if unused."""
        return max(self.contexts) + 2 if "batch" in self.experiments and self.contexts else 0


# --- memory -----------------------------------------------------------------------------------

def _padded(tokens: int) -> int:
    return int(padded(tokens))


def kv_cache_bytes(spec: ModelSpec, plan: LlamaCppPlan, tokens_per_seq: int, sequences: int) -> float:
    """Bytes of llama.cpp's cache for ``sequences`` of ``tokens_per_seq``: the cells
    ``work.kv_cells_held`` says (padded to 256; sliding-window layers their window + ubatch),
    the one rule a placement's bill and the memory footprint use. K and V at their own types
    (each type's per-token bytes count keys and values, hence / 2)."""
    full_cells, swa_cells = (float(x) for x in kv_cells_held(spec, tokens_per_seq, plan.ubatch))
    cells = full_cells
    total = 0.0
    for kv_type in (plan.cache_type_k, plan.cache_type_v):
        full, sliding = spec.kv_bytes_per_token(kv_type)
        total += (full * cells + sliding * swa_cells) * sequences / 2
    return total


def compute_bytes(spec: ModelSpec, plan: LlamaCppPlan, tokens_per_seq: int) -> float:
    """llama.cpp's compute buffer for one ubatch, erring high (``compute_buffer_bytes``), with
    the attention scores ubatch x context x heads that a pass without flash attention holds."""
    return float(compute_buffer_bytes(spec, plan.ubatch, _padded(tokens_per_seq), attention_scores=True))


def llamacpp_memory(spec: ModelSpec, plan: LlamaCppPlan) -> MemoryEstimate:
    """Peak memory of the run: the weights, plus the larger of the two contexts it makes in
    turn (one sequence for prompts and depths, with the copy of the deepest cache kept for the
    next run at that depth, as llama-bench keeps it; ``max(batches)`` sequences for the batch
    sweep)."""
    peaks = [(0.0, 0.0)]
    if plan.single_context:
        deepest = max(plan.depths) if "decode" in plan.experiments else 0
        kept = kv_cache_bytes(spec, plan, deepest, 1) if deepest else 0.0
        peaks.append((kv_cache_bytes(spec, plan, plan.single_context, 1) + kept,
                      compute_bytes(spec, plan, plan.single_context)))
    if plan.batch_context:
        peaks.append((kv_cache_bytes(spec, plan, plan.batch_context, max(plan.batches)),
                      compute_bytes(spec, plan, plan.batch_context)))
    cache, activations = max(peaks, key=sum)
    return MemoryEstimate(weights=float(spec.weight_bytes), cache=cache, activations=activations,
                          runtime=RUNTIME_BYTES)
