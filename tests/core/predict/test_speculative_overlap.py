"""The speculative verify pass combines its clocks as every other pass does: with the machine's
fitted overlap (``clocks.combined_seconds``), not always their max."""

from __future__ import annotations

import dataclasses

import pytest

from rooflab.core.predict.clocks import prefill_pass
from rooflab.core.predict.speculative import speculative
from rooflab.core.values.efficiency import Efficiency
from rooflab.core.values.workload import Workload
from tests.factories.specs import machine, synthetic_spec


def test_verify_uses_the_overlap():
    # 8.03e9 parameters at 4.5 bits on 1,008 GB/s and 165.2 TFLOP/s, verify of k = 4 drafts at 4,096
    # tokens of context. With overlap 0 (an engine that reads, then computes) the verify takes
    # memory + compute + the head's logits at the k extra positions + the step overhead; with 1, the max
    spec = synthetic_spec(8.03e9, 4.5, kv_bytes_per_token=131_072)
    w = Workload(draft_tokens=4, acceptance=0.8)
    for overlap in (0.0, 0.5, 1.0):
        eff = Efficiency(overlap=overlap, step_overhead=1e-4)
        m = dataclasses.replace(machine(1008.0, 165.2), efficiency=eff)
        p = prefill_pass(spec, m, w, prompt=5, context=4096)
        head = 2.0 * spec.head_params * 4 / m.effective_flops()
        mem, comp = float(p.memory_seconds), float(p.compute_seconds) + head
        expected = max(mem, comp) + (1 - overlap) * min(mem, comp) + 1e-4
        assert speculative(spec, m, w, context=4096).verify_seconds == pytest.approx(expected)
    # the serial engine pays the arithmetic on top of the read: dearer than the overlapped one
    serial = dataclasses.replace(machine(1008.0, 165.2), efficiency=Efficiency(overlap=0.0))
    assert speculative(spec, serial, w, context=4096).verify_seconds > speculative(
        spec, machine(1008.0, 165.2), w, context=4096).verify_seconds
