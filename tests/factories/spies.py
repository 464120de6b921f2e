"""Watching the one after-measurement workflow that the window and the command line share."""

from __future__ import annotations

from typing import Any

import pytest

from rooflab.core.measure import workflow


def spy(monkeypatch: pytest.MonkeyPatch, name: str,
        module: Any = workflow) -> list[tuple[tuple[Any, ...], dict[str, Any], Any]]:
    """Record each call of ``<module>.<name>`` (the workflow's by default) as (args, kwargs, what
    it returned), still running it."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any], Any]] = []
    real = getattr(module, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        calls.append((args, kwargs, result))
        return result

    monkeypatch.setattr(module, name, recording)
    return calls
