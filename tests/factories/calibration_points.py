"""The points a calibration times for each model (``calibration_run.CalibrationPlan``'s llama.cpp
sweep), with placeholder seconds for a test to price: four prompts (five in the thorough plan), four
cache depths, five batches."""

from __future__ import annotations

from rooflab.core.values.measured import EngineSettings, MeasuredPoint

PROMPTS = (32, 128, 512, 1024)      # the thorough plan adds 2,048


def calibration_plan(settings: EngineSettings, prompts: tuple[int, ...] = PROMPTS) -> list[MeasuredPoint]:
    pts = [MeasuredPoint(kind="prefill", prompt=n, context=0, batch=1, seconds=1.0, settings=settings)
           for n in prompts]
    pts += [MeasuredPoint(kind="decode", prompt=1, context=t, batch=1, seconds=1.0, settings=settings)
            for t in (3, 259, 1027, 2051)]
    pts += [MeasuredPoint(kind="batch", prompt=1, context=256, batch=b, seconds=1.0, settings=settings)
            for b in (1, 2, 4, 8, 16)]
    return pts
