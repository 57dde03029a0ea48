"""SQL over a trace: ``Trace.sql("SELECT ...")``, ``Job.sql(...)`` and ``perflab trace sql``.

DuckDB (the ``perflab[sql]`` extra) runs the query over views of the trace's columns. The
trace's numpy arrays are registered as they are (DuckDB scans them in place, no copy); the
views join them to the string table and decode the codes. A job is one set of views over all
its ranks, on the job's common clock, told apart by ``rank``.

Tables (every time in integer nanoseconds on the recording clock; NULL where unknown):

``events``: every event. ``row`` (the event's index in the trace), ``rank``, ``kind``
(``kernel``, ``memcpy``, ``memset``, ``cpu_op``, ``runtime``, ``annotation``, ``sync``,
``other``, ``python``), ``name``, ``category`` (the kernel category of GPU work, see
:mod:`perflab.analysis.categories`; NULL for host events), ``device`` (GPU index of GPU
work), ``stream`` (CUDA stream of GPU work), ``process`` and ``thread`` (of host events),
``track`` and ``track_label`` (the timeline lane), ``start_ns``, ``end_ns``, ``dur_ns``,
``correlation`` (ties a runtime call to the GPU work it launched) and ``external_id`` (ties a
CPU op to its runtime calls).

``kernels``: the kernel events, with ``grid_x grid_y grid_z block_x block_y block_z``,
``registers`` (per thread), ``shared_mem`` (bytes per block) and ``occupancy`` (percent).

``memcpy``: memcpy and memset events, with ``bytes`` and ``direction`` (``HtoD``, ``DtoH``,
``DtoD``, ``HtoH``, ``PtoP``, ``memset``, ``unknown``).

``ops``: CPU ops, with ``sequence`` (autograd), ``flops``, ``input_dims`` and
``input_types`` (JSON text).

``runtime``: CUDA runtime and driver calls and synchronisations (``kind`` says which).

``ranges``: annotations: NVTX ranges, ``record_function`` and user annotations,
``ProfilerStep#<n>`` (on the host or, mirrored, on the GPU).

The connection runs with DuckDB's external access off and its configuration locked: a query
reads the trace and nothing else, and writes no file (no spilling to a temporary directory).
It is bounded: a query that runs longer than its time limit (``timeout``, default
:data:`DEFAULT_TIMEOUT_S`) is stopped with DuckDB's ``interrupt()`` and refused with an
:class:`InputError`; DuckDB may use :data:`MEMORY_SHARE` of the machine's memory (or of the
container's limit) and one thread per core this process may run on, and a result may bring
as many rows into this process as :func:`max_rows` allows (the copy into numpy is beyond
DuckDB's limit; a bigger one is refused, not fetched). The query runs in a thread of its own
while the caller's thread waits, so that Ctrl-C (a KeyboardInterrupt, which only the main
thread receives) stops the query too, instead of waiting for DuckDB to notice.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import categorize
from perflab.errors import InputError, import_extra
from perflab.model.display import Shown
from perflab.model.trace import GPU_WORK_KINDS, KIND_NAMES, MEMCPY_DIRECTIONS, Trace, distinct
from perflab.model.units import format_bytes

if TYPE_CHECKING:
    import pandas as pd

    from perflab.model.job import Job

TABLES = ("events", "kernels", "memcpy", "ops", "runtime", "ranges")
FEATURE = "SQL over traces"
DEFAULT_TIMEOUT_S = 60.0  # a query over a trace of millions of events takes seconds
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # beyond this, a wait no longer fits the platform's timers
MEMORY_SHARE = 0.5  # of the machine's (or container's) memory: the rest stays with the trace
STOP_WAIT_S = 10.0  # how long an interrupted query gets to stop before it is left behind
# what a fetched cell costs in this process at most, as a rule (a text cell is a Python str):
# DuckDB's memory limit does not cover the numpy copy of a result, so its cells are counted
CELL_BYTES = 64
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")

_EVENTS = """
CREATE VIEW events AS
SELECT e.row, t.rank, k.text AS kind, s.text AS name, c.category,
  CASE WHEN t.kind = 0 THEN t.device END AS device,
  CASE WHEN t.kind = 0 THEN t.stream END AS stream,
  CASE WHEN t.kind = 1 THEN t.device END AS process,
  CASE WHEN t.kind = 1 THEN t.stream END AS thread,
  e.track, l.text AS track_label,
  e.start_ns, e.start_ns + e.dur_ns AS end_ns, e.dur_ns,
  NULLIF(e.correlation, -1) AS correlation, NULLIF(e.external_id, -1) AS external_id
