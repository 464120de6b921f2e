"""llama-bench and llama-batched-bench output -> measured points, in every format they write.

Inputs follow the formats printed by llama.cpp's tools (tools/llama-bench README and
tools/batched-bench/batched-bench.cpp): field names, the "pp512 @ d512" test labels, the
"value ± stddev" t/s cells, and batched-bench's PP | TG | B | N_KV | T_PP s ... columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.io.llamabench import parse_benchmark, read_benchmark


def _row(**fields):
    base = {"build_commit": "8cf427ff", "cpu_info": "AMD Ryzen 7 7800X3D", "backends": "CUDA",
            "model_filename": "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "model_type": "qwen2 7B Q4_K - Medium",
            "n_batch": 2048, "n_ubatch": 512, "n_threads": 8, "type_k": "f16", "type_v": "f16",
            "n_gpu_layers": -1, "n_prompt": 0, "n_gen": 0, "n_depth": 0}
    base.update(fields)
    return base


PP = _row(n_prompt=512, avg_ns=72135640, avg_ts=7100.0, stddev_ts=140.3,
          samples_ns=[74601900, 71632900, 71745200, 71952700, 70745500])
TG = _row(n_gen=128, avg_ns=1076767880, avg_ts=118.88, stddev_ts=1.04,
          samples_ns=[1075361300, 1065089400, 1071761200, 1081934900, 1089692600])
TG_DEEP = _row(n_gen=128, n_depth=4096, avg_ns=1280000000, avg_ts=100.0)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_json_array_pp_and_tg_rows(tmp_path):
    bench = read_benchmark(_write(tmp_path, "b.json", json.dumps([PP, TG, TG_DEEP], indent=2)))
    assert bench.tool == "llama-bench"
    assert bench.kv_type == "f16"
    assert bench.models == ("models/Qwen2.5-7B-Instruct-Q4_K_M.gguf",)
    pre, tg, deep = bench.points
    # prefill: the mean of the repeats (llama-bench's statistic: avg_ns), their standard
    # deviation, and the fastest and the median as extras
    assert (pre.kind, pre.prompt, pre.context, pre.batch) == ("prefill", 512, 0, 1)
    assert pre.seconds == pytest.approx(0.07213564)
    assert pre.stdev == pytest.approx(0.0014538, rel=1e-3)     # sample stdev of the five samples_ns
    assert pre.best == pytest.approx(0.0707455) and pre.median == pytest.approx(0.0717452)
    assert pre.repeats == 5 and pre.test == "pp512"
    # generation: per-step seconds of the mean repeat, at the middle of the 128 steps
    assert (tg.kind, tg.prompt, tg.context, tg.test) == ("decode", 1, 63, "tg128")
    assert tg.seconds == pytest.approx(1.07676788 / 128) and tg.best == pytest.approx(1.0650894 / 128)
    # no samples: the average; depth shifts the context and names the test
    assert deep.context == 4096 + 63 and deep.test == "tg128 @ d4096"
    assert deep.seconds == pytest.approx(1.28 / 128)


def test_jsonl_and_csv_give_the_same_points(tmp_path):
    from_json = parse_benchmark(json.dumps([PP, TG]))
    jsonl = "\n".join(json.dumps(r) for r in (PP, TG)) + "\n"
    from_jsonl = read_benchmark(_write(tmp_path, "b.jsonl", jsonl))
    keys = [k for k in PP if k != "samples_ns"]
    lines = [",".join(keys)] + [",".join(f'"{r[k]}"' for k in keys) for r in (PP, TG)]
    from_csv = read_benchmark(_write(tmp_path, "b.csv", "\n".join(lines) + "\n"))
    assert from_jsonl.points == from_json.points
    # CSV carries no per-repeat samples: the same mean, without the best
    assert [p.kind for p in from_csv.points] == ["prefill", "decode"]
    assert from_csv.points[0].seconds == pytest.approx(0.07213564)
    assert from_csv.points[1].seconds == pytest.approx(1.07676788 / 128)


def test_avg_ts_only_rows(tmp_path):
    rows = [{"model_type": "llama 7B", "n_prompt": 64, "n_gen": 0, "avg_ts": 32.0},
            {"model_type": "llama 7B", "n_prompt": 0, "n_gen": 16, "avg_ts": 16.0}]
    bench = parse_benchmark(json.dumps(rows))
    assert bench.points[0].seconds == pytest.approx(2.0)
    assert bench.points[1].seconds == pytest.approx(1 / 16)


def test_combined_rows_are_skipped_with_a_warning():
    bench = parse_benchmark(json.dumps([PP, _row(n_prompt=512, n_gen=128, avg_ns=1.5e9, avg_ts=400.0)]))
    assert len(bench.points) == 1
    assert any("cannot be split" in w for w in bench.warnings)


def test_rows_differing_in_threads_make_series():
    rows = [_row(n_prompt=64, avg_ts=6.17, n_threads=t) for t in (1, 2)]
    bench = parse_benchmark(json.dumps(rows))
    assert len(bench.series) == 2
    assert all("n_threads=" in label for label in bench.series)


def test_markdown_table_with_depth():
    text = """
