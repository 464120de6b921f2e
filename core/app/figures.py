"""The one answer for a scenario: placed once (auto-fit's placement or the user's, on one device
or several), summarised once, every headline figure priced on that placement. The numbers panel,
the charts, a pinned series, a report and ``rooflab predict`` all read ``Figures``; the command
line formats it as text, JSON and CSV, the window renders it, and neither prices a figure again.

Before there was one answer, a model the device held whole kept the one-memory request in the
window (every byte on the card, nothing reserved) while ``rooflab predict`` placed it: Qwen3-8B
Q4_K_M on an RTX 4090 at 23 prompts of 5,600 tokens read TPOT 23.9 ms in the window and 44.1 ms
from ``predict``, whose placement (the compute buffer and reserve counted) keeps 35 of 37 layers
on the GPU."""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

from rooflab.core.app.resolve import alternatives
from rooflab.core.calibration.expectations import Missing
from rooflab.core.predict.autofit import suggestions
from rooflab.core.predict.batching import batch_crossover, cache_resident, max_batch_that_fits, memory_resident
from rooflab.core.predict.clocks import decode_pass, prefill_pass
from rooflab.core.predict.crossover import prefill_crossover
from rooflab.core.predict.expected import Expected
from rooflab.core.predict.offload import placed_decode, placed_prefill
from rooflab.core.predict.ops_clocks import TimedOperation
from rooflab.core.predict.passes import largest_batch_on
from rooflab.core.predict.placed import PlacedSummary, placed_as_chosen, placed_crossovers
from rooflab.core.predict.placement import Placement, has_host_tier
from rooflab.core.predict.roofline import balance
from rooflab.core.predict.speculative import speculative
from rooflab.core.predict.step_parts import StepParts, decode_parts, prefill_parts
from rooflab.core.report.chart_types import Chart, Scenario
from rooflab.core.report.expected import StandsOn
from rooflab.core.report.expected_lines import expected_lines, merged
from rooflab.core.report.explain import Line, explain, parts_lines, wholly_on_device, with_parts
from rooflab.core.report.ops_table import scenario_operations
from rooflab.core.report.summary import Clocks, PartClocks, Summary, headline_charts


def place(sc: Scenario) -> PlacedSummary:
    """``sc`` placed as its choice asks (``placed_as_chosen``: by hand, fitted around the flags
    given, on several devices, or auto-fit), once, with what to change when the model is not
    all on the device: the same catalogue model in smaller weight formats among it."""
    spec, m, w = sc.model, sc.machine, sc.workload
    placed = placed_as_chosen(spec, m, w, sc.placement, suggest=False)
    if placed.fits and placed.parallel is None and placed.placement == Placement.all_on_device(spec):
        return placed
    if placed.parallel is None:
        advice = suggestions(spec, m, w, placed.fit, alternatives(spec))
    elif placed.placement.devices > 1:          # a layer split with host memory
        advice = suggestions(spec, m, w, placed.fit)
    else:                                       # the devices share every layer: nothing to move
        return placed
    return dataclasses.replace(placed, suggestions=advice)


def summarise(sc: Scenario, placed: PlacedSummary | None = None) -> Summary:
    """Every figure of ``sc``: the headline as placed (``place``, or ``placed`` when already
    placed), its crossovers and largest batch where it stands, its parts' clocks, and the
    one-memory figures the lessons start from (SpecError: several devices on a machine that
    states no interconnect)."""
    spec, m, w = sc.model, sc.machine, sc.workload
    placed = place(sc) if placed is None else placed
    start = w.context + w.prompt
    length = start + w.answer
    crossovers = placed_crossovers(spec, m, w, placed) or (math.nan, math.nan)
    # the bills of a placement are priced even when it does not fit ("at most 3 would"); a
    # one-device placement without host memory cannot be
    most = 0
    if placed.fits or has_host_tier(m) or placed.parallel is not None:
        most = largest_batch_on(spec, m, w, placed.priced_on, length)
    on = placed.runs_on
    return Summary(
        estimate=placed.estimate, placed=placed, drawn_on=placed.stands_on,
        placed_prefill_crossover=crossovers[0], placed_batch_crossover=crossovers[1], placed_max_batch=most,
        placed_prefill=None if on is None else PartClocks.of(placed_prefill(spec, m, w, on)),
        placed_decode=None if on is None else PartClocks.of(placed_decode(spec, m, w, on, context=start)),
        prefill=Clocks.of(prefill_pass(spec, m, w)),
        decode=Clocks.of(decode_pass(spec, m, w, context=start)),
        prefill_crossover=prefill_crossover(spec, m, w),
        batch_crossover=batch_crossover(spec, m, w, context=start),
        max_batch=max_batch_that_fits(spec, m, length, w.kv_type, w.ubatch),
        resident_bytes=float(memory_resident(spec, length, w.batch, w.kv_type, w.ubatch)),
        cache_bytes=float(cache_resident(spec, length, w.batch, w.kv_type, w.ubatch)),
        memory=m.memory,
        speculative=speculative(spec, m, w) if w.draft_tokens else None,
        balance=balance(m, w.compute_dtype),
    )


