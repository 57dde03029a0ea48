"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> :class:`Trace`.

Reads kernels, memcpy, memset, CUDA runtime calls, synchronisation and NVTX ranges, names
from ``StringIds`` and GPU properties from ``TARGET_INFO_GPU``.

The file is someone else's, so reading it must not run anything of theirs or take without
bound: it is opened read-only and immutable (no statement can write, so no trigger fires); only
the columns perflab uses are selected, never ``*``; a generated column (computed on reading, at
any cost), a view or a virtual table where perflab reads a table is refused by name; and every
query runs under a time bound, a bound on each value's size and one on the text fetched in all
(:class:`ReadLimits`).
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

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
# what SQLite hands back for a value, and a row of them
SqlValue = int | float | str | bytes | None
Row = tuple[SqlValue, ...]

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
    FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY rowid"""
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
# every column that a query of each table touches, in SELECT or WHERE: each must be stored
_READ: dict[str, tuple[str, ...]] = {
    **{table: tuple(spec) for table, spec in _COLUMNS.items()},
    "NVTX_EVENTS": (*_COLUMNS["NVTX_EVENTS"], "eventType", "textId", "text"),
    "StringIds": ("id", "value"),
}
_GPU_INFO = "TARGET_INFO_GPU"  # kept whole in the trace's meta, but for generated columns
_KNOWN = {name.lower(): name for name in (*_READ, _GPU_INFO)}  # SQLite's names ignore case
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# What reading one export may cost (ReadLimits.for_size): real exports stay far inside these.
MAX_VALUE_BYTES = 1 << 20  # one text or blob; nsys's longest names are tens of KB
MIN_TEXT_BYTES = 64 << 20  # text and blobs in all, beyond the file's own size
BASE_SECONDS = 60.0  # SQLite's work in all, plus a second for each READ_RATE bytes of file
READ_RATE = 4 << 20
PROGRESS_OPCODES = 1000  # how often (in SQLite VM steps) the time bound is checked
FETCH_ROWS = 256  # rows fetched at a time, each batch's text counted before the next


@dataclass(frozen=True)
class ReadLimits:
    """What reading one export may cost. ``seconds``: SQLite's work in all (a query still
    running past it is stopped); ``text_bytes``: text and blobs fetched in all (a stored value
    cannot be larger than the file, so more is computed, not stored); ``value_bytes``: any
    one value."""

    seconds: float
    text_bytes: int
    value_bytes: int = MAX_VALUE_BYTES

    @classmethod
    def for_size(cls, size: int) -> ReadLimits:
        """Bounds for a file of ``size`` bytes, generous for any real export."""
        return cls(BASE_SECONDS + size / READ_RATE, size + MIN_TEXT_BYTES)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.3g} MiB"


class _Reader:
    """perflab's queries on one export, within its :class:`ReadLimits`; every failure is an
    InputError naming the file and the table (and the column where one is to blame)."""

    def __init__(self, db: sqlite3.Connection, source: str, limits: ReadLimits) -> None:
        self.db, self.source, self.limits = db, source, limits
        self.deadline = time.monotonic() + limits.seconds
        self.text_left = limits.text_bytes
        if hasattr(db, "setlimit"):  # Python 3.11+; SQLite then refuses longer values itself
            db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limits.value_bytes)
        db.set_progress_handler(self._past_deadline, PROGRESS_OPCODES)

    def _past_deadline(self) -> bool:
        return time.monotonic() > self.deadline

    def rows(
        self, table: str, sql: str, params: Sequence[int] = (), text: dict[int, str] | None = None
    ) -> list[Row]:
        """Every row of ``sql``, a query of ``table``. ``text``: the columns (position ->
        name) whose values count against the bound on text fetched."""
        out: list[Row] = []
        try:
            cursor = self.db.execute(sql, params)
            while batch := cursor.fetchmany(FETCH_ROWS):
                self._count_text(table, batch, text or {})
                out.extend(batch)
        except sqlite3.Error as exc:
            raise self._failed(table, exc) from None
        return out

    def first(self, table: str, sql: str, params: Sequence[int] = ()) -> Row | None:
        try:
            row: Row | None = self.db.execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            raise self._failed(table, exc) from None
        return row

    def _count_text(self, table: str, batch: list[Row], text: dict[int, str]) -> None:
        for at, column in text.items():
            self.text_left -= sum(len(v) for row in batch if isinstance(v := row[at], str | bytes))
            if self.text_left < 0:
                raise InputError(
                    f"more than {_mib(self.limits.text_bytes)} of text read, the bound for "
                    "this file (its stored text is less): values computed on reading, not an "
                    "Nsight Systems export",
                    source=self.source,
                    position=f"table {table}, column {column}",
                )

    def _failed(self, table: str, exc: sqlite3.Error) -> InputError:
        if self._past_deadline():
            message = (
                f"reading it took longer than {self.limits.seconds:.3g} s: stopped (a table "
                "whose values are computed on reading, or a damaged file)"
            )
        elif isinstance(exc, sqlite3.DataError):  # string or blob too big
            message = (
                f"a value longer than {_mib(self.limits.value_bytes)}: not an Nsight Systems export"
            )
        else:
            message = f"not a readable Nsight Systems export: {exc}"
        return InputError(message, source=self.source, position=f"table {table}")


class _Parts:
    """Events gathered table by table, concatenated at the end."""

    def __init__(self) -> None:
        self.cols: dict[str, list[npt.NDArray[np.int64]]] = {
            k: [] for k in ("start", "end", "name", "corr", "device", "stream")
        }
        self.kind: list[npt.NDArray[np.int8]] = []
        self.gpu: list[npt.NDArray[np.bool_]] = []
        self.count = 0

    def add(
        self,
        kind: EventKind,
        rows: npt.NDArray[np.int64],
        name: npt.ArrayLike,
        device: npt.ArrayLike,
        stream: npt.ArrayLike,
        corr: npt.ArrayLike,
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
        self.kind.append(np.full(n, int(kind), dtype=np.int8))
        self.gpu.append(np.full(n, on_gpu, dtype=np.bool_))
        self.count += n
        return first

    def column(self, key: str) -> npt.NDArray[np.int64]:
        parts = self.cols[key]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def kinds(self) -> npt.NDArray[np.int8]:
        return np.concatenate(self.kind) if self.kind else np.zeros(0, dtype=np.int8)

    def on_gpu(self) -> npt.NDArray[np.bool_]:
        return np.concatenate(self.gpu) if self.gpu else np.zeros(0, dtype=np.bool_)


def load_nsys(path: str | os.PathLike[str], *, limits: ReadLimits | None = None) -> Trace:
    """The trace in the export at ``path``; ``limits``: what reading it may cost (by default
    :meth:`ReadLimits.for_size` of the file)."""
    source = str(path)
    size = regular_size(path)  # a FIFO or device would block or never end
    # immutable: no locks, no journal, nothing written (so no trigger can fire)
    uri = Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as db:
            db.text_factory = _lenient_text  # a damaged string must not abort the import
            db.execute("PRAGMA query_only = ON")
            db.execute("PRAGMA trusted_schema = OFF")  # the schema's SQL calls no function
            return _read(_Reader(db, source, limits or ReadLimits.for_size(size)))
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # not a database, corrupt...
        raise InputError(f"not a readable Nsight Systems export: {exc}", source=source) from None


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _text(value: SqlValue) -> str:
    """A name as stored: text, or a BLOB decoded leniently, or "" when absent."""
    if isinstance(value, bytes):
        return _lenient_text(value)
    return "" if value is None else str(value)


def _tables(reader: _Reader) -> set[str]:
    """The export's tables, those perflab reads spelt as perflab spells them. A view or a
    virtual table in place of one of those is refused: its rows are computed on reading, by
    SQL of the file's choosing."""
    found = set()
    master = reader.rows("sqlite_master", "SELECT type, name, sql FROM sqlite_master")
    for kind, name, sql in master:
        known = _KNOWN.get(str(name).lower())
        if kind != "table" and not (kind == "view" and known):
            continue
        if known and (kind == "view" or _virtual(sql)):
            what = "a view" if kind == "view" else "a virtual table"
            raise InputError(
                f"{what}, not a table: its rows would be computed on reading by SQL in the "
                "file; an Nsight Systems export stores them",
                source=reader.source,
                position=f"table {known}",
            )
        found.add(known or str(name))
    return found


