"""``perflab.range``: one name, three records (NVTX, torch.profiler, a host span)."""

from __future__ import annotations

import collections
import contextlib
import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

_MAX_SPANS = 10_000
_spans: collections.deque[HostSpan] = collections.deque(maxlen=_MAX_SPANS)
_state = threading.local()


@dataclass(frozen=True)
class HostSpan:
    name: str
    start_ns: int
    end_ns: int
    depth: int
    thread: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def open_ranges() -> int:
    """How many perflab ranges are open on this thread (0 when nothing leaked)."""
    return int(getattr(_state, "depth", 0))


def host_spans() -> list[HostSpan]:
    """The most recent host spans (up to 10,000), oldest first."""
    return list(_spans)


def clear_spans() -> None:
    _spans.clear()


def _nvtx_push(name: str) -> bool:
    try:
        import nvtx
    except ImportError:
        return _torch_nvtx_push(name)
    nvtx.push_range(message=name, domain="perflab")
    return True


def _nvtx_pop() -> None:
    try:
        import nvtx
    except ImportError:
        torch = sys.modules["torch"]
        torch.cuda.nvtx.range_pop()
        return
    nvtx.pop_range(domain="perflab")


def _torch_nvtx_push(name: str) -> bool:
    # torch.cuda.nvtx needs a CUDA build; never import torch just for this.
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return False
    torch.cuda.nvtx.range_push(name)
    return True


def _record_function(name: str) -> Any:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    rf = torch.autograd.profiler.record_function(name)
    rf.__enter__()
    return rf


class Range(contextlib.ContextDecorator):
    """Context manager and decorator marking a named range.

    Emits an NVTX range (the ``nvtx`` package, else ``torch.cuda.nvtx``), a
    torch.profiler ``record_function`` when torch is loaded, and a host-side span
    kept by perflab (:func:`host_spans`). Everything opened is closed on exit,
    also when the body raises.
    """

    def __init__(self, name: str, *, nvtx: bool = True) -> None:
        self.name = name
        self.nvtx = nvtx
        self._stack: list[tuple[bool, Any, int]] = []

    def __enter__(self) -> Range:
        pushed = _nvtx_push(self.name) if self.nvtx else False
        try:
            rf = _record_function(self.name)
        except BaseException:
            if pushed:
                _nvtx_pop()
            raise
        _state.depth = open_ranges() + 1
        self._stack.append((pushed, rf, time.perf_counter_ns()))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        pushed, rf, start = self._stack.pop()
        end = time.perf_counter_ns()
        depth = open_ranges() - 1
        _state.depth = depth
        try:
            if rf is not None:
                rf.__exit__(exc_type, exc, tb)
        finally:
            if pushed:
                _nvtx_pop()
            _spans.append(HostSpan(self.name, start, end, depth, threading.get_ident()))