@dataclass(frozen=True, kw_only=True)
class Figures:
    """One scenario's answer: its summary (placed once) and what the calibration that applies
    expects of it (None without one, or where the user's own efficiency is the figure)."""

    scenario: Scenario
    summary: Summary
    expected: Expected | None = None
    missing: Missing | None = None      # why there is no expected figure, where the reason is not the usual one

    @property
    def placed(self) -> PlacedSummary:
        return self.summary.placed

    @property
    def stands_on(self) -> StandsOn:
        """Where the headline's request runs (``PlacedSummary.stands_on``; None: nowhere)."""
        return self.placed.stands_on

    @property
    def expected_figures(self) -> Expected | None:
        """``expected`` when there are figures to stand beside (none for a model that cannot
        run here)."""
        return self.expected if self.placed.fits else None

    def lines(self) -> list[Line]:
        """The numbers panel's rows: each headline figure, the clock bounding it and why, with
        the expected figures under the ceilings they sit below and, off one device, where the
        prompt's and a token's time go."""
        lines = explain(self.scenario, self.summary)
        ex = self.expected_figures
        lines = lines if ex is None else merged(lines, expected_lines(self.scenario, ex, self.stands_on))
        if ex is None and self.missing is not None:     # under the time per token, where its figures would be
            at = next((i + 1 for i, line in enumerate(lines) if line.key == "tpot"), len(lines))
            lines = [*lines[:at], Line(key="expected", label="Expected", value="none", bound="",
                                       sentence=f"No expected figure: {self.missing.reason}.",
                                       tooltip=self.missing.line[:1].upper() + self.missing.line[1:] + "."),
                     *lines[at:]]
        return with_parts(lines, self.parts_lines())

    def why_text(self) -> str:
        """``explain``'s sentences as plain text, one per figure: ``rooflab predict``'s "why"
        block, the words the numbers panel shows for the same figures."""
        rows = with_parts(explain(self.scenario, self.summary), self.parts_lines())
        return "\n".join(["why:", *(f"  {row.label} ({row.value}): {row.sentence}" for row in rows)])

    @functools.cached_property
    def parts(self) -> tuple[StepParts, StepParts, str] | None:
        """(prefill, the first answer token's decode step, whose figures) split into named parts
        (``step_parts``) where the headline runs off one device: the expected figures' when
        there are any (the round trips are an engine's, 0 in a ceiling), else the ceiling's.
        None when it runs wholly on one device or does not run."""
        on, sc = self.stands_on, self.scenario
        if on is None or wholly_on_device(self.summary):
            return None
        ex = self.expected_figures
        machine, origin = (sc.machine, "the ceiling") if ex is None else (
            ex.machine, f"expected with {ex.calibration.engine_label}")
        w = sc.workload
        return (prefill_parts(sc.model, machine, w, on),
                decode_parts(sc.model, machine, w, on, context=w.context + w.prompt), origin)

    def parts_lines(self) -> list[Line]:
        """The part-by-part rows (``explain.parts_lines``) of ``parts``; none when it is None."""
        found = self.parts
        return [] if found is None else parts_lines(self.scenario, found[1], found[0], found[2])

    def charts(self) -> dict[str, Chart]:
        """Every chart, standing where the headline does (``headline_charts``)."""
        return headline_charts(self.scenario, self.summary)

    @functools.cached_property
    def operations(self) -> tuple[TimedOperation, ...]:
        """Every operation of the prefill and the decode step on its clocks, as the calibration
        that applies expects them (``report.ops_table.scenario_operations``): the Roofline tab's
        operation view and its "where the time goes" bar. Made when first asked (a slider's
        frame pays for it only while that view is shown), then kept."""
        return scenario_operations(self.scenario, self.expected_figures)


def figures(sc: Scenario, *, expected: Expected | None = None, missing: Missing | None = None) -> Figures:
    """``sc``'s one answer: placed and summarised once, beside ``expected`` (``missing``: why
    there is none, where that is not the usual reason)."""
    return Figures(scenario=sc, summary=summarise(sc), expected=expected, missing=missing)
