"""The allocator's ``[memory]`` instant events (``profile_memory=True``) -> the columns of
``trace.memory_events`` (see :mod:`perflab.model.memory`).

Each slice's memory events become column parts at once, as complete events do (see
:mod:`.columns`): the typed records have checked every amount's range while decoding
(:class:`.records.Args`); here a missing field and a time outside the model's window are
refused, naming the event. At the end the parts are joined and sorted by time, the file's
order kept between events at the same time.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.io.kineto.parts import ColumnParts, KeyTable
from perflab.io.kineto.records import MISSING, EventExact, InstantExact
from perflab.io.kineto.times import TS_MAX_US, TS_MIN_US, exact_ns, us_to_ns
from perflab.model.memory import MEMORY_COLUMNS

I64 = npt.NDArray[np.int64]
_ARGS, _TS = attrgetter("args"), attrgetter("ts")
_EXACT = (EventExact, InstantExact)  # records whose times are JSON text


class _Field(NamedTuple):
    """An args field of memory events and where it goes."""

    part: str  # its column part's key
    column: str  # its column of trace.memory
    absent: int | None  # the value it holds when the event lacks it; None: it may lack it
    label: str  # its name in the file


_FIELDS = {
    "addr": _Field("mem_addr", "addr", MISSING, "Addr"),
    "amount": _Field("mem_bytes", "bytes", MISSING, "Bytes"),
    "total_allocated": _Field("mem_allocated", "total_allocated", -1, "Total Allocated"),
    "total_reserved": _Field("mem_reserved", "total_reserved", None, "Total Reserved"),
    "device_type": _Field("mem_device_type", "device_type", -1, "Device Type"),
    "device_id": _Field("mem_device_id", "device_id", None, "Device Id"),
}


def memory_parts(
    records: list[Any], code: npt.NDArray[np.int32], where: I64, source: str
) -> dict[str, npt.NDArray[np.generic]]:
    """The column parts of a slice's memory events: ``code`` their key codes, ``where``
    their positions in ``traceEvents`` (for errors)."""
    args = list(map(_ARGS, records))
    parts: dict[str, npt.NDArray[np.generic]] = {"mem_code": code}
    for name, field in _FIELDS.items():
        values = np.fromiter(map(attrgetter(name), args), np.int64, count=len(args))
        if field.absent is not None and (values == field.absent).any():
            _refuse(
                f"a [memory] event without '{field.label}'", values == field.absent, where, source
            )
        parts[field.part] = values.astype(MEMORY_COLUMNS[field.column])
    parts["mem_ts"] = _times(records, where, source)
    return parts


def _refuse(what: str, bad: npt.NDArray[np.bool_], where: I64, source: str) -> None:
    at = int(where[np.flatnonzero(bad)[0]])
    raise InputError(what, source=source, position=f"traceEvents[{at}]")


def _times(records: list[Any], where: I64, source: str) -> I64:
    """Each event's time in ns; a missing, non-finite or out-of-window 'ts' is refused."""
    ns: I64 | None = None
    if type(records[0]) in _EXACT:
        ns, us = exact_ns(list(map(_TS, records)))
    else:
        us = np.fromiter(map(_TS, records), np.float64, count=len(records))
    inside = (us >= TS_MIN_US) & (us <= TS_MAX_US)  # NaN is outside
    if not inside.all():
        what = "a [memory] event's 'ts' is missing, not finite or outside the time window"
        _refuse(what, ~inside, where, source)
    return ns if ns is not None else us_to_ns(us)


def memory_columns(parts: ColumnParts, events: KeyTable) -> dict[str, npt.NDArray[Any]]:
    """The joined memory events, sorted by time (stable: the file's order at equal times),
    with each one's thread from its key."""
    code = parts.take("mem_code", np.int32)
    ts = parts.take("mem_ts", np.int64)
    order = np.argsort(ts, kind="stable")
    code = code[order]
    columns: dict[str, npt.NDArray[Any]] = {"ts_ns": ts[order]}
    for name in ("pid", "tid"):
        columns[name] = events[name][code] if len(code) else np.zeros(0, np.int64)
    for field in _FIELDS.values():
        columns[field.column] = parts.take(field.part, MEMORY_COLUMNS[field.column])[order]
    return columns
