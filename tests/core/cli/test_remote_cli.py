"""``rooflab inspect``, ``predict`` and ``compare`` take a Hub name or a GGUF URL, read from a
local server (HF_ENDPOINT pointed at it): the same figures as the file on disk; one line and
exit 2 for a model the server does not have."""

from __future__ import annotations

import json

import pytest

from rooflab.core.cli.main import main
from tests.factories.gguf_files import tiny_llama
from tests.factories.model_server import hub_file, serve_files


@pytest.fixture(autouse=True)
def local_hub(monkeypatch, tmp_path):
    for var in ("HF_TOKEN", "HF_HOME", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def test_inspect_predict_and_compare_take_remote_models(tmp_path, monkeypatch, capsys):
    path = tiny_llama(hub_file(tmp_path / "hub", "org/Tiny-GGUF", "Tiny-Q4_K_M.gguf"))
    with serve_files(tmp_path / "hub") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        url = f"{served.url}/org/Tiny-GGUF/resolve/main/Tiny-Q4_K_M.gguf"
        assert main(["inspect", "hf:org/Tiny-GGUF/Tiny-Q4_K_M.gguf", "--json"]) == 0
        remote = json.loads(capsys.readouterr().out)
        assert main(["predict", "--model", url, "--machine", "rtx-4090"]) == 0
        predicted = capsys.readouterr().out
        assert main(["compare", "--models", f"hf:org/Tiny-GGUF:Q4_K_M,{path}", "--machines", "rtx-4090",
                     "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        assert main(["inspect", "hf:org/Tiny-GGUF/Tiny-Q8_0.gguf"]) == 2
        err = capsys.readouterr().err
    assert main(["inspect", str(path), "--json"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in remote.items() if k != "source"} == {k: v for k, v in local.items() if k != "source"}
    assert predicted.startswith("tiny-llama on NVIDIA GeForce RTX 4090")
    assert len(rows) == 2 and rows[0]["weight_bytes"] == rows[1]["weight_bytes"]
    assert err == "rooflab: error: hf:org/Tiny-GGUF/Tiny-Q8_0.gguf: Tiny-Q8_0.gguf: not found (404)\n"


def test_fit_ranks_a_named_remote_model_among_the_catalogues(tmp_path, monkeypatch, capsys):
    tiny_llama(hub_file(tmp_path / "hub", "org/Tiny-GGUF", "Tiny-Q4_K_M.gguf"))
    with serve_files(tmp_path / "hub") as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        ref = "hf:org/Tiny-GGUF:Q4_K_M"
        assert main(["fit", "--machine", "rtx-4090", "--model", ref, "--weights", "q8_0", "--ceiling-only"]) == 0
        text = capsys.readouterr().out
        assert main(["fit", "--machine", "rtx-4090", "--model", ref, "--weights", "q8_0", "--ceiling-only",
                     "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
    named = [r for r in rows if r["named"]]
    assert [(r["catalogue_key"], r["model"], r["weights_format"]) for r in named] == [(ref, "tiny-llama", None)]
    assert named[0]["params_total"] < min(r["params_total"] for r in rows if not r["named"])
    assert any(line.split()[1:3] == ["tiny-llama", "*"] for line in text.splitlines())
    assert text.rstrip().endswith("* named with --model, ranked among the catalogue's")