FROM _events e
JOIN _tracks t ON e.track = t.track
JOIN _kinds k ON e.kind = k.code
JOIN _strings s ON e.name = s.id
JOIN _strings l ON t.label = l.id
LEFT JOIN _categories c ON e.name = c.id AND e.kind IN (0, 1, 2)
"""
_VIEWS = (
    _EVENTS,
    """
CREATE VIEW kernels AS
SELECT e.*, NULLIF(x.grid_x, -1) AS grid_x, NULLIF(x.grid_y, -1) AS grid_y,
  NULLIF(x.grid_z, -1) AS grid_z, NULLIF(x.block_x, -1) AS block_x,
  NULLIF(x.block_y, -1) AS block_y, NULLIF(x.block_z, -1) AS block_z,
  NULLIF(x.registers, -1) AS registers, NULLIF(x.shared_mem, -1) AS shared_mem,
  CASE WHEN isnan(x.occupancy) THEN NULL ELSE x.occupancy END AS occupancy
FROM events e LEFT JOIN _kernels x ON e.row = x.event WHERE e.kind = 'kernel'
""",
    """
CREATE VIEW memcpy AS
SELECT e.*, NULLIF(m.bytes, -1) AS bytes, d.text AS direction
FROM events e LEFT JOIN _memcpy m ON e.row = m.event
LEFT JOIN _directions d ON m.direction = d.code
WHERE e.kind IN ('memcpy', 'memset')
""",
    """
CREATE VIEW ops AS
SELECT e.*, NULLIF(o.sequence, -1) AS sequence,
  CASE WHEN isnan(o.flops) THEN NULL ELSE o.flops END AS flops,
  dims.text AS input_dims, types.text AS input_types
FROM events e LEFT JOIN _ops o ON e.row = o.event
LEFT JOIN _strings dims ON o.input_dims = dims.id
LEFT JOIN _strings types ON o.input_types = types.id
WHERE e.kind = 'cpu_op'
""",
    "CREATE VIEW runtime AS SELECT * FROM events WHERE kind IN ('runtime', 'sync')",
    "CREATE VIEW ranges AS SELECT * FROM events WHERE kind = 'annotation'",
)


@dataclass
class SqlResult(Shown):
    """A query's result: ``columns`` (name -> numpy array; NULLs are ``None`` in object
    columns, NaN in float ones) and each column's DuckDB type; shows itself as a table and
    converts with ``to_pandas()`` / ``to_dict()``."""

    query: str
    columns: dict[str, npt.NDArray[np.generic]]
    types: dict[str, str]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def rows(self, limit: int | None = None) -> list[list[object]]:
        """The rows as lists of plain Python values (``None`` for NULL and NaN)."""
        n = len(self) if limit is None else min(limit, len(self))
        cols = [_plain(v[:n].tolist()) for v in self.columns.values()]
        return [list(r) for r in zip(*cols, strict=True)] if cols else []

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.SqlView` declares."""
        from perflab.analysis.json_views import SqlView
        from perflab.model.schema import encode

        return encode(SqlView(columns=list(self.columns), types=self.types, rows=self.rows()))

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.columns)


def _plain(values: list[object]) -> list[object]:
    return [None if isinstance(v, float) and not math.isfinite(v) else v for v in values]


