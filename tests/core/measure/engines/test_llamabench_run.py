"""Driving a user's own llama-bench / llama-batched-bench: exact command lines from a plan, and
a run against an executable fake that replays real JSONL rows with delays (points stream live,
cancel ends the whole process group, a crash keeps earlier points and gives one line, garbage
gives a clear error). A last test drives the real llama-bench when one is on PATH.

The fake tool and llama.cpp's own example rows it replays: tests/factories/llama_tools.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from rooflab.core.errors import Cancelled, MeasurementError, SpecError
from rooflab.core.jobs import run_job
from rooflab.core.measure.engines.llamabench.plan import (
    BatchedBenchPlan,
    BenchBinary,
    EngineOptions,
    LlamaBenchPlan,
    batched_bench_argv,
    find_binary,
    llama_bench_argv,
    probe_binary,
)
from rooflab.core.measure.engines.llamabench.run import BenchRunError, run_batched_bench, run_llama_bench
from tests.factories.llama_tools import (
    BATCHED_HELP,
    BATCHED_ROW,
    BENCH_HELP,
    OLD_BATCHED_HELP,
    OLD_BENCH_HELP,
    OLD_ROW,
    PP_ROW,
    TG_ROW,
    fake_tool,
    row_lines,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the fake tools are #! scripts and use process groups")

@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")              # the fake never reads it; the run only checks it exists
    return path


def _gone(pid: int) -> bool:
    """No such process, or only a zombie left for its new parent to reap."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout
    return state.strip().startswith("Z") or not state.strip()


def _wait_gone(pid: int, seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.02)
    return _gone(pid)


def _samples(job) -> list:
    items: list = []
    result = run_job(job, items.append)
    return [p.sample for p in items if p.sample is not None], result


# --- command lines ------------------------------------------------------------------------------

def test_llama_bench_argv_is_exact():
    binary = BenchBinary(path="/opt/llama/llama-bench", tool="llama-bench", help=BENCH_HELP)
    options = EngineOptions(threads=8, gpu_layers=99, cpu_moe=4, flash_attention=True, cache_type_k="q8_0",
                            cache_type_v="q8_0", batch_size=2048, ubatch_size=512)
    plan = LlamaBenchPlan(model="/m/q.gguf", prompts=(512, 1024), gen=128, depths=(0, 4096), repetitions=3,
                          options=options)
    assert llama_bench_argv(binary, plan) == [
        "/opt/llama/llama-bench", "-m", "/m/q.gguf", "-p", "512,1024", "-n", "128", "-d", "0,4096",
        "-t", "8", "-ngl", "99", "-ncmoe", "4", "-fa", "1", "-ctk", "q8_0", "-ctv", "q8_0",
        "-b", "2048", "-ub", "512", "-r", "3", "-o", "jsonl"]
    assert plan.expected_rows == 6
    # defaults leave the build's own threads, layers and batches; no depth sweep, no -d (old builds lack it)
    old = BenchBinary(path="llama-bench", tool="llama-bench", help=OLD_BENCH_HELP)
    assert llama_bench_argv(old, LlamaBenchPlan(model="q.gguf", prompts=(), gen=16)) == [
        "llama-bench", "-m", "q.gguf", "-p", "0", "-n", "16", "-fa", "0", "-ctk", "f16", "-ctv", "f16",
        "-r", "5", "-o", "jsonl"]


def test_batched_bench_argv_is_exact_for_new_and_old_flash_attention():
    plan = BatchedBenchPlan(model="q.gguf", prompts=(128, 512), gen=(32,), batches=(1, 4, 16),
                            options=EngineOptions(threads=4, gpu_layers=0, flash_attention=True, cpu_moe=2))
    new = BenchBinary(path="bb", tool="llama-batched-bench", help=BATCHED_HELP)
    # -c: the largest combination, 16 sequences x (512 + 32) tokens
    assert batched_bench_argv(new, plan) == [
        "bb", "-m", "q.gguf", "-c", "8704", "-npp", "128,512", "-ntg", "32", "-npl", "1,4,16",
        "-t", "4", "-ngl", "0", "-ncmoe", "2", "-fa", "on", "-ctk", "f16", "-ctv", "f16",
        "--output-format", "jsonl"]
    old = BenchBinary(path="bb", tool="llama-batched-bench", help=OLD_BATCHED_HELP)
    shared = BatchedBenchPlan(model="q.gguf", prompts=(128,), gen=(32,), batches=(8,), shared_prompt=True)
    assert batched_bench_argv(old, shared) == [
        "bb", "-m", "q.gguf", "-c", "384", "-npp", "128", "-ntg", "32", "-npl", "8", "-pps",
        "-ctk", "f16", "-ctv", "f16", "--output-format", "jsonl"]
    flash = BatchedBenchPlan(model="q.gguf", options=EngineOptions(flash_attention=True))
    assert "-fa" in batched_bench_argv(old, flash) and "on" not in batched_bench_argv(old, flash)


