"""Kineto / torch.profiler Chrome-trace JSON (plain or gzip) -> :class:`Trace`.

msgspec decodes the events into compact typed records that declare only the fields perflab
uses (the decoder skips everything else), and each slice of records becomes numpy columns at
once; no dict per event is built. Large files are streamed: decompressed and decoded a slice of
``traceEvents`` at a time, so memory stays a small multiple of the columns (see
:mod:`perflab.io._kineto_fast`); files with an unusual layout are decoded whole. Files of 64 MB
of JSON or more are shared out in ranges with helper processes on spare cores (see
:mod:`perflab.io._parallel`), whose columns are merged into the very trace one process
builds. ``ac2g`` flow events fill in a missing launch<->kernel correlation and are then
dropped;
``python_function`` events are skipped unless ``python=True``. Metadata events that name
threads and processes become ``meta["thread_names"]`` (``{"<pid>:<tid>": name}``) and
``meta["process_names"]`` (``{"<pid>": name}``): text only, at most 256 characters each.

Times are kept to the nanosecond: a start written in microseconds with a fraction beyond
2**43 us (wall-clock times, ``1680565898123456.789``) is read from its digits, since a float64
steps by 0.25 us there (see :func:`exact_ns`); smaller times and whole numbers are exact as
floats.

Bad input ends in an InputError naming the file and, where it can, the event: times outside
the model's window (see :mod:`perflab.model.trace`), values that do not fit their columns,
nesting too deep to decode. A file read whole is first checked for JSON syntax by a pass that
keeps no events, and a gzip file read whole may expand at most 64-fold (see
:func:`perflab.io._common.text_limit`). A load that takes more than about two seconds shows
its progress (:mod:`perflab.io._progress`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import math
import operator
import os
import re
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from itertools import compress, pairwise, repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import msgspec
import numpy as np
import numpy.typing as npt

from perflab._gc import gc_paused
from perflab.errors import InputError
from perflab.io import _kineto_fast, _parallel, _progress, _tempdirs
from perflab.io._common import (
    StringTable,
    build_tracks,
    events_table,
    read_bytes,
    renumber,
    sort_order,
)
from perflab.model.serialize import MAX_DEPTH, json_safe, nesting_depth
from perflab.model.trace import (
    DUR_MAX_NS,
    KERNEL_COLUMNS,
    MAX_NAME_TABLE,
    MAX_NAME_TEXT,
    MEMCPY_COLUMNS,
    MEMCPY_DIRECTIONS,
    OP_COLUMNS,
    TIME_MAX_NS,
    TIME_MIN_NS,
    EventKind,
    Table,
    Trace,
    TrackKind,
    unique_rows,
)

# Kineto "cat" -> (kind, on a GPU track)
CATEGORIES: dict[str, tuple[EventKind, bool]] = {
    "kernel": (EventKind.KERNEL, True),
    "gpu_memcpy": (EventKind.MEMCPY, True),
    "gpu_memset": (EventKind.MEMSET, True),
    "gpu_user_annotation": (EventKind.ANNOTATION, True),
    "cuda_sync": (EventKind.SYNC, True),  # on the GPU track when it names a device
    "cpu_op": (EventKind.CPU_OP, False),
    "user_annotation": (EventKind.ANNOTATION, False),
    "cuda_runtime": (EventKind.RUNTIME, False),
    "cuda_driver": (EventKind.RUNTIME, False),
    "python_function": (EventKind.PYTHON, False),
}
SKIPPED_CATEGORIES = frozenset({"Trace"})  # the profiler's own span
# the model's time window in microseconds, a microsecond inside it for the rounding to ns
TS_MIN_US, TS_MAX_US = TIME_MIN_NS / 1000 + 1, TIME_MAX_NS / 1000 - 1
DUR_MAX_US = DUR_MAX_NS / 1000 - 1
# Below 2**43 us (101 days) a float64's spacing is under 1 ns, so a time written to the
# nanosecond (three decimals, as Kineto writes them) rounds back to its exact ns from the
# float; larger times (wall-clock microseconds since 1970, ~1.7e15) are read from their text.
FAST_LIMIT_US = float(2**43)
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_I32_MAX = 2**31 - 1
_DIRECTION_CODE = {d.lower(): i for i, d in enumerate(MEMCPY_DIRECTIONS)}
_OTHER = (EventKind.OTHER, False)
_LINKABLE = (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET, EventKind.RUNTIME)
SMALL_PARTS = 256  # slices' column parts joined into one block (see _Columns._put)
RETURN_FREED_BYTES = 4 << 20  # see return_freed_memory
PARALLEL_MIN_TEXT = 64 << 20  # JSON bytes per helper process that repay its start-up
RANGES_PER_PROCESS = 16  # ranges are claimed one at a time: a slow process takes fewer
_HELPER_MODULE = "perflab.io._kineto_helper"
MALFORMED_EXIT = 4  # a helper's exit status for text that no stream can read
TEMP_PREFIX = "perflab-load-"  # + owner pid: see perflab.io._tempdirs
_TOP_LEVEL = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds")
# device and stream ids given as text: decimal, hexadecimal (a pointer, as ROCm's Kineto
# writes "0x0"), or glibc's "(nil)" for a null pointer
LANE_TEXT = re.compile(r"^(?:-?[0-9]{1,19}|0[xX][0-9a-fA-F]{1,16}|\(nil\))$")
# deviceProperties that say the GPUs are AMD's (ROCm traces name them "AMD Instinct MI250X")
_AMD_NAME = re.compile(r"\b(?:AMD|Instinct|Radeon)\b|^gfx[0-9]")


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
        except _kineto_fast.Unusual:
            pass  # decoded whole below, which also explains what is wrong
        data = read_bytes(path)
        _check_syntax(data, source)
        return _build(_decode(data, source), source, python=python)


def _text_size(path: str | os.PathLike[str]) -> int:
    try:
        return _kineto_fast.text_size(path)
    except (OSError, InputError):
        return 0  # reading it will say what is wrong


def _check_syntax(data: bytes, source: str) -> None:
    """Malformed JSON is reported before any event is decoded: a skipping pass holds no
    decoded events, so a large broken file costs its text and one quick pass."""
    try:
        _SKIPPER.decode(data)
    except msgspec.ValidationError:
        pass  # not an object at the top level: the typed decode says so
    except msgspec.DecodeError as exc:
        raise InputError(f"malformed JSON: {exc}", source=source) from None
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", source=source) from None


def loads_kineto(data: bytes, source: str = "<bytes>", *, python: bool = False) -> Trace:
    """Like :func:`load_kineto`, from bytes already in memory (not gzip)."""
    with gc_paused():
        return _build(_decode(data, source), source, python=python)


# -- decoding ------------------------------------------------------------------------------


@dataclass
class _Doc:
    events: Iterable[list[Any]]  # slices of typed records with the attributes of _Event
    devices: list[dict[str, Any]] = field(default_factory=list)
    distributed: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


I64 = Annotated[int, msgspec.Meta(ge=_I64_MIN, le=_I64_MAX)]
I32 = Annotated[int, msgspec.Meta(ge=-1, le=_I32_MAX)]  # int32 columns; -1: unknown
# ROCm's Kineto writes stream (and device) ids as pointers: "0x0"
LaneText = Annotated[str, msgspec.Meta(pattern=LANE_TEXT.pattern)]
_NO_RAW = msgspec.Raw(b"")


class _Args(msgspec.Struct, frozen=True, gc=False):
    # in the order Kineto writes them: the decoder tries the next field first
    external_id: I64 = msgspec.field(default=-1, name="External id")
    device: I64 | LaneText = -1
    stream: I64 | LaneText = -1
    correlation: I64 = -1
    registers: I32 = msgspec.field(default=-1, name="registers per thread")
    shared_memory: I64 = msgspec.field(default=-1, name="shared memory")
    # Inductor's cpu_op rows carry a launcher text such as "grid(100,)"
    grid: tuple[I32, ...] | str | None = None  # tuples: hashable, see _GRID
    block: tuple[I32, ...] | str | None = None
    occupancy: float = msgspec.field(default=math.nan, name="est. achieved occupancy %")
    bytes: I64 = -1
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    sequence: I64 = msgspec.field(default=-1, name="Sequence number")
    flops: float = math.nan
    # a metadata event's text (thread_name, process_name): any JSON value, checked later
    label: msgspec.Raw = msgspec.field(default=_NO_RAW, name="name")
    # NCCL kernels' collective metadata (PyTorch's record_param_comms, copied by Kineto)
    group: str | I64 = msgspec.field(default="", name="Process Group Name")
    seq: I64 | str = msgspec.field(default=-1, name="Seq")


_EMPTY_ARGS = _Args()

# Start times that are integers, or within FAST_LIMIT_US, decode as numbers that hold
# them to the nanosecond; a larger one with a fraction fails the fast types and its slice
# is decoded by the exact ones, which keep the number's text (see exact_ns). Durations
# stay floats: exact to the ns up to 101 days.
FastTime = int | Annotated[float, msgspec.Meta(ge=-FAST_LIMIT_US, le=FAST_LIMIT_US)]


class _Event(msgspec.Struct, gc=False):
    """An event of any phase, as the whole-file decode reads them."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: I64 | str = -1
    tid: I64 | str = -1
    ts: FastTime = math.nan
    dur: float = math.nan
    id: I64 | str = -1
    args: _Args = _EMPTY_ARGS  # shared, frozen: events without args cost nothing


