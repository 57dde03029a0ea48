"""Kineto / torch.profiler Chrome-trace JSON (plain or gzip) -> :class:`Trace`.

The file is decoded by msgspec into compact typed records (only the fields perflab uses;
everything else is skipped by the decoder), then turned into numpy columns one field at a
time; no dict per event is built. Without msgspec the standard ``json`` module is used (slower,
same result). ``ac2g`` flow events fill in a missing launch<->kernel correlation and are then
dropped; ``python_function`` events are skipped unless ``python=True``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.io._common import (
    StringTable,
    build_tracks,
    events_table,
    read_bytes,
    renumber,
    sort_order,
)
from perflab.model.trace import (
    KERNEL_COLUMNS,
    MEMCPY_COLUMNS,
    MEMCPY_DIRECTIONS,
    OP_COLUMNS,
    EventKind,
    Table,
    Trace,
    TrackKind,
)

try:
    import msgspec
except ImportError:  # pragma: no cover - exercised by forcing the fallback in tests
    msgspec = None  # type: ignore[assignment]

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
MAX_TS_US = 9.2e15  # microseconds that still fit in int64 nanoseconds
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_DIRECTION_CODE = {d.lower(): i for i, d in enumerate(MEMCPY_DIRECTIONS)}


def load_kineto(path: str | os.PathLike[str], *, python: bool = False) -> Trace:
    """Read a torch.profiler / Kineto trace (``.json`` or ``.json.gz``)."""
    source = str(path)
    data = read_bytes(path)
    doc = _decode(data, source)
    return _build(doc, source, python=python)


def loads_kineto(data: bytes, source: str = "<bytes>", *, python: bool = False) -> Trace:
    """Like :func:`load_kineto`, from bytes already in memory (not gzip)."""
    return _build(_decode(data, source), source, python=python)


# -- decoding ------------------------------------------------------------------------------


@dataclass
class _Doc:
    events: list[Any]  # typed records with the attributes of _Event
    devices: list[dict[str, Any]]
    distributed: dict[str, Any]
    extra: dict[str, Any]


if msgspec is not None:
    I64 = Annotated[int, msgspec.Meta(ge=_I64_MIN, le=_I64_MAX)]

    class _Args(msgspec.Struct, gc=False):
        correlation: I64 = -1
        external_id: I64 = msgspec.field(default=-1, name="External id")
        device: I64 = -1
        stream: I64 = -1
        # Inductor's cpu_op rows carry a launcher text such as "grid(100,)"
        grid: list[I64] | str | None = None
        block: list[I64] | str | None = None
        registers: I64 = msgspec.field(default=-1, name="registers per thread")
        shared_memory: I64 = msgspec.field(default=-1, name="shared memory")
        occupancy: float = msgspec.field(default=math.nan, name="est. achieved occupancy %")
        bytes: I64 = -1
        sequence: I64 = msgspec.field(default=-1, name="Sequence number")
        flops: float = math.nan
        input_dims: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input Dims")
        input_types: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw, name="Input type")

    class _Event(msgspec.Struct, gc=False):
        ph: str = ""
        cat: str = ""
        name: str = ""
        pid: I64 | str = -1
        tid: I64 | str = -1
        ts: float = math.nan
        dur: float = math.nan
        id: I64 | str = -1
        args: _Args | None = None

    class _File(msgspec.Struct):
        traceEvents: list[_Event]
        deviceProperties: list[dict[str, Any]] = msgspec.field(default_factory=list)
        distributedInfo: dict[str, Any] = msgspec.field(default_factory=dict)
        baseTimeNanoseconds: I64 | None = None

    _DECODER = msgspec.json.Decoder(_File)
    _EMPTY_ARGS: Any = _Args()


def _decode(data: bytes, source: str) -> _Doc:
    if msgspec is None:
        return _decode_stdlib(data, source)
    try:
        f = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at ")
        if "`$`" in where or "Object missing required field `traceEvents`" in message:
            raise InputError(f"not a Kineto trace: {message}", source=source) from None
        raise InputError(message, source=source, position=where.strip("`") or None) from None
    except msgspec.DecodeError as exc:
        raise InputError(f"malformed JSON: {exc}", source=source) from None
    _check_utf8_strings(data, source)
    extra = {"base_time_ns": f.baseTimeNanoseconds} if f.baseTimeNanoseconds is not None else {}
    return _Doc(f.traceEvents, f.deviceProperties, f.distributedInfo, extra)


def _check_utf8_strings(data: bytes, source: str) -> None:
    """msgspec does not reject invalid UTF-8 inside strings; the standard says we must."""
    if data.isascii():
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", source=source, position=f"byte {exc.start}") from None


class _DictArgs:
    """The fallback decoder's stand-in for ``_Args`` (same attribute names)."""

    __slots__ = (
        "block",
        "bytes",
        "correlation",
        "device",
        "external_id",
        "flops",
        "grid",
        "input_dims",
        "input_types",
        "occupancy",
        "registers",
        "sequence",
        "shared_memory",
        "stream",
    )

    def __init__(self, a: dict[str, Any]) -> None:
        self.correlation = a.get("correlation", -1)
        self.external_id = a.get("External id", -1)
        self.device = a.get("device", -1)
        self.stream = a.get("stream", -1)
        self.grid = a.get("grid")
        self.block = a.get("block")
        self.registers = a.get("registers per thread", -1)
        self.shared_memory = a.get("shared memory", -1)
        self.occupancy = a.get("est. achieved occupancy %", math.nan)
        self.bytes = a.get("bytes", -1)
        self.sequence = a.get("Sequence number", -1)
        self.flops = a.get("flops", math.nan)
        dims, types = a.get("Input Dims"), a.get("Input type")
        self.input_dims = b"" if dims is None else json.dumps(dims).encode()
        self.input_types = b"" if types is None else json.dumps(types).encode()


