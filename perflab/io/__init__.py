"""Importers and exporters of traces.

:func:`load_trace` reads any trace perflab knows and detects the format from the file's
first bytes: Kineto / torch.profiler JSON (plain or gzip), an Nsight Systems SQLite export,
or a trace saved by :meth:`perflab.model.trace.Trace.save`. Nsight Compute results are not
timelines: read them with :func:`load_ncu`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.errors import InputError
from perflab.model.trace import Trace

if TYPE_CHECKING:  # the Nsight Compute model is imported when a report is read
    from perflab.model.ncu import NcuReport
    from perflab.model.trace_part import Request

__all__ = ["detect_format", "export_chrome", "load_ncu", "load_trace"]


def detect_format(path: str | os.PathLike[str]) -> str:
    """``"kineto"``, ``"nsys"``, ``"perflab"`` (saved trace), ``"ncu-csv"`` or
    ``"ncu-rep"``, from the first bytes of the file; InputError when none fits."""
    from perflab.io._common import GZIP_MAGIC, SQLITE_MAGIC, ZIP_MAGIC
    from perflab.model.serialize import open_regular

    source = str(path)
    with open_regular(path) as fh:  # a FIFO or a device is refused, not waited on
        try:
            head = fh.read(4096)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    if head.startswith(GZIP_MAGIC):
        return "kineto"
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(ZIP_MAGIC):
        return "perflab"
    if source.endswith(".ncu-rep"):
        return "ncu-rep"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith((b"{", b"[")):
        return "kineto"
    if text.startswith(b'"ID","Process ID"') or text.startswith(b"==PROF=="):
        return "ncu-csv"
    raise InputError(
        "unrecognised trace format (expected Kineto/torch.profiler JSON, an Nsight Systems "
        "SQLite export or a saved perflab trace)",
        source=source,
    )


def load_trace(
    path: str | os.PathLike[str],
    *,
    python: bool = False,
    workers: int | None = None,
    progress: bool = True,
    step: int | None = None,
    window: str | None = None,
    part: Request | None = None,
) -> Trace:
    """Load a trace file of any supported format into a :class:`Trace`.

    ``python=True`` keeps torch.profiler ``python_function`` events (skipped by default).
    ``workers``: helper processes for a large Kineto file (None: one per spare core for files
    of 64 MB of JSON or more; 0: none); see :func:`perflab.io.kineto.load_kineto`.
    ``progress``: a Kineto load that takes more than about two seconds shows how far it got
    (a line on stderr when that is a terminal, a bar in a notebook when ipywidgets is there).
    ``step=N`` (ProfilerStep#N's host events and the GPU work until the next step begins) or
    ``window="30s:32.5s"`` (the events that overlap that time since the trace's first event):
    only that part of the trace; a Kineto file is then read twice and only the part is held,
    other formats are read whole and cut (``meta["part"]`` says what was kept). ``part``: the
    same as a :class:`perflab.model.trace_part.Request`.
    """
    from perflab.model.trace_part import request_of

    part = part or request_of(step, window)
    fmt = detect_format(path)
    if fmt == "kineto":
        from perflab.io.kineto import load_kineto

        return load_kineto(path, python=python, workers=workers, progress=progress, part=part)
    if fmt in ("nsys", "perflab"):
        from perflab.model.trace_part import part_of

        trace = _load_nsys(path) if fmt == "nsys" else Trace.load(path)
        return trace if part is None else part_of(trace, part)
    raise InputError(
        "this is an Nsight Compute result, not a timeline: use perflab.io.load_ncu()",
        source=str(path),
    )


def _load_nsys(path: str | os.PathLike[str]) -> Trace:
    from perflab.io.nsys import load_nsys

    return load_nsys(path)


def load_ncu(path: str | os.PathLike[str]) -> NcuReport:
    """Read Nsight Compute results (``ncu --csv`` output or ``.ncu-rep``) into an NcuReport."""
    from perflab.io.ncu import load_ncu as load

    return load(path)


def export_chrome(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write ``trace`` as Chrome/Perfetto JSON (opens in ui.perfetto.dev); the file written."""
    from perflab.io.chrome import export_chrome as export

    return export(trace, path)