def _exact_fields(struct: Any, skip: tuple[str, ...] = ()) -> list[tuple[str, Any, Any]]:
    """A struct's fields with its start time as JSON text (``msgspec.Raw``)."""
    return [
        (f.name, msgspec.Raw, _NO_RAW) if f.name == "ts" else (f.name, f.type, f.default)
        for f in msgspec.structs.fields(struct)
        if f.name not in skip
    ]


_EventExact = msgspec.defstruct("_EventExact", _exact_fields(_Event), gc=False)


# Streamed slices decode each phase into its own type (a union tagged by "ph"): flow ends
# keep five fields and the phases perflab drops none, so they cost little to decode and
# are never keyed. A phase outside the Chrome trace format's list fails the slice, and the
# file is decoded whole.
class _Phased(msgspec.Struct, tag_field="ph", gc=False):
    """Base of the streamed record types."""


_Complete = msgspec.defstruct(  # _Event's fields but ph, which the tag holds
    "_Complete",
    [(f.name, f.type, f.default) for f in msgspec.structs.fields(_Event) if f.name != "ph"],
    bases=(_Phased,),
    tag="X",
    namespace={"ph": "X"},
)
_CompleteExact = msgspec.defstruct(
    "_CompleteExact",
    _exact_fields(_Event, skip=("ph",)),
    bases=(_Phased,),
    tag="X",
    namespace={"ph": "X"},
)
_COMPLETE_TYPES = (_Complete, _CompleteExact)
_EXACT_TYPES = (_EventExact, _CompleteExact)


class _MetadataArgs(msgspec.Struct, frozen=True, gc=False):
    label: msgspec.Raw = msgspec.field(default=_NO_RAW, name="name")  # checked later


class _Metadata(_Phased, tag="M"):
    """Thread and process names (and sort orders, which perflab does not use)."""

    name: str = ""
    pid: I64 | str = -1
    tid: I64 | str = -1
    args: _MetadataArgs = _MetadataArgs()


class _Flow(_Phased, tag="s"):
    cat: str = ""
    pid: I64 | str = -1
    tid: I64 | str = -1
    ts: FastTime = math.nan
    id: I64 | str = -1


_FLOW_TYPES = (_Flow, msgspec.defstruct("_FlowEnd", [], bases=(_Flow,), tag="f"))
_FlowExact = msgspec.defstruct(
    "_FlowExact", _exact_fields(_Flow), bases=(_Phased,), tag="s", gc=False
)
_EXACT_FLOW_TYPES = (
    _FlowExact,
    msgspec.defstruct("_FlowEndExact", [], bases=(_FlowExact,), tag="f"),
)
# The first pass only notes that flows are there: they are read (a second pass, with the
# types above and complete events left empty) only when a correlation is missing.
_FLOW_MARKS = [
    msgspec.defstruct(f"_FlowMark{i}", [], bases=(_Phased,), tag=phase)
    for i, phase in enumerate("sf")
]
_COMPLETE_MARK = msgspec.defstruct("_CompleteMark", [], bases=(_Phased,), tag="X")
_DROPPED = [
    msgspec.defstruct(f"_Phase{i}", [], bases=(_Phased,), tag=phase)
    for i, phase in enumerate("BEiICbnetPONDVvRc()")
]
_METADATA_MARK = msgspec.defstruct("_MetadataMark", [], bases=(_Phased,), tag="M")


class _File(msgspec.Struct):
    traceEvents: list[_Event]
    # None when absent, so that a streamed file's head and tail can be merged
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    baseTimeNanoseconds: I64 | None = None


_FileExact = msgspec.defstruct(
    "_FileExact",
    [
        ("traceEvents", list[_EventExact]),  # type: ignore[valid-type]
        *[(f.name, f.type, f.default) for f in msgspec.structs.fields(_File)[1:]],
    ],
)
# each decode tries the fast types first, then the exact ones (see FastTime)
_DECODERS = (msgspec.json.Decoder(_File), msgspec.json.Decoder(_FileExact))
_SKIPPER = msgspec.json.Decoder(msgspec.defstruct("_Nothing", []))  # checks syntax only


def _slice_decoder(*types: Any) -> Any:
    return msgspec.json.Decoder(list.__class_getitem__(functools.reduce(operator.or_, types)))


_SLICE_DECODERS = (
    _slice_decoder(_Complete, _Metadata, *_FLOW_MARKS, *_DROPPED),
    _slice_decoder(_CompleteExact, _Metadata, *_FLOW_MARKS, *_DROPPED),
)
_FLOW_SLICE_DECODERS = (
    _slice_decoder(_COMPLETE_MARK, _METADATA_MARK, *_FLOW_TYPES, *_DROPPED),
    _slice_decoder(_COMPLETE_MARK, _METADATA_MARK, *_EXACT_FLOW_TYPES, *_DROPPED),
)


def _decode(data: bytes, source: str) -> _Doc:
    try:
        f = _decode_typed(_DECODERS, data)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at ")
        if not where or "`$`" in where or "required field `traceEvents`" in message:
            raise InputError(f"not a Kineto trace: {message}", source=source) from None
        raise InputError(message, source=source, position=where.strip("`") or None) from None
    except msgspec.DecodeError as exc:
        raise InputError(f"malformed JSON: {exc}", source=source) from None
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", source=source) from None
    _check_utf8_strings(data, source)
    return _doc_of(f, f)


def _doc_of(head: Any, tail: Any, events: Iterable[list[Any]] | None = None) -> _Doc:
    """A _Doc from the decoded top level (the same object twice when decoded whole); a key
    found in both head and tail takes the tail's value, as a whole-file decode would."""

    def last(name: str) -> Any:
        value = getattr(tail, name)
        return getattr(head, name) if value is None else value

    base = last("baseTimeNanoseconds")
    return _Doc(
        [head.traceEvents] if events is None else events,
        last("deviceProperties") or [],
        last("distributedInfo") or {},
        {"base_time_ns": base} if base is not None else {},
    )