def _virtual(sql: SqlValue) -> bool:
    return isinstance(sql, str) and sql.lstrip().upper().startswith("CREATE VIRTUAL")


def _check_stored(reader: _Reader, table: str) -> None:
    """Every column perflab reads from ``table`` is there and stored: a generated column's
    value is computed by an expression of the file's, on every read, at any cost."""
    hidden = {
        str(name).lower(): flag
        for _, name, *_rest, flag in reader.rows(table, f"PRAGMA table_xinfo({table})")
    }
    for column in _READ[table]:
        flag = hidden.get(column.lower())
        if flag is None:
            problem = "no such column: not an Nsight Systems export"
        elif flag:  # 2: a virtual generated column, 3: a stored one (1: a virtual table's)
            problem = (
                "a generated column (GENERATED ALWAYS AS ...): its values are computed by an "
                "expression in the file; an Nsight Systems export stores them"
            )
        else:
            continue
        raise InputError(problem, source=reader.source, position=f"table {table}, column {column}")


def _check_columns(reader: _Reader, table: str) -> None:
    """Every row of ``table`` that perflab reads holds integers in range in the columns of
    ``_COLUMNS``, and ends no earlier than it starts; else an InputError naming the row."""
    spec = _COLUMNS[table]
    columns = list(spec)
    tests = [f"NOT (typeof({c}) = 'integer' AND {c} BETWEEN ? AND ?)" for c in columns]
    tests.append(f"end - start > {DUR_MAX_NS} OR end < start")
    rows = _ROWS_CHECKED.get(table, "1")
    # table and column names come from _COLUMNS, never from the file
    sql = (
        f"SELECT rowid, {', '.join(columns)} FROM {table} "  # noqa: S608
        f"WHERE ({rows}) AND ({' OR '.join(tests)}) LIMIT 1"
    )
    bounds = [b for c in columns for b in spec[c]]
    bad = reader.first(table, sql, bounds)
    if bad is None:
        return
    rowid, values = str(bad[0]), dict(zip(columns, bad[1:], strict=True))
    source = reader.source
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