class _DictEvent:
    __slots__ = ("args", "cat", "dur", "id", "name", "ph", "pid", "tid", "ts")

    def __init__(self, e: Any) -> None:
        if not isinstance(e, dict):
            raise TypeError(f"an event must be an object, not {type(e).__name__}")
        self.ph = e.get("ph", "")
        self.cat = e.get("cat", "")
        self.name = e.get("name", "")
        self.pid = e.get("pid", -1)
        self.tid = e.get("tid", -1)
        self.ts = e.get("ts", math.nan)
        self.dur = e.get("dur", math.nan)
        self.id = e.get("id", -1)
        args = e.get("args")
        self.args = _DictArgs(args) if isinstance(args, dict) else None


def _decode_stdlib(data: bytes, source: str) -> _Doc:
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", source=source, position=f"byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"malformed JSON: {exc.msg}",
            source=source,
            position=f"line {exc.lineno} col {exc.colno}",
        ) from None
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", source=source) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InputError("not a Kineto trace: no traceEvents list", source=source)
    events = doc["traceEvents"]
    for i, e in enumerate(events):
        try:
            events[i] = _DictEvent(e)
        except TypeError as exc:
            raise InputError(str(exc), source=source, position=f"traceEvents[{i}]") from None
    devices = doc.get("deviceProperties") or []
    distributed = doc.get("distributedInfo") or {}
    base = doc.get("baseTimeNanoseconds")
    extra = {"base_time_ns": base} if isinstance(base, int) else {}
    if not isinstance(devices, list) or not isinstance(distributed, dict):
        raise InputError("deviceProperties/distributedInfo have the wrong type", source=source)
    return _Doc(events, devices, distributed, extra)


# -- columns -------------------------------------------------------------------------------


def _build(doc: _Doc, source: str, *, python: bool) -> Trace:
    try:
        return _build_columns(doc, source, python=python)
    except InputError:
        raise
    except (OverflowError, ValueError, TypeError) as exc:
        # only reachable through the fallback decoder, which does not type-check fields
        raise InputError(
            f"a field has the wrong type or does not fit in 64 bits: {exc}", source=source
        ) from None


