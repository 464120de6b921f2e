"""llama.cpp's CPU flash attention splits one query's cache over its threads in whole chunks of
its padded view: a single sequence's step is charged those chunks (``work.split_context``), as a
calibration of that engine says (``Efficiency.kv_chunks``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rooflab.core.errors import SpecError
from rooflab.core.predict import work
from rooflab.core.predict.clocks import decode_pass
from rooflab.core.values.calibration import Rates
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.workload import Workload

CPU = MachineProfile(name="cpu", bandwidth=40e9, peak_flops={"fp32": 200e9}, memory=64e9, default_dtype="fp32",
                     kind="cpu")


def test_the_split_charges_whole_chunks_of_the_padded_view():
    # below 512 cells in the view (t + 1 <= 256) the filled cells; from there each of two threads
    # takes half the view, and the first half is full
    t = np.array([3, 255, 256, 259, 511, 512, 1027, 2051])
    assert work.split_context(t, 2).tolist() == [3, 255, 511, 511, 511, 767, 1279, 2303]
    assert work.split_context(t, 0).tolist() == t.tolist() == work.split_context(t, 1).tolist()
    # four threads: a 1,024-cell view in chunks of 256, all four full at 1,000 cached tokens
    assert float(work.split_context(1000, 4)) == 1023
    # the last chunk partly filled: 2,200 cells of a 2,304-cell view, two chunks of 1,152
    assert float(work.split_context(2199, 2)) == 2303


def test_a_single_sequence_step_pays_for_the_chunks_a_batch_does_not(dense_spec):
    wl = Workload(prompt=1, context=259, batch=1)
    split = dataclasses.replace(CPU, efficiency=Efficiency(kv_chunks=2))
    plain = decode_pass(dense_spec, CPU, wl)
    chunked = decode_pass(dense_spec, split, wl)
    k_full, _ = dense_spec.kv_bytes_per_token("f16")
    assert float(chunked.cache_bytes - plain.cache_bytes) == pytest.approx(k_full * (511 - 259))
    assert float(chunked.seconds) > float(plain.seconds)
    # a step of four sequences runs one query row per sequence: no split
    four = dataclasses.replace(wl, batch=4)
    assert float(decode_pass(dense_spec, split, four).cache_bytes) == \
        float(decode_pass(dense_spec, CPU, four).cache_bytes)
    # the jump from 255 to 256 cached tokens, where the view reaches 512 cells
    steps = decode_pass(dense_spec, split, wl, context=np.array([254.0, 255.0, 256.0])).seconds
    assert steps[1] - steps[0] < (steps[2] - steps[1]) / 100


def test_the_split_is_kept_with_the_calibration_and_checked():
    eff = Efficiency(kv_chunks=2)
    assert Efficiency.from_dict(eff.to_dict()) == eff and not eff.is_identity
    assert "kv_chunks" not in Efficiency().to_dict()
    for bad in (-1, 2.5, True, "2", 10_000):
        with pytest.raises(SpecError, match="kv_chunks"):
            Efficiency.from_dict({"kv_chunks": bad}) if not isinstance(bad, int) or isinstance(bad, bool) \
                else Efficiency(kv_chunks=bad)
    rates = Rates(bandwidth={"k-quant": 30e9}, prefill_flops={"k-quant": 1e11}, decode_flops={"k-quant": 1e11},
                  cache_bandwidth=5e9, kv_chunks=2)
    assert Rates.from_dict(rates.to_dict()) == rates
    with pytest.raises(SpecError, match="kv_chunks"):
        Rates.from_dict({**rates.to_dict(), "kv_chunks": -2})