def _fetch(reader: _Reader, table: str, sql: str, width: int) -> npt.NDArray[np.int64]:
    rows = reader.rows(table, sql)
    try:
        return np.array(rows, dtype=np.int64).reshape(-1, width)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(
            f"unexpected value: {exc}", source=reader.source, position=f"table {table}"
        ) from None


def _read(reader: _Reader) -> Trace:
    source = reader.source
    tables = _tables(reader)
    activity = {t for t in tables if t.startswith("CUPTI_ACTIVITY_KIND_")} | (
        {"NVTX_EVENTS"} & tables
    )
    if "StringIds" not in tables or not activity:
        raise InputError(
            "SQLite file is not an Nsight Systems export (no StringIds or CUPTI/NVTX tables)",
            source=source,
        )
    for table in sorted(_READ.keys() & tables):
        _check_stored(reader, table)
    for table in sorted(_COLUMNS.keys() & tables):
        _check_columns(reader, table)
    strings = StringTable()
    (bad_ids,) = reader.first(
        "StringIds",
        "SELECT count(*) FROM StringIds WHERE NOT (typeof(id) = 'integer' "
        "AND id BETWEEN 0 AND 50000000)",
    ) or (0,)
    if bad_ids:
        raise InputError("StringIds ids out of range", source=source, position="StringIds")
    ids = reader.rows("StringIds", "SELECT id, value FROM StringIds", text={1: "value"})
    numbers = np.array([i for i, _ in ids], dtype=np.int64)  # checked integers above
    max_id = int(numbers.max()) if len(numbers) else 0
    string_of = np.full(max_id + 1, strings.add(""), dtype=np.int64)
    string_of[numbers] = strings.add_all(_text(v) for _, v in ids)

    def name_ids(raw: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        ok = (raw >= 0) & (raw <= max_id)
        return np.where(ok, string_of[np.clip(raw, 0, max_id)], string_of[0])

    try:
        return _assemble(tables, _Context(reader, strings, name_ids))
    except InputError as exc:
        if exc.source:
            raise
        raise InputError(str(exc), source=source) from None


@dataclass(frozen=True)
class _Block:
    """The events one table gives, and its side-table columns (without ``event``)."""

    kind: EventKind
    rows: npt.NDArray[np.int64]  # start and end in the first two columns
    names: npt.ArrayLike
    device: npt.NDArray[np.int64]  # GPU id, or process id for host events
    stream: npt.NDArray[np.int64]  # stream, or thread id for host events
    corr: npt.NDArray[np.int64]
    on_gpu: bool
    side: tuple[str, Mapping[str, npt.ArrayLike]] | None = None  # ("kernels" or "memcpy", columns)


@dataclass(frozen=True)
class _Context:
    reader: _Reader
    strings: StringTable
    name_ids: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]

    @property
    def source(self) -> str:
        return self.reader.source


