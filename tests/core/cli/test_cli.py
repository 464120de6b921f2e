"""The command line: stable JSON keys, lesson figures end to end, one-line errors, exit 2."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rooflab.core.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


INSPECT_KEYS = {"name", "architecture", "layers", "params_total", "params_per_token", "file_bytes",
                "weight_bytes_read_per_token", "kv_bytes_per_token", "kv_bytes_per_token_windowed",
                "sliding_window", "experts", "experts_used", "groups"}


def test_inspect_json(capsys):
    code, out, _ = run(capsys, "inspect", "qwen3-8b-q4_k_m", "--json")
    d = json.loads(out)
    assert code == 0 and INSPECT_KEYS <= d.keys()
    assert d["weight_bytes_read_per_token"] == 4_671_768_832
    assert d["kv_bytes_per_token"] == 147_456 and d["sliding_window"] is None
    names = [g["name"] for g in d["groups"]]
    assert names == ["embedding", "attention", "feed_forward", "output", "norms"]
    for g in d["groups"]:
        assert {"name", "types", "params", "bytes", "bytes_read_per_token"} <= g.keys()


def test_inspect_gpt_oss_windowed(capsys):
    d = json.loads(run(capsys, "inspect", "gpt-oss-120b-mxfp4", "--json")[1])
    assert (d["kv_bytes_per_token"], d["kv_bytes_per_token_windowed"], d["sliding_window"]) == (36864, 36864, 128)
    assert (d["experts"], d["experts_used"]) == (128, 4)


def test_inspect_weights_and_kv_type(capsys):
    d = json.loads(run(capsys, "inspect", "qwen3-0.6b", "--weights", "fp32", "--kv-type", "f32", "--json")[1])
    assert d["weight_bytes_read_per_token"] == 2_384_199_680 and d["kv_bytes_per_token"] == 229_376


def test_inspect_text(capsys):
    code, out, _ = run(capsys, "inspect", "qwen3-30b-a3b-q4_k_m")
    assert code == 0 and "8 of 128 routed" in out and "experts" in out


def test_predict_json_reproduces_lesson(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "dgx-spark",
                       "--contexts", "4096", "--batches", "1,4,16,64", "--json")
    d = json.loads(out)
    assert code == 0
    assert {"model", "machine", "prefill_crossover_tokens", "batch_crossover", "decode", "prefill"} <= d.keys()
    assert d["machine"]["bandwidth_gb_per_s"] == 273
    assert {"name", "bandwidth_gb_per_s", "peak_tflops", "memory_gb"} <= d["machine"].keys()
    row_keys = {"context", "batch", "bytes_per_step", "kv_bytes_per_step", "tokens_per_second_per_sequence",
                "tokens_per_second_total", "experts_touched_per_layer", "memory_bytes", "fits", "bound"}
    assert all(row_keys <= r.keys() for r in d["decode"])
    each = [round(r["tokens_per_second_per_sequence"], 1) for r in d["decode"]]
    total = [round(r["tokens_per_second_total"]) for r in d["decode"]]
    assert each == [51.7, 38.5, 19.0, 6.3] and total == [52, 154, 305, 403]
    assert all({"prompt", "seconds", "tokens_per_second", "bound"} <= r.keys() for r in d["prefill"])


def test_predict_bandwidth_override(capsys):
    d = json.loads(run(capsys, "predict", "--model", "qwen3-30b-a3b-q4_k_m", "--machine", "m4-max",
                       "--bandwidth", "256", "--contexts", "4096", "--batches", "1", "--json")[1])
    assert round(d["decode"][0]["tokens_per_second_per_sequence"], 1) == 110.2


def test_predict_efficiency_flags(capsys):
    # roofline lesson example 14: 70 % of bandwidth, 50 % of compute, RTX 4090, 8B at 4.5 bpw
    d = json.loads(run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090",
                       "--bandwidth-efficiency", "0.7", "--compute-efficiency", "0.5",
                       "--contexts", "0", "--batches", "1", "--json")[1])
    assert d["machine"]["efficiency"]["bandwidth"] == 0.7
    expected = 0.7 * 1008e9 / d["model"]["weight_bytes_read_per_token"]
    assert d["decode"][0]["tokens_per_second_per_sequence"] == pytest.approx(expected, rel=1e-6)


def test_predict_memory_override_and_fit(capsys):
    d = json.loads(run(capsys, "predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-5090",
                       "--contexts", "4096", "--batches", "1", "--json")[1])
    assert d["decode"][0]["fits"] is False
    d = json.loads(run(capsys, "predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-5090",
                       "--memory-gb", "128", "--contexts", "4096", "--batches", "1", "--json")[1])
    assert d["decode"][0]["fits"] is True


def test_predict_csv(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen3-0.6b", "--machine", "desktop-ddr5", "--csv",
                       "--contexts", "0,1024", "--batches", "1,2", "--prompts", "1,64")
    blocks = out.strip().split("\ntable,")
    decode = list(csv.DictReader(io.StringIO(blocks[0])))
    assert code == 0 and len(decode) == 4 and decode[0]["table"] == "decode"
    prefill = list(csv.DictReader(io.StringIO("table," + blocks[1])))
    assert [r["prompt"] for r in prefill] == ["1", "64"]


def test_predict_csv_writes_byte_counts_as_integers(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen3-30b-a3b-q4_k_m", "--machine", "rtx-4090", "--csv",
                       "--contexts", "0,1024", "--batches", "1,3", "--prompts", "1")
    decode = list(csv.DictReader(io.StringIO(out.strip().split("\ntable,")[0])))
    assert code == 0 and len(decode) == 4
    for row in decode:
        for key in ("bytes_per_step", "kv_bytes_per_step", "memory_bytes"):
            assert row[key].isdigit(), (key, row[key])


def test_predict_text(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090")
    assert code == 0 and "TTFT" in out and "n* =" in out


def test_models_and_machines(capsys):
    models = json.loads(run(capsys, "models", "--json")[1])
    keys = {m["key"] for m in models}
    assert {"qwen3-0.6b", "qwen3-8b-q4_k_m", "qwen3-30b-a3b-q4_k_m", "gpt-oss-120b-mxfp4", "llama-3.1-8b"} <= keys
    machines = json.loads(run(capsys, "machines", "--json")[1])
    keys = {m["key"] for m in machines}
    assert {"dgx-spark", "ryzen-ai-max-395", "m4-max", "m4-pro", "rtx-5090", "rtx-4090", "a100-sxm-80gb",
            "h100-sxm", "desktop-ddr5"} <= keys
    assert run(capsys, "machines")[0] == 0 and run(capsys, "models")[0] == 0


def test_machines_lists_the_measured_machine_marked_as_measured(capsys):
    from rooflab.core.io.presets import save_measured_machine
    from rooflab.core.values.machine import MachineProfile

    assert all(not m["measured"] for m in json.loads(run(capsys, "machines", "--json")[1]))
    save_measured_machine(MachineProfile(name="This machine, measured", key="measured", bandwidth=20e9,
                                         peak_flops={"fp32": 3e11}, default_dtype="fp32", memory=16e9))
    machines = json.loads(run(capsys, "machines", "--json")[1])
    measured = [m for m in machines if m["measured"]]
    assert [m["key"] for m in measured] == ["measured"] and measured[0]["bandwidth_gb_per_s"] == 20
    line = [row for row in run(capsys, "machines")[1].splitlines() if row.startswith("measured ")]
    assert len(line) == 1 and line[0].endswith("This machine, measured (measured)")


@pytest.mark.parametrize("argv, fragment", [
    (["inspect", "/no/such/model.gguf"], "model.gguf"),
    (["inspect", "unknown-model"], "unknown model"),
    (["predict", "--model", "qwen3-0.6b", "--machine", "no-such-box"], "unknown machine"),
    (["predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--kv-type", "f7"], "--kv-type must be"),
    (["predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--batch", "0"], "--batch must be"),
    (["inspect", "qwen3-0.6b", "--weights", "q9"], "unknown weight format"),
])
def test_errors_are_one_line_exit_2(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and fragment in err and err.startswith("rooflab: error:")


@pytest.mark.parametrize("argv, suggestion", [
    (["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx4090"], "did you mean rtx-4090?"),
    (["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "RTX 4090"], "did you mean rtx-4090?"),
    (["inspect", "qwen3-8b-q4km"], "did you mean qwen3-8b-q4_k_m?"),
    (["inspect", "gpt-oss-20b"], "did you mean gpt-oss-20b-mxfp4"),
])
def test_a_misspelled_name_gets_a_suggestion(capsys, argv, suggestion):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert suggestion in err
    assert len(err) < 1200                  # the whole catalogue is no longer pasted into the line


@pytest.mark.parametrize("name, content", [("notes.txt", b"meeting at 3\n"), ("chart.png", b"\x89PNG\r\n\x1a\n")])
def test_a_file_that_is_no_model_says_what_rooflab_opens(capsys, tmp_path, name, content):
    # "notes.txt: is not valid JSON" and "chart.png: is not UTF-8 text" told the user nothing useful
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run(capsys, "inspect", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{name}: is neither a GGUF file nor a Hugging Face config.json" in err


@pytest.mark.parametrize("option, value, fragment", [
    ("--batches", "0", "[1, 65,536]"),              # a batch of 0 printed a row of 0 tokens/s
    ("--batches", "70000", "[1, 65,536]"),
    ("--prompts", "0", "[1, 16,777,216]"),           # silently became a 1-token prompt
    ("--contexts", "-1", "[0, 16,777,216]"),
    ("--batches", "2.5", "integers"),               # silently became 2
    ("--contexts", "", "at least one value"),
    ("--prompts", "a,b", "comma-separated integers"),
])
def test_bad_sweep_values_are_refused(capsys, option, value, fragment):
    with pytest.raises(SystemExit) as stop:
        main(["predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", option, value])
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == ""
    assert option in err and fragment in err


@pytest.mark.parametrize("argv", [
    ["predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--batches", "0"],
    ["predict", "--machine", "rtx-4090"],                                  # --model missing
    ["predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--bandwidth", "fast"],
    ["no-such-command"],
    ["measure", "model", "qwen3-0.6b", "--dtype", "fp8"],
])
def test_argument_errors_are_one_line(capsys, argv):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    _, err = capsys.readouterr()
    assert stop.value.code == 2
    assert err.count("\n") == 1 and "error:" in err and "--help" in err and "usage:" not in err


def test_sweep_values_at_the_limits_are_accepted(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--json",
                       "--batches", "1,65536", "--contexts", "0,16777216", "--prompts", "1,1e3")
    rows = json.loads(out)
    assert code == 0 and {r["batch"] for r in rows["decode"]} == {1, 65536}
    assert [r["prompt"] for r in rows["prefill"]] == [1, 1000]


def test_compute_dtype_is_one_the_machine_lists(capsys):
    def ttft(*dtype: str) -> float:             # compute-bound at 2,048 tokens: 1 / the dtype's peak
        code, out, err = run(capsys, "predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--json", *dtype)
        assert code == 0, err
        return json.loads(out)["request"]["ttft_seconds"]

    # a GeForce card's FP16 at FP16 accumulate (llama.cpp's rate) is 4x its FP32, twice its BF16 (FP32 accumulate)
    assert ttft("--dtype", "FP32") == ttft("--dtype", "fp32") == pytest.approx(2 * ttft("--dtype", "bf16"))
    assert ttft("--dtype", "bf16") == pytest.approx(2 * ttft("--dtype", "fp16"), rel=1e-3)
    code, out, err = run(capsys, "predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--dtype", "fp4")
    assert code == 2 and out == "" and "lists no fp4 peak" in err and "fp16" in err
    assert ttft("--dtype", "fp4", "--peak-tflops", "660.6") == pytest.approx(ttft("--dtype", "fp16") / 2, rel=1e-3)


def test_predict_text_at_the_extremes_reads_in_days_and_names_the_right_limit(capsys):
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090",
                       "--context", "16777216", "--batch", "65536")
    request = next(line for line in out.splitlines() if line.strip().startswith("TTFT"))
    assert code == 0 and "days" in request and " ms " not in request      # was "TTFT 8,051,521,381.6 ms"
    assert "bandwidth-bound at every batch up to 65,536" in out          # said "below 16M"
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "dgx-spark")
    assert "TTFT 237.5 ms (compute-bound), TPOT 18.29 ms (memory-bound), end to end 4.90 s" in out   # README


def test_bad_profile_file(tmp_path, capsys):
    bad = tmp_path / "box.json"
    bad.write_text('{"name": "box", "bandwidth": -1, "peak_flops": {"fp16": 1}, "memory": 1}')
    code, _, err = run(capsys, "predict", "--model", "qwen3-0.6b", "--machine", str(bad))
    assert code == 2 and "box.json" in err and "bandwidth" in err


def test_module_entry_has_no_traceback(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    proc = subprocess.run([sys.executable, "-m", "rooflab.core.cli.main", "inspect", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "broken.gguf" in proc.stderr


def test_predict_text_warns_past_trained_context(capsys):
    # on stderr, before any figure (tests/core/cli/test_past_training_cli.py: every form)
    err = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "dgx-spark", "--context", "100000")[2]
    assert "warning: 102,304 tokens is past the 40,960 Qwen3-8B Q4_K_M was trained for" in err
    _, out, err = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "dgx-spark")
    assert "trained for" not in out + err


# --- numbers, grids and output (issue 11) ----------------------------------------------------------

@pytest.mark.parametrize("option, value, fragment", [
    ("--bandwidth", "1e-308", "between 0.001 and 10,000,000 GB/s"),      # printed inf, --json crashed
    ("--bandwidth", "1e308", "between"),                                 # said "must be > 0, got inf"
    ("--peak-tflops", "1e-308", "TFLOP/s"),
    ("--peak-tflops", "1e308", "TFLOP/s"),
    ("--memory-gb", "1e-308", "GB"),
    ("--bandwidth", "nan", "between"),
    ("--bandwidth-efficiency", "1e-308", "between"),
    ("--compute-efficiency", "1e308", "between"),
    ("--step-overhead-ms", "-1", "between"),
    ("--step-overhead-ms", "inf", "between"),
])
def test_machine_numbers_outside_a_sane_range_are_refused(capsys, option, value, fragment):
    with pytest.raises(SystemExit) as stop:
        main(["predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--json", option, value])
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == "" and err.count("\n") == 1
    assert option in err and fragment in err


def test_machine_numbers_at_the_range_ends_give_finite_json(capsys):
    for extreme in (["--bandwidth", "0.001", "--peak-tflops", "0.000001"],
                    ["--bandwidth", "1e7", "--peak-tflops", "1e10", "--memory-gb", "1e9"]):
        code, out, err = run(capsys, "predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--json", *extreme)
        assert code == 0, err
        assert "Infinity" not in out and "NaN" not in out
        json.loads(out)


def test_grid_size_is_capped_with_a_clear_message(capsys):
    many = ",".join(str(i) for i in range(12_000))
    code, out, err = run(capsys, "predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090",
                         "--contexts", many, "--batches", ",".join(str(i) for i in range(1, 12_001)))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "144,000,000 decode rows" in err and "at most 100,000" in err


def test_print_json_never_emits_non_finite_numbers(capsys):
    from rooflab.core.cli.output import print_json

    print_json({"a": float("inf"), "b": [float("nan")], "c": 1.0})
    assert json.loads(capsys.readouterr().out) == {"a": None, "b": [None], "c": 1.0}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("extra", [[], ["--json"], ["--contexts", ",".join(str(i) for i in range(2000))]])
def test_output_to_a_full_disk_is_one_line(extra):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "rooflab.core.cli.main", "predict", "--model", "qwen3-0.6b",
                               "--machine", "rtx-4090", *extra], stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "No space left on device" in proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


def test_terminal_escapes_from_files_are_not_printed(tmp_path, capsys):
    from tests.factories.gguf_files import llama_tensors, llm_meta, write_gguf

    evil = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
    meta = llm_meta("llama", layers=1, hidden=256, heads=2) | {"general.name": f"tiny{evil}"}
    gguf = write_gguf(tmp_path / "tiny.gguf", "llama", llama_tensors(layers=1), meta)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": f"qwen3{evil}", "hidden_size": 256, "num_hidden_layers": 1,
                                  "num_attention_heads": 4, "vocab_size": 1000}))
    profile = tmp_path / "box.json"
    profile.write_text(json.dumps({"name": f"box{evil}", "bandwidth": 1e11, "peak_flops": {"fp16": 1e13},
                                   "memory": 1e10}))
    for argv in (["inspect", str(gguf), "--tensors"], ["inspect", str(config)],
                 ["predict", "--model", str(gguf), "--machine", str(profile)]):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        assert not any(c in out + err for c in "\x1b\x07\x9b"), argv


EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m"


def _raw_controls(text: str) -> bool:
    return any(c in text for c in "\x1b\x07\x9b")


def test_terminal_escapes_in_a_machine_profile_error_or_an_argument_are_not_printed(tmp_path, capsys):
    """Issue 15: a profile's name reached the error line raw (its bandwidth was refused), and so
    did --dtype and an unrecognised argument."""
    profile = tmp_path / "box.json"
    profile.write_text(json.dumps({"name": f"box{EVIL}", "bandwidth": -1, "peak_flops": {"fp16": 1e13},
                                   "memory": 1e10}))
    for argv, fragment in ((["predict", "--model", "qwen3-0.6b", "--machine", str(profile)], "bandwidth"),
                           (["predict", "--model", "qwen3-0.6b", "--machine", "rtx-4090", "--dtype", f"fp8{EVIL}"],
                            "--dtype"),
                           (["models", EVIL], "unrecognized")):
        try:
            code = main(argv)
        except SystemExit as stop:          # argparse's refusal
            code = stop.code
        out, err = capsys.readouterr()
        assert code == 2 and fragment in err and err.count("\n") == 1, argv
        assert not _raw_controls(out + err), argv


def test_terminal_escapes_in_a_stored_engine_calibration_are_not_printed(capsys):
    """The "expected with ..." lines print a kept calibration's engine label, machine, models and
    notes: text from a file in the data folder (issue 15)."""
    from rooflab.core.calibration import store
    from rooflab.core.values.calibration import EngineCalibration, Rates

    rates = Rates(bandwidth={"q4_k": 500e9}, prefill_flops={"q4_k": 80e12}, decode_flops={"q4_k": 50e12},
                  cache_bandwidth=500e9, pass_seconds=1e-3)
    store.save_engine_calibration(EngineCalibration(
        machine_key="rtx-4090", machine_name=f"box{EVIL}", engine_key=f"llama.cpp{EVIL}",
        engine_label=f"llama.cpp{EVIL}", settings={"backend": f"cuda{EVIL}"}, date=f"2026-01-01{EVIL}",
        models=(f"a{EVIL}", "b"), machine_bandwidth=1008e9, machine_flops=165e12, central=rates,
        notes=(f"note{EVIL}",)))
    for extra in ((), ("--csv",), ("--json",)):
        code, out, err = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", *extra)
        assert code == 0 and not _raw_controls(out + err), extra
    code, out, _ = run(capsys, "predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090")
    assert "expected with llama.cpp]0;pwned[2J31m" in out         # shown, less its control characters


def test_measure_import_of_an_absurd_prompt_is_one_line(tmp_path, capsys):
    from tests.factories.fuzz import BENCH_ROWS

    rows = [{**r, "n_prompt": 1e300} if r["n_prompt"] else r for r in BENCH_ROWS]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(rows))
    code, out, err = run(capsys, "measure", "import", str(path), "--model", "qwen3-0.6b", "--machine", "rtx-4090",
                         "--json", "--no-save")
    assert code == 2 and out == "" and err.count("\n") == 1 and "n_prompt" in err


@pytest.mark.parametrize(("machine", "flags"), [("rtx-4090", ()), ("rtx-4090", ("--gpu-layers", "10")),
                                               ("rtx-4090", ("--gpu-layers", "20"))])
def test_predict_says_why_in_the_numbers_panels_words(capsys, machine, flags):
    """One text builder: the "why" block of ``rooflab predict`` is ``report.explain``'s rows, the
    sentences the numbers panel shows, for the model placed as the same flags place it."""
    from rooflab.core.app.figures import summarise
    from rooflab.core.io import load_model
    from rooflab.core.io.presets import load_machine
    from rooflab.core.predict.choice import PlacementChoice
    from rooflab.core.report.chart_types import Scenario
    from rooflab.core.report.explain import explain
    from rooflab.core.values.defaults import DEFAULT_WORKLOAD

    code, out, _ = run(capsys, "predict", "--model", "gpt-oss-120b-mxfp4", "--machine", machine, *flags)
    assert code == 0
    choice = PlacementChoice(gpu_layers=int(flags[1])) if flags else PlacementChoice()
    sc = Scenario(model=load_model("gpt-oss-120b-mxfp4"), machine=load_machine(machine), workload=DEFAULT_WORKLOAD,
                  placement=choice)
    rows = explain(sc, summarise(sc))
    why = out[out.index("\nwhy:\n"):]
    assert len(rows) >= (2 if rows[0].value == "does NOT fit" else 8)
    for row in rows:
        assert f"  {row.label} ({row.value}): {row.sentence}" in why
