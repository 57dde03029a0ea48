"""Shared fixtures. The autouse fixture checks that no profiler, NVTX or GC state leaks."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from data_paths import TRACES


def _profiler_enabled() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    return bool(torch.autograd.profiler._is_profiler_enabled)


def gpu_available() -> bool:
    from perflab.capture.env import cuda_available

    return cuda_available()


@pytest.fixture(autouse=True)
def _no_leaked_state() -> Iterator[None]:
    from perflab.capture.nvtx import open_ranges

    yield
    assert open_ranges() == 0, "a perflab range was left open"
    assert gc.isenabled(), "garbage collection was left disabled"
    assert not _profiler_enabled(), "a torch.profiler session was left running"


@pytest.fixture
def trace_data() -> Path:
    """The real traces recorded on GPUs by other projects (tests/data/traces/README.md)."""
    return TRACES


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep compile/ceiling caches out of the user's home during tests."""
    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("gpu" in item.keywords for item in items) and not gpu_available():
        skip = pytest.mark.skip(reason="no GPU: CUDA is not available on this machine")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
