"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> :class:`Trace`.

Reads kernels, memcpy, memset, CUDA runtime calls, synchronisation and NVTX ranges, names
from ``StringIds`` and GPU properties from ``TARGET_INFO_GPU``. The file is opened read-only.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.io._common import StringTable, build_tracks, events_table, renumber, sort_order
from perflab.model.serialize import regular_size
from perflab.model.trace import (
    DUR_MAX_NS,
    KERNEL_COLUMNS,
    MEMCPY_COLUMNS,
    MEMCPY_DIRECTIONS,
    TIME_MAX_NS,
    TIME_MIN_NS,
    EventKind,
    Table,
    Trace,
    TrackKind,
)

# CUPTI copyKind -> our direction name (arrays count as device memory)
_COPY_KIND = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoD",
    4: "DtoH",
    5: "DtoD",
    6: "DtoD",
    7: "DtoD",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "HtoD",
    12: "DtoH",
    13: "DtoD",
}
_SYNC_TYPE = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}

_KERNEL_SQL = """SELECT start, end, deviceId, streamId, correlationId, demangledName,
    gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread,
    staticSharedMemory + dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL"""
_MEMCPY_SQL = """SELECT start, end, deviceId, streamId, correlationId, bytes, copyKind
    FROM CUPTI_ACTIVITY_KIND_MEMCPY"""
_MEMSET_SQL = """SELECT start, end, deviceId, streamId, correlationId, bytes
    FROM CUPTI_ACTIVITY_KIND_MEMSET"""
_RUNTIME_SQL = """SELECT start, end, globalTid, correlationId, nameId
    FROM CUPTI_ACTIVITY_KIND_RUNTIME"""
_SYNC_SQL = """SELECT start, end, deviceId, streamId, correlationId, syncType
    FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"""
# push/pop and start/end ranges (NVTX and NVTX-text: event types 59, 60, 70, 71)
_NVTX_RANGES = "end IS NOT NULL AND eventType IN (59, 60, 70, 71)"
_NVTX_SQL = (  # constants only
    "SELECT start, end, globalTid, textId, text FROM NVTX_EVENTS WHERE "  # noqa: S608
    + _NVTX_RANGES
)

# What every column read must hold, checked in SQL before anything is read: SQLite stores
# any type in any column, and numpy would turn 1.5 into 1 or "12" into 12 without a word.
_INT31 = (0, 2**31 - 1)
_ANY_INT = (-(2**63), 2**63 - 1)
_TIMES = {"start": (TIME_MIN_NS, TIME_MAX_NS), "end": (TIME_MIN_NS, TIME_MAX_NS)}
_GPU_IDS = {"deviceId": _ANY_INT, "streamId": _ANY_INT, "correlationId": _ANY_INT}
_COLUMNS: dict[str, dict[str, tuple[int, int]]] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": {
        **_TIMES,
        **_GPU_IDS,
        "demangledName": _ANY_INT,
        **dict.fromkeys(("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"), _INT31),
        "registersPerThread": _INT31,
        "staticSharedMemory": _INT31,
        "dynamicSharedMemory": _INT31,
    },
    "CUPTI_ACTIVITY_KIND_MEMCPY": {
        **_TIMES,
        **_GPU_IDS,
        "bytes": (0, 2**63 - 1),
        "copyKind": _ANY_INT,
    },
    "CUPTI_ACTIVITY_KIND_MEMSET": {**_TIMES, **_GPU_IDS, "bytes": (0, 2**63 - 1)},
    "CUPTI_ACTIVITY_KIND_RUNTIME": {
        **_TIMES,
        "globalTid": _ANY_INT,
        "correlationId": _ANY_INT,
        "nameId": _ANY_INT,
    },
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": {**_TIMES, **_GPU_IDS, "syncType": _ANY_INT},
    "NVTX_EVENTS": {**_TIMES, "globalTid": _ANY_INT},
}
_ROWS_CHECKED = {"NVTX_EVENTS": _NVTX_RANGES}


