"""A whole request: time to first token, time per output token and end to end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.speculative import speculative
from rooflab.core.predict.work import Array
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload

_TPOT_SAMPLES = 129   # decode time is piecewise linear in t: 129 samples average it to <0.1 %


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestEstimate:
    """Predicted clocks of one request (seconds, tokens/s), each sequence of the batch alike."""

    ttft: float                  # prefill of the prompt(s): the wait before the first token
    tpot: float                  # mean decode step over the answer
    end_to_end: float            # ttft + tpot x (answer - 1)
    prefill_bound: str
    decode_bound: str            # at the first decode step
    decode_ceiling: float        # tokens/s per sequence at the first decode step
    prompt_rate: float           # prompt tokens/s (all sequences)
    decode_rate: float           # 1 / tpot, per sequence
    total_rate: float            # batch / tpot
    kv_share: float              # share of the first decode step's bytes that is cache
    speculative_speedup: float = 1.0   # the factor TPOT was divided by (1 without drafts)


class TimedPass(Protocol):
    """What ``request`` reads of a pass: ``clocks.Pass`` or a placed pass (``offload``)."""

    @property
    def seconds(self) -> Array: ...

    @property
    def kv_share(self) -> Array: ...

    def bound(self) -> str | list[str]: ...


DecodeAt = Callable[[ArrayLike], TimedPass]     # context (tokens) -> one decode step at the batch


def request(spec: ModelSpec, machine: MachineProfile, workload: Workload, *,
            decode: DecodeAt | None = None, prefill: TimedPass | None = None) -> RequestEstimate:
    """TTFT = prefill(n_prompt); TPOT = mean decode step while the cache grows from
    context + prompt to context + prompt + answer - 1; end_to_end = TTFT + TPOT x (answer - 1).

    With speculative drafts (workload.draft_tokens > 0) TPOT is divided by the expected
    speed-up at the first decode step (``speculative``); the decode ceiling stays that of a
    plain step. Queueing and tokenisation are left out.

    ``decode`` (a step at a context) and ``prefill`` replace the one-memory clocks, for a
    placed model (``offload.placed_request``); the speculative speed-up stays the one-memory
    one."""
    step: DecodeAt = decode or (lambda t: decode_pass(spec, machine, workload, context=t))
    pre = prefill or prefill_pass(spec, machine, workload)
    start = workload.context + workload.prompt
    steps = workload.answer - 1
    if steps > 0:
        t = np.linspace(start, start + steps - 1, min(steps, _TPOT_SAMPLES))
        tpot = float(np.mean(step(t).seconds))
    else:
        tpot = float(step(start).seconds)
    first = step(start)
    speedup = 1.0
    if workload.draft_tokens:
        speedup = speculative(spec, machine, workload, context=start).speedup
        tpot /= speedup
    ttft = float(pre.seconds)
    return RequestEstimate(
        ttft=ttft, tpot=tpot, end_to_end=ttft + tpot * steps,
        prefill_bound=str(pre.bound()), decode_bound=str(first.bound()),
        decode_ceiling=1.0 / float(first.seconds),
        prompt_rate=workload.prompt * workload.batch / ttft,
        decode_rate=1.0 / tpot, total_rate=workload.batch / tpot,
        kv_share=float(first.kv_share), speculative_speedup=speedup,
    )
