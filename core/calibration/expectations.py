"""Which calibration gives a machine its expected figures, found once for the window, the
command line and reports:

1. a calibration timed on this machine (``rooflab measure calibrate``), kept for the machine's
   key: the engine the user runs, at the settings they ran it with;
2. else, for a preset with a known back end, the back end's efficiency fitted to published
   llama-bench results (``calibration.public``);
3. else none: only the ceiling is shown.

Tensor parallel is vLLM's (``predict.parallel.engine_of``): its expected figure takes a vLLM
calibration kept for the machine, else vLLM's published one where it applies (``vllm_public``:
NVIDIA GPUs, several over NVLink), else there is none (``missing_expected`` says why): never
llama.cpp's published factors, which measured another engine, and never the ceiling relabelled."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rooflab.core.calibration import store
from rooflab.core.calibration.host_experts import load_host_experts, with_host_experts
from rooflab.core.errors import ResourceError, RooflabError
from rooflab.core.files.paths import cache_dir
from rooflab.core.files.records import load_record, write_record
from rooflab.core.files.resources import resources_dir
from rooflab.core.predict.expected import MINOR_SHARE, Expected, expected_for, flop_shares
from rooflab.core.values.calibration import Accuracy, EngineCalibration, Rates
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec

log = logging.getLogger(__name__)


def calibration_for(machine: MachineProfile, engine: str | None = None) -> EngineCalibration | None:
    """The calibration that applies to ``machine`` (``engine``: an engine settings key to
    insist on), None when there is none."""
    found = store.load_engine_calibration(store.machine_key(machine), engine)
    if found is not None or engine is not None:
        return found
    return public_calibration(machine)


def public_calibration(machine: MachineProfile) -> EngineCalibration | None:
    """The published-benchmark calibration of ``machine``'s back end (Vulkan: of its GPU
    vendor's), None without one."""
    backend = getattr(machine, "backend", "") or ("cpu" if machine.kind == "cpu" else "")
    if not backend:
        return None
    group = f"vulkan-{vendor_of(machine.name)}" if backend == "vulkan" else backend
    from rooflab.core.calibration.public import priced_apart

    try:
        return _public(group, machine.published_twin or machine.key,
                       machine.flops("fp16") if "fp16" in machine.peak_flops else 0.0,
                       priced_apart(machine.kind, backend))
    except RooflabError as exc:
        log.warning("published benchmarks unusable for %s: %s", group, exc)
        return None


_VENDORS = (("nvidia", ("nvidia", "geforce", "rtx", "quadro", "tesla")),
            ("amd", ("amd", "radeon", "ryzen", "instinct")), ("intel", ("intel", "arc ")), ("apple", ("apple",)))


def vendor_of(name: str) -> str:
    """The GPU maker a machine's name names ("AMD Ryzen AI Max+ 395" -> "amd"), "" when none."""
    low = name.lower() + " "
    return next((vendor for vendor, words in _VENDORS if any(w in low for w in words)), "")


ANY = "any format"
PUBLIC_CACHE_FORMAT = 9       # bump when what ``_fitted_backend`` computes changes


# (fit, peaks, offsets, a unified GPU's prompt share: ``public.unified_share``, None where no row shows it)
Kept = tuple[EngineCalibration, dict[str, float], dict[str, tuple[float, float, float]], float | None]


