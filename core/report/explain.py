"""One sentence per headline number: which clock bounds it and why, in words.

The one text builder for these sentences: the numbers panel, the report sheet and ``rooflab
predict``'s text all read ``explain``. It takes the ``Summary`` that ``app.figures`` computed
(placed once) and only formats it: each sentence explains the placed figure beside it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rooflab.core.predict.footprint import compute_buffer_bytes
from rooflab.core.predict.host_part import host_flops, host_fp32_flops
from rooflab.core.predict.offload import OP_OFFLOAD_MIN_TOKENS
from rooflab.core.predict.offload_terms import CROSSING_SECONDS
from rooflab.core.predict.parallel import ParallelEstimate, mode_text
from rooflab.core.predict.placed import PlacedSummary
from rooflab.core.predict.placement import brief_flags, memory_words
from rooflab.core.predict.step_parts import StepPart, StepParts
from rooflab.core.predict.work import padded
from rooflab.core.report.chart_types import Scenario
from rooflab.core.report.summary import Clocks, PartClocks, Summary
from rooflab.core.report.text import capacity_text, count, significant, whole_gib
from rooflab.core.report.units import fmt


@dataclass(frozen=True, slots=True)
class Line:
    """One row of the numbers panel."""

    key: str
    label: str
    value: str
    bound: str          # "memory", "compute" or ""
    sentence: str
    tooltip: str        # the formula in words


def _bound_phrase(bound: str) -> str:
    return "bandwidth-bound" if bound == "memory" else "compute-bound"


def _unplaced_why(sc: Scenario, s: Summary) -> tuple[str, str]:
    """(why TTFT, why TPOT) of the model on one device: what sets each clock and what the other
    clock would take."""
    m, w = sc.machine, sc.workload
    e, pre, dec = s.estimate, s.prefill, s.decode
    bandwidth = fmt(m.effective_bandwidth, "B/s")
    compute = fmt(m.effective_flops(w.compute_dtype) * m.compute_share(w.threads), "FLOP/s")
    if m.thread_share(w.threads) < 1 and w.threads is not None:     # the rate the clock used, named
        compute += f" ({w.threads:,} of {count(f'{m.cores:,}', 'core')}, -t {w.threads:,})"
    if m.serial_factor(w.threads) < 1.0:
        compute += f", {m.efficiency.serial_share:.1%} of its arithmetic serial across threads"
    prompts = f"{w.batch:,} × {w.prompt:,}-token prompts" if w.batch > 1 else f"{w.prompt:,}-token prompt"
    needs = "need" if w.batch > 1 else "needs"
    if pre.bound == "compute":
        ttft_why = (f"The {prompts} {needs} {fmt(pre.flops, 'FLOP')}: {fmt(pre.compute_seconds, 's')} at "
                    f"{compute}. Reading {fmt(pre.bytes, 'B')} at {bandwidth} would take only "
                    f"{fmt(pre.memory_seconds, 's')}.")
    else:
        ttft_why = (f"Reading {fmt(pre.bytes, 'B')} of weights and cache at {bandwidth} takes "
                    f"{fmt(pre.memory_seconds, 's')}. The arithmetic of the {prompts} needs only "
                    f"{fmt(pre.compute_seconds, 's')}.")
    if dec.bound == "memory":
        tpot_why = (f"Each step reads {fmt(dec.bytes, 'B')} at {bandwidth}: {fmt(dec.memory_seconds, 's')}. "
                    f"{significant(e.kv_share * 100, 2)} % of it is KV cache. Its arithmetic needs only "
                    f"{fmt(dec.compute_seconds, 's')}.")
    else:
        who = f"{w.batch:,} sequences'" if w.batch > 1 else "one sequence's"
        tpot_why = (f"At {fmt(dec.flops, 'FLOP')} a step, {who} arithmetic takes {fmt(dec.compute_seconds, 's')} "
                    f"at {compute}. The bytes take only {fmt(dec.memory_seconds, 's')}.")
    return ttft_why, tpot_why


def _placed_why(sc: Scenario, s: Summary) -> tuple[str, str]:
    """(why TTFT, why TPOT) of a placement: several devices and their link, or the device's part
    and host memory's one after the other, each at its own memory's bandwidth and FLOP/s."""
    placed = s.placed
    if placed.parallel is not None:
        par = placed.parallel
        mode = mode_text(par.parallel.mode)
        return (f"On {par.devices} devices ({mode}), each with its share of the weights; the link adds "
                f"{fmt(par.prefill_communication_seconds, 's')} to the prefill.",
                f"On {par.devices} devices ({mode}): the link adds "
                f"{fmt(par.communication_seconds_per_step, 's')} to each step.")
    # the flags are the placement line's: here only what each part costs
    how = "Placed by hand" if placed.how == "manual" else "As auto-fit placed it"
    head = f"{how}, each part at its own memory's bandwidth and FLOP/s"
    pre, dec = s.placed_prefill, s.placed_decode
    if pre is None or dec is None:          # pragma: no cover - a placement that runs has its parts
        return f"{head}, one after the other.", f"{head}, one after the other."
    w = sc.workload
    start = w.context + w.prompt
    prompts = f"{w.batch:,} × {w.prompt:,}-token prompts" if w.batch > 1 else f"{w.prompt:,}-token prompt"
    return (f"{head}: for the {prompts}, {_parts(sc, pre)}; {fmt(pre.seconds, 's')} in all.",
            f"{head}: at {start:,} tokens of context {_parts(sc, dec)}; {fmt(dec.seconds, 's')} a step in all.")


def _parts(sc: Scenario, p: PartClocks) -> str:
    """Each part of a placed pass: what it reads and computes where, how long, and which clock
    bounds it ("12.1 GB and 0.9 TFLOP on the GPU take 12.3 ms (bandwidth-bound), then ...")."""
    def part(c: Clocks, where: str) -> str:
        return (f"{fmt(c.bytes, 'B')} and {fmt(c.flops, 'FLOP')} {where} take {fmt(c.seconds, 's')} "
                f"({_bound_phrase(c.bound)})")
    device, host = memory_words(sc.machine)
    text = part(p.device, device) + (f", then {part(p.host, host)}" if p.host.seconds > 0 else "")
    return text + (f", and the link {fmt(p.communication, 's')}" if p.communication > 0 else "")


def wholly_on_device(s: Summary) -> bool:
    """Whether the placement runs with every layer on one device (its figures are then the
    one-memory model's, ``offload.placed_request``), so the lessons' sentences explain it."""
    parts = s.placed_decode
    return s.placed.parallel is None and parts is not None and parts.host.seconds == 0 and parts.communication == 0


def _not_fitting(sc: Scenario, s: Summary, placed: PlacedSummary, where: str) -> list[Line]:
    """The rows of a placement that does not fit: why, how to fit, and the memory."""
    to_fit = "; ".join(placed.suggestions) or (
        "try fewer sequences, a shorter context, a smaller KV type or weight format, or a machine "
        "with more memory")
    return [Line("placement", "Placement", "does NOT fit", "",
                 f"{where[0].upper()}{where[1:]}. No figure is shown: this model cannot run here "
                 f"this way. To fit: {to_fit}.",
                 "Memory per device = weights placed there + KV + compute buffer + the back end's "
                 "reserve; host memory holds the rest."), *_memory_lines(sc, s)]


def explain(sc: Scenario, s: Summary) -> list[Line]:
    """The numbers panel's rows for ``s``: the placement, each headline figure (as placed), the
    clock bounding it and why."""
    e, placed = s.estimate, s.placed
    # the headline is the placement's, and every sentence explains it (a figure of the model on
    # the card alone, nothing reserved, would be a fast fiction where the placement is not)
    where = placed.headline(sc.model, sc.machine)
    if not placed.fits:
        return _not_fitting(sc, s, placed, where)
    whole = wholly_on_device(s)
    ttft_why, tpot_why = _unplaced_why(sc, s) if whole else _placed_why(sc, s)
    # auto-fit putting it all on the device needs no row of its own: the memory row says where
    lines = [] if whole and placed.how == "auto" else [_placement_line(placed, where)]
    # the request's own bounds (a placement's: the slower of its parts' summed clocks)
    lines += _timing_lines(sc, s, f"Prefill is {_bound_phrase(e.prefill_bound)}. {ttft_why}{flash_sentence(sc)}",
                           f"Decode is {_bound_phrase(e.decode_bound)}. {tpot_why}")
    lines += _crossover_lines(sc, s)
    return lines + _memory_lines(sc, s)


def flash_sentence(sc: Scenario) -> str:
    """What turning llama.cpp's flash attention off moves (" ..." to follow a sentence; "" with
    it on): the compute buffer holds the attention scores (``footprint.compute_buffer_bytes``),
    and the prompt's n² arithmetic takes the other kernel's rate where a calibration timed both,
    the ceiling's own rate where none did (the toggle then moves the time not at all)."""
    w, spec, eff = sc.workload, sc.model, sc.machine.efficiency
    if w.flash_attention:
        return ""
    cells = w.batch * padded(w.context + w.prompt + w.answer)
    more = float(compute_buffer_bytes(spec, w.ubatch, cells, attention_scores=True)
                 - compute_buffer_bytes(spec, w.ubatch, cells, attention_scores=False))
    rate = ("at the non-flash kernel's fitted rate" if eff.attention_factor(False) != eff.attention_factor(True)
            else "at the same rate as with it (the ceiling has one rate for both kernels; an expected "
                 "figure moves only where its calibration timed them apart)")
    return (f" Flash attention off (-fa off): llama.cpp's compute buffer holds the attention scores, "
            f"{fmt(max(more, 0.0), 'B')} more memory; the prompt's attention arithmetic is priced {rate}.")


