"""A request or a table past the context the model was trained for is said first, on stderr,
before any figure, in every output form (text, JSON, CSV, the serving table, compare): it was a
line under the tables (line 37 of the text), and ``--contexts 200000`` said nothing at all."""

from __future__ import annotations

import subprocess
import sys

import pytest

WARNING = "past the 40,960 Qwen3-8B Q4_K_M was trained for"
MODEL = ["--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090"]


def _run(*argv: str) -> tuple[int, str, str, list[str]]:
    """The command in its own process, its stdout and stderr, and both interleaved in the order
    written (stderr first when the warning is said before any figure)."""
    proc = subprocess.run([sys.executable, "-m", "rooflab.core.cli.main", *argv], capture_output=True, text=True,
                          timeout=120)
    both = subprocess.run([sys.executable, "-m", "rooflab.core.cli.main", *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr, both.stdout.splitlines()


@pytest.mark.parametrize("argv, said", [
    (("predict", *MODEL, "--context", "100000"), "102,304 tokens is"),
    (("predict", *MODEL, "--contexts", "200000"), "--contexts reaches 200,000 tokens,"),
    (("predict", *MODEL, "--contexts", "200000", "--json"), "--contexts reaches 200,000 tokens,"),
    (("predict", *MODEL, "--prompts", "65536", "--csv"), "--prompts reaches 65,536 tokens,"),
    (("predict", *MODEL, "--prompt", "50000", "--serve", "--concurrency", "1"), "50,256 tokens is"),
    (("compare", "--models", "qwen3-8b-q4_k_m", "--machines", "rtx-4090", "--depths", "0,200000"),
     "--depths reaches 200,000 tokens,"),
])
def test_the_warning_comes_first(argv, said):
    code, out, err, both = _run(*argv)
    assert code == 0, err
    assert f"rooflab: warning: {said} {WARNING}" in err and WARNING not in out
    assert WARNING in both[0]                                   # the first line written, before any figure


def test_within_the_trained_context_nothing_is_said():
    code, out, err, _ = _run("predict", *MODEL, "--contexts", "0,32768", "--json")
    assert code == 0 and "trained for" not in err + out
