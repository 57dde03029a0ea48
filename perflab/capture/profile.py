"""Run a function once under torch.profiler and return the :class:`Trace`.

CUDA activities are recorded when a GPU is there (or ``cuda=True``), CPU ops otherwise. The
profiler is always stopped, even when ``fn`` raises or is interrupted, and its Chrome trace
goes through the same Kineto importer as files from disk.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perflab.capture import env
from perflab.errors import NoGPUError
from perflab.model.trace import Trace


def profile(
    fn: Callable[[], Any],
    *,
    cuda: bool | None = None,
    record_shapes: bool = False,
    with_flops: bool = False,
    python: bool = False,
) -> Trace:
    """Profile one call of ``fn``; ``cuda=None`` means "if a GPU is available"."""
    import torch
    from torch.profiler import ProfilerActivity

    from perflab.io.kineto import load_kineto

    has_gpu = env.cuda_available() and torch.cuda.is_available()
    if cuda and not has_gpu:
        raise NoGPUError("cuda=True but torch sees no CUDA GPU")
    use_cuda = has_gpu if cuda is None else cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
    prof = torch.profiler.profile(
        activities=activities,
        record_shapes=record_shapes,
        with_flops=with_flops,
        with_stack=python,
    )
    prof.start()
    try:
        fn()
        if use_cuda:
            torch.cuda.synchronize()
    finally:
        prof.stop()  # also on exceptions and KeyboardInterrupt: no profiler left running
    with tempfile.TemporaryDirectory(prefix="perflab-profile-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(os.fspath(path))
        trace = load_kineto(path, python=python)
    trace.meta["source"] = "torch.profiler"
    trace.meta["format"] = "torch.profiler"
    trace.meta["backend"] = "cuda" if use_cuda else "cpu"
    return trace