def _check_utf8_strings(data: bytes, source: str) -> None:
    """msgspec does not reject invalid UTF-8 inside strings; the standard says we must."""
    if data.isascii():
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", source=source, position=f"byte {exc.start}") from None


def _load_streaming(
    path: str | os.PathLike[str], source: str, python: bool, shown: _progress.Progress
) -> Trace:
    columns = _Columns(source, python)
    with _event_stream(path) as stream:
        for events in stream:
            columns.add(events)
            shown.update(stream.cursor.end)
    doc = _doc_of(stream.head, stream.tail, events=())
    return columns.finish(doc, lambda: _reread(path))


@contextlib.contextmanager
def _event_stream(
    path: str | os.PathLike[str], *, flows: bool = False
) -> Iterator[_kineto_fast.EventStream]:
    """The file's events, slice by slice (``flows``: flow events in full, complete events
    empty); the file is closed when the block ends."""
    blocks = _kineto_fast.read_blocks(path)
    decode = _decode_flow_slice if flows else _decode_slice
    try:
        yield _kineto_fast.EventStream(blocks, decode, _decode_top_level)
    finally:
        blocks.close()


def _reread(path: str | os.PathLike[str]) -> Iterator[list[Any]]:
    """The file's events again, for their flows."""
    with _event_stream(path, flows=True) as stream:
        yield from stream


# -- parallel loading: the file's ranges shared with helper processes (see _parallel) ------


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
    with _tempdirs.owned_temp_dir(TEMP_PREFIX) as tmp, _event_stream(path) as stream:
        start, size = stream.array_start, _kineto_fast.text_size(path)
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
        except (InputError, _kineto_fast.RangeLayout):
            return None  # one process reads it again (and names the bad event, if any)
        finally:
            _parallel.stop_helpers(running)
        # any other Unusual (malformed text) stops one stream too: the caller goes straight
        # to the whole-file check instead of streaming the file a second time
        if MALFORMED_EXIT in statuses:
            raise _kineto_fast.Unusual("a helper found malformed text")
        results = (
            own.pop(k, None) or _helper_result(claims, k, statuses, tmp) for k in range(n_ranges)
        )
        merged = _merge_ranges(results, _Columns(source, python), stream.tail)
        if merged is None or stream.head is None:
            return None
        columns, tail = merged
        return columns.finish(_doc_of(stream.head, tail, events=()), lambda: _reread(path))


def _merge_ranges(
    results: Iterator[tuple[dict[str, npt.NDArray[Any]], dict[str, Any]] | None],
    columns: _Columns,
    tail: Any,
) -> tuple[_Columns, Any] | None:
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
    stream: _kineto_fast.EventStream,
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
    events: Iterable[list[Any]], stream: _kineto_fast.EventStream, source: str, python: bool
) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
    """One range's columns, exported, with the span of text it covered."""
    columns = _Columns(source, python)
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
    """A helper process's work (``python -m perflab.io._kineto_helper JOB``): claim ranges
    of the file, decode them, save their columns. Its exit status."""
    claims = _parallel.Claims(job["dir"], len(job["bounds"]) + 1)
    with gc_paused():
        try:
            with _event_stream(job["path"]) as stream:
                stream.bounds = job["bounds"]
                for k, events in stream.ranges(lambda: _claim_for(job, claims)):
                    arrays, meta = _range_result(events, stream, job["path"], job["python"])
                    if stream.tail is not None:
                        meta["tail"] = {name: getattr(stream.tail, name) for name in _TOP_LEVEL}
                        stream.tail = None  # sent once
                    _parallel.save_result(claims.result_path(k), arrays, meta)
                    del arrays
                    return_freed_memory()
        except _kineto_fast.RangeLayout:
            return _parallel.DATA_ERROR
        except _kineto_fast.Unusual:
            return MALFORMED_EXIT
        except InputError:
            return _parallel.DATA_ERROR
    return 0


def _claim_for(job: dict[str, Any], claims: _parallel.Claims) -> int | None:
    """The next range for a helper; none once the process that started it is gone."""
    return claims.claim() if os.getppid() == job["parent"] else None


def _decode_slice(piece: bytes | memoryview) -> list[Any]:
    """One streamed slice of traceEvents; any doubt sends the caller to the whole-file path.
    (The stream has checked that the text is UTF-8.)"""
    return _decode_records(_SLICE_DECODERS, piece)


def _decode_flow_slice(piece: bytes | memoryview) -> list[Any]:
    return _decode_records(_FLOW_SLICE_DECODERS, piece)


def _decode_typed(decoders: tuple[Any, Any], text: bytes | memoryview) -> Any:
    """Decoded by the fast types, or by the exact ones where a time does not fit them (a
    ValidationError then comes from the exact types, which hold times as text)."""
    try:
        return decoders[0].decode(text)
    except msgspec.ValidationError:
        return decoders[1].decode(text)


def _decode_records(decoders: tuple[Any, Any], piece: bytes | memoryview) -> list[Any]:
    try:
        events: list[Any] = _decode_typed(decoders, piece)
    except msgspec.ValidationError:
        raise _kineto_fast.Unusual("invalid event") from None
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc):
            raise _kineto_fast.Truncated from None
        raise _kineto_fast.Unusual("malformed JSON") from None
    except RecursionError:
        raise _kineto_fast.Unusual("nested too deeply") from None
    return events


def _decode_top_level(piece: bytes) -> Any:
    try:
        return _decode_typed(_DECODERS, piece)
    except (msgspec.DecodeError, RecursionError):
        raise _kineto_fast.Unusual("unusual top level") from None


def lane_id(value: Any, name: str) -> int:
    """A device or stream id: an integer, or text in LANE_TEXT; pointers of 2**63 and above
    become negative (two's complement), so that distinct pointers stay distinct."""
    if type(value) is int and _I64_MIN <= value <= _I64_MAX:
        return value
    if not isinstance(value, str) or not LANE_TEXT.match(value):
        raise TypeError(f"'{name}' must be an integer or a hex string, not {str(value)[:40]!r}")
    if value == "(nil)":
        return 0
    number = int(value, 16) if value[:2] in ("0x", "0X") else int(value)
    return number - (1 << 64) if number > _I64_MAX else number


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


# -- columns -------------------------------------------------------------------------------


def _build(doc: _Doc, source: str, *, python: bool) -> Trace:
    columns = _Columns(source, python)
    for events in doc.events:
        columns.add(events)
    return columns.finish(doc, lambda: doc.events)


class _Ids(dict[Any, int]):
    """Interns values: a new value gets the next id and is remembered in ``new``."""

    def __init__(self) -> None:
        super().__init__()
        self.new: list[Any] = []

    def __missing__(self, key: Any) -> int:
        self[key] = value = len(self)
        self.new.append(key)
        return value

    def codes(self, values: Iterable[Any], n: int) -> npt.NDArray[np.int32]:
        return np.fromiter(map(self.__getitem__, values), np.int32, count=n)


# Per event, (ph, cat, name, pid, tid) is one of few distinct combinations: it is interned as
# one tuple and decoded once per distinct value. Each attribute read costs about as much as
# numpy's work on the value, so every field is read once, and ``args`` only for kept events.
_EVENT_KEY = attrgetter("ph", "cat", "name", "pid", "tid")
_ARGS = attrgetter("args")
_TS, _DUR = attrgetter("ts"), attrgetter("dur")  # one numpy pass each beats one of pairs
_FLOW = attrgetter("pid", "tid", "ts")
# read on args; grid and block are interned (few distinct values)
_ARG_IDS = attrgetter("correlation", "external_id")
_ARG_IDS_DTYPE = np.dtype([("correlation", np.int64), ("external_id", np.int64)])
_GRID, _BLOCK = attrgetter("grid"), attrgetter("block")
_OP_EXTRAS = attrgetter("flops", "input_dims", "input_types")
_COMM_ARGS = attrgetter("group", "seq")  # on kernels: NCCL collective metadata
_NO_COMM_ARGS = ("", -1)
_OP_TEXT = ("input_dims", "input_types")