def _build_columns(doc: _Doc, source: str, *, python: bool) -> Trace:
    skip = SKIPPED_CATEGORIES if python else SKIPPED_CATEGORIES | {"python_function"}
    evs = [e for e in doc.events if e.ph == "X" and e.cat not in skip]
    strings = StringTable()
    other = (EventKind.OTHER, False)
    kinds_gpu = [CATEGORIES.get(e.cat, other) for e in evs]
    kind = np.array([k for k, _ in kinds_gpu], dtype=np.int8)
    on_gpu_cat = np.array([g for _, g in kinds_gpu], dtype=bool)
    ts = np.array([e.ts for e in evs], dtype=np.float64)
    dur = np.array([e.dur for e in evs], dtype=np.float64)
    _check_times(doc, ts, dur, source, skip)
    args = [e.args or _empty_args() for e in evs]
    correlation = _int_column([a.correlation for a in args])
    external_id = _int_column([a.external_id for a in args])
    device_arg = _int_column([a.device for a in args])
    stream_arg = _int_column([a.stream for a in args])
    pid = _id_column([e.pid for e in evs], strings)
    tid = _id_column([e.tid for e in evs], strings)
    name = strings.add_all(e.name if isinstance(e.name, str) else str(e.name) for e in evs)

    # GPU work sits on (device, stream); a cuda_sync only when it names a device
    on_gpu = on_gpu_cat & ((kind != EventKind.SYNC) | (device_arg >= 0))
    device = np.where(on_gpu, np.where(device_arg >= 0, device_arg, pid), pid)
    stream = np.where(on_gpu, np.where(stream_arg >= 0, stream_arg, tid), tid)
    track_kind = np.where(on_gpu, TrackKind.GPU, TrackKind.CPU).astype(np.int8)
    tracks, track = build_tracks(device, stream, track_kind, strings)

    _link_flows(doc, evs, kind, correlation, pid, tid, ts, strings)
    start_ns = _us_to_ns(ts)
    events = events_table(
        {
            "start_ns": start_ns,
            "dur_ns": np.rint(dur * 1000.0).astype(np.int64),
            "kind": kind,
            "track": track,
            "name": name,
            "correlation": correlation,
            "external_id": external_id,
        }
    )
    kernels = _kernel_table(args, kind)
    memcpy = _memcpy_table(args, kind, name, strings)
    ops = _op_table(args, kind, strings)
    order = sort_order(start_ns, track)
    new_row = renumber(order)
    for side in (kernels, memcpy, ops):
        side.columns["event"] = new_row[side["event"]]
    meta = _meta(doc, source, python)
    return Trace(
        events.take(order),
        tracks,
        strings.strings,
        kernels=kernels,
        memcpy=memcpy,
        ops=ops,
        meta=meta,
    )


def _empty_args() -> Any:
    return _EMPTY_ARGS if msgspec is not None else _DictArgs({})


def _check_times(
    doc: _Doc,
    ts: npt.NDArray[np.float64],
    dur: npt.NDArray[np.float64],
    source: str,
    skip: frozenset[str],
) -> None:
    """Every complete event needs a finite ts and a finite, non-negative dur."""
    problems = (
        (~np.isfinite(ts), "missing or non-finite 'ts'"),
        (np.abs(np.nan_to_num(ts)) > MAX_TS_US, "'ts' does not fit in 64-bit nanoseconds"),
        (~np.isfinite(dur), "missing or non-finite 'dur'"),
        (np.nan_to_num(dur) < 0, "negative duration"),
        (np.nan_to_num(dur) > MAX_TS_US, "'dur' does not fit in 64-bit nanoseconds"),
    )
    for bad, what in problems:
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"{what} in a complete ('X') event",
                source=source,
                position=f"traceEvents[{_original_index(doc, k, skip)}]",
            )


def _original_index(doc: _Doc, k: int, skip: frozenset[str]) -> int:
    """Position in traceEvents of the k-th kept event (for error messages)."""
    seen = -1
    for i, e in enumerate(doc.events):
        if e.ph == "X" and e.cat not in skip:
            seen += 1
            if seen == k:
                return i
    return -1


