"""Reading a Kineto file: streamed in one process, in ranges shared with helper processes, or
decoded whole.

Large files are streamed: decompressed and decoded a slice of ``traceEvents`` at a time, so
memory stays a small multiple of the columns (see :mod:`.fast`); files with an unusual layout
are decoded whole. Files of 64 MB of JSON or more are shared out in ranges with helper
processes on spare cores (see :mod:`perflab.io._parallel`), whose columns are merged into the
very trace one process builds. A file read whole is first checked for JSON syntax by a pass
that keeps no events, and a gzip file read whole may expand at most 64-fold (see
:func:`perflab.io._common.text_limit`). A load that takes more than about two seconds shows
its progress (:mod:`perflab.io._progress`).
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy.typing as npt

from perflab._gc import gc_paused
from perflab.errors import InputError
from perflab.io import _parallel, _progress, _tempdirs
from perflab.io._common import read_bytes
from perflab.io.kineto import fast
from perflab.io.kineto.columns import Columns, build, return_freed_memory
from perflab.io.kineto.decode import check_syntax, decode_file, doc_of, event_stream, reread
from perflab.model.trace import Trace

PARALLEL_MIN_TEXT = 64 << 20  # JSON bytes per helper process that repay its start-up
RANGES_PER_PROCESS = 16  # ranges are claimed one at a time: a slow process takes fewer
_HELPER_MODULE = "perflab.io.kineto.helper"
MALFORMED_EXIT = 4  # a helper's exit status for text that no stream can read
TEMP_PREFIX = "perflab-load-"  # + owner pid: see perflab.io._tempdirs
_TOP_LEVEL = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds")


def load_kineto(
    path: str | os.PathLike[str],
    *,
    python: bool = False,
    workers: int | None = None,
    progress: bool = True,
) -> Trace:
    """Read a torch.profiler / Kineto trace (``.json`` or ``.json.gz``).

    ``workers``: helper processes that decode parts of a large file at the same time (the
    result is the same). None: one per spare core, up to 7, for files of 64 MB of JSON or
    more; 0: this process only. ``progress``: show how far a load that takes more than a
    couple of seconds has got (see :mod:`perflab.io._progress`).
    """
    source = str(path)
    helpers = _helper_count(path, workers)
    label = f"reading {Path(path).name}"
    shown = _progress.Progress(label, _text_size(path), enabled=progress)
    with gc_paused(), shown:
        try:
            trace = _load_parallel(path, source, python, helpers, shown) if helpers else None
            return trace or _load_streaming(path, source, python, shown)
        except fast.Unusual:
            pass  # decoded whole below, which also explains what is wrong
        data = read_bytes(path)
        check_syntax(data, source)
        return build(decode_file(data, source), source, python=python)


def _text_size(path: str | os.PathLike[str]) -> int:
    try:
        return fast.text_size(path)
    except (OSError, InputError):
        return 0  # reading it will say what is wrong


def loads_kineto(data: bytes, source: str = "<bytes>", *, python: bool = False) -> Trace:
    """Like :func:`load_kineto`, from bytes already in memory (not gzip)."""
    with gc_paused():
        return build(decode_file(data, source), source, python=python)


def _load_streaming(
    path: str | os.PathLike[str], source: str, python: bool, shown: _progress.Progress
) -> Trace:
    columns = Columns(source, python)
    with event_stream(path) as stream:
        for events in stream:
            columns.add(events)
            shown.update(stream.cursor.end)
    doc = doc_of(stream.head, stream.tail, events=())
    return columns.finish(doc, lambda: reread(path))


# -- parallel loading: the file's ranges shared with helper processes (see io._parallel) ---


def _helper_count(path: str | os.PathLike[str], workers: int | None) -> int:
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            message = f"workers must be a whole number >= 0, not {workers!r}"
            raise InputError(message, source=str(path))
        return workers
    size = _text_size(path)
    spare = min(_parallel.available_cores() - 1, _parallel.MAX_HELPERS)
    return max(0, min(spare, size // PARALLEL_MIN_TEXT))


def _load_parallel(
    path: str | os.PathLike[str],
    source: str,
    python: bool,
    helpers: int,
    shown: _progress.Progress,
) -> Trace | None:
    """This process and ``helpers`` helper processes decode the file's ranges; None when the
    file must be read in one process after all (bad input, which that path explains, or a
    helper that failed)."""
    n_ranges = RANGES_PER_PROCESS * (helpers + 1)
    with _tempdirs.owned_temp_dir(TEMP_PREFIX) as tmp, event_stream(path) as stream:
        start, size = stream.array_start, fast.text_size(path)
        stream.bounds = [start + (size - start) * k // n_ranges for k in range(1, n_ranges)]
        claims = _parallel.Claims(tmp, n_ranges)
        first = [claims.claim()]  # range 0 (the head) stays here
        job = {
            "path": os.fspath(path),
            "python": python,
            "bounds": stream.bounds,
            "dir": tmp,
            "parent": os.getpid(),
        }
        started = [
            _parallel.start_helper(_HELPER_MODULE, job, Path(tmp, f"helper-{i}.log"))
            for i in range(helpers)
        ]
        running = [h for h in started if h is not None]
        try:
            claim = lambda: first.pop() if first else claims.claim()  # noqa: E731
            own, slowest = _own_ranges(stream, claim, source, python, shown)
            statuses = _parallel.finish_helpers(running, _parallel.HELPER_START_S + 10 * slowest)
        except (InputError, fast.RangeLayout):
            return None  # one process reads it again (and names the bad event, if any)
        finally:
            _parallel.stop_helpers(running)
        # any other Unusual (malformed text) stops one stream too: the caller goes straight
        # to the whole-file check instead of streaming the file a second time
        if MALFORMED_EXIT in statuses:
            raise fast.Unusual("a helper found malformed text")
        results = (
            own.pop(k, None) or _helper_result(claims, k, statuses, tmp) for k in range(n_ranges)
        )
        merged = _merge_ranges(results, Columns(source, python), stream.tail)
        if merged is None or stream.head is None:
            return None
        columns, tail = merged
        return columns.finish(doc_of(stream.head, tail, events=()), lambda: reread(path))


def _merge_ranges(
    results: Iterator[tuple[dict[str, npt.NDArray[Any]], dict[str, Any]] | None],
    columns: Columns,
    tail: Any,
) -> tuple[Columns, Any] | None:
    """All ranges' results absorbed in order, and the file's tail; None when one is missing
    or their texts do not tile the events array."""
    spans = []
    for result in results:  # one at a time: each is freed once absorbed
        if result is None:
            return None
        arrays, meta = result
        columns.absorb(arrays, meta)
        spans.append(meta["span"])
        tail = SimpleNamespace(**meta["tail"]) if meta.get("tail") else tail
    return (columns, tail) if tail is not None and _ranges_tile(spans) else None


def _own_ranges(
    stream: fast.EventStream,
    claim: Callable[[], int | None],
    source: str,
    python: bool,
    shown: _progress.Progress,
) -> tuple[dict[int, Any], float]:
    """This process's share: exported columns per range, and the longest time a range took.
    Ranges are claimed in file order, so the text offset reached is the load's progress."""
    own: dict[int, Any] = {}
    slowest = 0.0
    for k, events in stream.ranges(claim):
        began = time.perf_counter()
        own[k] = _range_result(events, stream, source, python)
        slowest = max(slowest, time.perf_counter() - began)
        shown.update(stream.cursor.end)
    return own, slowest