@functools.lru_cache(maxsize=64)
def _public(group: str, key: str, fp16: float, unified: bool = False) -> EngineCalibration | None:
    """The group's calibration for one machine. When ``key`` (the preset's published twin, or
    its own key) is among the published machines, compute factors are rescaled to the preset's
    own FP16 peak (both count a GeForce card's FP16 at FP16 accumulate, the rate llama.cpp's
    kernels run at; a preset stated otherwise keeps its own ceiling), and its
    own offset (``public.machine_offsets``: how its published rows ran against the group's fit)
    applies to the central figure and the band alike. A machine without rows of its own gets the
    median of what the machines the fit left out ran (``public_score.banded`` scores that figure):
    the fit's figure times their median measured / predicted. Either way the figure is the middle
    of its band, and the band is the held-out spread the accuracy script reports the coverage of.
    A ``unified`` GPU (``public.priced_apart``: on the host's memory and power budget, off Metal)
    without rows of its own runs its prompts at the share of that figure that the unified GPUs
    with rows showed."""
    kept = _backend(group)
    if kept is None:
        return None
    cal, peaks, offsets, share = kept
    scale = peaks[key] / fp16 if key in peaks and fp16 > 0 else 1.0
    from rooflab.core.calibration.public_fit import scaled

    def rescaled(r: Rates) -> Rates:
        # at most the preset's own peak: an expected figure is never above its ceiling (a profile
        # whose peak its engine outruns is wrong, as GeForce presets at FP32 accumulate were)
        return dataclasses.replace(r, prefill_flops={k: min(1.0, v * scale) for k, v in r.prefill_flops.items()},
                                   decode_flops={k: min(1.0, v * scale) for k, v in r.decode_flops.items()},
                                   attention_flops=None if r.attention_flops is None else
                                   min(1.0, r.attention_flops * scale),
                                   flash_attention_flops=None if r.flash_attention_flops is None else
                                   min(1.0, r.flash_attention_flops * scale))

    base = rescaled(cal.central)
    factors = [held_out_factors(cal.central, r) for r in cal.replicates]
    mid = _median_factors(factors)
    apart = share if unified and key not in offsets else None      # the share its prompts are priced at
    tg, pp, experts = offsets.get(key, (mid[0], mid[1] * (1.0 if apart is None else apart), 1.0))
    replicates = tuple(scaled(base, d / mid[0] * tg, p / mid[1] * pp, experts) for d, p in factors)
    notes = cal.notes
    if key in offsets:
        notes += (f"{key}'s own published rows: generation x{tg:.2f}, prompt processing x{pp:.2f} of the "
                  f"{group} fit" + (f", its routed experts' prompt rate x{experts:.2f} beside that"
                                    if abs(experts - 1.0) > LEAN else ""),)
    elif apart is not None:
        notes += (f"a GPU on the host's memory and power budget: its prompts are expected at x{apart:.2f} of the "
                  f"{group} fit, what the unified GPUs with published rows ran at",)
    elif max(abs(mid[0] - 1.0), abs(mid[1] - 1.0)) > LEAN:
        notes += (f"machines the {group} fit left out ran a median x{mid[0]:.2f} of its generation and x{mid[1]:.2f} "
                  "of its prompt processing figures: the expected figure is the fit's times that",)
    return dataclasses.replace(cal, central=scaled(base, tg, pp, experts), replicates=replicates, notes=notes)


LEAN = 0.05         # a median held-out factor this far from 1 is said in a note


def held_out_factors(central: Rates, replicate: Rates) -> tuple[float, float]:
    """(generation, prompt processing): the held-out quantiles a band replicate was scaled by
    (``_fitted_group``: ``public_fit.scaled(central, d, p)``), read back off its terms: a fixed
    cost divided by ``d`` (else a share not clipped at 1), the prompt FLOP/s times ``p``."""
    d = next((c / r for c, r in ((central.layer_seconds, replicate.layer_seconds),
                                 (central.pass_seconds, replicate.pass_seconds),
                                 (central.expert_layer_seconds, replicate.expert_layer_seconds)) if c > 0 and r > 0),
             None)
    if d is None:
        d = _ratio(central.bandwidth, replicate.bandwidth)
    return d, _ratio(central.prefill_flops, replicate.prefill_flops)


def _ratio(central: Any, replicate: Any) -> float:
    """replicate / central of a share where the replicate's is under the clip at 1 (the largest
    clipped ratio where every one is clipped: the least the factor was)."""
    pairs = [(replicate[k] / central[k], replicate[k] < 1.0) for k in central if central[k] > 0 and k in replicate]
    free = [r for r, unclipped in pairs if unclipped]
    return max(free or [r for r, _ in pairs] or [1.0])


