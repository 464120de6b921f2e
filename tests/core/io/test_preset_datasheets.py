"""Every machine preset's figures against the document it cites.

The table holds each figure as its source states it, in the source's units: bandwidth in GB/s
(10**9 bytes/s), device memory in GB as vendors mean it for memory (GiB, 2**30 bytes), peak
FLOP/s dense (no sparsity) in TFLOP/s, and the device-to-device link in GB/s per direction.
Where a datasheet gives only a sparse figure the table holds half of it, and where a figure is
derived (cores x clock x per-core rate) the table holds the derivation's result; the preset's
own ``sources`` text says which. A preset that gains a dtype needs a row here too."""

from __future__ import annotations

import pytest

from rooflab.core.io.presets import list_presets, load_machine
from rooflab.core.values.machine import BACKENDS

GB, GIB, TFLOPS = 1e9, 2**30, 1e12
REL = 0.01          # 1 %: datasheets round to three or four figures

# key: (document named first in the preset's sources, bandwidth GB/s, memory GB, {dtype: TFLOP/s},
#       link GB/s per direction (0 = none stated), backend)
DATASHEETS: dict[str, tuple[str, float, float, dict[str, float], float, str]] = {
    # NVIDIA GeForce: BF16/FP8 tensor rates with FP32 accumulate; fp16 at FP16 accumulate (twice it: the rate
    # llama.cpp's cuBLAS F16 path runs at, which its published prompts outran at FP32 accumulate)
    "rtx-3060-12gb": ("NVIDIA GeForce RTX 3060 family specifications", 360, 12,
                      {"fp32": 3584 * 2 * 1.777e-3, "fp16": 2 * (28 * 512 * 1.777e-3), "bf16": 28 * 512 * 1.777e-3,
                       "int8": 28 * 2048 * 1.777e-3}, 32, "cuda"),
    "rtx-3090": ("NVIDIA Ampere GA102 GPU Architecture whitepaper", 936, 24,
                 {"fp32": 35.6, "fp16": 2 * (71), "bf16": 71, "int8": 284}, 56.25, "cuda"),
    "rtx-4060-ti-16gb": ("NVIDIA GeForce RTX 4060 Ti specifications", 288, 16,
                         {"fp32": 4352 * 2 * 2.535e-3, "fp16": 2 * (34 * 512 * 2.535e-3), "bf16": 34 * 512 * 2.535e-3,
                          "fp8": 353 / 4, "int8": 353 / 2}, 16, "cuda"),
    "rtx-4080": ("NVIDIA Ada Lovelace GPU Architecture whitepaper", 716.8, 16,
                 {"fp32": 48.7, "fp16": 2 * (97.5), "bf16": 97.5, "fp8": 194.9, "int8": 389.9}, 32, "cuda"),
    "rtx-4090": ("NVIDIA Ada Lovelace GPU Architecture whitepaper", 1008, 24,
                 {"fp32": 82.6, "fp16": 2 * (165.2), "bf16": 165.2, "fp8": 330.3}, 32, "cuda"),
    "rtx-5080": ("NVIDIA RTX Blackwell GPU Architecture whitepaper", 960, 16,
                 {"fp32": 56.3, "fp16": 2 * (112.6), "bf16": 112.6, "fp8": 225.1}, 64, "cuda"),
    "rtx-5090": ("NVIDIA RTX Blackwell GPU Architecture whitepaper", 1792, 32,
                 # FP4: NVIDIA's 3,352 AI TOPS is FP4 with sparsity: dense is half (not a quarter)
                 {"fp32": 104.8, "fp16": 2 * (209.5), "bf16": 209.5, "fp8": 419, "fp4": 3352 / 2}, 64, "cuda"),
    # Turing at its reference boost; Pascal's 'fp16' is its INT8 DP4A rate, as the published twin's peak_fp16
    "rtx-3070": ("NVIDIA GeForce RTX 3070 specifications", 448, 8,
        {"fp32": 5888 * 2 * 1.725e-3, "fp16": 2 * (46 * 512 * 1.725e-3), "bf16": 46 * 512 * 1.725e-3,
         "int8": 46 * 2048 * 1.725e-3}, 32, "cuda"),
    "rtx-3080": ("NVIDIA GeForce RTX 3080 10GB specifications", 760, 10,
        {"fp32": 8704 * 2 * 1.71e-3, "fp16": 2 * (68 * 512 * 1.71e-3), "bf16": 68 * 512 * 1.71e-3,
         "int8": 68 * 2048 * 1.71e-3}, 32, "cuda"),
    "rtx-3080-ti": ("NVIDIA GeForce RTX 3080 Ti specifications", 912, 12,
        {"fp32": 10240 * 2 * 1.665e-3, "fp16": 2 * (80 * 512 * 1.665e-3), "bf16": 80 * 512 * 1.665e-3,
         "int8": 80 * 2048 * 1.665e-3}, 32, "cuda"),
    "rtx-3090-ti": ("NVIDIA GeForce RTX 3090 Ti specifications", 1008, 24,
        {"fp32": 10752 * 2 * 1.86e-3, "fp16": 2 * (84 * 512 * 1.86e-3), "bf16": 84 * 512 * 1.86e-3,
         "int8": 84 * 2048 * 1.86e-3}, 56.25, "cuda"),
    "rtx-4070-ti": ("NVIDIA GeForce RTX 4070 Ti specifications", 504, 12,
        {"fp32": 7680 * 2 * 2.61e-3, "fp16": 2 * (60 * 512 * 2.61e-3), "bf16": 60 * 512 * 2.61e-3,
         "fp8": 60 * 1024 * 2.61e-3, "int8": 60 * 2048 * 2.61e-3}, 32, "cuda"),
    "rtx-4070-ti-super": ("NVIDIA GeForce RTX 4070 Ti SUPER specifications", 672, 16,
        {"fp32": 8448 * 2 * 2.61e-3, "fp16": 2 * (66 * 512 * 2.61e-3), "bf16": 66 * 512 * 2.61e-3,
         "fp8": 66 * 1024 * 2.61e-3, "int8": 66 * 2048 * 2.61e-3}, 32, "cuda"),
    "rtx-4080-super": ("NVIDIA GeForce RTX 4080 SUPER specifications", 736, 16,
        {"fp32": 10240 * 2 * 2.55e-3, "fp16": 2 * (80 * 512 * 2.55e-3), "bf16": 80 * 512 * 2.55e-3,
         "fp8": 80 * 1024 * 2.55e-3, "int8": 80 * 2048 * 2.55e-3}, 32, "cuda"),
    "rtx-5070": ("NVIDIA RTX Blackwell GPU Architecture whitepaper", 672, 12,
        {"fp32": 6144 * 2 * 2.512e-3, "fp16": 2 * (48 * 512 * 2.512e-3), "bf16": 48 * 512 * 2.512e-3,
         "fp8": 48 * 1024 * 2.512e-3}, 64, "cuda"),
    "rtx-5070-ti": ("NVIDIA RTX Blackwell GPU Architecture whitepaper", 896, 16,
        {"fp32": 8960 * 2 * 2.452e-3, "fp16": 2 * (70 * 512 * 2.452e-3), "bf16": 70 * 512 * 2.452e-3,
         "fp8": 70 * 1024 * 2.452e-3}, 64, "cuda"),
    "rtx-2080-ti": ("NVIDIA Turing GPU Architecture whitepaper", 616, 11,
        {"fp32": 4352 * 2 * 1.545e-3, "fp16": 2 * (68 * 512 * 1.545e-3), "int8": 68 * 2048 * 1.545e-3}, 50, "cuda"),
    "gtx-1080-ti": ("NVIDIA GeForce GTX 1080 Ti specifications", 484, 11,
        {"fp32": 3584 * 2 * 1.582e-3, "fp16": 3584 * 8 * 1.582e-3, "int8": 3584 * 8 * 1.582e-3}, 16, "cuda"),
    # NVIDIA workstation and data centre
    "rtx-6000-ada": ("NVIDIA RTX 6000 Ada Generation datasheet", 960, 48,
                     {"fp32": 91.1, "fp8": 1457 / 2, "int8": 1457 / 2, "fp16": 1457 / 4, "bf16": 1457 / 4}, 32, "cuda"),
    "rtx-pro-6000-blackwell": ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet", 1792, 96,
                               {"fp32": 125, "fp4": 4000 / 2, "fp8": 4000 / 4, "fp16": 4000 / 8, "bf16": 4000 / 8},
                               64, "cuda"),
    "l40s": ("NVIDIA L40S datasheet", 864, 48,
             {"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05, "fp8": 733, "int8": 733}, 32, "cuda"),
    "a100-pcie-40gb": ("NVIDIA A100 Tensor Core GPU datasheet", 1555, 40,
                       {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624}, 300, "cuda"),
    "a100-pcie-80gb": ("NVIDIA A100 Tensor Core GPU datasheet", 1935, 80,
                       {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624}, 300, "cuda"),
    "a100-sxm-80gb": ("NVIDIA A100 Tensor Core GPU datasheet", 2039, 80,
                      {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624}, 300, "cuda"),
    "h100-pcie": ("NVIDIA H100 Tensor Core GPU datasheet", 2000, 80,
                  {"fp32": 51, "tf32": 756 / 2, "bf16": 1513 / 2, "fp16": 1513 / 2, "fp8": 3026 / 2,
                   "int8": 3026 / 2}, 300, "cuda"),
    "h100-nvl": ("NVIDIA H100 Tensor Core GPU datasheet", 3900, 94,
                 {"fp32": 60, "tf32": 835 / 2, "bf16": 1671 / 2, "fp16": 1671 / 2, "fp8": 3341 / 2,
                  "int8": 3341 / 2}, 300, "cuda"),
    "h100-sxm": ("NVIDIA H100 Tensor Core GPU datasheet", 3350, 80,
                 {"fp32": 67, "tf32": 989 / 2, "bf16": 1979 / 2, "fp16": 1979 / 2, "fp8": 3958 / 2}, 450, "cuda"),
    "h200": ("NVIDIA H200 Tensor Core GPU datasheet", 4800, 141,
             {"fp32": 67, "tf32": 989 / 2, "bf16": 1979 / 2, "fp16": 1979 / 2, "fp8": 3958 / 2, "int8": 3958 / 2},
             450, "cuda"),
    "b200": ("NVIDIA DGX B200 datasheet", 64000 / 8, 1440 / 8,
             {"fp4": 144000 / 8 / 2, "fp8": 72000 / 8 / 2, "fp16": 36000 / 8 / 2, "bf16": 36000 / 8 / 2}, 900, "cuda"),
    "dgx-spark": ("NVIDIA DGX Spark datasheet", 273, 128,
                  {"fp4": 1000 / 2, "fp8": 1000 / 4, "fp16": 1000 / 8, "bf16": 1000 / 8, "fp32": 31}, 25, "cuda"),
    "jetson-agx-orin-64gb": ("NVIDIA Jetson AGX Orin Series datasheet", 204.8, 64,
                             {"fp32": 5.3, "int8": 170 / 2, "fp16": 170 / 4, "bf16": 170 / 4}, 1.25, "cuda"),
    # Pascal P40: 'fp16' is the INT8 DP4A rate, as its published twin's peak_fp16
    "titan-v": ("NVIDIA TITAN V specifications", 652.8, 12,
        {"fp32": 5120 * 2 * 1.455e-3, "fp16": 110}, 16, "cuda"),
    "rtx-a6000": ("NVIDIA RTX A6000 datasheet", 768, 48,
        {"fp32": 38.7, "fp16": 309.7 / 2, "bf16": 309.7 / 2}, 56.25, "cuda"),
    "rtx-a5000": ("NVIDIA RTX A5000 datasheet", 768, 24,
        {"fp32": 27.8, "fp16": 222.2 / 2, "bf16": 222.2 / 2}, 56.25, "cuda"),
    "rtx-a4000": ("NVIDIA RTX A4000 datasheet", 448, 16,
        {"fp32": 19.2, "fp16": 153.4 / 2, "bf16": 153.4 / 2}, 32, "cuda"),
    "a40": ("NVIDIA A40 datasheet", 696, 48,
        {"fp32": 37.4, "tf32": 74.8, "bf16": 149.7, "fp16": 149.7, "int8": 299.3}, 56.25, "cuda"),
    "a30": ("NVIDIA A30 Tensor Core GPU datasheet", 933, 24,
        {"fp32": 10.3, "tf32": 82, "bf16": 165, "fp16": 165, "int8": 330}, 100, "cuda"),
    "tesla-t4": ("NVIDIA T4 Tensor Core GPU datasheet", 320, 16,
        {"fp32": 8.1, "fp16": 65, "int8": 130}, 16, "cuda"),
    "tesla-p40": ("NVIDIA Tesla P40 datasheet", 346, 24,
        {"fp32": 12, "fp16": 47, "int8": 47}, 16, "cuda"),
    "v100-pcie-32gb": ("NVIDIA Tesla V100 datasheet", 900, 32,
        {"fp32": 14, "fp16": 112}, 16, "cuda"),
    # AMD
    "mi300x": ("AMD Instinct MI300X datasheet", 5300, 192,
               {"fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
               128 / 2, "rocm"),
    "ryzen-ai-max-395": ("AMD Ryzen AI Max+ 395 specifications", 256, 128,
                         {"fp32": 40 * 64 * 2 * 2 * 2.9e-3, "fp16": 2 * 40 * 64 * 2 * 2 * 2.9e-3,
                          "bf16": 2 * 40 * 64 * 2 * 2 * 2.9e-3}, 5, "vulkan"),
    "ryzen-ai-max-390": ("AMD Ryzen AI Max series specifications", 256, 128,
                         {"fp32": 32 * 64 * 2 * 2 * 2.8e-3, "fp16": 2 * 32 * 64 * 2 * 2 * 2.8e-3,
                          "bf16": 2 * 32 * 64 * 2 * 2 * 2.8e-3}, 5, "vulkan"),
    "ryzen-ai-max-385": ("AMD Ryzen AI Max series specifications", 256, 128,
                         {"fp32": 32 * 64 * 2 * 2 * 2.8e-3, "fp16": 2 * 32 * 64 * 2 * 2 * 2.8e-3,
                          "bf16": 2 * 32 * 64 * 2 * 2 * 2.8e-3}, 5, "vulkan"),
    # AMD Radeon and Instinct: 'Peak Half Precision' as AMD states it, FP32 half of it (packed FP16)
    "rx-7900-xtx": ("AMD Radeon RX 7900 XTX specifications (amd.com)", 960, 24,
        {"fp32": 122.8 / 2, "fp16": 122.8}, 32, "rocm"),
    "rx-7900-xt": ("AMD Radeon RX 7900 XT specifications (amd.com)", 800, 20,
        {"fp32": 103 / 2, "fp16": 103}, 32, "rocm"),
    "rx-7900-gre": ("AMD Radeon RX 7900 GRE specifications (amd.com)", 576, 16,
        {"fp32": 91.96 / 2, "fp16": 91.96}, 32, "rocm"),
    "rx-7800-xt": ("AMD Radeon RX 7800 XT specifications (amd.com)", 624, 16,
        {"fp32": 74.65 / 2, "fp16": 74.65}, 32, "rocm"),
    "rx-6900-xt": ("AMD Radeon RX 6900 XT specifications (amd.com)", 512, 16,
        {"fp32": 46.08 / 2, "fp16": 46.08}, 32, "rocm"),
    "rx-6800-xt": ("AMD Radeon RX 6800 XT specifications (amd.com)", 512, 16,
        {"fp32": 41.47 / 2, "fp16": 41.47}, 32, "rocm"),
    "rx-6800": ("AMD Radeon RX 6800 specifications (amd.com)", 512, 16,
        {"fp32": 32.33 / 2, "fp16": 32.33}, 32, "rocm"),
    "rx-6700-xt": ("AMD Radeon RX 6700 XT specifications (amd.com)", 384, 12,
        {"fp32": 26.43 / 2, "fp16": 26.43}, 32, "rocm"),
    "radeon-pro-w7800": ("AMD Radeon PRO W7800 48GB specifications (amd.com)", 864, 48,
        {"fp32": 90.5 / 2, "fp16": 90.5}, 32, "rocm"),
    "mi50": ("AMD Radeon Instinct MI50 specifications (amd.com)", 1024, 32,
        {"fp32": 13.3, "fp16": 26.5, "int8": 53}, 32, "rocm"),
    "rx-7900-xtx-vulkan": ("AMD Radeon RX 7900 XTX specifications (amd.com)", 960, 24,
        {"fp32": 122.8 / 2, "fp16": 122.8}, 32, "vulkan"),
    "rx-6800-xt-vulkan": ("AMD Radeon RX 6800 XT specifications (amd.com)", 512, 16,
        {"fp32": 41.47 / 2, "fp16": 41.47}, 32, "vulkan"),
    "rx-9070-xt-vulkan": ("AMD Radeon RX 9070 XT specifications (amd.com)", 644.6, 16,
        {"fp32": 97.3 / 2, "fp16": 97.3}, 64, "vulkan"),
    # Intel Arc: FP16 on the XMX engines half the INT8 TOPS; FP32 Xe-cores x 128 lanes x 2 x graphics clock
    "arc-a770-vulkan": ("Intel Arc A770 specifications (intel.com)", 560, 16,
        {"fp32": 32 * 256 * 2.1e-3, "fp16": 512 * 256 * 2.1e-3 / 2, "int8": 512 * 256 * 2.1e-3}, 32, "vulkan"),
    "arc-b580-vulkan": ("Intel Arc B580 specifications (intel.com)", 456, 12,
        {"fp32": 20 * 256 * 2.67e-3, "fp16": 233 / 2, "int8": 233}, 16, "vulkan"),
    "arc-pro-b60-vulkan": ("Intel Arc Pro B60 specifications (intel.com)", 456, 24,
        {"fp32": 20 * 256 * 2.4e-3, "fp16": 197 / 2, "int8": 197}, 32, "vulkan"),
    "arc-pro-b50-vulkan": ("Intel Arc Pro B50 specifications (intel.com)", 224, 16,
        {"fp32": 16 * 256 * 2.6e-3, "fp16": 170 / 2, "int8": 170}, 32, "vulkan"),
    # Apple: M1 family from Apple's 2.6 TFLOPS for the 8-core M1, M2 from 27.2 for the 76-core M2 Ultra,
    # M3 estimated (cores x 128 x 2 x 1.398 GHz)
    "m1-pro": ("Apple M1 Pro press release", 200, 32, {"fp32": 2.6 * 2, "fp16": 2.6 * 2}, 5, "metal"),
    "m1-max": ("Apple M1 Max press release", 400, 64, {"fp32": 2.6 * 4, "fp16": 2.6 * 4}, 5, "metal"),
    "m1-ultra": ("Apple M1 Ultra press release", 800, 128, {"fp32": 2.6 * 8, "fp16": 2.6 * 8}, 5, "metal"),
    "m2-pro": ("Apple M2 Pro press release", 200, 32, {"fp32": 27.2 * 19 / 76, "fp16": 27.2 * 19 / 76}, 5, "metal"),
    "m2-max": ("Apple M2 Max press release", 400, 96, {"fp32": 27.2 / 2, "fp16": 27.2 / 2}, 5, "metal"),
    "m2-ultra": ("Apple M2 Ultra press release", 800, 192, {"fp32": 27.2, "fp16": 27.2}, 5, "metal"),
    "m3-pro": ("Apple MacBook Pro (M3 Pro) tech specs", 150, 36,
               {"fp32": 18 * 256 * 1.398e-3, "fp16": 18 * 256 * 1.398e-3}, 5, "metal"),
    "m3-max": ("Apple MacBook Pro (M3 Max", 400, 128,
               {"fp32": 40 * 256 * 1.398e-3, "fp16": 40 * 256 * 1.398e-3}, 5, "metal"),
    "m3-ultra": ("Apple Mac Studio (2025) press release", 819, 512,
                 {"fp32": 80 * 256 * 1.398e-3, "fp16": 80 * 256 * 1.398e-3}, 10, "metal"),
    "m4-pro": ("Apple: 273 GB/s", 273, 64, {"fp32": 8.5, "fp16": 8.5, "bf16": 8.5}, 10, "metal"),
    "m4-max": ("Apple: 546 GB/s", 546, 128, {"fp32": 17, "fp16": 17, "bf16": 17}, 10, "metal"),
    # CPUs
    # a CPU's int8: the dot-product path its quantized multiplies run on, 4x its FP32 FMA rate
    "desktop-ddr4": ("JEDEC DDR4-3200", 3200 * 8 * 2 / 1000, 32,
                     {"fp32": 8 * 4 * 2 * 8 * 2 / 1000, "int8": 4 * 8 * 4 * 2 * 8 * 2 / 1000}, 0, "cpu"),
    "desktop-ddr5": ("JEDEC DDR5-5600", 5600 * 8 * 2 / 1000, 64,
                     {"fp32": 1.024, "fp16": 1.024, "bf16": 1.024, "int8": 4 * 1.024}, 0, "cpu"),
    "epyc-9654": ("AMD EPYC 9004 series (Genoa) specifications", 4800 * 8 * 12 / 1000, 768,
                  {"fp32": 96 * 2.4 * 2 * 8 * 2 / 1000, "int8": 4 * 96 * 2.4 * 2 * 8 * 2 / 1000}, 0, "cpu"),
    "xeon-8480": ("Intel Xeon Platinum 8480+", 4800 * 8 * 8 / 1000, 512,
                  {"fp32": 56 * 2.0 * 2 * 16 * 2 / 1000, "bf16": 56 * 2.0 * 1024 / 1000,
                   "int8": 4 * 56 * 2.0 * 2 * 16 * 2 / 1000}, 0, "cpu"),      # VNNI, not AMX: see its source
    "reference-cpu": ("roofline lesson example 7", 12.8, 32, {"fp32": 0.2, "int8": 0.8}, 0, "cpu"),
}


def test_the_table_covers_every_preset():
    assert sorted(DATASHEETS) == sorted(m.key for m in list_presets())


@pytest.mark.parametrize("key", sorted(DATASHEETS))
def test_preset_matches_its_datasheet(key):
    document, bandwidth_gb, memory_gb, tflops, link_gb, backend = DATASHEETS[key]
    m = load_machine(key)
    cited = " ".join(m.sources.values())
    assert document in cited, f"{key}: sources do not name {document!r}"
    assert m.bandwidth == pytest.approx(bandwidth_gb * GB, rel=REL)
    assert m.memory == memory_gb * GIB
    assert set(m.peak_flops) == set(tflops), f"{key}: every dtype needs a datasheet row"
    for dtype, figure in tflops.items():
        assert m.peak_flops[dtype] == pytest.approx(figure * TFLOPS, rel=REL), (key, dtype)
    assert m.interconnect_bandwidth == pytest.approx(link_gb * GB, rel=REL)
    assert m.backend == backend


@pytest.mark.parametrize("key", sorted(DATASHEETS))
def test_preset_sources_every_figure(key):
    m = load_machine(key)
    assert m.backend in BACKENDS
    for figure in ("bandwidth", "peak_flops", "memory", "offload", "backend"):
        assert m.sources.get(figure, "").strip(), f"{key}: no source for {figure}"
    assert m.has_offload
    if m.has_interconnect:
        assert m.interconnect_name and m.sources.get("interconnect"), key


# a machine measured in the course, not sold: the lesson's measurement is its datasheet
MEASURED_IN_A_LESSON = frozenset({"reference-cpu"})
LESSON = ("lesson", "roofline lesson", "prefill lesson")


@pytest.mark.parametrize("key", sorted(DATASHEETS))
def test_presets_cite_the_vendor_before_the_course(key):
    """Issue 20: a figure's source names the vendor's datasheet (or the standard it follows)
    first; a course lesson that uses the same figure may follow as a second note."""
    if key in MEASURED_IN_A_LESSON:
        return
    m = load_machine(key)
    for figure in ("bandwidth", "peak_flops", "memory", "offload"):
        text = m.sources.get(figure, "").strip().lower()
        assert not text.startswith(LESSON), f"{key}: {figure} cites a lesson first: {text[:80]!r}"
