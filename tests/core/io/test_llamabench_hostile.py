"""llama-bench output on broken and hostile input: one ModelFileError line naming the file,
never a traceback, and no imported point out of range (a 1e300-token prompt once reached the
fit as "SVD did not converge", and --json as an "Out of range float" crash). Ends with
mutation fuzz of every format the reader takes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.io.llamabench import parse_benchmark, read_benchmark
from rooflab.core.values.measured import MeasuredPoint
from tests.factories.fuzz import (
    BENCH_ROWS,
    ESCAPES,
    MARKDOWN,
    bench_csv,
    bench_surface,
    one_line_error,
    run_surface,
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def expect_error(path: Path, *words: str) -> str:
    return one_line_error(read_benchmark, path, *words)


def json_rows(**fields: str) -> str:
    """The seed rows as a JSON array, the first row's ``fields`` replaced by raw JSON text."""
    first = json.dumps({k: v for k, v in BENCH_ROWS[0].items() if k not in fields})[:-1]
    first += "".join(f', "{k}": {v}' for k, v in fields.items()) + "}"
    return "[" + ", ".join([first, *(json.dumps(r) for r in BENCH_ROWS[1:])]) + "]"


def test_csv_field_over_128_kb_is_one_line(tmp_path):
    text = bench_csv().replace("AMD Ryzen 7 7800X3D", "x" * 200_000, 1)
    expect_error(write(tmp_path, "b.csv", text), "CSV")


@pytest.mark.parametrize(("fields", "word"), [
    ({"samples_ns": "[" + "1" + "0" * 400 + "]"}, "401 digits"),
    ({"n_prompt": "1" + "0" * 400}, "401 digits"),
    ({"n_prompt": "1e300"}, "n_prompt"),
    ({"n_prompt": "1e400"}, "1e400"),
    ({"avg_ts": "NaN"}, "NaN"),
    ({"n_depth": "16777217"}, "n_depth"),
    ({"samples_ns": "[1e300]", "avg_ns": "1e300"}, "seconds"),
])
def test_huge_numbers_in_json_rows_are_one_line(tmp_path, fields, word):
    expect_error(write(tmp_path, "b.json", json_rows(**fields)), word)


@pytest.mark.parametrize("value", ["1e300", "9" * 5000, "1e400", "nan"])
def test_huge_numbers_in_csv_rows_are_one_line(tmp_path, value):
    text = bench_csv([{**BENCH_ROWS[0], "n_prompt": value}, *BENCH_ROWS[1:]])
    expect_error(write(tmp_path, "b.csv", text), "n_prompt")


def test_a_5000_digit_markdown_test_name_is_skipped_with_a_short_warning(tmp_path):
    text = MARKDOWN.replace("        pp512 |", " pp" + "9" * 5000 + " |", 1)
    bench = read_benchmark(write(tmp_path, "b.md", text))
    assert len(bench.points) == 2
    assert bench.warnings and all(len(w) < 200 for w in bench.warnings)


def test_deep_nesting_in_json_and_jsonl(tmp_path):
    expect_error(write(tmp_path, "b.json", "[" * 100_000), "deeper")
    expect_error(write(tmp_path, "b.jsonl", json.dumps(BENCH_ROWS[0]) + "\n{" + '"a":[' * 100_000), "line 2")


def test_imported_points_are_range_checked_before_the_fit():
    for bad in (dict(prompt=10**300), dict(context=-1), dict(batch=1 << 20), dict(seconds=float("inf")),
                dict(seconds=1e300), dict(median=float("nan")), dict(repeats=0)):
        with pytest.raises(SpecError):
            MeasuredPoint(**{**dict(kind="prefill", prompt=512, context=0, batch=1, seconds=0.1), **bad})


def test_a_1e300_prompt_never_reaches_the_fit(tmp_path):
    """The fit and the import's --json once saw inf (the CLI test checks the command end to end)."""
    path = write(tmp_path, "b.jsonl", "\n".join(json.dumps({**r, "n_prompt": 1e300} if r["n_prompt"] else r)
                                               for r in BENCH_ROWS))
    expect_error(path, "n_prompt")


def test_terminal_escapes_in_names_are_stripped(tmp_path):
    rows = [{**r, "model_filename": f"models/evil{ESCAPES}.gguf", "model_type": ESCAPES, "backends": ESCAPES,
             "build_commit": ESCAPES} for r in BENCH_ROWS]
    bench = read_benchmark(write(tmp_path, "b.json", json.dumps(rows)))
    texts = [*bench.series, *bench.models, *bench.metadata.values(), *bench.warnings]
    assert texts and not any("\x1b" in t or "\x07" in t or "\x9b" in t or "\n" in t for t in texts)
    from rooflab.core.io.llamabench_rows import points_from_row
    from rooflab.core.values.measured import EngineSettings

    (point,) = points_from_row(rows[0], EngineSettings(engine="llama-bench"))
    assert point.settings is not None and "\x1b" not in point.settings.label


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_benchmark_fifo_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "bench.json")
    expect_error(tmp_path / "bench.json", "named pipe")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_dev_zero_is_refused_not_read():
    with pytest.raises(ModelFileError, match="character device"):
        read_benchmark("/dev/zero")


def test_parse_benchmark_of_a_bom_and_text():
    assert len(parse_benchmark("\ufeff" + json.dumps(BENCH_ROWS)).points) == 3


# --- fuzz -------------------------------------------------------------------------------------

def test_fuzz_mutations_only_raise_clean_errors(tmp_path):
    tally = run_surface(bench_surface(), 400, tmp_path, seed=20250101)
    assert not tally.crashes, "\n".join(tally.crashes[:5])
    assert not tally.hangs, tally.hangs[:5]
    # inputs are under 1 MB (a 200 kB CSV field at most); parsing and fitting one takes a few MB
    assert tally.peak < 64 << 20
    assert tally.slowest < 10.0
    assert tally.errors > 50 and tally.accepted > 50
