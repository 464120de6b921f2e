"""``benchmarks/accuracy/bench_offload_accuracy.py``'s pure parts and the data it reads: every
published placed run stays under the ceiling rooflab prices for it, the constants are fitted on
the rows they move, a band is built from the other folds with each fold weighing as one, and
prompt rows whose engine moved weights as the placed model does not price are told apart."""

from __future__ import annotations

import dataclasses
import json
from types import ModuleType

import pytest

from rooflab.core.io import load_model
from rooflab.core.io.presets import load_machine
from tests.factories.scripts import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench_offload_accuracy")


def test_every_placed_row_names_its_source_and_a_set_up_rooflab_can_price(bench):
    data = json.loads(bench.DATA.read_text(encoding="utf-8"))
    sources = {s["id"]: s for s in data["sources"]}
    assert all(s["url"].startswith("https://github.com/") and s["notes"] for s in sources.values())
    assert {r["source"] for r in data["rows"]} == set(sources)         # no row without a source, no idle source
    for r in data["rows"]:
        load_model(r["model"], weights=r["weights"])
        load_machine(r["gpu"])
        assert r["test"][:2] in ("pp", "tg") and int(r["test"][2:]) > 0
        assert r["tokens_per_second"] > 0 and r["host_bandwidth"] > 0 and r["expert_copy"] in ("active", "all")
        assert r["engine"] in ("llama.cpp", "ik_llama.cpp")


def test_no_published_placed_run_beats_its_ceiling(bench):
    """A run faster than its ceiling means the model or the stated set-up is wrong."""
    rows = bench.placed_rows()
    assert len(rows) >= 150
    above = [f"{r.label} [{r.source}]: {r.measured} > {r.ceiling:.1f}" for r in rows if r.measured > r.ceiling]
    assert not above, "\n".join(above)


def test_prompt_rows_the_placed_model_does_not_price_are_set_apart(bench):
    """GPT-OSS-120B: 128 experts, 4 used, so ik_llama.cpp sends host experts to the GPU only
    from 32 x 128 / 4 = 1024 tokens a ubatch (a prompt shorter than -ub is one ubatch of its
    length); mainline from 32. A copy of every expert is ik_llama.cpp before -ooae."""
    spec = load_model("gpt-oss-120b-mxfp4", weights="mxfp4")
    row = {"engine": "ik_llama.cpp", "expert_copy": "active", "ub": 512, "test": "pp4096"}
    assert "on the host" in bench.unpriced_prompt(row, spec)
    assert bench.unpriced_prompt(row | {"ub": 1024}, spec) == ""
    assert "on the host" in bench.unpriced_prompt(row | {"ub": 4096, "test": "pp310"}, spec)   # one short ubatch
    assert bench.unpriced_prompt(row | {"engine": "llama.cpp"}, spec) == ""
    assert "copied whole" in bench.unpriced_prompt(row | {"ub": 4096, "expert_copy": "all"}, spec)


def scored(bench, *, source: str, kind: str, measured: float, scale: float, ceiling: float = 1e9):
    """A placed row whose expected figure is ``scale`` x the host share (generation) or the link
    share (prompts)."""
    def predict(host: float, link: float, compute: float) -> float:
        return scale * (min(host, 10 * compute) if kind == "tg" else link)
    return bench.Scored(source=source, machine=source, category="offloaded", kind=kind, label=source,
                        measured=measured, ceiling=ceiling, predict=predict)


def test_each_constant_is_fitted_on_the_rows_it_moves(bench):
    """Generation rows measured at 0.5 of what a host share of 1 prices (their compute bound at
    ten times the compute share, never the lesser here), prompt rows at 0.9: the fit returns
    those shares; a row above its ceiling is left out of the fit. Where no row is bound by a
    term (the compute share at any value above 0.25), the fit keeps the shipped value."""
    rows = [scored(bench, source=f"s{i}", kind="tg", measured=50.0, scale=100.0) for i in range(3)]
    rows += [scored(bench, source=f"p{i}", kind="pp", measured=900.0, scale=1000.0) for i in range(3)]
    rows += [scored(bench, source="x", kind="tg", measured=95.0, scale=100.0, ceiling=90.0)] * 4
    fitted = bench.fit(rows)
    assert fitted["host"] == pytest.approx(0.5)
    assert fitted["link"] == pytest.approx(0.9)
    assert fitted["compute"] == pytest.approx(bench.offload_terms.HOST_EXPERT_DECODE_COMPUTE)


def test_a_host_bound_by_its_arithmetic_fits_the_compute_share(bench):
    """One machine's rows measured at 0.32 of what a share of 1 prices and bound by twice the
    compute share, another's at 0.9 and bound by the host share alone: the compute share takes
    the first machine (0.32 / 2), the host share the second."""
    rows = [dataclasses.replace(scored(bench, source=f"a{i}", kind="tg", measured=32.0, scale=100.0),
                                machine="a", predict=lambda h, link, c: 100.0 * min(h, 2 * c)) for i in range(3)]
    rows += [dataclasses.replace(scored(bench, source=f"b{i}", kind="tg", measured=90.0, scale=100.0),
                                 machine="b", predict=lambda h, link, c: 100.0 * h) for i in range(3)]
    fitted = bench.fit(rows)
    assert fitted["host"] == pytest.approx(0.9)
    assert fitted["compute"] == pytest.approx(0.16)


def test_a_band_weighs_each_other_fold_as_one(bench):
    """Four residuals of fold a at 0 and one of fold b at 2: by row b's would be the top fifth;
    weighing each fold as one, b holds the upper half of the weight, centred at 0.75. A row's
    band comes from the other folds only."""
    upper = bench.weighted_quantiles([0.0, 0.0, 0.0, 0.0, 2.0], ["a", "a", "a", "a", "b"], (0.75,))[0]
    assert upper == pytest.approx(2.0)
    rows = [scored(bench, source="a", kind="tg", measured=10.0, scale=10.0) for _ in range(8)]
    rows += [scored(bench, source=s, kind="tg", measured=20.0, scale=10.0) for s in ("b", "c") for _ in range(4)]
    bands = bench.residual_bands(rows, [10.0] * len(rows), lambda r: r.source)
    assert bands[0] == pytest.approx((20.0, 20.0))        # fold a's row: only b's and c's residuals (x2)
    assert bands[8] == pytest.approx((10.0, 20.0))        # fold b's row: a's (x1) and c's (x2), one vote each
