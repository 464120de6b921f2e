"""The placement a user asks for, in llama.cpp's flags, before it meets a model: ``-ngl`` (or
"auto"), ``--n-cpu-moe``, ``--no-kv-offload``, and how many identical devices share the model
(``--devices``, ``--parallel``, ``--interconnect``). ``rooflab predict``'s flags and the
window's Workload tab both make one of these, and ``fit`` / ``parallel_on`` turn it into what
the predictions take, so the two read the flags by one rule: -ngl given is a placement by hand,
never fitted; -ngl left on "auto" is fitted around the other flags given, which stay as given."""

from __future__ import annotations

from dataclasses import dataclass

from rooflab.core.errors import SpecError
from rooflab.core.predict.autofit import Fit, choose, fit_placement
from rooflab.core.predict.parallel import MODES, Parallel, mode_text
from rooflab.core.predict.placement import MAX_DEVICES, MAX_LAYERS, Placement
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec
from rooflab.core.values.workload import Workload


def _count(name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise SpecError(f"placement.{name} must be an integer in [{low:,}, {high:,}], got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementChoice:
    """What the user chose. ``gpu_layers`` [-ngl]: None ("auto") leaves the layers to rooflab,
    fitted around the other flags given (see ``fit``); ``cpu_moe`` [--n-cpu-moe] (None: not
    given, auto-fit may move experts to the host; a number, 0 included: exactly that many
    layers' experts on the host); ``kv_on_device`` (False: --no-kv-offload); ``devices``
    identical devices sharing the model as ``parallel`` says ("layer" or "tensor") over
    ``link_bandwidth`` bytes/s per direction (None: the machine's stated interconnect).

    On several devices in tensor parallel (vLLM) every layer is on the devices, so the
    one-device flags must be left at their defaults (SpecError otherwise, naming both); a layer
    split (llama.cpp's) takes them as llama.cpp does, the layers on the devices shared among
    them and the rest in host memory."""

    gpu_layers: int | None = None
    cpu_moe: int | None = None
    kv_on_device: bool = True
    devices: int = 1
    parallel: str = "layer"
    link_bandwidth: float | None = None

    def __post_init__(self) -> None:
        if self.gpu_layers is not None:
            _count("gpu_layers", self.gpu_layers, 0, MAX_LAYERS)
        if self.cpu_moe is not None:
            _count("cpu_moe", self.cpu_moe, 0, MAX_LAYERS)
        _count("devices", self.devices, 1, MAX_DEVICES)
        if not isinstance(self.kv_on_device, bool):
            raise SpecError(f"placement.kv_on_device must be true or false, got {self.kv_on_device!r}")
        if self.parallel not in MODES:
            raise SpecError(f"placement.parallel must be one of {', '.join(MODES)}, got {self.parallel!r}")
        if self.link_bandwidth is not None and not (
                isinstance(self.link_bandwidth, (int, float)) and not isinstance(self.link_bandwidth, bool)
                and self.link_bandwidth > 0):
            raise SpecError(f"placement.link_bandwidth must be > 0 bytes/s, got {self.link_bandwidth!r}")
        if self.devices > 1 and self.is_manual and self.parallel == "tensor":
            raise SpecError("GPU layers (-ngl), experts on the CPU (--n-cpu-moe) and the KV cache's place "
                            "(--no-kv-offload) are llama.cpp's; in tensor parallel (vLLM) every layer is on "
                            "the devices: use --parallel layer to keep some in host memory")

    @property
    def is_manual(self) -> bool:
        """Whether any one-device flag is given (a placement by hand, or -ngl fitted around the
        flags given)."""
        return self.gpu_layers is not None or self.cpu_moe is not None or not self.kv_on_device

    @property
    def is_auto(self) -> bool:
        """Nothing chosen: one device, placed by rooflab (auto-fit) when it does not hold the model."""
        return not self.is_manual and self.devices == 1

    def fit(self, spec: ModelSpec, machine: MachineProfile, workload: Workload) -> Fit | None:
        """The placement of ``spec`` the flags ask for, with its bill: -ngl given, that
        placement by hand (``chosen`` False), fitting or not; -ngl on auto with --n-cpu-moe or
        --no-kv-offload given, the fastest placement that fits keeping them as given
        (``fit_placement``; ``chosen`` True); on several devices in a layer split with any of
        them given, the same over the devices. None when no one-device flag is given (auto-fit,
        the devices sharing every layer, or the workload's offload share, is then
        ``placed_summary``'s to make)."""
        if not self.is_manual:
            return None
        n = self.devices
        if self.gpu_layers is None:
            return fit_placement(spec, machine, workload, cpu_moe=self.cpu_moe, kv_on_device=self.kv_on_device,
                                 devices=n)
        given = Placement(gpu_layers=self.gpu_layers, cpu_moe=self.cpu_moe or 0, kv_on_device=self.kv_on_device,
                          devices=n)
        return choose(spec, machine, workload, given)

    def parallel_on(self, machine: MachineProfile) -> Parallel | None:
        """The devices sharing the model, None for one (SpecError when ``machine`` states no
        interconnect and no link bandwidth is given)."""
        if self.devices == 1:
            return None
        return Parallel.on(machine, self.devices, self.parallel, self.link_bandwidth)

    def to_dict(self) -> dict[str, object]:
        """The choice as JSON-ready values (what the window's settings keep)."""
        return {"gpu_layers": self.gpu_layers, "cpu_moe": self.cpu_moe, "kv_on_device": self.kv_on_device,
                "devices": self.devices, "parallel": self.parallel, "link_bandwidth": self.link_bandwidth}

    @classmethod
    def from_dict(cls, data: object) -> PlacementChoice:
        """The choice ``to_dict`` wrote; SpecError for anything else (a key it does not know,
        a value of the wrong kind)."""
        if not isinstance(data, dict):
            raise SpecError(f"placement must be an object, got {type(data).__name__}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(str(k) for k in data if k not in known)
        if unknown:
            raise SpecError(f"placement has unknown field(s): {', '.join(unknown)}")
        return cls(**data)

    def describe(self) -> str:
        """A short text for series labels: the flags, or the devices, or "auto placement"."""
        if self.devices > 1 and not self.is_manual:
            return f"{self.devices} × {mode_text(self.parallel)}"
        if not self.is_manual:
            return "auto placement"
        parts = [f"{self.devices} × {mode_text(self.parallel)},"] if self.devices > 1 else []
        parts.append("-ngl auto" if self.gpu_layers is None else f"-ngl {self.gpu_layers}")
        if self.cpu_moe is not None:
            parts.append(f"--n-cpu-moe {self.cpu_moe}")
        if not self.kv_on_device:
            parts.append("--no-kv-offload")
        return " ".join(parts)


AUTO = PlacementChoice()