def test_flags_a_build_lacks_are_refused_in_one_line():
    old = BenchBinary(path="llama-bench", tool="llama-bench", version="b4000 (abcdef0)", help=OLD_BENCH_HELP)
    with pytest.raises(MeasurementError, match=r"b4000 \(abcdef0\) has no --n-depth"):
        llama_bench_argv(old, LlamaBenchPlan(model="q.gguf", depths=(0, 512)))
    with pytest.raises(MeasurementError, match="--n-cpu-moe"):
        llama_bench_argv(old, LlamaBenchPlan(model="q.gguf", options=EngineOptions(cpu_moe=3)))
    too_old = BenchBinary(path="bb", tool="llama-batched-bench", help="-fa, --flash-attn  enable")
    with pytest.raises(MeasurementError, match="--output-format"):
        batched_bench_argv(too_old, BatchedBenchPlan(model="q.gguf"))


@pytest.mark.parametrize("build, field", [
    (lambda: LlamaBenchPlan(model="q.gguf", prompts=(0,)), "prompts"),
    (lambda: LlamaBenchPlan(model="q.gguf", prompts=(), gen=0), "nothing to measure"),
    (lambda: LlamaBenchPlan(model="q.gguf", depths=()), "depths"),
    (lambda: LlamaBenchPlan(model="q.gguf", depths=512), "depths"),
    (lambda: LlamaBenchPlan(model="q.gguf", repetitions=0), "repetitions"),
    (lambda: LlamaBenchPlan(model="q.gguf", options=EngineOptions(cache_type_k="f32")), "cache_type_k"),
    (lambda: EngineOptions(threads=0), "threads"),
    (lambda: EngineOptions(cache_type_v="q3_k"), "cache_type_v"),
    (lambda: BatchedBenchPlan(model="q.gguf", batches=(0,)), "batches"),
    (lambda: BatchedBenchPlan(model="q.gguf", prompts=(512,), gen=(32,), batches=(8,), context=1024), "context"),
])
def test_plans_validate_their_fields(build, field):
    with pytest.raises(SpecError, match=field):
        build()


def test_plan_lists_become_tuples():
    plan = LlamaBenchPlan(model="q.gguf", prompts=[64, 128], depths=[0])
    assert plan.prompts == (64, 128) and plan.depths == (0,)
    hash(plan)


# --- finding and probing ------------------------------------------------------------------------

