"""Speculative decoding: verifying k drafted tokens is one pass over k + 1 positions, which
costs about one decode step while decode is memory-bound."""

from __future__ import annotations

from dataclasses import dataclass

from rooflab.core.predict.clocks import combined_seconds, decode_pass, prefill_pass
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


def expected_tokens(draft_tokens: int, acceptance: float) -> float:
    """Tokens one verify step yields when each draft is accepted with probability a, drafts
    stop at the first rejection and the target adds one token: (1 - a^(k+1)) / (1 - a)."""
    if acceptance >= 1.0:
        return float(draft_tokens + 1)
    return (1.0 - acceptance ** (draft_tokens + 1)) / (1.0 - acceptance)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeculativeEstimate:
    step_seconds: float           # one ordinary decode step
    verify_seconds: float         # one pass over k + 1 positions
    verify_cost: float            # verify / step: ~1.0 while memory-bound
    expected_tokens: float        # tokens per verify step
    speedup: float                # tokens/s against plain decode, draft cost included


def speculative(spec: ModelSpec, machine: MachineProfile, workload: Workload,
                context: float | None = None) -> SpeculativeEstimate:
    """Verify cost and expected speed-up for the workload's draft length and acceptance.

    speed-up = E x t_step / (t_verify + k x draft_cost x t_step), E = expected_tokens.
    Each sequence of a batch verifies its own drafts; the draft model's cost is a ratio."""
    k = workload.draft_tokens
    t = workload.context + workload.prompt if context is None else context
    step = float(decode_pass(spec, machine, workload, context=t).seconds)
    if k:
        p = prefill_pass(spec, machine, workload, prompt=k + 1, context=t)
        # unlike a prefill, a verify pass computes logits at all k + 1 positions
        head = 2.0 * spec.head_params * k * workload.batch / machine.effective_flops(workload.compute_dtype)
        # the two clocks combine as every other pass's do (the calibrated overlap, 1: the max)
        verify = float(combined_seconds(p.memory_seconds, p.compute_seconds + head, machine.efficiency.overlap))
        verify += machine.efficiency.step_overhead
    else:
        verify = step
    tokens = expected_tokens(k, workload.acceptance)
    speedup = tokens * step / (verify + k * workload.draft_cost * step)
    return SpeculativeEstimate(step_seconds=step, verify_seconds=verify, verify_cost=verify / step,
                               expected_tokens=tokens, speedup=speedup)