| model                          |       size |     params | backend    | ngl |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | --------------: | -------------------: |
| qwen2 7B Q4_K - Medium         |   4.36 GiB |     7.62 B | CUDA       |  -1 |           pp512 |      7340.20 ± 23.45 |
| qwen2 7B Q4_K - Medium         |   4.36 GiB |     7.62 B | CUDA       |  -1 |           tg128 |        120.60 ± 0.59 |
| qwen2 7B Q4_K - Medium         |   4.36 GiB |     7.62 B | CUDA       |  -1 |    pp512 @ d512 |      6425.91 ± 18.88 |
| qwen2 7B Q4_K - Medium         |   4.36 GiB |     7.62 B | CUDA       |  -1 |    tg128 @ d512 |        116.71 ± 0.60 |
| qwen2 7B Q4_K - Medium         |   4.36 GiB |     7.62 B | CUDA       |  -1 |     pp512+tg128 |        400.00 ± 1.00 |

build: 8cf427ff (5163)
"""
    bench = parse_benchmark(text)
    kinds = [(p.kind, p.context) for p in bench.points]
    assert kinds == [("prefill", 0), ("decode", 63), ("prefill", 512), ("decode", 512 + 63)]
    assert bench.points[0].seconds == pytest.approx(512 / 7340.20)
    assert bench.points[3].seconds == pytest.approx(1 / 116.71)
    assert len(bench.warnings) == 1


def test_batched_bench_markdown_with_log_lines():
    text = """main: n_kv_max = 16384, n_batch = 2048, n_ubatch = 512, flash_attn = 0, is_pp_shared = 0

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   128 |    128 |    1 |    256 |    0.108 |  1186.64 |    3.079 |    41.57 |    3.187 |    80.32 |
|   128 |    128 |    8 |   2048 |    0.751 |  1363.27 |    7.344 |   139.43 |    8.095 |   252.99 |
|   128 |    128 |    8 |   1152 |    0.094 |  1363.27 |    7.344 |   139.43 |    8.095 |   252.99 |