def _timing_lines(sc: Scenario, s: Summary, ttft_sentence: str, tpot_sentence: str) -> list[Line]:
    """TTFT, TPOT, end to end, the decode ceiling and the prompt rate."""
    w, e = sc.workload, s.estimate
    pre_bound, dec_bound = e.prefill_bound, e.decode_bound
    return [
        Line("ttft", "Time to first token", fmt(e.ttft, "s"), pre_bound, ttft_sentence,
             "TTFT = max(prompt FLOPs / peak compute, bytes read / bandwidth) + per-step overhead. "
             "Queueing and tokenisation are left out."),
        Line("tpot", "Time per output token", fmt(e.tpot, "s"), dec_bound, tpot_sentence + (
                 f" Speculative decoding divides it by {significant(e.speculative_speedup, 3)}."
                 if w.draft_tokens else ""),
             "TPOT = the mean decode step while the cache grows over the answer; one step = "
             "max((weights + batch × cache bytes) / bandwidth, batch × 2 × active parameters / compute)."),
        Line("end_to_end", "End to end", fmt(e.end_to_end, "s"), "",
             f"TTFT plus {count(f'{w.answer - 1:,}', 'more step')} of TPOT: the wait for a "
             f"{w.answer:,}-token answer."
             if w.answer > 1 else "TTFT alone: the prefill gives the only answer token, no decode step follows.",
             "end to end = TTFT + TPOT × (answer tokens − 1)."),
        Line("ceiling", "Decode ceiling", per_sequence(fmt(e.decode_ceiling, "tokens/s"), w.batch), dec_bound,
             "The fastest one sequence can generate at the first answer token" +
             (f"; {fmt(e.total_rate, 'tokens/s')} in total over the batch of {w.batch:,} (over the answer)."
              if w.batch > 1 else "."),
             "ceiling = 1 / (one decode step at context + prompt tokens), per sequence; the batch's total "
             "rate is batch / TPOT."),
        Line("prompt_rate", "Prompt rate", fmt(e.prompt_rate, "tokens/s"), pre_bound,
             "Prompt tokens processed per second of prefill (all sequences).",
             "prompt rate = prompt tokens × batch / TTFT."),
    ]