def _gpu_block(
    kind: EventKind,
    rows: npt.NDArray[np.int64],
    names: npt.ArrayLike,
    side: tuple[str, Mapping[str, npt.ArrayLike]] | None = None,
) -> _Block:
    """GPU activity rows: start, end, deviceId, streamId, correlationId, ..."""
    return _Block(kind, rows, names, rows[:, 2], rows[:, 3], rows[:, 4], True, side)


def _host_block(
    kind: EventKind,
    rows: npt.NDArray[np.int64],
    names: npt.ArrayLike,
    corr: npt.NDArray[np.int64],
) -> _Block:
    """Host rows: start, end, globalTid, ..."""
    pid, tid = _split_global_tid(rows[:, 2])
    return _Block(kind, rows, names, pid, tid, corr, False)


def _kernel_block(ctx: _Context) -> _Block:
    k = _fetch(ctx.reader, "CUPTI_ACTIVITY_KIND_KERNEL", _KERNEL_SQL, 14)
    # the SQL selects these in KERNEL_COLUMNS order, grid_x .. shared_mem
    dims = {c: k[:, 6 + i] for i, c in enumerate(list(KERNEL_COLUMNS)[1:9])}
    return _gpu_block(EventKind.KERNEL, k, ctx.name_ids(k[:, 5]), side=("kernels", dims))


def _memcpy_block(ctx: _Context) -> _Block:
    m = _fetch(ctx.reader, "CUPTI_ACTIVITY_KIND_MEMCPY", _MEMCPY_SQL, 7)
    direction = [_COPY_KIND.get(int(c), "unknown") for c in m[:, 6]]
    sides = _memory_sides(ctx.reader, len(m))
    names = ctx.strings.add_all(f"Memcpy {d}{s}" for d, s in zip(direction, sides, strict=True))
    copies: dict[str, npt.ArrayLike] = {
        "bytes": m[:, 5],
        "direction": [MEMCPY_DIRECTIONS.index(d) for d in direction],
    }
    return _gpu_block(EventKind.MEMCPY, m, names, side=("memcpy", copies))


# CUPTI memory kinds (ENUM_CUDA_MEM_KIND) as Kineto names them: "Memcpy DtoH (Device -> Pinned)"
_MEMORY_KIND = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device",
    6: "Managed",
}
_SIDES_SQL = """SELECT CASE WHEN typeof(srcKind) = 'integer' THEN srcKind ELSE -1 END,
    CASE WHEN typeof(dstKind) = 'integer' THEN dstKind ELSE -1 END
    FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY rowid"""


def _memory_sides(reader: _Reader, count: int) -> list[str]:
    """Per copy, in rowid order as _MEMCPY_SQL reads them: " (Device -> Pageable)" from
    srcKind/dstKind, read only where both are stored columns (older exports lack them: then
    "", as before); a value that is not a known kind reads "Unknown"."""
    table = "CUPTI_ACTIVITY_KIND_MEMCPY"
    stored = {
        str(name).lower()
        for _, name, *_rest, flag in reader.rows(table, f"PRAGMA table_xinfo({table})")
        if not flag
    }
    if not {"srckind", "dstkind"} <= stored:
        return [""] * count
    kinds = _fetch(reader, table, _SIDES_SQL, 2)
    if len(kinds) != count:
        return [""] * count
    kind = _MEMORY_KIND.get
    return [f" ({kind(a, 'Unknown')} -> {kind(b, 'Unknown')})" for a, b in kinds.tolist()]