class _Parts:
    """Events gathered table by table, concatenated at the end."""

    def __init__(self) -> None:
        self.cols: dict[str, list[npt.NDArray[Any]]] = {
            k: [] for k in ("start", "end", "kind", "name", "corr", "device", "stream", "gpu")
        }
        self.count = 0

    def add(
        self,
        kind: EventKind,
        rows: npt.NDArray[np.int64],
        name: npt.NDArray[Any],
        device: npt.NDArray[Any],
        stream: npt.NDArray[Any],
        corr: npt.NDArray[Any],
        on_gpu: bool,
    ) -> int:
        """Append events; returns the row index of the first one."""
        first = self.count
        n = len(rows)
        for key, values in (
            ("start", rows[:, 0]),
            ("end", rows[:, 1]),
            ("name", name),
            ("device", device),
            ("stream", stream),
            ("corr", corr),
        ):
            self.cols[key].append(np.asarray(values, dtype=np.int64))
        self.cols["kind"].append(np.full(n, int(kind), dtype=np.int8))
        self.cols["gpu"].append(np.full(n, on_gpu, dtype=bool))
        self.count += n
        return first

    def column(self, key: str) -> npt.NDArray[Any]:
        parts = self.cols[key]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def load_nsys(path: str | os.PathLike[str]) -> Trace:
    source = str(path)
    regular_size(path)  # a FIFO or device would block or never end
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as db:
            db.text_factory = _lenient_text  # a damaged string must not abort the import
            return _read(db, source)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # not a database, corrupt...
        raise InputError(f"not a readable Nsight Systems export: {exc}", source=source) from None


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _text(value: Any) -> str:
    """A name as stored: text, or a BLOB decoded leniently, or "" when absent."""
    if isinstance(value, bytes):
        return _lenient_text(value)
    return "" if value is None else str(value)


def _check_columns(db: sqlite3.Connection, table: str, source: str) -> None:
    """Every row of ``table`` that perflab reads holds integers in range in the columns of
    ``_COLUMNS``, and ends no earlier than it starts; else an InputError naming the row."""
    spec = _COLUMNS[table]
    present = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
    columns = [c for c in spec if c in present]
    tests = [f"NOT (typeof({c}) = 'integer' AND {c} BETWEEN ? AND ?)" for c in columns]
    tests.append(f"end - start > {DUR_MAX_NS} OR end < start")
    rows = _ROWS_CHECKED.get(table, "1")
    # table and column names come from _COLUMNS, never from the file
    sql = (
        f"SELECT rowid, {', '.join(columns)} FROM {table} "  # noqa: S608
        f"WHERE ({rows}) AND ({' OR '.join(tests)}) LIMIT 1"
    )
    bounds = [b for c in columns for b in spec[c]]
    bad = db.execute(sql, bounds).fetchone()
    if bad is None:
        return
    rowid, values = bad[0], dict(zip(columns, bad[1:], strict=True))
    for column, value in values.items():
        lo, hi = spec[column]
        if type(value) is not int or not lo <= value <= hi:
            what = (
                "a time outside the trace window" if column in _TIMES else "not an integer in range"
            )
            raise InputError(
                f"{column} = {value!r}: {what}", source=source, position=f"{table} rowid {rowid}"
            )
    raise InputError(
        "an event ends before it starts, or lasts longer than 146 years",
        source=source,
        position=f"{table} rowid {rowid}",
    )


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _fetch(db: sqlite3.Connection, sql: str, width: int) -> npt.NDArray[np.int64]:
    rows = db.execute(sql).fetchall()
    try:
        return np.array(rows, dtype=np.int64).reshape(-1, width)
    except (TypeError, ValueError, OverflowError) as exc:
        table = sql.split("FROM")[-1].split()[0]
        raise InputError(f"unexpected value in {table}: {exc}") from None