def _crossover_lines(sc: Scenario, s: Summary) -> list[Line]:
    """n* and b*: where prefill and decode turn compute-bound."""
    w = sc.workload
    pre_bound = s.estimate.prefill_bound
    one_memory = wholly_on_device(s)
    lines = []
    ncross = s.headline_prefill_crossover
    if math.isfinite(ncross):
        nstar = count(f"{ncross:,.0f}", "token")
        if not one_memory and w.prompt > ncross and pre_bound == "memory":
            sentence = (f"The prefill first turns compute-bound at about {nstar}; from {OP_OFFLOAD_MIN_TOKENS} "
                        "tokens on llama.cpp streams the host's layers to the GPU over its link, so this "
                        f"{w.prompt:,}-token prompt is bandwidth-bound again.")
        elif ncross > 1:
            sentence = (f"Prompts longer than about {nstar} are compute-bound; shorter ones mostly pay "
                        "for reading the weights once.")
        else:
            sentence = ("Every prompt is compute-bound here: even one token's arithmetic outlasts reading "
                        "the weights once.")
        trained = sc.model.context_length
        if trained and ncross > trained:
            sentence += f" That lies beyond the {trained:,} tokens {sc.model.name} was trained for."
            nstar += f" (past the {trained:,} trained)"
        lines.append(Line("n_star", "Prefill crossover n*", nstar, "", sentence,
                          "n* ≈ W × C / (2 × N × B): where prefill's compute clock overtakes its memory clock."
                          if one_memory else "n* is the first prompt length where the two parts' arithmetic "
                          "(each at its own FLOP/s) outlasts their reads (each at its own bandwidth)."))
    bcross = s.headline_batch_crossover
    formula = "b* solves 2 × N × b / C = (W + b × k × t) / B." if one_memory else (
        "b* is the first batch where the two parts' arithmetic (each at its own FLOP/s) outlasts "
        "their reads (each at its own bandwidth).")
    most = s.headline_max_batch
    if math.isfinite(bcross) and 0 < most < bcross:
        bstar = count(f"{bcross:,.0f}", "sequence")
        fit = count(f"{most:,}", "fits", "fit")
        lines.append(Line("batch_crossover", "Batch crossover", f"{bstar} (only {fit})", "",
                          f"Decode would turn compute-bound at about {bstar}, beyond what fits here: at most "
                          f"{fit}, so every batch that runs stays bandwidth-bound.", formula))
    elif math.isfinite(bcross):
        bstar = count(f"{bcross:,.0f}", "sequence")
        lines.append(Line("batch_crossover", "Batch crossover", bstar, "",
                          f"Up to about {bstar} share each read of the weights almost for free; past it, "
                          "decode turns compute-bound." if round(bcross) > 1 else
                          "Decode is compute-bound from the first sequence: batching shares the weights' "
                          "read but adds arithmetic at full cost.", formula))
    else:
        lines.append(Line("batch_crossover", "Batch crossover", "none", "",
                          "Decode stays bandwidth-bound at every batch: the caches grow as fast as the arithmetic.",
                          formula))
    return lines