def _us_to_ns(ts: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Microseconds (float, exact up to 2**53) to int64 ns without float rounding of the
    large integer part: whole microseconds * 1000 + rounded fraction."""
    whole = np.floor(ts)
    return whole.astype(np.int64) * 1000 + np.rint((ts - whole) * 1000.0).astype(np.int64)


def _int_column(values: list[Any]) -> npt.NDArray[np.int64]:
    return np.array(values, dtype=np.int64)


def _id_column(values: list[Any], strings: StringTable) -> npt.NDArray[np.int64]:
    """pid/tid: integers as they are; names (e.g. "Spans") become stable negative ids."""
    try:
        return np.array(values, dtype=np.int64)
    except (ValueError, TypeError):
        return np.array(
            [v if isinstance(v, int) else _text_id(v, strings) for v in values], dtype=np.int64
        )


def _text_id(value: Any, strings: StringTable) -> int:
    text = str(value)
    return int(text) if text.lstrip("-").isdigit() else -2 - strings.add(text)


def _link_flows(
    doc: _Doc,
    evs: list[Any],
    kind: npt.NDArray[np.int8],
    correlation: npt.NDArray[np.int64],
    pid: npt.NDArray[np.int64],
    tid: npt.NDArray[np.int64],
    ts: npt.NDArray[np.float64],
    strings: StringTable,
) -> None:
    """Fill missing correlations of launches and GPU work from ``ac2g`` flow events, whose
    endpoints sit on (pid, tid, ts) of the events they bind to."""
    linkable = np.isin(
        kind, [EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET, EventKind.RUNTIME]
    )
    missing = np.flatnonzero(linkable & (correlation < 0))
    if len(missing) == 0:
        return
    flows: dict[tuple[int, int, float], int] = {}
    for e in doc.events:
        if e.ph in ("s", "f") and e.cat == "ac2g" and isinstance(e.id, int):
            key = (
                _text_id(e.pid, strings) if not isinstance(e.pid, int) else e.pid,
                _text_id(e.tid, strings) if not isinstance(e.tid, int) else e.tid,
                e.ts,
            )
            flows[key] = e.id
    for i in missing.tolist():
        found = flows.get((int(pid[i]), int(tid[i]), float(ts[i])))
        if found is not None:
            correlation[i] = found


def _kernel_table(args: list[Any], kind: npt.NDArray[np.int8]) -> Table:
    rows = np.flatnonzero(kind == EventKind.KERNEL)
    ka = [args[i] for i in rows.tolist()]
    grid = _dim3([a.grid for a in ka])
    block = _dim3([a.block for a in ka])
    return Table(
        KERNEL_COLUMNS,
        {
            "event": rows,
            "grid_x": grid[:, 0],
            "grid_y": grid[:, 1],
            "grid_z": grid[:, 2],
            "block_x": block[:, 0],
            "block_y": block[:, 1],
            "block_z": block[:, 2],
            "registers": _int_column([a.registers for a in ka]),
            "shared_mem": _int_column([a.shared_memory for a in ka]),
            "occupancy": np.array([a.occupancy for a in ka], dtype=np.float64),
        },
    )


def _dim3(values: list[Any]) -> npt.NDArray[np.int64]:
    missing = [-1, -1, -1]
    rows = [v if isinstance(v, list) and len(v) == 3 else missing for v in values]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def _memcpy_table(
    args: list[Any], kind: npt.NDArray[np.int8], name: npt.NDArray[np.int32], strings: StringTable
) -> Table:
    rows = np.flatnonzero((kind == EventKind.MEMCPY) | (kind == EventKind.MEMSET))
    text = strings.strings
    # direction per distinct name ("Memcpy HtoD (Pageable -> Device)"), then per row
    lookup = np.zeros(len(text), dtype=np.int8)
    for n in np.unique(name[rows]).tolist():
        lookup[n] = memcpy_direction(text[n])
    direction = lookup[name[rows]]
    direction[kind[rows] == EventKind.MEMSET] = _DIRECTION_CODE["memset"]
    return Table(
        MEMCPY_COLUMNS,
        {
            "event": rows,
            "bytes": _int_column([args[i].bytes for i in rows.tolist()]),
            "direction": direction,
        },
    )


def memcpy_direction(name: str) -> int:
    """``"Memcpy HtoD (Pageable -> Device)"`` -> the code of ``"HtoD"`` in MEMCPY_DIRECTIONS."""
    words = name.split()
    token = words[1].lower() if len(words) > 1 and words[0].lower() == "memcpy" else ""
    return _DIRECTION_CODE.get(token, 0)


def _op_table(args: list[Any], kind: npt.NDArray[np.int8], strings: StringTable) -> Table:
    rows = np.flatnonzero(kind == EventKind.CPU_OP)
    oa = [args[i] for i in rows.tolist()]
    sequence = _int_column([a.sequence for a in oa])
    flops = np.array([a.flops for a in oa], dtype=np.float64)
    dims = _raw_strings([a.input_dims for a in oa], strings)
    types = _raw_strings([a.input_types for a in oa], strings)
    keep = (sequence >= 0) | np.isfinite(flops) | (dims >= 0) | (types >= 0)
    return Table(
        OP_COLUMNS,
        {
            "event": rows[keep],
            "sequence": sequence[keep],
            "flops": flops[keep],
            "input_dims": dims[keep],
            "input_types": types[keep],
        },
    )


def _raw_strings(raws: list[Any], strings: StringTable) -> npt.NDArray[np.int32]:
    """JSON fragments (shapes, dtypes) as string ids; -1 where absent."""
    return np.array(
        [strings.add(bytes(r).decode("utf-8", "replace")) if len(r) else -1 for r in raws],
        dtype=np.int32,
    )


def _meta(doc: _Doc, source: str, python: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "source": source,
        "format": "kineto",
        "events_read": len(doc.events),
        "devices": [_plain(d) for d in doc.devices if isinstance(d, dict)],
        "python_functions": python,
        **doc.extra,
    }
    for key in ("rank", "world_size", "backend"):
        if key in doc.distributed:
            meta[key] = _plain(doc.distributed[key])
    return meta


def _plain(value: Any) -> Any:
    """Keep meta JSON-able (device properties are nested plain values already)."""
    return json.loads(json.dumps(value, default=str, allow_nan=False))