def test_find_binary(tmp_path, monkeypatch):
    with pytest.raises(MeasurementError, match="no such file"):
        find_binary("llama-bench", tmp_path / "nope" / "llama-bench")
    plain = tmp_path / "plain" / "llama-bench"
    plain.parent.mkdir()
    plain.write_text("not executable")
    with pytest.raises(MeasurementError, match="not an executable file"):
        find_binary("llama-bench", plain)
    fake = fake_tool(tmp_path, [])
    assert find_binary("llama-bench", fake) == fake
    assert find_binary("llama-bench", tmp_path) == fake          # a build/bin folder
    with pytest.raises(MeasurementError, match="holds no executable llama-batched-bench"):
        find_binary("llama-batched-bench", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_binary("llama-bench") == fake
    monkeypatch.setenv("PATH", str(tmp_path / "plain"))
    with pytest.raises(MeasurementError, match="llama-bench is not on PATH"):
        find_binary("llama-bench")
    with pytest.raises(SpecError):
        find_binary("llama-server")


def test_probe_reads_help_and_version(tmp_path):
    bench = probe_binary(fake_tool(tmp_path, []))
    assert bench.tool == "llama-bench" and bench.version == ""       # llama-bench's rows carry it
    assert bench.supports("--n-depth") and bench.supports("-ncmoe") and not bench.supports("--no-such")
    batched = probe_binary(fake_tool(tmp_path, [], name="llama-batched-bench", help_text=BATCHED_HELP))
    assert batched.tool == "llama-batched-bench"
    assert batched.version == "b5163 (8cf427ff)"


# --- running ------------------------------------------------------------------------------------

def test_points_stream_while_the_tool_runs(tmp_path, model):
    steps = [["err", "load_backend: loaded CUDA backend"], *row_lines(PP_ROW), ["sleep", 1.0],
             *row_lines(TG_ROW, OLD_ROW)]
    job = run_llama_bench(LlamaBenchPlan(model=str(model), prompts=(512,), gen=128), fake_tool(tmp_path, steps))
    first = next(p for p in job if p.sample is not None)
    pid = int((tmp_path / "pid").read_text())
    assert not _gone(pid), "the first point must arrive while llama-bench still runs"
    assert first.sample.kind == "prefill" and first.sample.prompt == 512
    assert first.sample.seconds == pytest.approx(0.07213564)         # the mean of the five samples_ns
    assert first.sample.best == pytest.approx(0.0707455) and first.sample.test == "pp512"
    rest, run = _samples(job)
    assert [p.kind for p in rest] == ["decode", "decode"]
    assert run.rows == 3 and len(run.points) == 3 and _gone(pid)
    settings = first.sample.settings
    assert (settings.engine, settings.version, settings.device) == ("llama-bench", "b5163 (8cf427ff)", "cuda")
    assert (settings.threads, settings.batch_size, settings.ubatch_size, settings.kv_type) == (8, 2048, 512, "f16")
    assert settings.gpu_layers == 999                                 # -1: every layer
    assert settings.flash_attention is False                          # "auto" in the row: the plan's -fa 0
    assert rest[1].settings.gpu_layers == 99                          # the older row's own value
    assert json.loads((tmp_path / "argv.json").read_text())[-2:] == ["-o", "jsonl"]


def test_cancel_ends_the_process_group_promptly(tmp_path, model):
    steps = [*row_lines(PP_ROW), ["sleep", 60]]
    cancel = threading.Event()
    job = run_llama_bench(LlamaBenchPlan(model=str(model)), fake_tool(tmp_path, steps, grandchild=True,
                                                                  ignore_term=True), cancel)
    assert next(p for p in job if p.sample is not None).sample.kind == "prefill"
    pid, grandchild = int((tmp_path / "pid").read_text()), int((tmp_path / "grandchild").read_text())
    cancel.set()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        next(job)
    # SIGTERM is ignored by the fake: SIGKILL follows after the 0.5 s grace (slack for a busy machine)
    assert time.monotonic() - started < 2.0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)                                               # reaped: no zombie left
    assert _wait_gone(grandchild), "a process the tool started outlived the cancel"


def test_a_process_left_holding_the_output_does_not_hang_the_run(tmp_path, model):
    # the tool exits, but a process it started keeps its stdout open: the run still ends
    fake = fake_tool(tmp_path, [*row_lines(PP_ROW, TG_ROW), ["exit", 0]], grandchild=True)
    started = time.monotonic()
    points, run = _samples(run_llama_bench(LlamaBenchPlan(model=str(model)), fake))
    assert len(points) == 2 and time.monotonic() - started < 8
    assert _wait_gone(int((tmp_path / "grandchild").read_text()))


def test_closing_the_job_also_ends_the_tool(tmp_path, model):
    job = run_llama_bench(LlamaBenchPlan(model=str(model)), fake_tool(tmp_path, [*row_lines(PP_ROW), ["sleep", 60]]))
    next(p for p in job if p.sample is not None)
    pid = int((tmp_path / "pid").read_text())
    job.close()                                                       # a window that drops the job
    assert _wait_gone(pid, 1.5)


@pytest.mark.parametrize("tail, status", [
    ([["err", "GGML_ASSERT(ggml_nbytes(src0) <= INT_MAX) failed"], ["err", "#0  0x00007f in ggml_abort ()"],
      ["signal", 6]], "was killed by SIGABRT"),
    ([["err", "main: error: failed to create context with model 'q.gguf'"], ["err", "llama_perf: done"],
      ["exit", 1]], "exited with status 1"),
])
def test_a_crash_keeps_the_points_and_gives_one_line(tmp_path, model, tail, status):
    seen: list = []
    job = run_llama_bench(LlamaBenchPlan(model=str(model)), fake_tool(tmp_path, [*row_lines(PP_ROW), *tail]))
    with pytest.raises(BenchRunError) as info:
        run_job(job, seen.append)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("llama-bench ") and status in message and "after 1 of 2 rows" in message
    assert ("GGML_ASSERT" in message) or ("failed to create context" in message)
    assert [p.kind for p in info.value.points] == ["prefill"]
    assert [p.sample for p in seen if p.sample is not None] == list(info.value.points)