def _read(db: sqlite3.Connection, source: str) -> Trace:
    tables = _tables(db)
    activity = {t for t in tables if t.startswith("CUPTI_ACTIVITY_KIND_")} | (
        {"NVTX_EVENTS"} & tables
    )
    if "StringIds" not in tables or not activity:
        raise InputError(
            "SQLite file is not an Nsight Systems export (no StringIds or CUPTI/NVTX tables)",
            source=source,
        )
    for table in sorted(_COLUMNS.keys() & tables):
        _check_columns(db, table, source)
    strings = StringTable()
    (bad_ids,) = db.execute(
        "SELECT count(*) FROM StringIds WHERE NOT (typeof(id) = 'integer' "
        "AND id BETWEEN 0 AND 50000000)"
    ).fetchone()
    if bad_ids:
        raise InputError("StringIds ids out of range", source=source, position="StringIds")
    ids = db.execute("SELECT id, value FROM StringIds").fetchall()
    max_id = max((i for i, _ in ids), default=0)
    string_of = np.full(max_id + 1, strings.add(""), dtype=np.int64)
    string_of[[i for i, _ in ids]] = strings.add_all(_text(v) for _, v in ids)

    def name_ids(raw: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        ok = (raw >= 0) & (raw <= max_id)
        return np.where(ok, string_of[np.clip(raw, 0, max_id)], string_of[0])

    try:
        return _assemble(db, tables, _Context(db, strings, name_ids, source))
    except InputError as exc:
        if exc.source:
            raise
        raise InputError(str(exc), source=source) from None


@dataclass(frozen=True)
class _Block:
    """The events one table gives, and its side-table columns (without ``event``)."""

    kind: EventKind
    rows: npt.NDArray[np.int64]  # start and end in the first two columns
    names: npt.NDArray[Any]
    device: npt.NDArray[Any]  # GPU id, or process id for host events
    stream: npt.NDArray[Any]  # stream, or thread id for host events
    corr: npt.NDArray[Any]
    on_gpu: bool
    side: tuple[str, dict[str, Any]] | None = None  # ("kernels" or "memcpy", columns)


@dataclass(frozen=True)
class _Context:
    db: sqlite3.Connection
    strings: StringTable
    name_ids: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]
    source: str


def _gpu_block(
    kind: EventKind, rows: npt.NDArray[np.int64], names: npt.NDArray[Any], **rest: Any
) -> _Block:
    """GPU activity rows: start, end, deviceId, streamId, correlationId, ..."""
    return _Block(kind, rows, names, rows[:, 2], rows[:, 3], rows[:, 4], True, **rest)


def _host_block(kind: EventKind, rows: npt.NDArray[np.int64], names: Any, corr: Any) -> _Block:
    """Host rows: start, end, globalTid, ..."""
    pid, tid = _split_global_tid(rows[:, 2])
    return _Block(kind, rows, names, pid, tid, corr, False)


def _kernel_block(ctx: _Context) -> _Block:
    k = _fetch(ctx.db, _KERNEL_SQL, 14)
    # the SQL selects these in KERNEL_COLUMNS order, grid_x .. shared_mem
    dims = {c: k[:, 6 + i] for i, c in enumerate(list(KERNEL_COLUMNS)[1:9])}
    return _gpu_block(EventKind.KERNEL, k, ctx.name_ids(k[:, 5]), side=("kernels", dims))


def _memcpy_block(ctx: _Context) -> _Block:
    m = _fetch(ctx.db, _MEMCPY_SQL, 7)
    direction = [_COPY_KIND.get(int(c), "unknown") for c in m[:, 6]]
    names = ctx.strings.add_all(f"Memcpy {d}" for d in direction)
    copies = {"bytes": m[:, 5], "direction": [MEMCPY_DIRECTIONS.index(d) for d in direction]}
    return _gpu_block(EventKind.MEMCPY, m, names, side=("memcpy", copies))


def _memset_block(ctx: _Context) -> _Block:
    s = _fetch(ctx.db, _MEMSET_SQL, 6)
    names = np.full(len(s), ctx.strings.add("Memset"))
    sets = {"bytes": s[:, 5], "direction": np.full(len(s), MEMCPY_DIRECTIONS.index("memset"))}
    return _gpu_block(EventKind.MEMSET, s, names, side=("memcpy", sets))


def _runtime_block(ctx: _Context) -> _Block:
    r = _fetch(ctx.db, _RUNTIME_SQL, 5)
    return _host_block(EventKind.RUNTIME, r, ctx.name_ids(r[:, 4]), r[:, 3])


def _sync_block(ctx: _Context) -> _Block:
    y = _fetch(ctx.db, _SYNC_SQL, 6)
    names = ctx.strings.add_all(_SYNC_TYPE.get(int(t), "Synchronization") for t in y[:, 5])
    return _gpu_block(EventKind.SYNC, y, names)


