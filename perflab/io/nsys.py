"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> :class:`Trace`.

Reads kernels, memcpy, memset, CUDA runtime calls, synchronisation and NVTX ranges, names
from ``StringIds`` and GPU properties from ``TARGET_INFO_GPU``. The file is opened read-only.
"""

from __future__ import annotations

import math
import os
import sqlite3
from contextlib import closing
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
        return _assemble(db, tables, strings, name_ids, source)
    except InputError as exc:
        if exc.source:
            raise
        raise InputError(str(exc), source=source) from None


def _assemble(
    db: sqlite3.Connection, tables: set[str], strings: StringTable, name_ids: Any, source: str
) -> Trace:
    parts = _Parts()
    kernels = memcpy = None
    rows_read = 0

    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        k = _fetch(db, _KERNEL_SQL, 14)
        first = parts.add(EventKind.KERNEL, k, name_ids(k[:, 5]), k[:, 2], k[:, 3], k[:, 4], True)
        kernels = Table(
            KERNEL_COLUMNS,
            {
                "event": np.arange(first, first + len(k)),
                **{
                    c: k[:, 6 + i]
                    # the SQL selects these in KERNEL_COLUMNS order, grid_x .. shared_mem
                    for i, c in enumerate(list(KERNEL_COLUMNS)[1:9])
                },
            },
        )
        rows_read += len(k)
    copies: list[Table] = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        m = _fetch(db, _MEMCPY_SQL, 7)
        direction = [_COPY_KIND.get(int(c), "unknown") for c in m[:, 6]]
        names = strings.add_all(f"Memcpy {d}" for d in direction)
        first = parts.add(EventKind.MEMCPY, m, names, m[:, 2], m[:, 3], m[:, 4], True)
        copies.append(
            Table(
                MEMCPY_COLUMNS,
                {
                    "event": np.arange(first, first + len(m)),
                    "bytes": m[:, 5],
                    "direction": [MEMCPY_DIRECTIONS.index(d) for d in direction],
                },
            )
        )
        rows_read += len(m)
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        s = _fetch(db, _MEMSET_SQL, 6)
        names = np.full(len(s), strings.add("Memset"))
        first = parts.add(EventKind.MEMSET, s, names, s[:, 2], s[:, 3], s[:, 4], True)
        copies.append(
            Table(
                MEMCPY_COLUMNS,
                {
                    "event": np.arange(first, first + len(s)),
                    "bytes": s[:, 5],
                    "direction": np.full(len(s), MEMCPY_DIRECTIONS.index("memset")),
                },
            )
        )
        rows_read += len(s)
    if copies:
        memcpy = Table.concat(MEMCPY_COLUMNS, copies)
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        r = _fetch(db, _RUNTIME_SQL, 5)
        pid, tid = _split_global_tid(r[:, 2])
        parts.add(EventKind.RUNTIME, r, name_ids(r[:, 4]), pid, tid, r[:, 3], False)
        rows_read += len(r)
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in tables:
        y = _fetch(db, _SYNC_SQL, 6)
        names = strings.add_all(_SYNC_TYPE.get(int(t), "Synchronization") for t in y[:, 5])
        parts.add(EventKind.SYNC, y, names, y[:, 2], y[:, 3], y[:, 4], True)
        rows_read += len(y)
    if "NVTX_EVENTS" in tables:
        raw = db.execute(_NVTX_SQL).fetchall()
        rows = _fetch_rows(raw, source)
        texts = [_text(t) for *_, t in raw]
        text_ids = np.array([i if type(i) is int else -1 for *_, i, _ in raw], dtype=np.int64)
        named = np.where(text_ids >= 0, name_ids(text_ids), strings.add_all(texts))
        pid, tid = _split_global_tid(rows[:, 2])
        parts.add(EventKind.ANNOTATION, rows, named, pid, tid, np.full(len(rows), -1), False)
        rows_read += len(rows)

    start, end = parts.column("start"), parts.column("end")
    dur = end - start
    if len(dur) and int(dur.min()) < 0:
        raise InputError("an event ends before it starts (negative duration)", source=source)
    on_gpu = parts.column("gpu").astype(bool)
    track_kind = np.where(on_gpu, TrackKind.GPU, TrackKind.CPU).astype(np.int8)
    tracks, track = build_tracks(
        parts.column("device"), parts.column("stream"), track_kind, strings
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
    meta = {
        "source": source,
        "format": "nsys",
        "events_read": rows_read,
        "devices": _gpu_info(db, tables),
    }
    return Trace(
        events.take(order), tracks, strings.strings, kernels=kernels, memcpy=memcpy, meta=meta
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
