"""The shipped fit of the published results (resources/fitted/public-calibrations.json) is the
fit of the data as it is now: made by ``python benchmarks/bench_public_accuracy.py --write-fit``
and read instead of refitting at every start."""

from __future__ import annotations

from rooflab.core.calibration import expectations
from rooflab.core.calibration import public


def test_the_shipped_fit_was_made_from_the_data_as_it_is():
    shipped = expectations._shipped(expectations.data_digest())
    assert shipped is not None, ("resources/benchmarks changed since the fit was written: run "
                                 "python benchmarks/bench_public_accuracy.py --write-fit")
    assert set(shipped) == set(public.group_rows(public.load_public()))


def test_a_group_refitted_now_is_the_shipped_one():
    """The smallest group, fitted again here, gives the shipped calibration to the digit."""
    shipped = expectations._shipped(expectations.data_digest())
    assert shipped is not None
    rows = public.group_rows(public.load_public())
    group = min(rows, key=lambda g: len(rows[g]))
    fresh = expectations._fitted_group(group)
    assert fresh is not None
    assert fresh[0].to_dict() == shipped[group][0].to_dict()


def test_a_preset_reads_the_shipped_fit_without_fitting(monkeypatch):
    expectations._backend.cache_clear()
    expectations._public.cache_clear()

    def refuse(group: str) -> None:
        raise AssertionError(f"fitted {group} at run time")

    monkeypatch.setattr(expectations, "_fitted_group", refuse)
    from rooflab.core.io.presets import load_machine

    cal = expectations.public_calibration(load_machine("rtx-4090"))
    assert cal is not None and cal.source == "public" and cal.settings["group"] == "cuda"
    expectations._backend.cache_clear()
    expectations._public.cache_clear()