@pytest.mark.parametrize("steps, reason", [
    ([["out", '{"n_prompt": 512, "avg_ts": \n']], "malformed JSONL row"),
    ([["out", "[1, 2, 3]\n"], ["out", '"just a string"\n'], ["exit", 0]], "ended without printing"),
    ([["out", "x" * 100_000 + "\n"]], "longer than 64 KiB"),
    ([["out", "\x00\xff garbage\n" * 1200]], "lines that are not JSONL rows"),
    ([["out", '{"n_prompt": 512, "n_gen": 0, "avg_ts": "fast"}\n']], "cannot read"),
])
def test_garbage_output_gives_a_clear_error(tmp_path, model, steps, reason):
    ending = [] if steps[-1][0] == "exit" else [["sleep", 30]]      # garbage, then hang
    job = run_llama_bench(LlamaBenchPlan(model=str(model)), fake_tool(tmp_path, [*steps, *ending]))
    started = time.monotonic()
    with pytest.raises(BenchRunError, match=reason) as info:
        run_job(job)
    assert "\n" not in str(info.value)
    assert time.monotonic() - started < 10          # the tool was stopped, not waited for
    assert _wait_gone(int((tmp_path / "pid").read_text()))


def test_a_missing_model_is_refused_before_running(tmp_path):
    with pytest.raises(MeasurementError, match="no such model file"):
        run_job(run_llama_bench(LlamaBenchPlan(model=str(tmp_path / "none.gguf")), fake_tool(tmp_path, [])))
    assert not (tmp_path / "pid").exists()


def test_batched_bench_rows_give_prefill_and_batch_points(tmp_path, model):
    steps = [["err", "build: 5163 (8cf427ff) with cc (GCC) 13.2.0 for x86_64-linux-gnu"],
             ["err", "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4080) - 15000 MiB free"],
             ["out", "\n"], *row_lines(BATCHED_ROW), ["sleep", 0.2], *row_lines({**BATCHED_ROW, "pl": 1, "n_kv": 2176}),
             ["out", "\n\n"]]
    fake = fake_tool(tmp_path, steps, name="llama-batched-bench", help_text=BATCHED_HELP)
    plan = BatchedBenchPlan(model=str(model), prompts=(2048,), gen=(128,), batches=(16, 1))
    points, run = _samples(run_batched_bench(plan, fake))
    assert [(p.kind, p.batch) for p in points] == [("prefill", 16), ("batch", 16), ("prefill", 1), ("batch", 1)]
    assert points[1].seconds == pytest.approx(10.031 / 128)
    assert points[1].context == 2048 + 63
    settings = points[0].settings
    assert (settings.version, settings.device, settings.threads, settings.flash_attention) == \
        ("b5163 (8cf427ff)", "cuda", 28, True)
    assert run.tool == "llama-batched-bench" and run.argv[-2:] == ("--output-format", "jsonl")


# --- the real tool ------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("llama-bench") is None, reason="no llama-bench on PATH (build llama.cpp to run)")
def test_the_real_llama_bench(tmp_path):
    """The real binary accepts rooflab's command line: with a file that is no model it fails on
    loading (not on a flag), in one line; with ROOFLAB_TEST_GGUF it measures for real."""
    binary = probe_binary(find_binary("llama-bench"))
    assert binary.supports("-p") and binary.supports("-n")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    plan = LlamaBenchPlan(model=str(broken), prompts=(16,), gen=4, repetitions=1, options=EngineOptions(threads=1))
    with pytest.raises(BenchRunError) as info:
        run_job(run_llama_bench(plan, binary))
    assert "invalid parameter" not in str(info.value) and "\n" not in str(info.value)
    model = os.environ.get("ROOFLAB_TEST_GGUF")
    if model:
        points, run = _samples(run_llama_bench(LlamaBenchPlan(model=model, prompts=(16,), gen=4, repetitions=2,
                                                              options=EngineOptions(threads=1)), binary))
        assert [p.kind for p in points] == ["prefill", "decode"] and all(p.seconds > 0 for p in points)
        assert run.settings.version.startswith("b")
