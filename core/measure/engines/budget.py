"""Will the run fit? Memory a timing run needs (weights, caches, activations) against what the
device has free, checked before anything is loaded. Estimates err on the high side: a refusal
costs a re-plan, an out-of-memory kill costs the user's session."""

from __future__ import annotations

from dataclasses import dataclass

from rooflab.core.errors import MeasurementError
from rooflab.core.predict import work
from rooflab.core.values.model import ModelSpec

GB = 1e9
RUNTIME_BYTES = 384 << 20        # torch, transformers and allocator slack, measured ~300 MiB
HEADROOM = 0.9                   # never plan to use the last tenth of free memory


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    """Peak bytes of a run, by what holds them."""

    weights: float
    cache: float
    activations: float
    runtime: float = RUNTIME_BYTES

    @property
    def total(self) -> float:
        return self.weights + self.cache + self.activations + self.runtime

    def describe(self) -> str:
        return (f"{self.total / GB:.2f} GB (weights {self.weights / GB:.2f}, caches {self.cache / GB:.2f}, "
                f"activations {self.activations / GB:.2f}, runtime {self.runtime / GB:.2f})")


def _ffn_width(spec: ModelSpec) -> float:
    """Feed-forward width a token passes through, from the parameters it multiplies per layer."""
    per_layer = spec.block_params_per_token / max(spec.layers, 1)
    return max(4.0 * spec.hidden, per_layer / (3.0 * spec.hidden))


def activation_bytes(spec: ModelSpec, *, batch: int, queries: int, keys: int, elt: int) -> float:
    """Transient bytes of one forward pass: b sequences of ``queries`` new tokens over ``keys``.

    Hidden states (~16 live copies of hidden) and the feed-forward intermediate (4 x ffn) per
    token; attention scores b x heads x q x k twice (an unfused kernel materialises them and
    their softmax); the causal mask b x q x k x 4; logits for the last position in fp32."""
    tokens = batch * queries
    per_token = elt * (16.0 * spec.hidden + 4.0 * _ffn_width(spec))
    heads = max(spec.attention.heads) if spec.attention.heads else 1
    scores = 2.0 * batch * heads * queries * keys * elt
    mask = 4.0 * batch * queries * keys
    logits = 2.0 * 4.0 * batch * spec.vocab
    return tokens * per_token + scores + mask + logits


def run_memory(spec: ModelSpec, *, elt: int, kv_type: str, prompts: tuple[int, ...], decode_steps: int,
               contexts: tuple[int, ...], batches: tuple[int, ...]) -> MemoryEstimate:
    """Peak of the prefill/decode sweep and the batched sweep, weights included once.

    Caches: the longest prompt plus its decode steps; for the batch sweep, b copies of the
    longest context plus the batch-1 prefill they were copied from. A cache append copies one
    layer (torch.cat), so one more layer's worth is added."""
    weights = float(spec.weight_bytes)
    per_token = float(work.kv_bytes(spec, 1.0, kv_type)) * (1.0 + 1.0 / max(spec.layers, 1))
    peaks: list[tuple[float, float]] = [(0.0, 0.0)]
    if prompts:
        longest = max(prompts)
        peaks.append(((longest + decode_steps + 1) * per_token,
                      activation_bytes(spec, batch=1, queries=longest, keys=longest, elt=elt)))
    if contexts and batches:
        t, b = max(contexts), max(batches)
        peaks.append(((b + 1) * (t + 2) * per_token,
                      max(activation_bytes(spec, batch=1, queries=t, keys=t, elt=elt),
                          activation_bytes(spec, batch=b, queries=1, keys=t + 1, elt=elt))))
    cache, activations = max(peaks, key=lambda p: p[0] + p[1])
    return MemoryEstimate(weights=weights, cache=cache, activations=activations)


def check_fits(estimate: MemoryEstimate, available: float | None, device: str) -> None:
    """Raise MeasurementError when the run would need more than 90 % of ``available`` bytes.

    ``available`` None (the system would not say) lets the run go ahead."""
    if available is None:
        return
    if estimate.total > HEADROOM * available:
        raise MeasurementError(
            f"not enough memory on {device}: this run needs about {estimate.describe()}, "
            f"but only {available / GB:.2f} GB is free. Use shorter prompts, fewer or smaller "
            "batches, a 2-byte dtype, or a device with more memory.")
