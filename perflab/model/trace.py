"""A columnar trace: one row per event, numpy columns, small side tables.

Every importer (Kineto JSON, Nsight Systems SQLite, torch.profiler capture) produces this
model; analyses and the timeline read it. Nothing here holds a Python object per event.

Events (``trace.events``, also reachable as attributes, all of length ``len(trace)``):

=============== ======== =================================================================
column          dtype    meaning
=============== ======== =================================================================
``start_ns``    int64    start time, nanoseconds on the recording clock (absolute)
``dur_ns``      int64    duration in nanoseconds (>= 0)
``kind``        int8     an :class:`EventKind` code (kernel, memcpy, memset, cpu_op, ...)
``track``       int32    row in ``trace.tracks`` (rank, device/process, stream/thread)
``name``        int32    index into ``trace.strings``
``correlation`` int64    launch <-> GPU activity link (runtime call and its kernel share it);
                         -1 when none
``external_id`` int64    CPU op <-> runtime call link (Kineto "External id"); -1 when none
=============== ======== =================================================================

Rows are sorted by ``(start_ns, track)`` by the importers, but analyses must not rely on it.

Tracks (``trace.tracks``, one row per timeline lane):

``rank`` int32 (0 unless merged from several ranks), ``device`` int64 (GPU index for GPU
tracks, process id for CPU tracks), ``stream`` int64 (CUDA stream id for GPU tracks, thread id
for CPU tracks), ``kind`` int8 (:class:`TrackKind`: GPU or CPU), ``label`` int32 (index into
``trace.strings``, e.g. ``"GPU 0 stream 7"``).

Side tables (``event`` is the row index into the events table):

- ``trace.kernels``: ``event`` int64, ``grid_x grid_y grid_z block_x block_y block_z``
  int32, ``registers`` int32 (per thread), ``shared_mem`` int64 (bytes per block, static +
  dynamic), ``occupancy`` float64 (estimated achieved occupancy, percent; NaN when unknown).
  Unknown integers are -1.
- ``trace.memcpy``: one row per memcpy **and** memset event: ``event`` int64, ``bytes`` int64,
  ``direction`` int8 (index into :data:`MEMCPY_DIRECTIONS`; memsets have ``"memset"``).
- ``trace.ops``: op metadata for CPU ops that carry any: ``event`` int64, ``sequence`` int64
  (autograd sequence number, -1 if none), ``flops`` float64 (from ``with_flops``; NaN if none),
  ``input_dims`` int32 and ``input_types`` int32 (indices into ``trace.strings`` holding the
  JSON text of the shapes/types, -1 if none).
- ``trace.memory_events``: the allocator's ``[memory]`` events (``profile_memory=True``), one row
  each, by time: see :mod:`perflab.model.memory` (merge keeps every input's).

``trace.meta`` is a JSON-able dict: ``source`` (file), ``format`` (``"kineto"``, ``"nsys"``,
``"torch.profiler"``), ``events_read`` (entries in the input: ``traceEvents`` length for
Kineto, rows read otherwise), ``devices`` (list of ``{"id", "name", ...}`` device
properties) and ``rank``/``world_size`` when known. Kineto traces may add
``thread_names`` (``{"<pid>:<tid>": name}``), ``process_names`` (``{"<pid>": name}``) and
``collective_args`` (NCCL kernels' process group and ``Seq`` number: lists ``correlation``,
``group``, ``seq``, keyed by the kernel's correlation id, which survives row selections).

Times are checked where they enter (importers and :meth:`Trace.load`): a start lies in
``[TIME_MIN_NS, TIME_MAX_NS]`` and a duration in ``[0, DUR_MAX_NS]``, which keeps every end,
and every difference of an end and a start, inside int64.

Saved with :meth:`Trace.save` as ``.npz`` (no pickle: every array is numeric, the strings and
meta live in a JSON header with ``schema_version``) and read back with :meth:`Trace.load`,
which checks the file as the importers check their input.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.errors import SchemaError
from perflab.model import display
from perflab.model.display import Shown
from perflab.model.memory import MEMORY_COLUMNS, SAVED_COUNT_KEY, loaded_memory, saved_memory
from perflab.model.serialize import (
    SCHEMA_VERSION,
    check_header,
    json_safe,
    load_arrays,
    save_arrays,
)
from perflab.model.trace_meta import MAX_NAME_TABLE as MAX_NAME_TABLE
from perflab.model.trace_meta import MAX_NAME_TEXT as MAX_NAME_TEXT
from perflab.model.trace_meta import NAME_TABLES as NAME_TABLES
from perflab.model.trace_meta import check_meta

if TYPE_CHECKING:
    import pandas as pd

    from perflab.analysis.trace_summary import TraceSummary
    from perflab.model.display import (
        CriticalPaths,
        IdleCauses,
        MemoryReport,
        SqlResult,
        Timeline,
        TraceDiff,
    )

KIND = "trace"
# The time window (ns): starts from about 36 years before to 2079 after the epoch, durations
# up to 146 years; then end = start + dur and end - start never leave int64.
TIME_MIN_NS = -(2**60)
TIME_MAX_NS = 2**62 - 2**60
DUR_MAX_NS = 2**62 - 1


class EventKind(IntEnum):
    """What an event is; stored as int8 in ``Trace.kind``."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2
    CPU_OP = 3
    RUNTIME = 4  # CUDA runtime and driver API calls
    ANNOTATION = 5  # NVTX ranges, record_function / user annotations (CPU or GPU side)
    SYNC = 6  # stream/device/event synchronisation
    OTHER = 7
    PYTHON = 8  # python_function events (only when asked for)


