"""Measure the host half of an offload here: llama.cpp's CPU back end reading routed experts one
token at a time (``calibration.host_experts`` says what the figure is and where it is used).

Each layout is a catalogue model's real tensor shapes (Qwen3-30B-A3B's 128 experts of 2048 x 768
in Q4_K_M, gpt-oss-20b's 32 of 2880 x 2880 in MXFP4) with ``LAYERS`` layers and a
``VOCAB``-token vocabulary: the head and embedding are the same in the two twins and cancel in
their difference, and a small head keeps the step short, so a loaded machine's noise is a
smaller share of it. Its twin reads one expert a token instead of the layout's k. A round times
generation (llama-bench's tg test at depth 0) of the twin and of the layout, in a child process
each, in alternating order (a machine that slows during the run slows both); the difference of
the two steps is what the extra experts cost. Random-weight GGUFs are written once into the
cache folder (``engine.gguf_for``), a few hundred MB each."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from rooflab.core.calibration.host_experts import HostExpertCalibration, LayoutRate, experts_class
from rooflab.core.calibration.store import machine_key
from rooflab.core.errors import MeasurementError
from rooflab.core.io.catalogue import get_entry
from rooflab.core.io.hf import spec_from_config
from rooflab.core.jobs import CancelFlag, Progress, check_cancel
from rooflab.core.predict.work import weight_bytes_read_per_token
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec

LAYERS = 2                # layers of each layout: the experts of two layers, a step of a few ms
VOCAB = 16_000            # tokens of the vocabulary: the head cancels in the difference anyway
GEN_TOKENS = 32           # tokens generated per timed test (llama-bench's -n)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """A catalogue model's layout cut to ``LAYERS`` layers: its name and catalogue key."""

    name: str
    catalogue: str

    def specs(self, layers: int = LAYERS, vocab: int = VOCAB) -> tuple[ModelSpec, ModelSpec]:
        """(the layout with its experts per token, its twin with one)."""
        entry = get_entry(self.catalogue)
        if entry is None:
            raise MeasurementError(f"no catalogue entry {self.catalogue} for the {self.name} layout")
        cfg = dict(entry.config)
        cfg |= {"num_hidden_layers": layers, "vocab_size": vocab}
        if isinstance(cfg.get("layer_types"), list):
            cfg["layer_types"] = cfg["layer_types"][:layers]
        used = int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 0)
        if used < 2:
            raise MeasurementError(f"{self.catalogue} routes {used} expert a token: nothing to difference")

        def one(k: int) -> ModelSpec:
            twin = {**cfg, "num_experts_per_tok": k}
            if "experts_per_token" in cfg:
                twin["experts_per_token"] = k
            return spec_from_config(twin, weights=entry.default_weights, name=f"{self.name} layout, {layers} layers, "
                                    f"{k} of its experts a token", source=f"host-experts:{self.catalogue}:{k}")

        return one(used), one(1)


LAYOUTS: tuple[Layout, ...] = (Layout(name="qwen3-moe", catalogue="qwen3-30b-a3b-q4_k_m"),
                               Layout(name="gpt-oss", catalogue="gpt-oss-20b-mxfp4"))

#: times generation of a spec, returning (seconds per token, engine label): llama.cpp in a child
#: process by default (``timed_in_llamacpp``); tests give their own
Timer = Callable[[ModelSpec, int | None, CancelFlag], Generator[Progress, None, tuple[float, str]]]


def timed_in_llamacpp(spec: ModelSpec, threads: int | None, cancel: CancelFlag
                      ) -> Generator[Progress, None, tuple[float, str]]:
    """Seconds per generated token of ``spec``'s random-weight GGUF at depth 0 (llama-bench's
    tg test, one warm-up), with the engine's label."""
    from rooflab.core.measure.engines.engine import measure_in_llamacpp
    from rooflab.core.measure.engines.llamacpp.plan import LlamaCppPlan

    plan = LlamaCppPlan(threads=threads, experiments=("decode",), depths=(0,), gen_tokens=GEN_TOKENS, repeats=1)
    run = yield from measure_in_llamacpp(spec, spec, plan, cancel, synthetic=True)
    decode = [p for p in run.points if p.kind == "decode"]
    if not decode:
        raise MeasurementError(f"llama.cpp timed no generation of {spec.name}")
    return decode[0].seconds, run.settings.label


def measure_host_experts(machine: MachineProfile, *, rounds: int = 3, threads: int | None = None,
                         layouts: Sequence[Layout] = LAYOUTS, layers: int = LAYERS, cancel: CancelFlag = None,
                         timer: Timer | None = None) -> Generator[Progress, None, HostExpertCalibration]:
    """This machine's routed-expert decode rate for each layout, ``rounds`` rounds, against
    ``machine`` (this machine as measured: its bandwidth is the ceiling)."""
    if not 1 <= rounds <= 16:
        raise MeasurementError(f"rounds must be 1 to 16, got {rounds}")
    time_one = timer or timed_in_llamacpp
    pairs = [(layout, *layout.specs(layers)) for layout in layouts]
    seconds: dict[str, list[float]] = {layout.name: [] for layout in layouts}
    label = ""
    total = rounds * len(pairs) * 2
    done = 0
    for r in range(rounds):
        for layout, full, twin in pairs:
            measured: dict[int, float] = {}
            order = (full, twin) if r % 2 == 0 else (twin, full)      # alternate: drift lands on both
            for spec in order:
                check_cancel(cancel)
                yield Progress(step="time", message=f"round {r + 1} of {rounds}: {spec.name}", fraction=done / total)
                step, label = yield from _relabelled(time_one(spec, threads, cancel), done / total)
                measured[spec.experts_used] = step
                done += 1
            seconds[layout.name].append(measured[full.experts_used] - measured[twin.experts_used])
    rates = tuple(LayoutRate(layout=layout.name, format_class=experts_class(full),
                             extra_bytes=weight_bytes_read_per_token(full) - weight_bytes_read_per_token(twin),
                             extra_seconds=tuple(seconds[layout.name])) for layout, full, twin in pairs)
    if not any(r.rates for r in rates):
        raise MeasurementError("the extra experts took no time in any round: the machine was too busy to tell "
                               "them apart; measure again when it is quieter")
    return HostExpertCalibration(machine_key=machine_key(machine), machine_name=machine.name,
                                 date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                 engine=label, bandwidth=machine.bandwidth, layouts=rates)


def _relabelled(job: Generator[Progress, None, Any], fraction: float) -> Generator[Progress, None, Any]:
    """``job``'s progress at the round's place in the whole (a GGUF written, a child started)."""
    while True:
        try:
            p = next(job)
        except StopIteration as stop:
            return stop.value
        yield dataclasses.replace(p, fraction=fraction)