def _range_result(
    events: Iterable[list[Any]], stream: fast.EventStream, source: str, python: bool
) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
    """One range's columns, exported, with the span of text it covered."""
    columns = Columns(source, python)
    for piece in events:
        columns.add(piece)
    arrays, meta = columns.export()
    meta["span"] = stream.span
    return arrays, meta


def _ranges_tile(spans: list[Any]) -> bool:
    """Whether the ranges' texts follow one another exactly, a comma apart; only ranges
    after the end of the events cover nothing."""
    n = next((i for i, span in enumerate(spans) if span is None), len(spans))
    covered = [tuple(span) for span in spans[:n]]
    return (
        n > 0
        and all(span is None for span in spans[n:])
        and all(b[0] == a[1] + 1 for a, b in pairwise(covered))
    )


def _helper_result(
    claims: _parallel.Claims, k: int, statuses: list[int], tmp: str
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Range k as a helper saved it; None (with a warning when the helper broke down rather
    than found bad input) when it did not."""
    result = claims.result_path(k)
    if result.exists():
        with contextlib.suppress(InputError):
            return _parallel.load_result(result)  # else unreadable: read in one process
    if any(status not in (0, _parallel.DATA_ERROR) for status in statuses):
        logs = sorted(Path(tmp).glob("helper-*.log"))
        last = [line for log in logs for line in log.read_text(errors="replace").splitlines()]
        warnings.warn(
            "a helper process of the parallel trace load failed"
            + (f" ({last[-1]})" if last else "")
            + "; reading the file in one process instead",
            RuntimeWarning,
            stacklevel=4,
        )
    return None


def run_helper(job: dict[str, Any]) -> int:
    """A helper process's work (``python -m perflab.io.kineto.helper JOB``): claim ranges
    of the file, decode them, save their columns. Its exit status."""
    claims = _parallel.Claims(job["dir"], len(job["bounds"]) + 1)
    with gc_paused():
        try:
            with event_stream(job["path"]) as stream:
                stream.bounds = job["bounds"]
                for k, events in stream.ranges(lambda: _claim_for(job, claims)):
                    arrays, meta = _range_result(events, stream, job["path"], job["python"])
                    if stream.tail is not None:
                        meta["tail"] = {name: getattr(stream.tail, name) for name in _TOP_LEVEL}
                        stream.tail = None  # sent once
                    _parallel.save_result(claims.result_path(k), arrays, meta)
                    del arrays
                    return_freed_memory()
        except fast.RangeLayout:
            return _parallel.DATA_ERROR
        except fast.Unusual:
            return MALFORMED_EXIT
        except InputError:
            return _parallel.DATA_ERROR
    return 0


def _claim_for(job: dict[str, Any], claims: _parallel.Claims) -> int | None:
    """The next range for a helper; none once the process that started it is gone."""
    return claims.claim() if os.getppid() == job["parent"] else None