def _placement_line(placed: PlacedSummary, where: str) -> Line:
    """The Placement row: llama.cpp's flags, or the devices sharing the model."""
    if placed.parallel is not None:
        par = placed.parallel
        return Line("placement", "Placement", f"{par.devices} × {mode_text(par.parallel.mode)}", "",
                    f"{where[0].upper()}{where[1:]}.",
                    "Layer split: the devices run their layers in turn, each reading its share. Tensor "
                    "parallel: every layer is split across the devices, with an all-reduce per layer "
                    "over the link. The charts draw the devices: each one's memory, the link's share of each step.")
    chosen = {"auto": "chosen as llama.cpp's fit does: as many layers on the device as fit, experts moved "
                      "out first." if not placed.fit.kept else
                      f"fitted around what was set ({placed.fit.kept}): as many layers on the device as fit.",
              "manual": "as set in the Workload tab's Placement group.",
              "offload": "from the Workload tab's share of the weights offloaded."}[placed.how]
    return Line("placement", "Placement", brief_flags(placed.placement), "", f"{where[0].upper()}{where[1:]}.",
                f"Layers on the GPU (-ngl) and routed experts kept on the host (--n-cpu-moe), {chosen}")


def parts_sentence(parts: StepParts) -> str:
    """Where a pass's time goes, in words, the parts summing to its seconds: "1.66 ms weights on
    the GPU (9 %), 12.9 ms experts on the CPU (68 %), 1.5 ms round trips (7.9 %; 60
    crossings × 25 µs), ...". The one text of ``step_parts`` for the why, the numbers panel, the report and
    the Placement group."""
    def one(part: StepPart) -> str:
        how = ""
        if part.key == "round_trips" and parts.crossings:
            times = f" × {count(f'{parts.passes:,.0f}', 'ubatch', 'ubatches')}" if round(parts.passes) > 1 else ""
            how = f"; {parts.crossings:,} crossings × {fmt(CROSSING_SECONDS, 's')}{times}"
        return f"{fmt(part.seconds, 's')} {part.label} ({significant(100 * parts.share(part), 2)} %{how})"

    return ", ".join(one(p) for p in parts.parts)


