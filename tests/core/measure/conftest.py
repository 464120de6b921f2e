"""Measurement tests run torch on one thread: on a small shared machine a parallel region
waits for its slowest thread, so another job taking a core would make every pass crawl and
the tests slow and flaky. The tests check structure and sanity, never speed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