def _median_factors(factors: list[tuple[float, float]]) -> tuple[float, float]:
    if not factors:
        return 1.0, 1.0
    return float(np.median([d for d, _ in factors])), float(np.median([p for _, p in factors]))


def data_digest() -> str:
    """A digest of the shipped published-benchmark files: what a fit of them is kept under."""
    from rooflab.core.io.public_bench import default_paths

    try:
        return hashlib.sha1(b"".join(p.read_bytes() for p in default_paths())).hexdigest()[:16]
    except OSError as exc:
        raise ResourceError(f"cannot read the published benchmarks ({exc})") from exc


def shipped_path() -> Path:
    """resources/fitted/public-calibrations.json: every group's fit of the shipped data, made by
    ``python packaging/refit_published.py`` (a test checks it is current)."""
    return Path(resources_dir()) / "fitted" / "public-calibrations.json"


@functools.lru_cache(maxsize=1)
def _shipped(digest: str) -> dict[str, Kept] | None:
    """The shipped fits when they were made from the data as it is now, else None."""
    from rooflab.core.files.safe_json import read_json

    try:        # a shipped file is never set aside: one that does not fit the data is refitted
        found = _fits(read_json(shipped_path(), what="the shipped public fits"))
    except (OSError, RooflabError, KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        log.info("%s unused: %s", shipped_path(), exc)
        return None
    return found[1] if found[0] == digest else None


def _fits(data: dict[str, Any]) -> tuple[str, dict[str, Kept]]:
    if data.get("fit_format") != PUBLIC_CACHE_FORMAT:
        raise TypeError("made by another version of the fit")
    peaks = {str(k): float(v) for k, v in data["peaks"].items()}
    offsets = data["offsets"]
    shares = data["unified_share"]
    return str(data["digest"]), {str(g): (store.printable_calibration(EngineCalibration.from_dict(c)), peaks,
                                          _offsets(offsets[g]), _share(shares.get(g)))
                                 for g, c in data["groups"].items()}


def _share(value: Any) -> float | None:
    """A stored unified prompt share: None, or a number in (0, 1]."""
    if value is None:
        return None
    share = float(value)
    if not 0 < share <= 1:
        raise ValueError(f"unified share {share} out of range")
    return share


def _offsets(data: Any) -> dict[str, tuple[float, float, float]]:
    """A stored {machine: [generation, prompt processing, routed experts' prompt rate]} object,
    each a positive number."""
    out = {}
    for k, v in data.items():
        tg, pp, experts = (float(x) for x in v)
        if not all(0 < x < 100 for x in (tg, pp, experts)):
            raise ValueError(f"offset of {k} out of range")
        out[str(k)] = (tg, pp, experts)
    return out


def write_shipped_fits(path: Path | None = None) -> Path:
    """Fit every group of the shipped data and write them where ``_backend`` looks first."""
    from rooflab.core.calibration import public

    fits = {g: _fitted_group(g) for g in public.group_rows(public.load_public())}
    kept = {g: f for g, f in fits.items() if f is not None}
    peaks = next(iter(kept.values()))[1] if kept else {}
    target = path or shipped_path()
    write_record(target, {"fit_format": PUBLIC_CACHE_FORMAT, "digest": data_digest(), "peaks": peaks,
                          "groups": {g: f[0].to_dict() for g, f in kept.items()},
                          "offsets": {g: {k: list(v) for k, v in f[2].items()} for g, f in kept.items()},
                          "unified_share": {g: f[3] for g, f in kept.items()}})
    _shipped.cache_clear()
    return target


@functools.lru_cache(maxsize=8)
def _backend(group: str) -> Kept | None:
    """(the group's calibration, each published machine's FP16 peak, the group's machines'
    offsets): the shipped fit when it is
    current, else fitted once per version of the data and kept in the cache folder (fitting and
    scoring it leave one machine out takes seconds a window's start should not pay)."""
    digest = data_digest()
    shipped = _shipped(digest)
    if shipped is not None:
        return shipped.get(group)
    path = cache_dir() / "published" / f"{group}-{digest}-{PUBLIC_CACHE_FORMAT}.json"
    kept = load_record(path, _cached)
    if kept is not None:
        return kept
    fitted = _fitted_group(group)
    if fitted is not None:
        try:
            write_record(path, {"calibration": fitted[0].to_dict(), "peaks": fitted[1],
                                "offsets": {k: list(v) for k, v in fitted[2].items()},
                                "unified_share": fitted[3]})
        except OSError as exc:          # a cache that cannot be written costs time, not the figure
            log.info("cannot keep %s: %s", path, exc)
    return fitted


def _cached(data: dict[str, Any]) -> Kept:
    peaks = data["peaks"]
    if not isinstance(peaks, dict):
        raise TypeError("peaks must be an object")
    return (store.printable_calibration(EngineCalibration.from_dict(data["calibration"])),
            {str(k): float(v) for k, v in peaks.items()}, _offsets(data.get("offsets", {})),
            _share(data.get("unified_share")))


BAND_REPLICATES = 25          # replicates that make an expected figure's band


def _fitted_group(group: str) -> Kept | None:
    """The group's factors as relative rates; the band from leaving one machine out: each
    replicate the central rates scaled by one quantile of measured / predicted over held-out
    rows (generation and prompt processing apart), so the band is the spread unseen machines
    showed; accuracy from the same held-out rows."""
    from rooflab.core.calibration import public, public_fit, public_score

    data = public.load_public()
    rows = public.group_rows(data)
    if group not in rows:
        return None
    fits = public.fit_groups(data)
    central = public.group_rates(fits, group)
    held = list(public_score.held_out(data, "machine", [group]))
    centred = public_score.banded(data, held, "machine")      # the figures a machine without rows gets
    quantiles = np.linspace(2.0, 98.0, BAND_REPLICATES)
    tg, pp = (np.exp(public_score.residual_quantiles(data, held, group, kind, quantiles)) for kind in ("tg", "pp"))
    replicates = tuple(public_fit.scaled(central, float(d), float(p)) for d, p in zip(tg, pp, strict=True))
    accuracy: dict[str, dict[str, Accuracy]] = {}
    table = {}
    for phase, kind in (("prefill", "pp"), ("decode", "tg")):
        errors = [p.error for p in centred if public.kind(data.rows[p.row]) == kind]
        if errors:
            table[phase] = Accuracy(median=float(np.median(errors)), worst=float(np.max(errors)), count=len(errors))
    if table:
        accuracy["leave_one_machine_out"] = table
    machines = {data.rows[i].machine for i in rows[group]}
    backend = group.split("-")[0]
    label = BACKEND_NAMES.get(backend, backend) + (f" ({group.split('-', 1)[1]})" if "-" in group else "")
    cal = EngineCalibration(
        machine_key="", machine_name=f"{group} machines", engine_key=f"llama.cpp-{group}-published",
        engine_label=f"llama.cpp {label}", settings={"backend": backend, "group": group},
        date=max((s.accessed for s in data.sources), default=""), models=("published llama-bench results",),
        machine_bandwidth=1.0, machine_flops=1.0, central=central, replicates=replicates,
        accuracy=accuracy, source="public", points=len(rows[group]),
        notes=(f"llama.cpp on {group}: {len(machines)} machines, {len(rows[group])} published results",))
    share = public.unified_share(data, fits)
    offsets = public.machine_offsets(data, fits, machines, share=share)
    return cal, {m.key: m.compute_peak for m in data.machines}, offsets, share


BACKEND_NAMES = {"cuda": "CUDA", "metal": "Metal", "rocm": "ROCm", "vulkan": "Vulkan", "cpu": "CPU"}


VLLM = "vllm"           # the engine of tensor parallel (``parallel.engine_of``)
NO_VLLM_CALIBRATION = ("no vLLM calibration applies here, so there is no expected figure (llama.cpp's published "
                       "factors measured another engine; the ceiling, with the link's all-reduces, is not one)")


def vllm_calibration_for(machine: MachineProfile, devices: int = 2) -> EngineCalibration | None:
    """vLLM's calibration of ``devices`` x ``machine``: one timed here, else the published one
    where it applies (``vllm_public.not_applied``), else None."""
    from rooflab.core.calibration.vllm_public import not_applied, vllm_calibration

    kept = calibration_for(machine, VLLM)
    if kept is not None or not_applied(machine, devices):
        return kept
    return vllm_calibration(devices)


def expected_on(spec: ModelSpec, machine: MachineProfile, *, dtype: str | None = None,
                engine: str | None = None, devices: int = 2) -> Expected | None:
    """What the calibration of ``machine`` expects of ``spec``, None when nothing is calibrated.
    ``engine`` "vllm" (tensor parallel over ``devices``): a vLLM calibration (``vllm_calibration_for``),
    else None: a ceiling is never labelled expected (``missing_expected`` says why there is none)."""
    cal = vllm_calibration_for(machine, devices) if engine == VLLM else calibration_for(machine, engine)
    if cal is None or off_int8_path(spec, machine, cal, dtype):
        return None
    # the host's routed experts as this machine's CPU back end read them, where that was measured
    return with_host_experts(spec, machine, expected_for(spec, machine, cal, dtype=dtype, host=host_rates(machine)),
                             load_host_experts() if machine.kind == "gpu" and spec.is_moe else None)


def off_int8_path(spec: ModelSpec, machine: MachineProfile, cal: EngineCalibration, dtype: str | None) -> bool:
    """Whether ``cal`` is llama.cpp's published CPU fit, ``spec`` has quantized weights and
    ``dtype`` is not the int8 path their factors are of: those multiplies run on int8 dot
    products whatever dtype is asked, so their factors put on another peak (an FP32 one, 4x
    lower) would price them 4x slow. A float model's factors are of the FP32 rate its
    multiplies run at (``MachineProfile.float_share``): any dtype prices it."""
    return (cal.source == "public" and machine.kind == "cpu" and "int8" in machine.peak_flops
            and machine.applied_dtype(dtype) != "int8" and not is_float_model(spec))


def is_float_model(spec: ModelSpec) -> bool:
    """Whether all but a minor share of ``spec``'s multiplies are of float weights (F32, F16, BF16)."""
    return flop_shares(spec).get("float", 0.0) >= 1.0 - MINOR_SHARE


@dataclass(frozen=True, slots=True)
class Missing:
    """Why a machine has no expected figure: ``reason``, the short why the numbers panel shows
    under its "Expected: none" row, and ``line``, the whole of it (``rooflab predict``, the
    row's tooltip)."""

    reason: str
    line: str


def missing_expected(spec: ModelSpec, machine: MachineProfile, engine: str | None, devices: int = 2,
                     dtype: str | None = None) -> Missing | None:
    """Why ``machine`` has no expected figure of ``spec`` for ``engine`` at ``dtype`` (None when it
    has one, or when the reason is the ordinary one: no calibration of the machine at all)."""
    if engine != VLLM:
        cal = calibration_for(machine, engine)
        if cal is None or not off_int8_path(spec, machine, cal, dtype):
            return None
        why = (f"llama.cpp's published CPU factors are of the int8 path its quantized multiplies run on, "
               f"not of {machine.applied_dtype(dtype)}; compute in int8 (the default) for its figure")
        return Missing(reason=why, line=why)
    if vllm_calibration_for(machine, devices) is not None:
        return None
    from rooflab.core.calibration.vllm_public import not_applied

    why = not_applied(machine, devices) or "the published vLLM runs could not be read"
    return Missing(reason=why, line=f"{NO_VLLM_CALIBRATION}: {why}; time vLLM here to get one")


def host_rates(machine: MachineProfile) -> Rates | None:
    """The factors llama.cpp's CPU back end reaches (its published fit), for the host behind a
    discrete GPU: the layers kept in host memory run on that CPU, not at the GPU's shares."""
    if machine.kind != "gpu" or machine.offload_bandwidth <= 0:
        return None
    kept = _backend("cpu")
    return None if kept is None else kept[0].central
