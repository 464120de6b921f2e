"""Serving under load: an event simulation of continuous batching as llama-server and vLLM
schedule it, stepped by rooflab's own clocks (``serving_clock``), so one request alone gets the
TTFT and TPOT ``rooflab predict`` gives and the figures under load follow from the same passes.

The scheduler, one engine step at a time:

- at most ``slots`` sequences hold a place (llama-server's ``--parallel``, vLLM's
  ``max_num_seqs``); a request that finds none waits in a first-come queue;
- a step has a budget of ``step_tokens`` tokens (vLLM's ``max_num_batched_tokens``,
  llama-server's ``--batch-size``): each decoding sequence takes one, and what is left goes to
  prompts in order of arrival, in chunks (chunked prefill), partial prompts first;
- decode and prefill share the step (one forward pass), so a long prompt arriving slows every
  token of the sequences already decoding for that step;
- a prompt's last chunk yields the request's first token at the end of its step; each later
  step adds one token per decoding sequence, and a sequence leaves when its answer is done.

The load is a concurrency level (each of C clients sends its next request when its last one
ends: a closed loop) or a request rate (Poisson arrivals: an open loop). Lengths are fixed or
spread uniformly (``Lengths``). Everything random comes from one seeded generator, so a figure
is reproducible. Left out: preemption when the KV cache runs short (slots are sized to fit),
prefix caching, speculative drafts, tokenisation and the HTTP path (a measurement shows those).

Speed: while the batch does not change, decode steps are taken as one segment (their times
grow linearly with the context), so a level costs a few iterations per request, not one per
token: thousands of requests run in well under a second (``benchmarks/speed/bench_serving_sim.py``)."""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from rooflab.core.errors import SpecError
from rooflab.core.predict.serving_clock import On, StepClock, step_clock
from rooflab.core.predict.serving_stats import MODES, Bounds, ServingLevel, level_stats, saturation_rate
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS, Workload

MAX_REQUESTS = 100_000       # requests in one level
MAX_RATE = 1e6               # requests/s
MAX_SLOTS = 4096
MAX_SIMULATED = 400_000      # requests one simulation (all its levels) or one command runs: seconds, not minutes
MAX_LOOPS = 1_000_000        # scheduler iterations of one simulation (10-20 us each): a few per request, usually


@dataclass(frozen=True, slots=True, kw_only=True)
class Lengths:
    """Token counts of prompts or answers: ``mean`` tokens, each drawn uniformly from
    [mean x (1 - spread), mean x (1 + spread)] (vLLM's random range ratio; 0: all alike)."""

    mean: int
    spread: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.mean, int) or isinstance(self.mean, bool) or not 1 <= self.mean <= MAX_TOKENS:
            raise SpecError(f"lengths.mean must be an integer in [1, {MAX_TOKENS}], got {self.mean!r}")
        if not (isinstance(self.spread, (int, float)) and 0.0 <= self.spread < 1.0):
            raise SpecError(f"lengths.spread must be in [0, 1), got {self.spread!r}")

    @property
    def most(self) -> int:
        return max(1, math.floor(self.mean * (1.0 + self.spread)))

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """``count`` lengths (integers >= 1)."""
        if self.spread == 0:
            return np.full(count, self.mean, dtype=np.int64)
        low = max(1, math.ceil(self.mean * (1.0 - self.spread)))
        return rng.integers(low, self.most + 1, size=count)