def _column(values: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    """A fetched column as a plain array: masked entries (NULL) become None, or NaN in a
    float column."""
    if not isinstance(values, np.ma.MaskedArray):
        return np.asarray(values)
    if not np.ma.is_masked(values):
        return np.asarray(values.data)
    if values.dtype.kind == "f":
        return np.asarray(values.filled(np.nan))
    out = values.data.astype(object)
    out[np.ma.getmaskarray(values)] = None
    return np.asarray(out)


def _codes(names: tuple[str, ...]) -> dict[str, npt.NDArray[np.generic]]:
    return {
        "code": np.arange(len(names), dtype=np.int64),
        "text": np.array(names, dtype=object),
    }


def _categories(trace: Trace) -> dict[str, npt.NDArray[np.generic]]:
    """The kernel category of every name that GPU work carries (names matched once each)."""
    ids = distinct(trace.name[trace.mask(*GPU_WORK_KINDS)]).astype(np.int64)
    labels = categorize([trace.strings[i] for i in ids.tolist()])
    return {"id": ids, "category": np.array(labels, dtype=object)}


def _register(con: Any, trace: Trace) -> None:  # a duckdb connection (no usable types)
    """The trace's arrays (as they are: DuckDB scans numpy in place) and the views."""
    events = {"row": np.arange(len(trace), dtype=np.int64), **trace.events.columns}
    tracks = {"track": np.arange(len(trace.tracks), dtype=np.int32), **trace.tracks.columns}
    tables = {
        "_events": events,
        "_tracks": tracks,
        "_strings": {
            "id": np.arange(len(trace.strings), dtype=np.int32),
            "text": np.array(trace.strings, dtype=object),
        },
        "_kinds": _codes(KIND_NAMES),
        "_directions": _codes(MEMCPY_DIRECTIONS),
        "_categories": _categories(trace),
        "_kernels": trace.kernels.columns,
        "_memcpy": trace.memcpy.columns,
        "_ops": trace.ops.columns,
    }
    for name, columns in tables.items():
        con.register(name, columns)
    for view in _VIEWS:
        con.execute(view)


def connect(trace: Trace) -> Any:
    """A DuckDB connection holding the trace's views (module docstring): external access off,
    memory and threads bounded, configuration locked."""
    duckdb = import_extra("duckdb", FEATURE)
    config: dict[str, object] = {"enable_external_access": False, "temp_directory": ""}
    memory = memory_limit_bytes()
    if memory is not None:
        config["memory_limit"] = f"{max(memory >> 20, 64)}MiB"
    config["threads"] = _usable_cores()
    con = duckdb.connect(config={**config, "lock_configuration": True})
    try:
        _register(con, trace)
    except BaseException:
        con.close()
        raise
    return con


def memory_limit_bytes() -> int | None:
    """What DuckDB may use: :data:`MEMORY_SHARE` of the physical memory or of the container's
    (cgroup) limit, whichever is smaller; None when neither can be read."""
    known = [m for m in (_physical_memory(), _cgroup_memory()) if m]
    return int(min(known) * MEMORY_SHARE) if known else None


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not on this platform
        return None


def _cgroup_memory() -> int | None:
    """The memory limit of this process's cgroup (v2, then v1); None when unlimited."""
    for path in _CGROUP_LIMITS:
        try:
            with open(path, encoding="ascii") as fh:
                text = fh.read(64).strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text.isdigit() and 0 < int(text) < 1 << 60:  # v1 writes ~2**63 for "no limit"
            return int(text)
    return None


def _usable_cores() -> int:
    """The cores this process may run on (its affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def check_timeout(timeout: object) -> float:
    """``timeout`` as seconds, or an InputError: a number above 0 and at most
    :data:`MAX_TIMEOUT_S`."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InputError(f"the SQL time limit must be a number of seconds, not {timeout!r}")
    if not 0 < timeout <= MAX_TIMEOUT_S:  # NaN fails this too
        raise InputError(
            f"the SQL time limit must be above 0 and at most {MAX_TIMEOUT_S:.0f} s, not {timeout!r}"
        )
    return float(timeout)


def run_sql(source: Trace | Job, query: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> SqlResult:
    """Run ``query`` over ``source`` (a trace, or a job as one set of tables with ``rank``),
    stopping it after ``timeout`` seconds; a DuckDB error becomes an :class:`InputError`
    carrying DuckDB's message. Ctrl-C stops the query and raises KeyboardInterrupt."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("the SQL query is empty")
    limit = check_timeout(timeout)
    trace = source if isinstance(source, Trace) else source.merged()
    duckdb = import_extra("duckdb", FEATURE)
    con = connect(trace)
    types, fetched = _bounded(con, lambda: _fetch(duckdb, con, query), limit)
    columns = {name: _column(values) for name, values in fetched.items()}
    return SqlResult(query, columns, dict(zip(columns, types, strict=True)))


Fetched = tuple[list[str], dict[str, npt.NDArray[np.generic]]]


def _fetch(duckdb: Any, con: Any, query: str) -> Fetched:
    """The query's column types and columns, on the query's own thread; DuckDB's errors as
    InputErrors. The connection is closed here, by the thread that used it."""
    try:
        relation = con.sql(query)
        if relation is None:
            raise InputError("the SQL statement returns no rows: give a query (SELECT ...)")
        types = [str(t) for t in relation.types]
        most = max_rows(len(types))
        fetched = relation.limit(most + 1).fetchnumpy()  # names made unique: x, x_1
    except duckdb.OutOfMemoryException:
        raise InputError(_out_of_memory()) from None
    except duckdb.Error as exc:
        raise InputError(f"SQL error: {exc}") from None
    finally:
        con.close()
    if fetched and len(next(iter(fetched.values()))) > most:
        raise InputError(
            f"the result has more than {most:,} rows of {len(types)} columns, more than this "
            "machine's memory lets perflab fetch: aggregate (GROUP BY), filter (WHERE) or add "
            "a LIMIT"
        )
    return types, fetched


def max_rows(columns: int) -> int:
    """The most rows of ``columns`` columns that a result may bring into this process: the
    cells that :data:`CELL_BYTES` each fit in DuckDB's memory limit (4 GiB when the machine's
    memory is unknown), at least a million."""
    memory = memory_limit_bytes() or 4 << 30
    return max(1_000_000, memory // CELL_BYTES // max(columns, 1))


def _out_of_memory() -> str:
    memory = memory_limit_bytes()
    share = f"{MEMORY_SHARE:.0%} of this machine's memory"
    limit = f" ({format_bytes(memory)}, {share})" if memory else ""
    return (
        f"the query needs more memory than DuckDB may use here{limit}: select fewer rows or "
        "columns, or aggregate (GROUP BY) before joining"
    )


class _Outcome:
    """What the query's thread hands back: its result or its exception, and when."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Fetched | None = None
        self.error: BaseException | None = None

    def run(self, work: Callable[[], Fetched]) -> None:
        try:
            self.value = work()
        except BaseException as exc:  # handed to the waiting thread, raised there
            self.error = exc
        finally:
            self.done.set()


def _bounded(con: Any, work: Callable[[], Fetched], limit: float) -> Fetched:
    """``work()`` (which runs a query on ``con`` and closes it) on a thread of its own, the
    calling thread waiting at most ``limit`` seconds: past that, or on Ctrl-C, the query is
    interrupted; a timeout is an InputError, Ctrl-C a KeyboardInterrupt."""
    outcome = _Outcome()
    thread = threading.Thread(target=outcome.run, args=(work,), name="perflab-sql", daemon=True)
    thread.start()
    try:
        finished = outcome.done.wait(limit)
    except KeyboardInterrupt:
        _stop(con, outcome)
        raise
    if not finished:
        _stop(con, outcome)
        raise InputError(
            f"the query ran longer than {limit:g} s (--timeout SECONDS, or timeout= in "
            "Trace.sql and Job.sql, sets a longer limit)"
        )
    if outcome.error is not None:
        raise outcome.error
    assert outcome.value is not None
    return outcome.value


def _stop(con: Any, outcome: _Outcome) -> None:
    """Interrupt the running query and give it :data:`STOP_WAIT_S` to stop (DuckDB checks for
    an interrupt between chunks of work); its thread closes the connection."""
    con.interrupt()
    outcome.done.wait(STOP_WAIT_S)
