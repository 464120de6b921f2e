"""Watching the one after-measurement workflow that the window and the command line share."""

from __future__ import annotations

from typing import Any

import pytest

from rooflab.core.measure import workflow


def spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any], Any]]:
    """Record each call of ``workflow.<name>`` as (args, kwargs, what it returned), still running it."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any], Any]] = []
    real = getattr(workflow, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        calls.append((args, kwargs, result))
        return result

    monkeypatch.setattr(workflow, name, recording)
    return calls
