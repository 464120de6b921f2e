"""Without torch, measuring says what to pip install (a wheel user has no packaging/dev.sh)."""

from __future__ import annotations

import sys

import pytest

from rooflab.core.errors import MeasurementError
from rooflab.core.measure.engines.torch import backend


def test_missing_torch_names_what_to_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)      # None in sys.modules: import raises ImportError
    with pytest.raises(MeasurementError) as caught:
        backend.require_torch()
    message = str(caught.value)
    # pinned: an unpinned torch is a multi-GB CUDA download on Linux
    assert "pip install torch==" in message and "dev.sh" not in message and "\n" not in message
