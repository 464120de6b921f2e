"""What the operating system says about this machine: memory free and total, last-level cache,
processor name. Standard library only (no psutil); torch only for an accelerator's memory."""

from __future__ import annotations

import ctypes
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from rooflab.core.values.machine import INT8_MATRIX_PATH, INT8_PATH

_MEMINFO = Path("/proc/meminfo")


def _meminfo_bytes(field: str) -> float | None:
    """A /proc/meminfo field ("MemAvailable", "MemTotal") in bytes, None when absent."""
    try:
        text = _MEMINFO.read_text(encoding="ascii")
    except OSError:
        return None
    match = re.search(rf"^{field}:\s+(\d+)\s*kB", text, re.MULTILINE)
    return float(match.group(1)) * 1024 if match else None


def _sysctl(name: str) -> str | None:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _macos_available() -> float | None:
    """Free + inactive + speculative pages from vm_stat: what macOS can hand out without swapping."""
    try:
        out = subprocess.run(["vm_stat"], capture_output=True, text=True, timeout=5, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    page = re.search(r"page size of (\d+) bytes", out)
    size = int(page.group(1)) if page else 4096
    pages = 0
    for label in ("Pages free", "Pages inactive", "Pages speculative"):
        match = re.search(rf"^{label}:\s+(\d+)", out, re.MULTILINE)
        pages += int(match.group(1)) if match else 0
    return float(pages * size) if pages else None


class _MemoryStatus(ctypes.Structure):
    _fields_ = [("dwLength", ctypes.c_ulong), ("dwMemoryLoad", ctypes.c_ulong),
                ("ullTotalPhys", ctypes.c_ulonglong), ("ullAvailPhys", ctypes.c_ulonglong),
                ("ullTotalPageFile", ctypes.c_ulonglong), ("ullAvailPageFile", ctypes.c_ulonglong),
                ("ullTotalVirtual", ctypes.c_ulonglong), ("ullAvailVirtual", ctypes.c_ulonglong),
                ("ullAvailExtendedVirtual", ctypes.c_ulonglong)]


def _windows_memory() -> tuple[float, float] | None:
    """(available, total) bytes from GlobalMemoryStatusEx."""
    if sys.platform != "win32":
        return None
    status = _MemoryStatus()
    status.dwLength = ctypes.sizeof(_MemoryStatus)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):  # type: ignore[attr-defined,unused-ignore]
        return None
    return float(status.ullAvailPhys), float(status.ullTotalPhys)


def system_memory_total() -> float | None:
    """Bytes of physical memory, None when the system does not say."""
    if sys.platform.startswith("linux"):
        return _meminfo_bytes("MemTotal")
    if sys.platform == "darwin":
        value = _sysctl("hw.memsize")
        return float(value) if value and value.isdigit() else None
    win = _windows_memory()
    if win:
        return win[1]
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def system_memory_available() -> float | None:
    """Bytes the system can give a new allocation without swapping, None when unknown.

    Linux: MemAvailable; macOS: vm_stat's free, inactive and speculative pages; Windows:
    GlobalMemoryStatusEx; elsewhere half the physical memory, as a cautious guess."""
    if sys.platform.startswith("linux"):
        value = _meminfo_bytes("MemAvailable")
        if value is not None:
            return value
    elif sys.platform == "darwin":
        value = _macos_available()
        if value is not None:
            return value
    win = _windows_memory()
    if win:
        return win[0]
    total = system_memory_total()
    return total / 2 if total else None


def free_and_total_memory(device: str) -> tuple[float | None, float | None]:
    """(available, total) bytes on ``device`` ("cpu", "cuda", "cuda:1", "mps")."""
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index or 0
        cuda_free, cuda_total = torch.cuda.mem_get_info(index)
        return float(cuda_free), float(cuda_total)
    if device.startswith("mps"):
        import torch

        # unified memory: the GPU's share is capped by Metal's recommended working set
        cap = float(torch.mps.recommended_max_memory())
        used = float(torch.mps.current_allocated_memory())
        system = system_memory_available()
        room = cap - used
        return (min(room, system) if system else room), cap
    return system_memory_available(), system_memory_total()