def _nvtx_block(ctx: _Context) -> _Block:
    raw = ctx.db.execute(_NVTX_SQL).fetchall()
    rows = _fetch_rows(raw, ctx.source)
    texts = [_text(t) for *_, t in raw]
    text_ids = np.array([i if type(i) is int else -1 for *_, i, _ in raw], dtype=np.int64)
    named = np.where(text_ids >= 0, ctx.name_ids(text_ids), ctx.strings.add_all(texts))
    return _host_block(EventKind.ANNOTATION, rows, named, np.full(len(rows), -1))


# the tables read, in this order (names are numbered in the order they are met)
_BLOCKS: tuple[tuple[str, Callable[[_Context], _Block]], ...] = (
    ("CUPTI_ACTIVITY_KIND_KERNEL", _kernel_block),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", _memcpy_block),
    ("CUPTI_ACTIVITY_KIND_MEMSET", _memset_block),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", _runtime_block),
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", _sync_block),
    ("NVTX_EVENTS", _nvtx_block),
)
_SIDE_SCHEMAS = {"kernels": KERNEL_COLUMNS, "memcpy": MEMCPY_COLUMNS}


def _assemble(db: sqlite3.Connection, tables: set[str], ctx: _Context) -> Trace:
    parts = _Parts()
    sides: dict[str, list[Table]] = {name: [] for name in _SIDE_SCHEMAS}
    rows_read = 0
    for table, read in _BLOCKS:
        if table not in tables:
            continue
        b = read(ctx)
        first = parts.add(b.kind, b.rows, b.names, b.device, b.stream, b.corr, b.on_gpu)
        if b.side is not None:
            name, columns = b.side
            events = np.arange(first, first + len(b.rows))
            sides[name].append(Table(_SIDE_SCHEMAS[name], {"event": events, **columns}))
        rows_read += len(b.rows)
    kernels, memcpy = (
        Table.concat(_SIDE_SCHEMAS[name], found) if found else None for name, found in sides.items()
    )
    meta = {
        "source": ctx.source,
        "format": "nsys",
        "events_read": rows_read,
        "devices": _gpu_info(db, tables),
    }
    return _trace_of(parts, ctx, kernels, memcpy, meta)


def _trace_of(
    parts: _Parts, ctx: _Context, kernels: Table | None, memcpy: Table | None, meta: Any
) -> Trace:
    start, end = parts.column("start"), parts.column("end")
    dur = end - start
    if len(dur) and int(dur.min()) < 0:
        raise InputError("an event ends before it starts (negative duration)", source=ctx.source)
    on_gpu = parts.column("gpu").astype(bool)
    track_kind = np.where(on_gpu, TrackKind.GPU, TrackKind.CPU).astype(np.int8)
    tracks, track = build_tracks(
        parts.column("device"), parts.column("stream"), track_kind, ctx.strings
    )
    events = events_table(
        {
            "start_ns": start,
            "dur_ns": dur,
            "kind": parts.column("kind"),
            "track": track,
            "name": parts.column("name"),
            "correlation": parts.column("corr"),
            "external_id": np.full(len(start), -1),
        }
    )
    order = sort_order(start, track)
    new_row = renumber(order)
    for side in (kernels, memcpy):
        if side is not None:
            side.columns["event"] = new_row[side["event"]]
    return Trace(
        events.take(order), tracks, ctx.strings.strings, kernels=kernels, memcpy=memcpy, meta=meta
    )


def _fetch_rows(raw: list[tuple[Any, ...]], source: str) -> npt.NDArray[np.int64]:
    try:
        return np.array([r[:3] for r in raw], dtype=np.int64).reshape(-1, 3)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"unexpected value in NVTX_EVENTS: {exc}", source=source) from None


def _split_global_tid(gtid: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
    """nsys packs (process id, thread id) into a 64-bit "globalTid": bits 24-47, 0-23."""
    return (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF


def _gpu_info(db: sqlite3.Connection, tables: set[str]) -> list[dict[str, Any]]:
    if "TARGET_INFO_GPU" not in tables:
        return []
    cur = db.execute("SELECT * FROM TARGET_INFO_GPU")
    cols = [c[0] for c in cur.description]
    out = []
    for row in cur.fetchall():
        d = {c: v for c, v in zip(cols, row, strict=True) if _plain_value(v)}
        out.append(d)
    return out


def _plain_value(value: Any) -> bool:
    """Kept in the trace's meta: text, integers and finite floats (the meta is JSON)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (int, str))
