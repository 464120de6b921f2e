"""Every import format checks the model it names against the model on screen (issue 18): a
llama-bench markdown table of Qwen3-8B imported with ``--model gpt-oss-20b-mxfp4`` exited 0 and
stored a fit that ``predict --calibrated`` then applied; JSON input was already refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooflab.core.cli.main import main
from rooflab.core.errors import SpecError
from rooflab.core.io import load_model
from rooflab.core.io.bench_model import weight_format_name
from rooflab.core.io.llamabench import parse_benchmark
from rooflab.core.measure import workflow
from rooflab.core.values.machine import MachineProfile

HERE = MachineProfile(name="this machine", bandwidth=40e9, peak_flops={"fp32": 2e11, "bf16": 4e11}, memory=64e9,
                      default_dtype="fp32", kind="cpu", key="measured")
QWEN3_8B_MARKDOWN = """\
| model                  |       size |     params | backend | threads |  test |          t/s |
| ---------------------- | ---------: | ---------: | ------- | ------: | ----: | -----------: |
| qwen3 8B Q4_K - Medium |   4.68 GiB |     8.19 B | CPU     |       2 | pp512 | 21.84 ± 0.31 |
| qwen3 8B Q4_K - Medium |   4.68 GiB |     8.19 B | CPU     |       2 | tg128 |  4.12 ± 0.02 |
"""
ROW = {"model_type": "qwen3 8B Q4_K - Medium", "model_size": 5027783488, "model_n_params": 8190735360,
       "n_threads": 2, "n_prompt": 512, "n_gen": 0, "n_depth": 0, "avg_ns": 23443223000, "avg_ts": 21.84}
BATCHED_WITH_LOG = """\
print_info: arch             = qwen3
print_info: file type   = Q4_K - Medium
print_info: file size   = 4.68 GiB (4.91 BPW)
print_info: model params     = 8.19 B
main: n_kv_max = 4096, n_batch = 2048, n_ubatch = 512, flash_attn = 0, is_pp_shared = 0

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   128 |    128 |    1 |    256 |    5.860 |    21.84 |   31.068 |     4.12 |   36.928 |     6.93 |
"""


def _formats() -> dict[str, str]:
    keys = list(ROW)
    return {"markdown": QWEN3_8B_MARKDOWN, "json": json.dumps([ROW]), "jsonl": json.dumps(ROW) + "\n",
            "csv": ",".join(keys) + "\n" + ",".join(str(ROW[k]) for k in keys) + "\n",
            "batched-bench with its load log": BATCHED_WITH_LOG}


@pytest.mark.parametrize("fmt", list(_formats()))
def test_every_format_names_its_model(fmt):
    model = parse_benchmark(_formats()[fmt]).model
    assert model.architecture == "qwen3" and model.weight_format == "Q4_K_M"
    assert model.params == pytest.approx(8.19e9, rel=0.01) and model.size == pytest.approx(5.03e9, rel=0.01)


@pytest.mark.parametrize("fmt", list(_formats()))
def test_every_format_is_refused_for_another_model(fmt):
    bench = parse_benchmark(_formats()[fmt], "qwen3-8b.txt")
    with pytest.raises(SpecError) as caught:
        workflow.check_bench_model(bench, load_model("gpt-oss-20b-mxfp4"))
    line = str(caught.value)
    assert "\n" not in line and line.startswith("qwen3-8b.txt: the benchmark ran qwen3 ")
    assert "architecture qwen3 (this model is gpt_oss)" in line and "weights in Q4_K_M" in line
    workflow.check_bench_model(bench, load_model("qwen3-8b-q4_k_m"))            # the model it ran passes


def test_the_issues_markdown_import_is_refused_on_the_command_line(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(tmp_path / "data"))
    table = tmp_path / "qwen3-8b.md"
    table.write_text(QWEN3_8B_MARKDOWN, encoding="utf-8")
    code = main(["measure", "import", str(table), "--model", "gpt-oss-20b-mxfp4", "--machine", "desktop-ddr5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "not gpt-oss" in err[0].lower().replace("_", "-")
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*calibration*"))


@pytest.mark.parametrize("ftype, name", [("Q4_K - Medium", "Q4_K_M"), ("MXFP4 MoE", "MXFP4"), ("Q8_0", "Q8_0"),
                                         ("IQ2_XXS - 2.0625 bpw", "IQ2_XXS"), ("all F32", "F32"),
                                         ("Q3_K - Large", "Q3_K_L"), ("BF16 (guessed)", "BF16"), ("?", "")])
def test_llama_cpp_file_types_read_as_weight_formats(ftype, name):
    assert weight_format_name(ftype) == name