#: lower-case names, index = EventKind value
KIND_NAMES: tuple[str, ...] = tuple(k.name.lower() for k in EventKind)
#: kinds that occupy the GPU: their union is "busy" time
GPU_WORK_KINDS: tuple[EventKind, ...] = (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)


class TrackKind(IntEnum):
    GPU = 0
    CPU = 1


MEMCPY_DIRECTIONS: tuple[str, ...] = ("unknown", "HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "memset")

EVENT_COLUMNS: dict[str, type[np.generic]] = {
    "start_ns": np.int64,
    "dur_ns": np.int64,
    "kind": np.int8,
    "track": np.int32,
    "name": np.int32,
    "correlation": np.int64,
    "external_id": np.int64,
}
TRACK_COLUMNS: dict[str, type[np.generic]] = {
    "rank": np.int32,
    "device": np.int64,
    "stream": np.int64,
    "kind": np.int8,
    "label": np.int32,
}
KERNEL_COLUMNS: dict[str, type[np.generic]] = {
    "event": np.int64,
    "grid_x": np.int32,
    "grid_y": np.int32,
    "grid_z": np.int32,
    "block_x": np.int32,
    "block_y": np.int32,
    "block_z": np.int32,
    "registers": np.int32,
    "shared_mem": np.int64,
    "occupancy": np.float64,
}
MEMCPY_COLUMNS: dict[str, type[np.generic]] = {
    "event": np.int64,
    "bytes": np.int64,
    "direction": np.int8,
}
OP_COLUMNS: dict[str, type[np.generic]] = {
    "event": np.int64,
    "sequence": np.int64,
    "flops": np.float64,
    "input_dims": np.int32,
    "input_types": np.int32,
}
# columns holding indices into the string table (remapped by merge)
_STRING_COLUMNS = {"events": ("name",), "tracks": ("label",), "ops": ("input_dims", "input_types")}
_TABLES = {
    "events": EVENT_COLUMNS,
    "tracks": TRACK_COLUMNS,
    "kernels": KERNEL_COLUMNS,
    "memcpy": MEMCPY_COLUMNS,
    "ops": OP_COLUMNS,
}


class Table:
    """Named numpy columns of equal length, with a fixed schema (column -> dtype)."""

    def __init__(
        self, schema: dict[str, type[np.generic]], columns: dict[str, Any] | None = None
    ) -> None:
        self.schema = schema
        cols = columns or {}
        unknown = set(cols) - set(schema)
        if unknown:
            raise ValueError(f"unknown columns {sorted(unknown)}")
        n = len(next(iter(cols.values()))) if cols else 0
        self.columns: dict[str, npt.NDArray[Any]] = {}
        for name, dtype in schema.items():
            if name in cols:
                col = np.ascontiguousarray(cols[name], dtype=dtype)
                if col.shape != (n,):
                    raise ValueError(f"column {name!r} has shape {col.shape}, expected ({n},)")
            else:
                col = _missing(dtype, n)
            self.columns[name] = col

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        return self.columns[name]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def __repr__(self) -> str:
        return f"Table({len(self)} rows: {', '.join(self.columns)})"

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.columns.values())

    def take(self, rows: npt.NDArray[Any]) -> Table:
        return Table(self.schema, {k: v[rows] for k, v in self.columns.items()})

    @classmethod
    def concat(cls, schema: dict[str, type[np.generic]], parts: Sequence[Table]) -> Table:
        if not parts:
            return cls(schema)
        return cls(schema, {k: np.concatenate([p[k] for p in parts]) for k in schema})

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(dict(self.columns))


