"""What a test needs from this machine besides rooflab: llama-cpp-python, the llama.cpp engine.

The README's set-up installs it (``pip install -e '.[llamacpp,test]'``), so CI has it and a test
that needs it and does not find it fails: a missing binding must not let CI pass with the engine
untested. A machine set up without it on purpose says so with ``ROOFLAB_NO_LLAMACPP=1``; its
engine tests are then skipped, each saying why."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

NO_LLAMACPP = "ROOFLAB_NO_LLAMACPP"


def llama_cpp(*, module_level: bool = False) -> ModuleType:
    """The ``llama_cpp`` module; a failure when it is missing, a skip where ``NO_LLAMACPP`` is 1.
    ``module_level``: called at a test module's top (a failure is then a collection error)."""
    try:
        import llama_cpp as module
    except ImportError:
        if os.environ.get(NO_LLAMACPP) == "1":
            pytest.skip(f"llama-cpp-python is not installed ({NO_LLAMACPP}=1: this machine runs without it)",
                        allow_module_level=module_level)
        pytest.fail("llama-cpp-python is not installed, but the set-up installs it (pip install -e "
                    f"'.[llamacpp,test]'); set {NO_LLAMACPP}=1 only on a machine meant to run without the engine",
                    pytrace=False)
    return module