llama_perf_context_print:        load time =     512.00 ms
"""
    bench = parse_benchmark(text)
    assert bench.tool == "llama-batched-bench"
    points = bench.points
    assert [(p.kind, p.batch) for p in points] == [("prefill", 1), ("batch", 1), ("prefill", 8), ("batch", 8),
                                                   ("prefill", 1), ("batch", 8)]
    assert points[3].seconds == pytest.approx(7.344 / 128)
    assert points[3].context == 128 + 63
    assert points[2].seconds == pytest.approx(0.751)     # all 8 prompts
    # N_KV = PP + B x TG: one shared prompt, so its prefill is a single sequence
    assert points[4].batch == 1


def test_batched_bench_jsonl():
    lines = [json.dumps({"n_kv_max": 4096, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 0, "is_pp_shared": 0,
                         "n_gpu_layers": 99, "n_threads": 8, "n_threads_batch": 8, "pp": 256, "tg": 64, "pl": b,
                         "n_kv": b * 320, "t_pp": 0.2 * b, "speed_pp": 1280.0, "t_tg": 1.6, "speed_tg": 40.0 * b,
                         "t": 0.2 * b + 1.6, "speed": 1.0}) for b in (1, 4)]
    bench = parse_benchmark("some log line\n" + "\n".join(lines))
    assert [(p.kind, p.batch) for p in bench.points] == [("prefill", 1), ("batch", 1), ("prefill", 4), ("batch", 4)]
    assert bench.points[3].seconds == pytest.approx(1.6 / 64)


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("hello world\n", "not llama-bench output"),
    ("[1, 2, 3]", "array of objects"),
    ("[{\"n_prompt\": 512", "not valid JSON"),
    ('[{"n_prompt": 512, "n_gen": 0}]', "avg_ts"),
    ('[{"n_prompt": 512, "n_gen": 0, "avg_ts": "fast"}]', "not a number"),
    ('[{"n_prompt": 512, "n_gen": 0, "avg_ts": 0}]', "avg_ts must be > 0"),
    ('[{"n_prompt": 0, "n_gen": 0, "avg_ts": 5}]', "no prompt-processing"),
    ('{"n_prompt": 512}\n{oops}\n', "line 2"),
    ("| a | b |\n|---|---|\n| 1 | 2 |\n", "markdown table without"),
    ("|    PP |     TG |    B |\n|---|---|---|\n| 1 | 2 | 3 |\n", "lacks the column"),
])
def test_bad_files_raise_model_file_error(tmp_path, text, reason):
    path = _write(tmp_path, "bad.txt", text)
    with pytest.raises(ModelFileError) as info:
        read_benchmark(path)
    assert info.value.path == str(path)
    assert reason in info.value.reason


def test_unreadable_paths(tmp_path):
    with pytest.raises(ModelFileError, match="no such file"):
        read_benchmark(tmp_path / "missing.json")
    with pytest.raises(ModelFileError, match="is a folder"):
        read_benchmark(tmp_path)
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ModelFileError, match="UTF-8"):
        read_benchmark(binary)


# --- one row at a time (a run being read as it streams) -----------------------------------------

def test_points_from_row_matches_the_file_reader():
    from rooflab.core.io.llamabench_rows import points_from_row

    assert points_from_row(PP) + points_from_row(TG) == parse_benchmark(json.dumps([PP, TG])).points
    assert points_from_row(_row(n_prompt=512, n_gen=128, avg_ts=400.0)) == ()      # pp+tg: no phase
    batched = {"n_kv_max": 4096, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 0, "is_pp_shared": 0,
               "n_gpu_layers": 99, "n_threads": 8, "n_threads_batch": 8, "pp": 256, "tg": 64, "pl": 4,
               "n_kv": 1280, "t_pp": 0.8, "speed_pp": 1280.0, "t_tg": 1.6, "speed_tg": 160.0, "t": 2.4,
               "speed": 533.3}
    assert [(p.kind, p.batch) for p in points_from_row(batched)] == [("prefill", 4), ("batch", 4)]
    assert all(p.settings is None for p in points_from_row(batched))
    for bad in ([1, 2], {"n_prompt": 512, "avg_ts": "fast"}, {"pp": 1, "tg": 1, "pl": 0, "t_pp": 1, "t_tg": 1}):
        with pytest.raises(SpecError):
            points_from_row(bad)


@pytest.mark.parametrize("fields, expected", [
    ({"build_number": 5163}, dict(version="b5163 (8cf427ff)", device="cuda", threads=8, gpu_layers=999, kv_type="f16",
              batch_size=2048, ubatch_size=512, flash_attention=True)),
    ({"backends": "Metal,BLAS", "n_gpu_layers": 99, "flash_attn": False}, dict(device="metal", gpu_layers=99,
                                                                              flash_attention=False)),
    ({"backends": "CPU", "n_gpu_layers": 99, "flash_attn": 1}, dict(device="cpu", gpu_layers=0, flash_attention=True)),
    ({"backends": "ROCm", "type_k": "q8_0", "n_cpu_moe": 12}, dict(device="rocm", kv_type="q8_0/f16", cpu_moe=12)),
    ({"flash_attn": -1, "build_number": None}, dict(flash_attention=True, version="8cf427ff")),
])
def test_points_from_row_stamps_the_rows_settings(fields, expected):
    from rooflab.core.io.llamabench_rows import points_from_row
    from rooflab.core.values.measured import EngineSettings

    base = EngineSettings(engine="llama-bench", version="from --version", flash_attention=True, kv_type="q4_0")
    (point,) = points_from_row({**PP, **fields}, base)
    settings = point.settings
    assert settings.engine == "llama-bench"
    for name, value in expected.items():
        assert getattr(settings, name) == value, name
