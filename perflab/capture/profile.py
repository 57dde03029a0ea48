"""Run a function once under torch.profiler and return the :class:`Trace`.

CUDA activities are recorded when a GPU is there (or ``cuda=True``), CPU ops otherwise. The
profiler is always stopped, even when ``fn`` raises or is interrupted, and its Chrome trace
goes through the same Kineto importer as files from disk.

Kineto logs routine lines ("USDT: ... profiler_start") straight to the process's stderr file
descriptor, which Jupyter shows as red error boxes. Those lines are caught at the descriptor
around the profiler's start, stop and export and kept in ``trace.meta["profiler_log"]``;
anything else written there meanwhile (a real warning) still reaches ``sys.stderr``.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from perflab.capture import env
from perflab.errors import import_extra, no_gpu
from perflab.model.trace import Trace


def profile(
    fn: Callable[[], object],
    *,
    cuda: bool | None = None,
    record_shapes: bool = False,
    with_flops: bool = False,
    python: bool = False,
    memory: bool = False,
) -> Trace:
    """Profile one call of ``fn``; ``cuda=None`` means "if a GPU is available". ``memory``
    records the allocator's allocations and frees (torch's ``profile_memory``), which
    ``trace.memory()`` reads."""
    torch = import_extra("torch", "profile()")
    from torch.profiler import ProfilerActivity

    from perflab.io.kineto import load_kineto

    has_gpu = env.cuda_available() and torch.cuda.is_available()
    if cuda and not has_gpu:
        raise no_gpu("profile(cuda=True)", "torch sees none")
    use_cuda = has_gpu if cuda is None else cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
    prof = torch.profiler.profile(
        activities=activities,
        record_shapes=record_shapes,
        with_flops=with_flops,
        with_stack=python,
        profile_memory=memory,
    )
    log: list[str] = []
    with quiet_profiler_log(log):
        prof.start()
    try:
        fn()
        if use_cuda:
            torch.cuda.synchronize()
    finally:
        with quiet_profiler_log(log):  # also on exceptions and KeyboardInterrupt
            prof.stop()
    with tempfile.TemporaryDirectory(prefix="perflab-profile-") as tmp:
        path = Path(tmp) / "trace.json"
        with quiet_profiler_log(log):
            prof.export_chrome_trace(os.fspath(path))
        trace = load_kineto(path, python=python)
    trace.meta["profiler_log"] = log
    trace.meta["source"] = "torch.profiler"
    trace.meta["format"] = "torch.profiler"
    trace.meta["backend"] = "cuda" if use_cuda else "cpu"
    return trace


# Kineto's routine log lines: "USDT:2026-12-03 01:08:16 5604:5604 File.cpp:52] profiler_start"
# (older versions: "STAGE:..."); other text is passed on.
PROFILER_LOG_LINE = re.compile(r"^(USDT|STAGE):\S+ \S+ \d+:\d+ \S+:\d+\] ")
MAX_LOG_BYTES = 1 << 20  # what one quiet section keeps of what was written to stderr


@contextmanager
def quiet_profiler_log(log: list[str]) -> Iterator[None]:
    """Send what is written to file descriptor 2 inside the block to a private file; on the
    way out (whatever happens) restore the descriptor, append what was written to ``log``
    and pass all but the profiler's routine lines on to ``sys.stderr``."""
    try:
        saved = os.dup(2)
    except OSError:
        saved = -1
    if saved < 0:  # no stderr descriptor to redirect
        yield
        return
    with tempfile.TemporaryFile(prefix="perflab-stderr-") as sink:
        try:
            _flush_stderr()  # Python's pending text goes out before, not into the sink
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            _flush_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            _sort_lines(sink.read(MAX_LOG_BYTES).decode("utf-8", "replace"), log)


def _flush_stderr() -> None:
    if sys.stderr is not None:
        sys.stderr.flush()


def _sort_lines(text: str, log: list[str]) -> None:
    """Every line to ``log``; those that are not routine profiler lines also to stderr."""
    lines = [line for line in text.splitlines() if line.strip()]
    log += lines
    other = [line for line in lines if not PROFILER_LOG_LINE.match(line)]
    if other and sys.stderr is not None:
        print("\n".join(other), file=sys.stderr)