def parts_lines(sc: Scenario, decode: StepParts, prefill: StepParts, origin: str) -> list[Line]:
    """The numbers panel's rows of where the first answer token's step and the prompt's time go
    (``step_parts``), priced on ``origin``'s machine ("expected with llama.cpp CUDA", "the
    ceiling")."""
    start = sc.workload.context + sc.workload.prompt
    tip = ("The pass split into named parts that sum to it: each memory's bytes (weights, cache) or "
           "arithmetic, the host's weights streamed over PCIe to the GPU for a prompt, the GPU <-> host "
           "round trips (crossings per graph pass × the seconds one costs × graph passes), the link between "
           "devices and the engine's fixed cost per step.")
    return [Line("prompt_parts", "Prompt, part by part", fmt(prefill.seconds, "s"), "",
                 f"{origin[0].upper()}{origin[1:]}: {parts_sentence(prefill)}.", tip),
            Line("token_parts", "Token, part by part", fmt(decode.seconds, "s"), "",
                 f"{origin[0].upper()}{origin[1:]}, a step at {start:,} tokens of context: "
                 f"{parts_sentence(decode)}.{host_cpu_sentence(sc, decode)}", tip + host_cpu_tip(sc, decode))]


def _host_bound(sc: Scenario, decode: StepParts) -> bool:
    return decode.seconds_of("host_arithmetic") > 0 and sc.machine.kind == "gpu"


def host_cpu_sentence(sc: Scenario, decode: StepParts) -> str:
    """Where a decode step's host part is bound by the CPU's arithmetic, the peak it is priced at
    and whether the profile states it (" CPU peak 1.02 TFLOP/s (assumed)."); ""
    otherwise."""
    if not _host_bound(sc, decode):
        return ""
    stated = "stated" if sc.machine.offload_flops > 0 else "assumed"
    return f" CPU int8 path {fmt(host_flops(sc.machine), 'OP/s')} ({stated})."


def host_cpu_tip(sc: Scenario, decode: StepParts) -> str:
    """The same, for the tooltip: where the peak comes from and how a user with another CPU sets
    theirs; "" where the host's arithmetic does not bound the step."""
    if not _host_bound(sc, decode):
        return ""
    whose = ("the host CPU this profile states" if sc.machine.offload_flops > 0 else
             "none is stated, so an 8-core desktop at 4 GHz; for yours give cores × GHz × 32 (AVX2) as the "
             "host CPU's FLOP/s: the Machine tab, or 'flops' under 'offload' in a machine file")
    return (f" The CPU's part is bound by its arithmetic: its quantized multiplies run on int8 dot products at "
            f"{fmt(host_flops(sc.machine), 'OP/s')}, 4 × the FP32 peak of {fmt(host_fp32_flops(sc.machine), 'FLOP/s')} "
            f"({whose}).")


_PARTS_AFTER = {"prompt_parts": ("ttft", "expected_ttft"), "token_parts": ("tpot", "expected_tpot")}


def with_parts(lines: list[Line], parts: list[Line]) -> list[Line]:
    """``lines`` with each part-by-part row under the figure it splits (its expected twin when
    shown, else the ceiling's)."""
    out = list(lines)
    for row in parts:
        keys = [i for i, line in enumerate(out) if line.key in _PARTS_AFTER.get(row.key, ())]
        out.insert(max(keys) + 1 if keys else len(out), row)
    return out


def per_sequence(rate: str, batch: int) -> str:
    """A rate of one sequence, said so when the batch has more: "92.3 tokens/s per sequence"."""
    return f"{rate} per sequence" if batch > 1 else rate


def used_of(used: float, capacity: float) -> str:
    """"25.4 GB of 25.8 GB (24 GiB)": both in the same unit, so they compare at a glance, and
    the vendor's GiB beside the capacity when that is how it is stated."""
    gib = whole_gib(capacity)
    return f"{fmt(used, 'B')} of {fmt(capacity, 'B')}" + (f" ({gib:,} GiB)" if gib is not None else "")