class _KeyTable:
    """Numpy lookup columns over the ids of an :class:`_Ids`, extended as keys arrive."""

    def __init__(
        self, describe: Callable[[list[Any]], dict[str, list[Any]]], dtypes: dict[str, Any]
    ) -> None:
        self.ids = _Ids()
        self.describe = describe
        self.dtypes = dtypes
        self.lists: dict[str, list[Any]] = {name: [] for name in dtypes}
        self.arrays: dict[str, npt.NDArray[Any]] = {}

    def __getitem__(self, column: str) -> npt.NDArray[Any]:
        if self.ids.new:
            for name, values in self.describe(self.ids.new).items():
                self.lists[name].extend(values)
            self.ids.new = []
            self.arrays = {}
        if column not in self.arrays:
            dtype = np.dtype(self.dtypes[column])  # (int64, 3): rows of three
            array = np.array(self.lists[column], dtype=dtype.base)
            self.arrays[column] = array.reshape(-1, *dtype.shape)
        return self.arrays[column]


_EVENT_KEY_COLUMNS = {
    "keep": np.bool_,
    "flow": np.bool_,
    "names": np.bool_,
    "kind": np.int8,
    "gpu_cat": np.bool_,
    "name": np.int32,
    "pid": np.int64,
    "tid": np.int64,
}
_DIM3_COLUMNS = {"dim3": np.dtype((np.int64, 3))}  # rows of three