def distinct(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """The sorted distinct values of an integer column, as ``np.unique(values)``, by one
    sort: numpy 2.4's unique imports ``numpy.ma`` on its first call and hashes, both slower
    than one sort on the columns a load and a summary see."""
    ordered = np.sort(values.ravel())
    if len(ordered) == 0:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def unique_rows(
    matrix: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``np.unique(matrix, axis=0, return_inverse=True)`` (same rows, same order) through
    one lexsort, a few times faster than numpy's sort of whole rows."""
    if len(matrix) == 0:
        return matrix.copy(), np.zeros(0, dtype=np.int64)
    order = np.lexsort(matrix.T[::-1])
    ordered = matrix[order]
    starts = np.concatenate(([True], np.any(ordered[1:] != ordered[:-1], axis=1)))
    inverse = np.empty(len(matrix), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[starts], inverse


def _missing(dtype: type[np.generic], n: int) -> npt.NDArray[Any]:
    """The "unknown" fill: NaN for floats, -1 for integers."""
    if np.issubdtype(dtype, np.floating):
        return np.full(n, np.nan, dtype=dtype)
    return np.full(n, -1, dtype=dtype)


def kind_mask(kind: npt.NDArray[np.int8], kinds: Iterable[int]) -> npt.NDArray[np.bool_]:
    """Per event kind: whether it is one of ``kinds``, by one table lookup per event (a
    tenth of np.isin's time on 6M events)."""
    table = np.zeros(256, dtype=bool)
    table[np.array([int(k) for k in kinds], dtype=np.int8).view(np.uint8)] = True
    return table[kind.astype(np.int8, copy=False).view(np.uint8)]


class Trace(Shown):
    """Columnar events plus tracks, kernel/memcpy/op side tables, strings and meta.

    See the module docstring for every column. Build one with an importer
    (:func:`perflab.io.load_trace`) or directly from columns.
    """

    def __init__(
        self,
        events: Table,
        tracks: Table,
        strings: list[str],
        *,
        kernels: Table | None = None,
        memcpy: Table | None = None,
        ops: Table | None = None,
        memory_events: Table | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.events = events
        self.tracks = tracks
        self.strings = strings
        self.kernels = kernels if kernels is not None else Table(KERNEL_COLUMNS)
        self.memcpy = memcpy if memcpy is not None else Table(MEMCPY_COLUMNS)
        self.ops = ops if ops is not None else Table(OP_COLUMNS)
        self.memory_events = memory_events if memory_events is not None else Table(MEMORY_COLUMNS)
        self.meta: dict[str, Any] = dict(meta or {})

    # -- columns as attributes -------------------------------------------------------
    @property
    def start_ns(self) -> npt.NDArray[np.int64]:
        return self.events["start_ns"]

    @property
    def dur_ns(self) -> npt.NDArray[np.int64]:
        return self.events["dur_ns"]

    @property
    def end_ns(self) -> npt.NDArray[np.int64]:
        end: npt.NDArray[np.int64] = self.events["start_ns"] + self.events["dur_ns"]
        return end

    @property
    def kind(self) -> npt.NDArray[np.int8]:
        return self.events["kind"]

    @property
    def track(self) -> npt.NDArray[np.int32]:
        return self.events["track"]

    @property
    def name(self) -> npt.NDArray[np.int32]:
        return self.events["name"]

    @property
    def correlation(self) -> npt.NDArray[np.int64]:
        return self.events["correlation"]

    @property
    def external_id(self) -> npt.NDArray[np.int64]:
        return self.events["external_id"]

    def __len__(self) -> int:
        return len(self.events)

    # -- convenience -------------------------------------------------------------------
    def names_of(self, rows: npt.NDArray[Any] | None = None) -> list[str]:
        """Event names (decoded) for ``rows`` (all events when None)."""
        ids = self.name if rows is None else self.name[rows]
        return [self.strings[i] for i in ids.tolist()]

    def mask(self, *kinds: EventKind) -> npt.NDArray[np.bool_]:
        """Boolean mask of events of any of ``kinds``."""
        return kind_mask(self.kind, kinds)

    def event_device(self) -> npt.NDArray[np.int64]:
        """Per event: the GPU index of its track, or -1 for CPU tracks."""
        is_gpu = self.tracks["kind"] == TrackKind.GPU
        device = np.where(is_gpu, self.tracks["device"], -1)
        return np.asarray(device[self.track], dtype=np.int64)

    def track_label(self, track: int) -> str:
        return self.strings[int(self.tracks["label"][track])]

    def select(self, rows: npt.NDArray[Any]) -> Trace:
        """A new trace with only ``rows`` (bool mask or indices) of the events; side
        tables follow their events, tracks and strings are kept whole."""
        idx = np.flatnonzero(rows) if np.asarray(rows).dtype == np.bool_ else np.asarray(rows)
        new_row = np.full(len(self), -1, dtype=np.int64)
        new_row[idx] = np.arange(len(idx))
        return Trace(
            self.events.take(idx),
            self.tracks,
            self.strings,
            kernels=_follow(self.kernels, new_row),
            memcpy=_follow(self.memcpy, new_row),
            ops=_follow(self.ops, new_row),
            memory_events=self.memory_events,
            meta=self.meta,
        )

    # -- pandas --------------------------------------------------------------------------
    def to_pandas(self) -> pd.DataFrame:
        """The events as a DataFrame with decoded ``name``, ``kind`` and ``track`` labels."""
        import pandas as pd

        names = np.asarray(self.strings, dtype=object)
        labels = names[self.tracks["label"]] if len(self.tracks) else np.array([], dtype=object)
        return pd.DataFrame(
            {
                "start_ns": self.start_ns,
                "dur_ns": self.dur_ns,
                "kind": pd.Categorical.from_codes(self.kind, categories=list(KIND_NAMES)),
                "track": self.track,
                "track_label": labels[self.track] if len(self) else labels,
                "name": names[self.name] if len(self) else names[:0],
                "correlation": self.correlation,
                "external_id": self.external_id,
            }
        )

    # -- analyses (pure functions live in perflab.analysis) ---------------------------------
    def summary(self) -> TraceSummary:
        """Busy/idle per device, kernels, comm overlap, memcpy, categories: a
        :class:`perflab.analysis.trace_summary.TraceSummary`."""
        from perflab.analysis.trace_summary import summarize  # it imports this module

        return summarize(self)

    def idle(self, min_ns: int = 0, step: int | None = None) -> IdleCauses:
        """Every gap in the GPUs' busy time with the cause that held the next work back and
        the trace's evidence for it: a :class:`perflab.analysis.idle_causes.IdleCauses`
        (heuristics; its module has the rules). ``min_ns``: only longer gaps; ``step``:
        only the gaps of ``ProfilerStep#<step>``."""
        return display.trace_idle(self, min_ns=min_ns, step=step)

    def diff(self, test: Trace, **options: Any) -> TraceDiff:
        """This trace (the control) against ``test``, name by name: counts and times of GPU
        work and host events, new/gone/changed, with several steps a side a verdict per name
        from the step-to-step noise, the change by category and stream, and a headline: a
        :class:`perflab.analysis.trace_diff.TraceDiff`. ``options``: ``step`` (N or (N, M)),
        ``short_names``, ``renames`` (see :func:`perflab.analysis.trace_diff.diff_traces`)."""
        return display.trace_diff(self, test, **options)

    def sql(self, query: str, *, timeout: float | None = None) -> SqlResult:
        """Run a DuckDB SQL query over this trace's tables (``events``, ``kernels``, ``ops``,
        ``runtime``, ``memcpy``, ``ranges``: :mod:`perflab.analysis.trace_sql`), stopped after
        ``timeout`` s (None: 60); shows as a table, has ``to_pandas()``. Needs ``perflab[sql]``."""
        return display.trace_sql(self, query, timeout)

    def memory(self) -> MemoryReport:
        """Where the memory went, from the allocator's events: per device its curves, peak,
        what was live at the peak by op and by phase, fragmentation; growth per step (see
        :func:`perflab.analysis.memory.memory_report`)."""
        return display.trace_memory(self)

    def critical(self, **options: Any) -> CriticalPaths:
        """Each ProfilerStep's critical path, by kind, and what-ifs replayed over its
        dependency graph: ``step`` (N: only that one), ``what_if`` (e.g. ``["host=0.5"]``;
        :func:`perflab.analysis.critical_path.critical_path`)."""
        return display.trace_critical(self, **options)

    def timeline(self, **options: Any) -> Timeline:
        """An interactive timeline of this trace (see perflab.render.timeline.timeline)."""
        return display.trace_timeline(self, **options)

    # -- several ranks -----------------------------------------------------------------------
    @classmethod
    def merge(cls, traces: Sequence[Trace], ranks: Sequence[int] | None = None) -> Trace:
        """One trace from several (typically one per rank). The rank of each input is
        ``ranks[i]`` if given, else its ``meta["rank"]``, else its position; it becomes part
        of every track. Correlation ids stay per rank (pair them with the track's rank).
        The allocator's events of every input are kept, by time (the inputs' order at equal
        times), each with its thread's pid and tid as the tracks keep theirs."""
        if ranks is None:
            ranks = [int(t.meta.get("rank", i)) for i, t in enumerate(traces)]
        if len(ranks) != len(traces):
            raise ValueError("merge: need one rank per trace")
        index: dict[str, int] = {}  # merged string table, in first-seen order
        events: list[Table] = []
        tracks: list[Table] = []
        kernels: list[Table] = []
        memcpy: list[Table] = []
        ops: list[Table] = []
        memory: list[Table] = []
        track_base = row_base = 0
        for trace, rank in zip(traces, ranks, strict=True):
            remap = np.array([index.setdefault(s, len(index)) for s in trace.strings], np.int64)
            ev = _remap_strings(trace.events, "events", remap)
            ev.columns["track"] = ev["track"] + track_base
            tr = _remap_strings(trace.tracks, "tracks", remap)
            tr.columns["rank"] = np.full(len(tr), rank, dtype=np.int32)
            events.append(ev)
            tracks.append(tr)
            for side, out in ((trace.kernels, kernels), (trace.memcpy, memcpy)):
                out.append(_shift_events(side, row_base))
            ops.append(_shift_events(_remap_strings(trace.ops, "ops", remap), row_base))
            memory.append(trace.memory_events)
            track_base += len(trace.tracks)
            row_base += len(trace)
        strings = list(index)
        meta = {
            "format": "merged",
            "ranks": [int(r) for r in ranks],
            "events_read": sum(int(t.meta.get("events_read", len(t))) for t in traces),
            "sources": [t.meta.get("source") for t in traces],
            "devices": next((t.meta["devices"] for t in traces if t.meta.get("devices")), []),
        }
        return cls(
            Table.concat(EVENT_COLUMNS, events),
            Table.concat(TRACK_COLUMNS, tracks),
            strings,
            kernels=Table.concat(KERNEL_COLUMNS, kernels),
            memcpy=Table.concat(MEMCPY_COLUMNS, memcpy),
            ops=Table.concat(OP_COLUMNS, ops),
            memory_events=_by_time(Table.concat(MEMORY_COLUMNS, memory)),
            meta=meta,
        )

    # -- save / load ---------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write an ``.npz``: numeric arrays plus a JSON header (strings, meta,
        schema_version). Loads with ``allow_pickle=False``."""
        target = Path(path)
        header = {
            "perflab": KIND,
            "schema_version": SCHEMA_VERSION,
            "strings": self.strings,
            "meta": json_safe(self.meta),
            SAVED_COUNT_KEY: len(self.memory_events),
        }
        arrays = {
            f"{table_name}.{col}": values
            for table_name in _TABLES
            for col, values in getattr(self, table_name).columns.items()
        } | saved_memory(self.memory_events.columns)
        return save_arrays(target, arrays, header)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Trace:
        """Read a file written by :meth:`save`; only the arrays the schema names are read,
        and every value is checked as the importers check theirs (SchemaError otherwise)."""
        source = str(path)
        names = [f"{table}.{col}" for table, schema in _TABLES.items() for col in schema]
        arrays, doc = load_arrays(path, names)
        if doc is None:
            raise SchemaError("not a perflab trace: no header", source=source)
        check_header(KIND, doc, source)
        strings, meta = doc.get("strings"), doc.get("meta")
        if not isinstance(strings, list) or not all(type(s) is str for s in strings):
            raise SchemaError("damaged trace file: strings are not a list of text", source=source)
        check_meta(meta, source)
        tables = {
            table: _saved_table(table, schema, arrays, source) for table, schema in _TABLES.items()
        }
        trace = cls(
            tables["events"],
            tables["tracks"],
            strings,
            kernels=tables["kernels"],
            memcpy=tables["memcpy"],
            ops=tables["ops"],
            memory_events=Table(MEMORY_COLUMNS, loaded_memory(path, doc)),
            meta=meta,
        )
        _check_indices(trace, source)
        _check_values(trace, source)
        return trace

    # -- display -------------------------------------------------------------------------------
    def describe(self) -> str:
        counts = np.bincount(self.kind.astype(np.int64), minlength=len(KIND_NAMES))
        parts = [f"{int(n)} {KIND_NAMES[k]}" for k, n in enumerate(counts) if n]
        src = self.meta.get("source") or self.meta.get("format", "trace")
        span = (int(self.end_ns.max()) - int(self.start_ns.min())) if len(self) else 0
        from perflab.model.units import counted, format_ns

        return (
            f"Trace of {src}: {counted(len(self), 'event')} ({', '.join(parts) or 'none'}), "
            f"{counted(len(self.tracks), 'track')}, span {format_ns(span)}"
        )

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


def _follow(side: Table, new_row: npt.NDArray[np.int64]) -> Table:
    """Keep side-table rows whose event survived a selection, renumbered."""
    mapped = new_row[side["event"]]
    keep = mapped >= 0
    out = side.take(np.flatnonzero(keep))
    out.columns["event"] = mapped[keep]
    return out


def _by_time(memory: Table) -> Table:
    """Memory events sorted by time, as an importer sorts them (stable: their order kept at
    equal times)."""
    return memory.take(np.argsort(memory["ts_ns"], kind="stable"))


def _shift_events(side: Table, base: int) -> Table:
    out = side.take(np.arange(len(side)))
    out.columns["event"] = side["event"] + base
    return out


def _remap_strings(table: Table, table_name: str, remap: npt.NDArray[np.int64]) -> Table:
    out = table.take(np.arange(len(table)))
    for col in _STRING_COLUMNS.get(table_name, ()):
        ids = table[col]
        out.columns[col] = np.where(ids >= 0, remap[np.maximum(ids, 0)], -1).astype(ids.dtype)
    return out


def _saved_table(
    table: str, schema: dict[str, type[np.generic]], arrays: dict[str, Any], source: str
) -> Table:
    """One table of a saved file: every column of its exact type and of one length."""
    columns = {}
    for col, dtype in schema.items():
        values = arrays[f"{table}.{col}"]
        if values.dtype != np.dtype(dtype):
            raise SchemaError(
                f"damaged trace file: column of type {values.dtype}, expected {np.dtype(dtype)}",
                source=source,
                position=f"{table}.{col}",
            )
        columns[col] = values
    if len({len(v) for v in columns.values()}) > 1:
        raise SchemaError(
            "damaged trace file: columns of different lengths", source=source, position=table
        )
    return Table(schema, columns)


def time_problem(
    start_ns: npt.NDArray[np.int64], dur_ns: npt.NDArray[np.int64]
) -> tuple[int, str] | None:
    """The first event whose start or duration lies outside the time window (see the
    module docstring), and what is wrong with it; None when all are inside."""
    problems = (
        ((start_ns < TIME_MIN_NS) | (start_ns > TIME_MAX_NS), "start outside the time window"),
        (dur_ns < 0, "negative duration"),
        (dur_ns > DUR_MAX_NS, "duration longer than 146 years"),
    )
    for bad, what in problems:
        if bad.any():
            return int(np.flatnonzero(bad)[0]), what
    return None


def _check_values(trace: Trace, source: str) -> None:
    """Times inside the window, codes inside their enumerations."""
    found = time_problem(trace.start_ns, trace.dur_ns)
    if found is not None:
        row, what = found
        raise SchemaError(f"damaged trace file: {what}", source=source, position=f"event {row}")
    codes: Iterable[tuple[str, npt.NDArray[Any], int]] = (
        ("track kind", trace.tracks["kind"], len(TrackKind)),
        ("memcpy direction", trace.memcpy["direction"], len(MEMCPY_DIRECTIONS)),
    )
    for what, values, limit in codes:
        if len(values) and (int(values.min()) < 0 or int(values.max()) >= limit):
            raise SchemaError(f"damaged trace file: unknown {what}", source=source)


def _check_indices(trace: Trace, source: str) -> None:
    """Reject files whose indices point outside their tables (damaged or hand-edited)."""
    checks: Iterable[tuple[str, npt.NDArray[Any], int]] = (
        ("event name", trace.name, len(trace.strings)),
        ("event track", trace.track, len(trace.tracks)),
        ("track label", trace.tracks["label"], len(trace.strings)),
        ("kernel event", trace.kernels["event"], len(trace)),
        ("memcpy event", trace.memcpy["event"], len(trace)),
        ("op event", trace.ops["event"], len(trace)),
    )
    for what, ids, limit in checks:
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= limit):
            raise SchemaError(f"damaged trace file: {what} index out of range", source=source)
    kinds = trace.kind
    if len(kinds) and (int(kinds.min()) < 0 or int(kinds.max()) >= len(KIND_NAMES)):
        raise SchemaError("damaged trace file: unknown event kind", source=source)
