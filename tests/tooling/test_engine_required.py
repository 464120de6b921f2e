"""CI runs the engine: a missing llama-cpp-python fails the tests that need it, unless the machine
says it runs without it (ROOFLAB_NO_LLAMACPP=1); only then are they skipped."""

from __future__ import annotations

import sys

import pytest

from tests.factories import needs


def test_a_missing_binding_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)            # import llama_cpp raises ImportError
    monkeypatch.delenv(needs.NO_LLAMACPP, raising=False)
    with pytest.raises(pytest.fail.Exception, match="set-up installs it"):
        needs.llama_cpp(module_level=True)


def test_a_machine_without_the_engine_says_so_and_skips(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    monkeypatch.setenv(needs.NO_LLAMACPP, "1")
    with pytest.raises(pytest.skip.Exception, match="ROOFLAB_NO_LLAMACPP=1"):
        needs.llama_cpp(module_level=True)


def test_no_engine_test_skips_on_its_own():
    """No test module may fall back to a bare importorskip of the binding (a silent skip in CI)."""
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    bare = [str(p.relative_to(tests)) for p in tests.rglob("test_*.py")
            if p.name != Path(__file__).name and "importorskip(\"llama_cpp\"" in p.read_text(encoding="utf-8")]
    assert bare == []