@dataclass(frozen=True, slots=True, kw_only=True)
class Load:
    """One load level: ``mode`` "concurrency" (``level`` clients) or "rate" (requests/s)."""

    mode: str
    level: float

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SpecError(f"load mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        high = MAX_BATCH if self.mode == "concurrency" else MAX_RATE
        if not (isinstance(self.level, (int, float)) and 0 < self.level <= high) or \
                (self.mode == "concurrency" and float(self.level) != int(self.level)):
            what = "a whole number of clients" if self.mode == "concurrency" else "requests/s"
            raise SpecError(f"{self.mode} must be {what} in (0, {high:g}], got {self.level!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingPlan:
    """How the server is set up and how it is loaded: ``slots`` sequences at most, a budget of
    ``step_tokens`` tokens per step, ``requests`` per level (None: ``default_requests``),
    ``seed`` for every draw, ``bounds`` for goodput. ``step_overhead`` and ``request_overhead``
    (seconds, 0 by default: the engine alone) are the server's own time on the engine's thread
    beyond the forward passes, per step (scheduling, sampling, detokenising and streaming the
    tokens) and per request admitted (tokenising, setting up its sequence)."""

    prompt: Lengths
    answer: Lengths
    slots: int = 16
    step_tokens: int = 2048
    requests: int | None = None
    seed: int = 0
    bounds: Bounds = field(default_factory=Bounds)
    step_overhead: float = 0.0
    request_overhead: float = 0.0

    def __post_init__(self) -> None:
        for name in ("step_overhead", "request_overhead"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value < 60.0):
                raise SpecError(f"serving.{name} must be in [0, 60) s, got {value!r}")
        for name, low, high in (("slots", 1, MAX_SLOTS), ("step_tokens", 1, MAX_TOKENS)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise SpecError(f"serving.{name} must be an integer in [{low}, {high}], got {value!r}")
        if self.step_tokens < self.slots:
            raise SpecError(f"serving.step_tokens ({self.step_tokens}) must be at least slots ({self.slots}): "
                            "every decoding sequence takes one token of a step")
        if self.requests is not None and (not isinstance(self.requests, int) or isinstance(self.requests, bool)
                                          or not 1 <= self.requests <= MAX_REQUESTS):
            raise SpecError(f"serving.requests must be an integer in [1, {MAX_REQUESTS}], got {self.requests!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed < 2**63:
            raise SpecError(f"serving.seed must be a non-negative integer, got {self.seed!r}")

    def count(self, load: Load) -> int:
        return self.requests if self.requests is not None else default_requests(load)


def default_requests(load: Load) -> int:
    """Requests in a level when none are asked for: 4 per client (at least 16), or 20 seconds'
    worth of arrivals (at least 16); at most 1,000. A measurement sends as many."""
    if load.mode == "concurrency":
        return int(min(1000, max(16, 4 * load.level)))
    return int(min(1000, max(16, round(20 * load.level))))


def draw_requests(plan: ServingPlan, load: Load) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(prompt tokens, answer tokens, arrival seconds or None for a closed loop) of a level's
    requests, from the plan's seed: the lengths are the same at every level (only the count
    changes), and a measurement sends on the same schedule."""
    n = plan.count(load)
    lengths = np.random.default_rng([plan.seed, 1])
    prompts, answers = plan.prompt.draw(lengths, n), plan.answer.draw(lengths, n)
    if load.mode == "concurrency":
        return prompts, answers, None
    gaps = np.random.default_rng([plan.seed, 2]).exponential(1.0 / float(load.level), size=n)
    gaps[0] = 0.0                                  # the first request goes at once
    return prompts, answers, np.cumsum(gaps)


@dataclass(frozen=True, slots=True)
class Timeline:
    """What one simulated level did: per request (seconds from the level's start) its arrival,
    first token and end; each run of steps as its mean duration and the gaps it stands for
    (decoding sequences x steps); and how many loop iterations it took."""

    arrival: np.ndarray
    first: np.ndarray
    end: np.ndarray
    prompts: np.ndarray
    answers: np.ndarray
    gap_seconds: np.ndarray
    gap_counts: np.ndarray
    iterations: int


def simulated_requests(plan: ServingPlan, loads: tuple[Load, ...]) -> int:
    """Requests ``serve`` simulates for ``loads``: each level's and the saturating level's."""
    full = Load(mode="concurrency", level=plan.slots)
    return sum(plan.count(load) for load in loads) + max(plan.count(full), 8 * plan.slots)


def check_size(requests: int, what: str = "the serving simulation") -> None:
    """SpecError (one line) when ``what`` would simulate more than ``MAX_SIMULATED`` requests."""
    if requests > MAX_SIMULATED:
        raise SpecError(f"{what} would simulate {requests:,} requests (levels x requests, and the saturating "
                        f"level); at most {MAX_SIMULATED:,}: ask fewer levels or --requests")


def check_steps(plan: ServingPlan, requests: int) -> None:
    """SpecError when ``requests`` prompts need more than ``MAX_LOOPS`` steps at the least: a
    step prefills at most ``step_tokens`` tokens, so the prompts' tokens over it bound the steps
    from below (16M-token prompts at one token a step would loop for hours)."""
    shortest = max(1, math.ceil(plan.prompt.mean * (1.0 - plan.prompt.spread)))
    steps = requests * shortest / plan.step_tokens
    if steps > MAX_LOOPS:
        raise SpecError(f"the serving simulation needs over {steps:,.0f} steps ({requests:,} prompts of "
                        f"{plan.prompt.mean:,} tokens at {plan.step_tokens:,} tokens a step); at most "
                        f"{MAX_LOOPS:,}: fewer requests or shorter prompts, or more tokens a step (--step-tokens)")


def simulate(clock: StepClock, plan: ServingPlan, load: Load, *, context: int = 0,
             max_loops: int | None = None) -> Timeline:
    """Run one level through the scheduler (module docstring); ``context``: tokens every
    request finds cached before its prompt (a shared prefix). SpecError past ``max_loops``
    iterations (default ``MAX_LOOPS``): long prompts at a small token budget a step take a
    step per chunk, and a simulation must end in seconds."""
    prompts, answers, arrivals = draw_requests(plan, load)
    n = int(prompts.size)
    limit = max_loops if max_loops is not None else MAX_LOOPS
    ans = [int(a) for a in answers]
    closed = arrivals is None
    arrive = [math.inf] * n
    released = min(int(load.level), n) if closed else n
    if closed:
        arrive[:released] = [0.0] * released
    else:
        arrive = [float(x) for x in arrivals]  # type: ignore[union-attr]
    first, end = [math.nan] * n, [math.nan] * n
    start_ctx = [0.0] * n
    waiting: deque[int] = deque()
    prefilling: deque[list[int]] = deque()          # [request, tokens left, tokens done]
    finishing: list[tuple[int, int]] = []           # (step it ends at, request)
    gap_s: list[float] = []
    gap_n: list[int] = []
    b, ctx_sum, step, now, done, nxt, loops = 0, 0.0, 0, 0.0, 0, 0, 0
    slots, budget_all = plan.slots, plan.step_tokens
    per_step, per_request = plan.step_overhead, plan.request_overhead
    while done < n:
        loops += 1
        if loops > limit:
            raise SpecError(f"the serving simulation passed {MAX_LOOPS:,} steps ({n:,} requests of up to "
                            f"{plan.prompt.most:,} prompt tokens, {plan.step_tokens:,} tokens a step): ask fewer "
                            "requests or shorter prompts, or more tokens a step (--step-tokens)")
        while nxt < released and arrive[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        if not b and not prefilling and not waiting:
            now = arrive[nxt]                      # idle until the next arrival
            continue
        mean_ctx = ctx_sum / b if b else 0.0
        if prefilling or (waiting and b + len(prefilling) < slots):
            budget, chunk, weighted = budget_all - b, 0, 0.0
            for entry in prefilling:
                if budget <= 0:
                    break
                take = min(entry[1], budget)
                chunk, weighted, budget = chunk + take, weighted + take * (context + entry[2]), budget - take
                entry[1] -= take
                entry[2] += take
            admitted = 0
            while budget > 0 and waiting and b + len(prefilling) < slots:
                rid = waiting.popleft()
                take = min(int(prompts[rid]), budget)
                prefilling.append([rid, int(prompts[rid]) - take, take])
                chunk, weighted, budget = chunk + take, weighted + take * context, budget - take
                admitted += 1
            dt = clock.step(b, mean_ctx, chunk, weighted / chunk if chunk else 0.0) + per_step + \
                admitted * per_request
            k = 1
        else:                                       # decode only until the batch changes
            k = finishing[0][0] - step
            d0 = clock.decode(b, mean_ctx)
            if nxt < released and b < slots and not closed:
                k = min(k, max(1, math.ceil((arrive[nxt] - now) / (d0 + per_step))))
            dt = (0.5 * k * (d0 + clock.decode(b, mean_ctx + k - 1)) if k > 1 else d0) + k * per_step
        now += dt
        if b:
            gap_s.append(dt / k)
            gap_n.append(b * k)
        step += k
        ctx_sum += b * k
        while finishing and finishing[0][0] == step:
            _, rid = heapq.heappop(finishing)
            end[rid] = now
            b -= 1
            ctx_sum -= start_ctx[rid] + ans[rid] - 1
            done += 1
            if closed and released < n:
                arrive[released] = now
                released += 1
        while prefilling and prefilling[0][1] == 0:
            rid = prefilling.popleft()[0]
            first[rid] = now
            if ans[rid] <= 1:
                end[rid] = now
                done += 1
                if closed and released < n:
                    arrive[released] = now
                    released += 1
                continue
            b += 1
            start_ctx[rid] = float(context + int(prompts[rid]))
            ctx_sum += start_ctx[rid]
            heapq.heappush(finishing, (step + ans[rid] - 1, rid))
    return Timeline(arrival=np.asarray(arrive), first=np.asarray(first), end=np.asarray(end), prompts=prompts,
                    answers=answers, gap_seconds=np.asarray(gap_s), gap_counts=np.asarray(gap_n, dtype=np.int64),
                    iterations=loops)


def level_of(timeline: Timeline, load: Load, bounds: Bounds | None = None) -> ServingLevel:
    """The level's figures (``serving_stats.level_stats``) from a simulated timeline."""
    return level_stats(mode=load.mode, level=load.level, arrival=timeline.arrival, first=timeline.first,
                       end=timeline.end, prompt_tokens=timeline.prompts, answer_tokens=timeline.answers,
                       itl=timeline.gap_seconds, itl_weights=timeline.gap_counts, bounds=bounds)


@dataclass(frozen=True, slots=True, kw_only=True)
class Serving:
    """Predicted levels, in the order asked, and the saturation rate: the sustained requests/s
    of a closed loop that keeps every slot busy (``saturation_level``)."""

    plan: ServingPlan
    levels: tuple[ServingLevel, ...]
    saturation_level: ServingLevel
    seconds: float                   # wall time the simulation took

    @property
    def saturation_rate(self) -> float:
        return saturation_rate([self.saturation_level, *self.levels])


def clock_for(spec: ModelSpec, machine: MachineProfile, workload: Workload, plan: ServingPlan,
              on: On = None) -> StepClock:
    """The step clock the plan needs: contexts up to the longest prompt and answer."""
    longest = workload.context + plan.prompt.most + plan.answer.most
    return step_clock(spec, machine, workload, on, slots=plan.slots, budget=plan.step_tokens,
                      max_context=longest, max_prefill_context=workload.context + plan.prompt.most)


def serve(spec: ModelSpec, machine: MachineProfile, workload: Workload, plan: ServingPlan,
          loads: tuple[Load, ...], on: On = None) -> Serving:
    """Simulate each of ``loads`` and the saturating closed loop (at least 8 requests per slot)
    for ``spec`` on ``machine`` as ``on`` places it; ``workload.context`` is a cached prefix
    every request shares, its KV type and compute dtype apply."""
    import time

    requests = simulated_requests(plan, loads)
    check_size(requests)
    check_steps(plan, requests)
    began = time.perf_counter()
    clock = clock_for(spec, machine, workload, plan, on)
    left = MAX_LOOPS                 # one budget of scheduler iterations for all the levels

    def run(p: ServingPlan, load: Load) -> ServingLevel:
        nonlocal left
        timeline = simulate(clock, p, load, context=workload.context, max_loops=left)
        left -= timeline.iterations
        return level_of(timeline, load, plan.bounds)

    levels = tuple(run(plan, load) for load in loads)
    full = Load(mode="concurrency", level=plan.slots)
    saturated = run(dataclasses.replace(plan, requests=max(plan.count(full), 8 * plan.slots)), full)
    return Serving(plan=plan, levels=levels, saturation_level=saturated, seconds=time.perf_counter() - began)