def _memset_block(ctx: _Context) -> _Block:
    s = _fetch(ctx.reader, "CUPTI_ACTIVITY_KIND_MEMSET", _MEMSET_SQL, 6)
    names = np.full(len(s), ctx.strings.add("Memset"))
    sets = {"bytes": s[:, 5], "direction": np.full(len(s), MEMCPY_DIRECTIONS.index("memset"))}
    return _gpu_block(EventKind.MEMSET, s, names, side=("memcpy", sets))


def _runtime_block(ctx: _Context) -> _Block:
    r = _fetch(ctx.reader, "CUPTI_ACTIVITY_KIND_RUNTIME", _RUNTIME_SQL, 5)
    return _host_block(EventKind.RUNTIME, r, ctx.name_ids(r[:, 4]), r[:, 3])


def _sync_block(ctx: _Context) -> _Block:
    y = _fetch(ctx.reader, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", _SYNC_SQL, 6)
    names = ctx.strings.add_all(_SYNC_TYPE.get(int(t), "Synchronization") for t in y[:, 5])
    return _gpu_block(EventKind.SYNC, y, names)


def _nvtx_block(ctx: _Context) -> _Block:
    raw = ctx.reader.rows("NVTX_EVENTS", _NVTX_SQL, text={4: "text"})
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


def _assemble(tables: set[str], ctx: _Context) -> Trace:
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
        "devices": _gpu_info(ctx.reader, tables),
    }
    return _trace_of(parts, ctx, kernels, memcpy, meta)


def _trace_of(
    parts: _Parts,
    ctx: _Context,
    kernels: Table | None,
    memcpy: Table | None,
    meta: dict[str, object],
) -> Trace:
    start, end = parts.column("start"), parts.column("end")
    dur = end - start
    if len(dur) and int(dur.min()) < 0:
        raise InputError("an event ends before it starts (negative duration)", source=ctx.source)
    on_gpu = parts.on_gpu()
    track_kind = np.where(on_gpu, TrackKind.GPU, TrackKind.CPU).astype(np.int8)
    tracks, track = build_tracks(
        parts.column("device"), parts.column("stream"), track_kind, ctx.strings
    )
    events = events_table(
        {
            "start_ns": start,
            "dur_ns": dur,
            "kind": parts.kinds(),
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


def _fetch_rows(raw: list[Row], source: str) -> npt.NDArray[np.int64]:
    try:
        return np.array([r[:3] for r in raw], dtype=np.int64).reshape(-1, 3)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"unexpected value in NVTX_EVENTS: {exc}", source=source) from None


def _split_global_tid(gtid: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
    """nsys packs (process id, thread id) into a 64-bit "globalTid": bits 24-47, 0-23."""
    return (gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF


def _gpu_info(reader: _Reader, tables: set[str]) -> list[dict[str, SqlValue]]:
    """Each GPU's row of TARGET_INFO_GPU, its stored columns with plain names (no ``*``: a
    generated column would be computed, and a name is spliced into the SQL)."""
    if _GPU_INFO not in tables:
        return []
    info = reader.rows(_GPU_INFO, f"PRAGMA table_xinfo({_GPU_INFO})")
    cols = [
        str(name) for _, name, *_rest, flag in info if not flag and _IDENTIFIER.fullmatch(str(name))
    ]
    if not cols:
        return []
    sql = f"SELECT {', '.join(f'[{c}]' for c in cols)} FROM {_GPU_INFO}"  # noqa: S608
    rows = reader.rows(_GPU_INFO, sql, text=dict(enumerate(cols)))
    return [{c: v for c, v in zip(cols, row, strict=True) if _plain_value(v)} for row in rows]


def _plain_value(value: SqlValue) -> bool:
    """Kept in the trace's meta: text, integers and finite floats (the meta is JSON)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (int, str))