def _parallel_memory_line(sc: Scenario, par: ParallelEstimate) -> Line:
    """Memory on each of several devices: its share of the weights, its KV, buffer and reserve."""
    w = sc.workload
    length = w.context + w.prompt + w.answer
    mem = par.memory
    return Line("memory", "Memory", f"{used_of(mem.used, mem.capacity)} per device", "",
                f"Each of the {par.devices} devices holds {fmt(mem.weights, 'B')} of weights, "
                f"{fmt(mem.kv, 'B')} of KV cache for {w.batch:,} × {length:,} tokens, a compute buffer and the "
                "back end's reserve: " + ("it fits." if mem.fits else "it does NOT fit."),
                "Memory per device = its share of the weights + its share of the KV + compute buffer + "
                "the back end's reserve.")


def _placed_memory_line(sc: Scenario, s: Summary) -> Line:
    """Memory as placed: each memory's bill against its size, and the largest batch it holds."""
    m, w = sc.machine, sc.workload
    bill = s.placed.fit.memory
    length = w.context + w.prompt + w.answer
    most = s.headline_max_batch
    parts = [f"{fmt(use.used, 'B')} of {capacity_text(use.capacity)} {where}" + ("" if use.fits else " (too much)")
             for use, where in zip((bill.device, bill.host), memory_words(m), strict=True) if use.used > 0]
    if bill.fits:
        verdict = f"at most {count(f'{most:,}', 'such sequence')} " + ("fits." if most == 1 else "fit.")
    elif most > 0:
        verdict = f"it does NOT fit; at most {count(f'{most:,}', 'such sequence')} would."
    elif any(use.weights + use.reserve > use.capacity for use in (bill.device, bill.host)):
        short = [where for use, where in zip((bill.device, bill.host), memory_words(m), strict=True)
                 if use.weights + use.reserve > use.capacity]
        verdict = (f"it does NOT fit: before any cache, the weights placed {' and '.join(short)} and the back "
                   "end's reserve need more than there is.")
    else:
        verdict = f"it does NOT fit: not even one sequence of {length:,} tokens fits beside the weights."
    return Line("memory", "Memory", used_of(bill.device.used, m.memory), "",
                f"As placed: {' and '.join(parts)} (weights placed there, KV cache, compute buffer and the "
                f"back end's reserve) for {w.batch:,} × {length:,} tokens; {verdict}",
                "Memory per device = weights placed there + KV + compute buffer + the back end's reserve; "
                "host memory holds the rest.")


def _memory_lines(sc: Scenario, s: Summary) -> list[Line]:
    """The memory as placed (each device's bill on several devices), then the trained-context
    and speculative rows."""
    if s.placed.parallel is not None:
        return [_parallel_memory_line(sc, s.placed.parallel), *_more_lines(sc, s)]
    return [_placed_memory_line(sc, s), *_more_lines(sc, s)]


def _more_lines(sc: Scenario, s: Summary) -> list[Line]:
    """The trained-context and speculative rows, when they apply."""
    spec, w = sc.model, sc.workload
    length = w.context + w.prompt + w.answer
    lines: list[Line] = []
    if spec.context_length and length > spec.context_length:
        lines.append(Line("trained_context", "Context", f"{length:,} of {spec.context_length:,} tokens", "",
                          f"Past the {spec.context_length:,} tokens {spec.name} was trained for: the speed "
                          "above still holds, the answers may not.",
                          "trained context = the model's max_position_embeddings / context_length."))
    if s.speculative is not None:
        sp = s.speculative
        lines.append(Line("speculative", "Speculative speed-up", f"{significant(sp.speedup, 3)}×", "",
                          f"{count(w.draft_tokens, 'draft')} at {significant(w.acceptance * 100, 3)} % "
                          f"acceptance {'yields' if w.draft_tokens == 1 else 'yield'} "
                          f"{count(significant(sp.expected_tokens, 3), 'token')} per verify step. "
                          f"That step costs {count(significant(sp.verify_cost, 3), 'decode step')}.",
                          "speed-up = E × t_step / (t_verify + k × draft cost × t_step), "
                          "E = (1 − a^(k+1)) / (1 − a)."))
    return lines
