"""From stopwatch timestamps to the two clocks users feel: TTFT and TPOT."""

from __future__ import annotations

from dataclasses import dataclass

from rooflab.core.errors import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class StopwatchReading:
    ttft: float                 # seconds
    tpot: float                 # seconds per output token after the first
    decode_rate: float          # tokens/s = 1 / tpot
    prompt_rate: float          # prompt tokens / prefill seconds
    naive_rate: float           # output tokens / end-to-end: the misleading stopwatch figure
    end_to_end: float


def from_timestamps(*, prompt_tokens: int, output_tokens: int, first_token: float,
                    last_token: float, queueing: float = 0.0) -> StopwatchReading:
    """TTFT = first token time; TPOT = (end_to_end - TTFT) / (n_output - 1);
    prompt rate = n_prompt / (TTFT - queueing). Times in seconds from the request."""
    if output_tokens < 2:
        raise SpecError("stopwatch: need at least 2 output tokens to time decode")
    if prompt_tokens < 1:
        raise SpecError("stopwatch: prompt_tokens must be >= 1")
    if not 0 <= queueing < first_token:
        raise SpecError(f"stopwatch: the first token ({first_token:g} s) must come after the request "
                        f"was sent ({queueing:g} s)")
    if not first_token < last_token:
        raise SpecError(f"stopwatch: the last token ({last_token:g} s) must come after the first "
                        f"({first_token:g} s)")
    tpot = (last_token - first_token) / (output_tokens - 1)
    return StopwatchReading(ttft=first_token, tpot=tpot, decode_rate=1.0 / tpot,
                            prompt_rate=prompt_tokens / (first_token - queueing),
                            naive_rate=output_tokens / last_token, end_to_end=last_token)