class _Columns:
    """Turns slices of decoded events into numpy columns (``add``), then one Trace
    (``finish``). Only the kept events' columns stay alive between slices."""

    def __init__(self, source: str, python: bool) -> None:
        self.source = source
        self.python = python
        self.skip = SKIPPED_CATEGORIES if python else SKIPPED_CATEGORIES | {"python_function"}
        self.strings = StringTable()
        # CPU ops' shapes and dtypes, one table each, joined to ``strings`` at the end so that
        # string ids do not depend on where the file was sliced
        self.op_strings = {name: StringTable() for name in _OP_TEXT}
        self.comm_groups = StringTable()  # process group names of NCCL kernels
        self.text_ids = _Ids()  # pids/tids given as names
        self.events = _KeyTable(self._describe_events, _EVENT_KEY_COLUMNS)
        self.dims = _KeyTable(lambda keys: {"dim3": _dim3(keys)}, _DIM3_COLUMNS)
        self.events_read = 0
        self.kept = 0
        # records that may be ac2g flow ends (for streamed slices, every record that is not a
        # complete event): with none, the file is not read again for flows
        self.maybe_flows = 0
        self.parts: dict[str, list[npt.NDArray[Any]]] = {}
        self.small_parts: dict[str, int] = {}  # parts appended since the last join, per key
        # thread_name / process_name -> {(pid, tid) as written: name}
        self.names: dict[str, dict[tuple[Any, Any], str]] = {k: {} for k in _NAME_EVENTS}

    def _put(self, **columns: npt.NDArray[Any]) -> None:
        for key, values in columns.items():
            parts = self.parts.setdefault(key, [])
            parts.append(values)
            # a slice's parts are small heap blocks; joined a few hundred at a time into one
            # large (mmapped) block, the heap's holes are reused instead of growing with the
            # file (a 3M-event load peaked at 255 MB instead of 344 MB)
            small = self.small_parts.get(key, 0) + 1
            if small >= SMALL_PARTS:
                parts[-small:] = [np.concatenate(parts[-small:])]
                small = 0
            self.small_parts[key] = small

    def _column(self, key: str, dtype: Any) -> npt.NDArray[Any]:
        parts = self.parts.pop(key, [])
        self.small_parts.pop(key, None)
        if not parts:
            return np.zeros(0, dtype=dtype)
        column = np.ascontiguousarray(np.concatenate(parts), dtype=dtype)
        freed = sum(p.nbytes for p in parts)
        del parts
        if freed >= RETURN_FREED_BYTES:
            return_freed_memory()
        return column

    def export(self) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
        """The columns read so far and what their ids stand for (JSON-able), for ``absorb``.
        The columns are handed over: this reader lets go of its parts at once, since it
        lives until the paused collector runs (its key table's describe method refers back
        to it), and a load exports one reader per range."""
        arrays = {key: np.concatenate(parts) for key, parts in self.parts.items()}
        self.parts, self.small_parts = {}, {}
        meta = {
            "keys": list(self.events.ids),
            "dims": list(self.dims.ids),
            "op_strings": {name: table.strings for name, table in self.op_strings.items()},
            "comm_groups": self.comm_groups.strings,
            "events_read": self.events_read,
            "kept": self.kept,
            "maybe_flows": self.maybe_flows,
            "names": {k: [[*key, text] for key, text in t.items()] for k, t in self.names.items()},
        }
        return arrays, meta

    def absorb(self, arrays: dict[str, npt.NDArray[Any]], meta: dict[str, Any]) -> None:
        """Take in the columns that another reader exported for the next part of the file,
        as if this one had read that part: ids are translated to this reader's."""
        keys = [tuple(key) for key in meta["keys"]]
        dims = [_hashable(dim) for dim in meta["dims"]]
        dim_id = self.dims.ids.codes(dims, len(dims))
        new_id = {
            "code": self.events.ids.codes(keys, len(keys)),
            "k_grid": dim_id,
            "k_block": dim_id,
            "c_group": self.comm_groups.add_all(meta["comm_groups"]),
            **{
                f"o_{name}": table.add_all(meta["op_strings"][name])
                for name, table in self.op_strings.items()
            },
        }
        for key, values in arrays.items():
            if key in new_id:
                values = _translated(values, new_id[key])
            elif key.endswith("_event"):
                values = values + self.kept  # rows of this reader's kept events
            self._put(**{key: values})
        self.events_read += meta["events_read"]
        self.kept += meta["kept"]
        self.maybe_flows += meta["maybe_flows"]
        for kind, entries in meta["names"].items():
            self._note_names(
                SimpleNamespace(name=kind, pid=pid, tid=tid, args=SimpleNamespace(label=text))
                for pid, tid, text in entries
            )

    def _describe_events(self, keys: list[Any]) -> dict[str, list[Any]]:
        """Lookup columns for new (ph, cat, name, pid, tid) keys."""
        ph, cat, name, pid, tid = zip(*keys, strict=True)
        keep = [p == "X" and c not in self.skip for p, c in zip(ph, cat, strict=True)]
        kind_gpu = [CATEGORIES.get(c, _OTHER) for c in cat]
        kept = list(compress(range(len(keys)), keep))  # text ids only for kept events
        pids, tids = [0] * len(keys), [0] * len(keys)
        for values, out in ((pid, pids), (tid, tids)):
            ids = _id_column([values[i] for i in kept], self.text_ids).tolist()
            for i, v in zip(kept, ids, strict=True):
                out[i] = v
        names = [self.strings.add(n) if k else -1 for n, k in zip(name, keep, strict=True)]
        return {
            "keep": keep,
            "flow": [p in ("s", "f") and c == "ac2g" for p, c in zip(ph, cat, strict=True)],
            "names": [p == "M" and n in _NAME_EVENTS for p, n in zip(ph, name, strict=True)],
            "kind": [int(k) for k, _ in kind_gpu],
            "gpu_cat": [g for _, g in kind_gpu],
            "name": names,
            "pid": pids,
            "tid": tids,
        }

    # -- one slice ---------------------------------------------------------------------
    def add(self, events: list[Any]) -> None:
        try:
            self._add(events)
        except InputError:
            raise
        except (OverflowError, ValueError, TypeError) as exc:
            # values the typed records let through that a column cannot hold (an id written
            # as a 30-digit text)
            raise InputError(
                f"a field has the wrong type or does not fit in 64 bits: {exc}",
                source=self.source,
            ) from None

    def _add(self, events: list[Any]) -> None:
        offset, n = self.events_read, len(events)
        self.events_read += n
        if n == 0:
            return
        table = self.events
        kept, code, position = self._kept(events)
        start_ns, dur_ns = self._times(kept, lambda k: offset + position(k))
        args = list(map(_ARGS, kept))
        ids = np.fromiter(map(_ARG_IDS, args), _ARG_IDS_DTYPE, count=len(args))
        kind = table["kind"][code].astype(np.int8)
        self._add_side_tables(args, kind)
        self._put(
            code=code,
            start_ns=start_ns,
            dur_ns=dur_ns,
            correlation=ids["correlation"],
            external_id=ids["external_id"],
            **self._gpu_lanes(args, table["gpu_cat"][code]),
        )
        self.kept += len(kept)

    def _kept(
        self, events: list[Any]
    ) -> tuple[list[Any], npt.NDArray[np.int32], Callable[[int], int]]:
        """The records that become rows (complete events of categories not skipped), their
        key codes and a function from a row's index to its event's position in ``events``
        (for error messages: worked out only when asked); thread and process names are
        noted."""
        table = self.events
        complete_mask: list[bool] | None = None  # None: every record is a complete event
        if _streamed(events):  # typed by phase: only complete events are keyed
            types = list(map(type, events))
            if _Metadata in types:
                self._note_names(compress(events, map(operator.is_, types, repeat(_Metadata))))
            complete = _CompleteExact if _CompleteExact in types else _Complete
            is_complete = list(map(operator.is_, types, repeat(complete)))
            complete_mask = is_complete
            events = list(compress(events, is_complete))
            self.maybe_flows += len(is_complete) - len(events)
            code = table.ids.codes(map(_EVENT_KEY, events), len(events))
        else:
            code = table.ids.codes(map(_EVENT_KEY, events), len(events))
            self.maybe_flows += int(np.count_nonzero(table["flow"][code]))
            named = np.flatnonzero(table["names"][code])
            if len(named):
                self._note_names(_pick(events, named))
        keep = table["keep"][code]
        position = functools.partial(_position, complete_mask, keep)
        return list(compress(events, keep.tolist())), code[keep], position

    def _note_names(self, records: Iterable[Any]) -> None:
        """Thread and process names from metadata events (the last one given wins, as in
        trace viewers); a name that is not text is ignored, a long one is cut."""
        for e in records:
            table = self.names.get(e.name)
            if table is None or (len(table) >= MAX_NAME_TABLE and (e.pid, e.tid) not in table):
                continue
            text = _name_text(e.args.label)
            if text:
                table[(e.pid, e.tid)] = text

    def _times(
        self, kept: list[Any], position: Callable[[int], int]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Start and duration of every kept event in integer ns, checked (see _check_times).
        Floats (times within FAST_LIMIT_US) convert exactly; larger times come as text."""
        n = len(kept)
        dur = np.fromiter(map(_DUR, kept), np.float64, count=n)
        if n and type(kept[0]) in _EXACT_TYPES:
            start_ns, ts = exact_ns(list(map(_TS, kept)))
            self._check_times(ts, dur, position)
        else:
            ts = np.fromiter(map(_TS, kept), np.float64, count=n)
            self._check_times(ts, dur, position)
            start_ns = _us_to_ns(ts)
        return start_ns, np.rint(dur * 1000.0).astype(np.int64)

    def _gpu_lanes(
        self, args: list[Any], gpu_cat: npt.NDArray[np.bool_]
    ) -> dict[str, npt.NDArray[np.int64]]:
        """device and stream args, read only where they place the event (GPU categories);
        -1 elsewhere."""
        rows = np.flatnonzero(gpu_cat)
        on_gpu = _pick(args, rows)
        lanes = {}
        for name in ("device", "stream"):
            column = np.full(len(args), -1, dtype=np.int64)
            try:
                column[rows] = _numbers(on_gpu, name)
            except ValueError:  # ids given as hex text: parsed one by one
                column[rows] = [lane_id(getattr(a, name), name) for a in on_gpu]
            lanes[name] = column
        return lanes

    def _check_times(
        self, ts: npt.NDArray[np.float64], dur: npt.NDArray[np.float64], position: Any
    ) -> None:
        """Every complete event needs a finite ts and a finite, non-negative dur, both
        inside the model's time window."""
        # NaN fails every comparison, so four reductions clear a good slice
        if ((ts >= TS_MIN_US) & (ts <= TS_MAX_US)).all() and (
            (dur >= 0) & (dur <= DUR_MAX_US)
        ).all():
            return
        problems = (
            (~np.isfinite(ts), "missing or non-finite 'ts'"),
            (
                (np.nan_to_num(ts) < TS_MIN_US) | (np.nan_to_num(ts) > TS_MAX_US),
                "'ts' outside the time window (-2**60 to 2**62 - 2**60 ns)",
            ),
            (~np.isfinite(dur), "missing or non-finite 'dur'"),
            (np.nan_to_num(dur) < 0, "negative duration"),
            (np.nan_to_num(dur) > DUR_MAX_US, "'dur' longer than 146 years"),
        )
        for bad, what in problems:
            if bad.any():
                raise InputError(
                    f"{what} in a complete ('X') event",
                    source=self.source,
                    position=f"traceEvents[{position(int(np.flatnonzero(bad)[0]))}]",
                )

    def _add_side_tables(self, args: list[Any], kind: npt.NDArray[np.int8]) -> None:
        """Kernel, memcpy/memset and CPU-op rows from the kept events' ``args``."""
        base = self.kept
        rows = np.flatnonzero(kind == EventKind.KERNEL)
        kernels, n = _pick(args, rows), len(rows)
        self._put(
            k_event=rows + base,
            k_grid=self.dims.ids.codes(map(_GRID, kernels), n),
            k_block=self.dims.ids.codes(map(_BLOCK, kernels), n),
            k_registers=_numbers(kernels, "registers"),
            k_shared_mem=_numbers(kernels, "shared_memory"),
            k_occupancy=_numbers(kernels, "occupancy", np.float64),
        )
        comm = list(map(_COMM_ARGS, kernels))
        if comm.count(_NO_COMM_ARGS) != n:  # NCCL kernels with collective metadata
            self._add_comm_args(rows + base, comm)
        rows = np.flatnonzero((kind == EventKind.MEMCPY) | (kind == EventKind.MEMSET))
        self._put(m_event=rows + base, m_bytes=_numbers(_pick(args, rows), "bytes"))
        rows = np.flatnonzero(kind == EventKind.CPU_OP)
        ops = _pick(args, rows)
        sequence = _numbers(ops, "sequence")
        flops, dims, types = self._op_extras(ops)
        keep = (sequence >= 0) | np.isfinite(flops) | (dims >= 0) | (types >= 0)
        self._put(
            o_event=rows[keep] + base,
            o_sequence=sequence[keep],
            o_flops=flops[keep],
            o_input_dims=dims[keep],
            o_input_types=types[keep],
        )

    def _add_comm_args(self, rows: npt.NDArray[np.intp], comm: list[tuple[Any, Any]]) -> None:
        """Process group and sequence number of the kernels that carry them."""
        keep = [c != _NO_COMM_ARGS for c in comm]
        kept = list(compress(comm, keep))
        self._put(
            c_event=rows[np.array(keep, dtype=bool)],
            c_group=np.array(
                [self.comm_groups.add(str(g)[:MAX_NAME_TEXT]) if g != "" else -1 for g, _ in kept],
                dtype=np.int32,
            ),
            c_seq=np.array([_sequence_number(q) for _, q in kept], dtype=np.int64),
        )

    def _op_extras(
        self, ops: Sequence[Any]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """flops, input dims and input types from CPU ops' args; most traces record none."""
        extras = list(map(_OP_EXTRAS, ops))
        # the decoders' shared defaults: a tuple compare finds them by identity
        absent = (math.nan, _NO_RAW, _NO_RAW)
        if extras.count(absent) == len(extras):
            missing = np.full(len(ops), -1, np.int32)
            return np.full(len(ops), np.nan), missing, missing
        flops, dims, types = zip(*extras, strict=True)
        return (
            np.array(flops, dtype=np.float64).reshape(-1),
            _raw_strings(list(dims), self.op_strings["input_dims"]),
            _raw_strings(list(types), self.op_strings["input_types"]),
        )

    # -- the whole trace -------------------------------------------------------------------
    def finish(self, doc: _Doc, reread: Callable[[], Iterable[list[Any]]]) -> Trace:
        """``reread`` gives the events again: flows are only read when some launch or GPU
        activity lacks its correlation, which current Kineto versions always record."""
        code = self._column("code", np.int32)
        table = self.events
        tracks, track = self._tracks(code, gpu_word(doc.devices))
        start_ns = self._column("start_ns", np.int64)
        correlation = self._column("correlation", np.int64)
        self._link_flows(code, table["kind"][code], correlation, start_ns, reread)
        comm_meta = self._comm_meta(correlation)
        kernels = self._kernel_table()
        memcpy = self._memcpy_table(code)
        ops = self._op_table()
        order = sort_order(start_ns, track)
        new_row = renumber(order)
        for side in (kernels, memcpy, ops):
            side.columns["event"] = new_row[side["event"]]
        del new_row
        # sorted one column at a time: the unsorted one is freed before the next is made
        code = code[order]
        columns = {"start_ns": start_ns[order]}
        del start_ns
        columns["dur_ns"] = self._column("dur_ns", np.int64)[order]
        columns["kind"] = table["kind"][code]
        columns["track"] = track[order]
        del track
        columns["name"] = table["name"][code].astype(np.int32)
        del code
        columns["correlation"] = correlation[order]
        del correlation
        columns["external_id"] = self._column("external_id", np.int64)[order]
        del order
        events = events_table(columns)
        return Trace(
            events,
            tracks,
            self.strings.strings,
            kernels=kernels,
            memcpy=memcpy,
            ops=ops,
            meta={
                **_meta(doc, self.source, self.python, self.events_read),
                **self._name_meta(),
                **comm_meta,
            },
        )

    def _comm_meta(self, correlation: npt.NDArray[np.int64]) -> dict[str, Any]:
        """``collective_args``: the NCCL kernels' process groups and sequence numbers, keyed
        by the kernels' correlation ids (see perflab.model.trace); absent when none has
        them."""
        rows = self._column("c_event", np.int64)
        group = self._column("c_group", np.int32)
        seq = self._column("c_seq", np.int64)
        linked = correlation[rows] >= 0  # a kernel without a correlation cannot be found
        if not linked.any():
            return {}
        names = self.comm_groups.strings
        return {
            "collective_args": {
                "correlation": correlation[rows[linked]].tolist(),
                "group": [names[g] if g >= 0 else None for g in group[linked].tolist()],
                "seq": seq[linked].tolist(),
            }
        }

    def _name_meta(self) -> dict[str, dict[str, str]]:
        """``thread_names`` ({"<pid>:<tid>": name}) and ``process_names`` ({"<pid>": name}),
        with pids and tids numbered as the tracks number them; absent when the trace names
        none."""
        out: dict[str, dict[str, str]] = {}
        for kind, table in self.names.items():
            names = {}
            for (pid, tid), text in table.items():
                key = str(_id_value(pid, self.text_ids))
                if kind == "thread_name":
                    key += f":{_id_value(tid, self.text_ids)}"
                names[key] = text
            if names:
                out[kind.replace("_name", "_names")] = names
        return out

    def _tracks(self, code: npt.NDArray[np.int32], gpu: str) -> tuple[Table, npt.NDArray[np.int32]]:
        """Tracks and the track of every event. The lane is a function of the event key and
        the device/stream args, so it is worked out once per distinct combination."""
        table = self.events
        group, key, device_arg, stream_arg = _key_groups(
            code,
            self._column("device", np.int64),
            self._column("stream", np.int64),
            len(table["kind"]),
        )
        kind, pid, tid = (table[c][key] for c in ("kind", "pid", "tid"))
        # GPU work sits on (device, stream); a cuda_sync only when it names a device
        on_gpu = table["gpu_cat"][key] & ((kind != EventKind.SYNC) | (device_arg >= 0))
        device = np.where(on_gpu, np.where(device_arg >= 0, device_arg, pid), pid)
        stream = np.where(on_gpu, np.where(stream_arg >= 0, stream_arg, tid), tid)
        track_kind = np.where(on_gpu, TrackKind.GPU, TrackKind.CPU).astype(np.int8)
        tracks, lane = build_tracks(device, stream, track_kind, self.strings, gpu=gpu)
        return tracks, lane[group]

    def _link_flows(
        self,
        code: npt.NDArray[np.int32],
        kind: npt.NDArray[np.int8],
        correlation: npt.NDArray[np.int64],
        start_ns: npt.NDArray[np.int64],
        reread: Callable[[], Iterable[list[Any]]],
    ) -> None:
        """Fill missing correlations of launches and GPU work from ``ac2g`` flow events,
        whose endpoints sit on (pid, tid, ts) of the events they bind to."""
        missing = np.flatnonzero(np.isin(kind, _LINKABLE) & (correlation < 0))
        if len(missing) == 0 or self.maybe_flows == 0:
            return
        ends = self._flow_ends(reread())
        pid, tid = self.events["pid"][code], self.events["tid"][code]
        for i in missing.tolist():
            found = ends.get((int(pid[i]), int(tid[i]), int(start_ns[i])))
            if found is not None:
                correlation[i] = found

    def _flow_ends(self, slices: Iterable[list[Any]]) -> dict[tuple[int, int, int], int]:
        """``ac2g`` flow ends by the (pid, tid, start in ns) they sit on -> their id."""
        ends: dict[tuple[int, int, int], int] = {}
        flow_types = (*_FLOW_TYPES, *_EXACT_FLOW_TYPES)
        for events in slices:
            if _streamed(events):
                flows = [e for e in events if type(e) in flow_types and e.cat == "ac2g"]
            else:
                code = self.events.ids.codes(map(_EVENT_KEY, events), len(events))
                flows = list(compress(events, self.events["flow"][code].tolist()))
            flows = [f for f in flows if type(f.id) is int]  # ids given as text do not link
            for f, ns in zip(flows, _ns_of(list(map(_TS, flows))).tolist(), strict=True):
                pid, tid, _ = _FLOW(f)
                ends[(_id_value(pid, self.text_ids), _id_value(tid, self.text_ids), ns)] = f.id
        return ends

    def _kernel_table(self) -> Table:
        dims = self.dims["dim3"]
        grid, block = (dims[self._column(f"k_{name}", np.int32)] for name in ("grid", "block"))
        return Table(
            KERNEL_COLUMNS,
            {
                "event": self._column("k_event", np.int64),
                "grid_x": grid[:, 0],
                "grid_y": grid[:, 1],
                "grid_z": grid[:, 2],
                "block_x": block[:, 0],
                "block_y": block[:, 1],
                "block_z": block[:, 2],
                "registers": self._column("k_registers", np.int64),
                "shared_mem": self._column("k_shared_mem", np.int64),
                "occupancy": self._column("k_occupancy", np.float64),
            },
        )

    def _memcpy_table(self, code: npt.NDArray[np.int32]) -> Table:
        rows = self._column("m_event", np.int64)
        text = self.strings.strings
        name = self.events["name"][code[rows]]
        # direction per distinct name ("Memcpy HtoD (Pageable -> Device)"), then per row
        lookup = np.zeros(len(text), dtype=np.int8)
        for n in np.unique(name).tolist():
            lookup[n] = memcpy_direction(text[n])
        direction = lookup[name]
        direction[self.events["kind"][code[rows]] == EventKind.MEMSET] = _DIRECTION_CODE["memset"]
        return Table(
            MEMCPY_COLUMNS,
            {"event": rows, "bytes": self._column("m_bytes", np.int64), "direction": direction},
        )

    def _op_table(self) -> Table:
        text = {
            name: _translated(
                self._column(f"o_{name}", np.int32), self.strings.add_all(table.strings)
            )
            for name, table in self.op_strings.items()
        }
        return Table(
            OP_COLUMNS,
            {
                "event": self._column("o_event", np.int64),
                "sequence": self._column("o_sequence", np.int64),
                "flops": self._column("o_flops", np.float64),
                **text,
            },
        )


_NAME_EVENTS = ("thread_name", "process_name")


def _name_text(value: Any) -> str:
    """A metadata event's ``args.name`` as text ("" when it is not a string), at most
    MAX_NAME_TEXT long."""
    if isinstance(value, msgspec.Raw):
        raw = bytes(value)
        if raw[:1] != b'"':
            return ""
        value = msgspec.json.decode(raw)
    if not isinstance(value, str):
        return ""
    text = value.strip()
    return text if len(text) <= MAX_NAME_TEXT else text[: MAX_NAME_TEXT - 1] + "…"


def _sequence_number(value: Any) -> int:
    """A collective's "Seq" (a count; digit text is read as the number); -1 otherwise."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    return value if type(value) is int and value >= 0 else -1


def _position(complete: list[bool] | None, keep: npt.NDArray[np.bool_], row: int) -> int:
    """Where a slice's kept row ``row`` was among its records (see _Columns._kept)."""
    rows = np.flatnonzero(keep)
    at = rows if complete is None else np.flatnonzero(complete)[rows]
    return int(at[row])


def _ns_of(values: list[Any]) -> npt.NDArray[np.int64]:
    """Times in us (floats, or text where they did not fit a float) -> ns, as events get
    theirs; a value that is no time gives -1 (it then matches no event)."""
    if all(type(v) is float for v in values):
        us = np.array(values, dtype=np.float64)
        ok = np.isfinite(us) & (us >= TS_MIN_US) & (us <= TS_MAX_US)
        return np.where(ok, _us_to_ns(np.where(ok, us, 0.0)), -1)
    ns, us = exact_ns(values)
    return np.where(np.isfinite(us) & (us >= TS_MIN_US) & (us <= TS_MAX_US), ns, -1)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return None
    return trim


def return_freed_memory() -> None:
    """Hand the pages of freed heap blocks back to the system (glibc's malloc_trim). The
    columns' parts, freed as each column is joined, leave holes in the heap that a larger
    column does not fit in; resident, they counted in the load's peak (a 3M-event load with
    a helper: 391 MB without, 290 MB with)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _streamed(events: list[Any]) -> bool:
    """Whether a slice holds records typed by phase (see ``_Phased``)."""
    return bool(events) and isinstance(events[0], _Phased)


def _key_groups(
    code: npt.NDArray[np.int32],
    device: npt.NDArray[np.int64],
    stream: npt.NDArray[np.int64],
    n_keys: int,
) -> tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Distinct (key, device, stream) combinations that occur: (group of every event, and
    per group its key, device and stream). Kineto gives every event of a key the same
    device and stream, which is checked in one vectorised pass; otherwise rows are sorted."""
    seen_device = np.zeros(n_keys, dtype=np.int64)
    seen_stream = np.zeros(n_keys, dtype=np.int64)
    seen_device[code], seen_stream[code] = device, stream
    if np.array_equal(seen_device[code], device) and np.array_equal(seen_stream[code], stream):
        used = np.flatnonzero(np.bincount(code, minlength=n_keys))
        group_of_key = np.zeros(n_keys, dtype=np.int64)
        group_of_key[used] = np.arange(len(used))
        return group_of_key[code], used, seen_device[used], seen_stream[used]
    rows = np.stack([code.astype(np.int64), device, stream], axis=1)
    distinct, group = unique_rows(rows)
    return group, distinct[:, 0], distinct[:, 1], distinct[:, 2]


def _pick(records: list[Any], rows: npt.NDArray[np.intp]) -> Sequence[Any]:
    """``records[rows]`` for a list."""
    if len(rows) < 2:
        return [records[i] for i in rows.tolist()]
    picked: tuple[Any, ...] = itemgetter(*rows.tolist())(records)
    return picked


def _numbers(records: Sequence[Any], name: str, dtype: Any = np.int64) -> npt.NDArray[Any]:
    """Attribute ``name`` of every record, as one numpy column."""
    return np.fromiter(map(attrgetter(name), records), dtype, count=len(records))


def _us_to_ns(ts: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Microseconds (float, exact up to 2**53) to int64 ns without float rounding of the
    large integer part: whole microseconds * 1000 + rounded fraction."""
    whole = np.floor(ts)
    return whole.astype(np.int64) * 1000 + np.rint((ts - whole) * 1000.0).astype(np.int64)


_MAX_WHOLE_DIGITS = 16  # whole microseconds of the time window (3.5e15) have at most 16
_POWERS = 10 ** np.arange(_MAX_WHOLE_DIGITS + 3, dtype=np.uint64)  # sums stay below 2**64
_COMMA, _DOT, _MINUS, _ZERO = b",.-0"


def exact_ns(values: Sequence[Any]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Microseconds given as JSON number text (``msgspec.Raw`` or bytes) or as numbers (ints
    and floats the fast types read) -> (nanoseconds, rounded half to even from the decimal digits
    themselves, never through a float; microseconds as float64, NaN where a value is not a
    number). The ns of a value outside the model's time window is 0 (its float says where it
    lies)."""
    texts: Sequence[Any] = values
    try:  # Raw and bytes join as they are: no step per value in Python
        joined = b",".join(texts)
    except TypeError:  # numbers, or values that are none
        texts = [v if isinstance(v, (bytes, bytearray)) else _number_text(v) for v in values]
        joined = b",".join(texts)
    n = len(texts)
    ns, plain = _plain_ns(joined, n) if n else (np.zeros(0, np.int64), np.zeros(0, bool))
    us = ns / 1000.0
    for i in np.flatnonzero(~plain).tolist():  # exponents, long digit runs, non-numbers
        ns[i], us[i] = _one_exact_ns(bytes(texts[i]))
    return ns, us


def _number_text(value: Any) -> Any:
    """A time value as text bytes (a Raw is used as it is: bytes.join reads it)."""
    if isinstance(value, msgspec.Raw):
        return value
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        return str(value).encode()
    return b"?"  # not a number


def _plain_ns(joined: bytes, n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """ns of the ``n`` comma-joined texts that read ``-?D{1,16}(.D+)?`` (and whether each
    does), computed on their bytes all at once: each digit times its power of ten, summed
    per text."""
    buf = np.frombuffer(joined + b",", np.uint8)
    ends = np.flatnonzero(buf == _COMMA)
    if len(ends) != n:  # a comma inside some value: not numbers; one by one
        return np.zeros(n, np.int64), np.zeros(n, bool)
    starts = np.concatenate([[0], ends[:-1] + 1])
    aligned = _aligned_ns(buf, starts, ends, joined.find(b"."))
    if aligned is not None:
        return aligned
    of_byte = np.repeat(np.arange(n), ends - starts + 1)  # the text each byte belongs to
    digit = (buf >= _ZERO) & (buf <= _ZERO + 9)
    dots = np.flatnonzero(buf == _DOT)
    negative = buf[np.minimum(starts, len(buf) - 1)] == _MINUS
    odd = ~digit
    odd[dots] = False
    odd[ends] = False
    odd[starts[negative]] = False
    point = ends.copy()  # where each text's point is (its end when it has none)
    point[of_byte[dots]] = dots
    whole_digits = point - starts - negative
    plain = (
        (whole_digits >= 1)
        & (whole_digits <= _MAX_WHOLE_DIGITS)
        & (np.bincount(of_byte[dots], minlength=n) <= 1)
        & (np.bincount(of_byte[odd], minlength=n) == 0)
    )
    # a digit's place: 1 for the last whole digit, -1 for the first after the point; in ns
    # it stands for 10**power
    place = point[of_byte] - np.arange(len(buf))
    power = np.where(place > 0, place + 2, place + 3)
    value = (buf - _ZERO).astype(np.uint64)
    counted = digit & (power >= 0)
    magnitude = np.add.reduceat(
        np.where(counted, value * _POWERS[np.clip(power, 0, len(_POWERS) - 1)], 0), starts
    )
    below = digit & (power < 0)  # digits below a nanosecond decide the rounding
    tenth = np.add.reduceat(np.where(below & (power == -1), value, 0), starts)
    rest = np.add.reduceat(below & (power < -1) & (value > 0), starts) > 0
    magnitude += (tenth > 5) | ((tenth == 5) & (rest | (magnitude % 2 == 1)))
    limit = np.where(negative, -TIME_MIN_NS, TIME_MAX_NS).astype(np.uint64)
    inside = plain & (magnitude <= limit)
    signed = np.where(inside, magnitude, 0).astype(np.int64)
    return np.where(negative, -signed, signed), inside


_FRACTION_NS = np.array([0, 100, 10, 1], dtype=np.uint64)  # the point, then three decimals


def _aligned_ns(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], ends: npt.NDArray[np.intp], dot: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None:
    """The layout of nearly every trace: every text has the same number of whole digits
    (``dot``, the first text's) and one to three decimals. The texts are read as rows of a
    digit matrix, weighted by one product, instead of the general pass's bookkeeping per
    byte; None for any other layout, which the general pass reads."""
    if not 1 <= dot <= _MAX_WHOLE_DIGITS:
        return None
    decimals = ends - starts - dot - 1
    if decimals.min() < 1 or decimals.max() > 3:
        return None
    padded = np.concatenate([buf, np.zeros(3, np.uint8)])  # the last row may read past it
    rows = np.lib.stride_tricks.sliding_window_view(padded, dot + 4)[starts]
    if (rows[:, dot] != _DOT).any():
        return None
    digits = rows - np.uint8(_ZERO)  # non-digits wrap around to more than 9
    digits[:, dot] = 0
    digits[:, dot + 1 :] *= np.arange(3) < decimals[:, None]  # past its decimals: unused
    if (digits > 9).any():
        return None
    weights = np.concatenate([_POWERS[dot + 2 : 2 : -1], _FRACTION_NS])  # ns per digit
    magnitude = digits.astype(np.uint64) @ weights
    inside = magnitude <= np.uint64(TIME_MAX_NS)
    return np.where(inside, magnitude, 0).astype(np.int64), inside


def _one_exact_ns(text: bytes) -> tuple[int, float]:
    """(ns, float us) of one JSON number in any notation; (0, NaN) for anything else."""
    try:
        value = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError):
        return 0, math.nan
    if not value.is_finite() or text.strip()[:1] not in b"-0123456789":
        return 0, math.nan
    us = float(value)
    if not TS_MIN_US <= us <= TS_MAX_US:
        return 0, us
    return int((value * 1000).to_integral_value(ROUND_HALF_EVEN)), us


def _id_column(values: list[Any], text_ids: _Ids) -> npt.NDArray[np.int64]:
    """pid/tid: integers as they are; names (e.g. "Spans") become stable negative ids."""
    try:
        return np.array(values, dtype=np.int64)
    except (ValueError, TypeError):
        return np.array([_id_value(v, text_ids) for v in values], dtype=np.int64)


def _id_value(value: Any, text_ids: _Ids) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    # numbered in order of first use, so the same in every slicing of the file
    return int(text) if text.lstrip("-").isdigit() else -2 - text_ids[text]


def _dim3(values: Iterable[Any]) -> list[list[int]]:
    """grid/block triples; -1s where absent or not three integers."""
    missing = (-1, -1, -1)
    rows = [v if isinstance(v, tuple) and len(v) == 3 else missing for v in values]
    triples: list[list[int]] = np.array(rows, dtype=np.int64).tolist()
    return triples


def memcpy_direction(name: str) -> int:
    """``"Memcpy HtoD (Pageable -> Device)"`` -> the code of ``"HtoD"`` in MEMCPY_DIRECTIONS."""
    words = name.split()
    token = words[1].lower() if len(words) > 1 and words[0].lower() == "memcpy" else ""
    return _DIRECTION_CODE.get(token, 0)


def _translated(
    local: npt.NDArray[np.int32], new_id: npt.NDArray[np.int32]
) -> npt.NDArray[np.int32]:
    """Ids of one table as ids of another (``new_id``: local id -> id there); -1 stays."""
    if len(new_id) == 0:
        return local
    return np.where(local >= 0, new_id[np.maximum(local, 0)], -1).astype(np.int32)


def _raw_strings(raws: list[Any], strings: StringTable) -> npt.NDArray[np.int32]:
    """JSON fragments (shapes, dtypes) as string ids; -1 where absent."""
    return np.array(
        [strings.add(bytes(r).decode("utf-8", "replace")) if len(r) else -1 for r in raws],
        dtype=np.int32,
    )


def gpu_word(devices: list[Any]) -> str:
    """How the trace's GPUs are called in labels: "AMD GPU" where deviceProperties name an
    AMD device (a ROCm trace), else "GPU"."""
    for device in devices:
        if isinstance(device, dict) and any(
            isinstance(device.get(key), str) and _AMD_NAME.search(device[key])
            for key in ("name", "vendor", "gcnArchName")
        ):
            return "AMD GPU"
    return "GPU"


def _meta(doc: _Doc, source: str, python: bool, events_read: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "source": source,
        "format": "kineto",
        "events_read": events_read,
        "devices": [_plain(d, source) for d in doc.devices if isinstance(d, dict)],
        "python_functions": python,
        **doc.extra,
    }
    if gpu_word(doc.devices) != "GPU":
        meta["gpu"] = gpu_word(doc.devices)
    for key in ("rank", "world_size", "backend"):
        if key in doc.distributed:
            meta[key] = _plain(doc.distributed[key], source)
    for key, low, what in (("rank", 0, "a rank number"), ("world_size", 1, "a size")):
        value = meta.get(key, low)
        if isinstance(value, str) and value.isascii() and value.isdigit():
            value = meta[key] = int(value)  # some writers give the rank as text
        if type(value) is not int or not low <= value <= _I64_MAX:  # analyses count with it
            raise InputError(f"distributedInfo.{key} {value!r} is not {what}", source=source)
    return meta


def _plain(value: Any, source: str) -> Any:
    """Keep meta JSON-able and shallow (device properties are nested plain values)."""
    if nesting_depth(value) > MAX_DEPTH:
        raise InputError(f"trace metadata nested more than {MAX_DEPTH} deep", source=source)
    return json_safe(json.loads(json.dumps(value, default=str)))
