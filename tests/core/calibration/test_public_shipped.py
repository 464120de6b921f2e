"""The shipped fit of the published results (resources/fitted/public-calibrations.json) is the
fit of the data as it is now: made by ``python packaging/refit_published.py``
and read instead of refitting at every start.

Refitted here, every group and every machine's offset must make the same choices (weight-format
classes, r0, the overlap, which terms the rows could see) exactly, and the same figures to
``RELATIVE`` : a processor's linear algebra (another BLAS, AVX-512 against AVX2) moves the last
bits of a fit, and a comparison to the digit failed on an Intel Xeon that passed on AMD EPYC."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from rooflab.core.calibration import expectations, public, public_fit

RELATIVE = 1e-9       # a fit of inputs moved by 1e-16 moves its figures by 1e-14 (test below)


def differences(shipped: Any, fresh: Any, path: str = "") -> list[str]:
    """Where ``fresh`` differs from ``shipped``: keys, lengths, text and flags exactly, numbers
    beyond ``RELATIVE``."""
    if isinstance(shipped, dict) and isinstance(fresh, dict):
        if shipped.keys() != fresh.keys():
            return [f"{path}: keys {sorted(shipped)} != {sorted(fresh)}"]
        return [d for k in shipped for d in differences(shipped[k], fresh[k], f"{path}/{k}")]
    if isinstance(shipped, list | tuple) and isinstance(fresh, list | tuple):
        if len(shipped) != len(fresh):
            return [f"{path}: {len(shipped)} items != {len(fresh)}"]
        pairs = enumerate(zip(shipped, fresh, strict=True))
        return [d for i, (a, b) in pairs for d in differences(a, b, f"{path}[{i}]")]
    numbers = (int, float)
    if isinstance(shipped, numbers) and isinstance(fresh, numbers) and not isinstance(shipped, bool):
        close = math.isclose(shipped, fresh, rel_tol=RELATIVE, abs_tol=1e-300)
        return [] if close else [f"{path}: {shipped!r} != {fresh!r}"]
    return [] if shipped == fresh else [f"{path}: {shipped!r} != {fresh!r}"]


def test_the_comparison_tells_a_choice_from_roundoff():
    assert differences({"q8": 0.5, "r0": 128.0}, {"q8": 0.5 * (1 + 1e-14), "r0": 128.0}) == []
    assert differences({"q8": 0.5}, {"q8": 0.5 * (1 + 1e-6)}) != []
    assert differences({"q8": 0.5}, {"i-quant": 0.5}) != []
    assert differences({"attention_flops": 0.1}, {}) != []
    assert differences([1.0, 2.0], [1.0]) != []


def test_the_shipped_fit_was_made_from_the_data_as_it_is():
    shipped = expectations._shipped(expectations.data_digest())
    assert shipped is not None, ("resources/benchmarks changed since the fit was written: run "
                                 "python packaging/refit_published.py")
    assert set(shipped) == set(public.group_rows(public.load_public()))


def test_every_group_refitted_now_is_the_shipped_one():
    """Every group, fitted again here with its band and its machines' offsets, gives the shipped
    calibration: the same choices, the same figures to ``RELATIVE``."""
    shipped = expectations._shipped(expectations.data_digest())
    assert shipped is not None
    found = []
    for group in public.group_rows(public.load_public()):
        fresh = expectations._fitted_group(group)
        assert fresh is not None
        cal, peaks, offsets, share = shipped[group]
        found += differences({"calibration": cal.to_dict(), "peaks": peaks, "offsets": offsets, "share": share},
                             {"calibration": fresh[0].to_dict(), "peaks": fresh[1], "offsets": fresh[2],
                              "share": fresh[3]}, group)
    assert not found, ("the shipped fit is not what the code fits now (python packaging/refit_published.py):\n"
                       + "\n".join(found[:20]))


def test_inputs_moved_in_their_last_bits_make_the_same_choices():
    """Each group's rows with every time moved by a few units in the last place (what another
    processor's arithmetic does): the same r0, overlap and classes, figures within ``RELATIVE``."""
    data = public.load_public()
    rng = np.random.default_rng(7)
    for group in public.group_rows(data):
        g = public.design(data, group)
        moved = dataclasses.replace(g.design, seconds=g.design.seconds * (1 + 4e-16 * rng.standard_normal(len(g.rows))))
        base, fresh = public_fit.fit_factors(g), public_fit.fit_factors(dataclasses.replace(g, design=moved))
        assert differences(dataclasses.asdict(base), dataclasses.asdict(fresh), group) == []


def test_a_tie_within_the_tolerance_goes_to_the_grids_first():
    """Scores this close are one: the first of the grid wins, whatever their last bits say; a
    score better by more than the tolerance still wins."""
    tie = public_fit.CHOICE_TOLERANCE
    assert public_fit.first_within([2.0, 2.0 * (1 - 0.5 * tie), 2.5]) == 0
    assert public_fit.first_within([2.0, 2.0 * (1 - 3 * tie), 2.5]) == 1
    assert public_fit.first_within([4.2e-15, 3.5e-15, 1e-10]) == 0
    assert public_fit.first_within([0.5, 0.1]) == 1


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


def test_a_unified_gpu_without_rows_of_its_own_gets_the_shipped_share():
    """A GPU on the host's memory and power budget that no published row names (the Ryzen AI Max+
    395 preset without its twin, on ROCm) expects its prompts at the shipped unified share of
    its back end's figure, and says so; the same chip called discrete does not. Generation is
    the same either way."""
    from rooflab.core.io.presets import load_machine

    unified = dataclasses.replace(load_machine("ryzen-ai-max-395"), published_twin="", backend="rocm",
                                  key="a-new-apu")
    discrete = dataclasses.replace(unified, kind="gpu")
    a, b = expectations.public_calibration(unified), expectations.public_calibration(discrete)
    assert a is not None and b is not None
    share = expectations._backend("rocm")[3]
    assert share is not None and 0.2 < share < 0.9
    for k, v in b.central.prefill_flops.items():
        assert a.central.prefill_flops[k] == pytest.approx(v * share, rel=1e-9), k
    assert dict(a.central.bandwidth) == dict(b.central.bandwidth)
    assert any("host's memory and power budget" in n for n in a.notes)
    assert not any("host's memory and power budget" in n for n in b.notes)
