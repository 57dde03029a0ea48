"""Shared fixtures. The autouse fixture checks that no profiler, NVTX, NVML-polling or GC
state leaks.

Under a gpu-only selection (``pytest -m gpu``, as on the lent GPU machine, which lacks
hypothesis, IPython and nbformat), a test file with no gpu test is not imported: every test
in it would be deselected anyway. A file whose gpu tests need, at import, a package that is
not installed is not collected either, and the run's summary names it and the package.
Other selections collect everything, so a missing development package still fails loudly.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from data_paths import TRACES

_NOT_COLLECTED = pytest.StashKey[list[str]]()


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
    from perflab.capture.throttle import active_pollers

    yield
    assert open_ranges() == 0, "a perflab range was left open"
    assert active_pollers() == 0, "an NVML polling thread was left running"
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


def selects_only_gpu(markexpr: str) -> bool:
    """Whether ``-m`` keeps only gpu tests: ``gpu``, or ``gpu and ...`` without ``or``,
    parentheses or ``not gpu`` (anything else: assume it may keep other tests)."""
    words = markexpr.split()
    if "or" in words or "(" in markexpr or ")" in markexpr:
        return False
    return any(w == "gpu" and (i == 0 or words[i - 1] != "not") for i, w in enumerate(words))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    if not selects_only_gpu(config.getoption("markexpr") or ""):
        return None
    from perflab.machine.gpu_modules import has_gpu_tests, missing_at_import

    if not has_gpu_tests(collection_path):
        return True  # no gpu test in it: all would be deselected
    missing = missing_at_import(collection_path)
    if not missing:
        return None
    note = f"{collection_path.name}: its gpu tests need {', '.join(missing)}, not installed here"
    notes = config.stash.setdefault(_NOT_COLLECTED, [])
    if _asked_for(collection_path, config) and note not in notes:
        notes.append(note)
    return True


def _asked_for(path: Path, config: pytest.Config) -> bool:
    """Whether the command line names ``path`` or a folder holding it (pytest also looks
    at the siblings of a named file, which the run would not collect anyway)."""
    for arg in config.args:
        named = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path.resolve() == named or (named.is_dir() and path.resolve().is_relative_to(named)):
            return True
    return False


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    notes = terminalreporter.config.stash.get(_NOT_COLLECTED, [])
    if notes:
        from perflab.machine.gpu_modules import NOT_COLLECTED

        for note in notes:
            terminalreporter.write_line(NOT_COLLECTED + note)