def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache in bytes (32 MiB when the system does not say)."""
    sizes: list[int] = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text(encoding="ascii").strip()
        except OSError:
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", text)
        if match:
            scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2)]
            sizes.append(int(match.group(1)) * scale)
    if not sizes and sys.platform == "darwin":
        for name in ("hw.l3cachesize", "hw.l2cachesize"):
            value = _sysctl(name)
            if value and value.isdigit() and int(value) > 0:
                sizes.append(int(value))
                break
    return max(sizes) if sizes else 32 << 20


def cpu_name() -> str:
    """The processor's marketing name when the system gives one."""
    if sys.platform.startswith("linux"):
        try:
            text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
        if match:
            return match.group(1).strip()
    if sys.platform == "darwin":
        value = _sysctl("machdep.cpu.brand_string")
        if value:
            return value
    return platform.processor() or platform.machine() or "unknown CPU"


def _sibling_sets(allowed: set[int]) -> set[str]:
    """The distinct thread-sibling masks of the CPUs in ``allowed`` (Linux sysfs): one per core."""
    sets: set[str] = set()
    for cpu in sorted(allowed):
        try:
            text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings").read_text(encoding="ascii")
        except OSError:
            return set()
        sets.add(text.strip())
    return sets


def _cpuinfo_cores(allowed: set[int]) -> int:
    """Distinct (physical id, core id) pairs of /proc/cpuinfo among ``allowed``, 0 if unknown."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    cores = set()
    for block in text.split("\n\n"):
        fields = dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        processor = fields.get("processor", "")
        if processor.isdigit() and "core id" in fields and int(processor) in allowed:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
    return len(cores)


def physical_cores() -> int:
    """Cores this process may run on, each counted once however many hardware threads it has:
    what llama-bench takes for its default thread count (``common_cpu_get_num_math``: the
    distinct thread-sibling sets). Linux: sysfs topology, else /proc/cpuinfo's core ids, of the
    CPUs in this process's affinity; macOS: the performance cores; elsewhere every CPU. (A
    hybrid Intel CPU's efficiency cores are counted, which llama-bench leaves out.)"""
    try:
        allowed = set(os.sched_getaffinity(0))
    except AttributeError:                      # not on Linux
        allowed = set()
    if allowed:
        found = len(_sibling_sets(allowed)) or _cpuinfo_cores(allowed)
        if found:
            return found
        return len(allowed)
    if sys.platform == "darwin":
        for name in ("hw.perflevel0.physicalcpu", "hw.physicalcpu"):
            value = _sysctl(name)
            if value and value.isdigit() and int(value) > 0:
                return int(value)
    return os.cpu_count() or 1


#: headroom over the clock /proc/cpuinfo states, which is the nominal one on a VM and the current
#: one elsewhere: no core boosts 1.5x past it
BOOST_HEADROOM = 1.5


def _cpuinfo() -> str | None:
    """/proc/cpuinfo's text; None off Linux or where it cannot be read."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def cpu_fp32_bound(threads: int) -> float | None:
    """FLOP/s no fp32 multiply on ``threads`` threads of this CPU can beat: its physical cores
    among them x its highest clock x two FMA units of the widest vector its flags name (AVX-512:
    16 lanes, AVX2: 8, else 4) x 2 FLOP. An upper bound from the processor's own description,
    not a figure to reach; None off Linux or when /proc/cpuinfo says nothing usable."""
    text = _cpuinfo()
    if text is None:
        return None
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)$", text, re.MULTILINE)]
    if not flags or not mhz:
        return None
    try:
        top = float(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) * 1e3
    except (OSError, ValueError):
        top = max(mhz) * 1e6 * BOOST_HEADROOM
    names = set(flags.group(1).split())
    lanes = 16 if "avx512f" in names else 8 if "avx2" in names else 4
    cores = max(1, min(threads, physical_cores() or threads))
    return cores * top * lanes * 2 * 2


def cpu_int8_path(text: str | None = None) -> float:
    """This CPU's int8 dot-product rate over its FP32 FMA rate: ``INT8_MATRIX_PATH`` on a Linux
    Arm core whose features name i8mm (Neoverse V1 and V2 issue SMMLA at SDOT's rate), else
    ``INT8_PATH`` (AVX2, AVX-512 VNNI, SDOT; Apple's cores, off Linux, gain nothing from i8mm).
    ``text``: a /proc/cpuinfo to read instead of this machine's."""
    text = _cpuinfo() if text is None else text
    if text is None:
        return INT8_PATH
    features = re.search(r"^Features\s*:\s*(.+)$", text, re.MULTILINE)
    return INT8_MATRIX_PATH if features and "i8mm" in features.group(1).split() else INT8_PATH
