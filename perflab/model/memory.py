"""Memory data: the allocator's events of a trace, and a CUDA caching-allocator snapshot.

A trace recorded with ``torch.profiler.profile(profile_memory=True)`` holds one ``[memory]``
instant event per allocation and free (a free has negative ``Bytes``), taken on the thread
that called the allocator. :class:`perflab.model.trace.Trace` keeps them as the columns of
``trace.memory_events``, one row per event, sorted by time (then by their order in the file):

=================== ====== ===============================================================
column              dtype  meaning
=================== ====== ===============================================================
``ts_ns``           int64  when, nanoseconds on the trace's clock
``pid``, ``tid``    int64  the thread that called the allocator (as a CPU track numbers it)
``addr``            int64  the block's address (a free names the address it frees)
``bytes``           int64  bytes allocated (> 0) or freed (< 0)
``total_allocated`` int64  the device's allocated bytes after the event
``total_reserved``  int64  bytes the allocator holds from the device after it (-1: unknown)
``device_type``     int8   c10's DeviceType: 0 CPU, 1 CUDA, ... (see :data:`DEVICE_TYPES`)
``device_id``       int32  the device's index (-1 for the CPU)
=================== ====== ===============================================================

Every amount lies within :data:`MAX_BYTES` (8 PiB, exact in a float64 too), so a sum of
up to 512 of them fits an int64; longer sums are bounded before they are made (see
:func:`perflab.analysis.memory.memory_report`).

:class:`MemorySnapshot` holds what ``torch.cuda.memory._snapshot()`` returns (or
``_dump_snapshot`` pickled), read by :mod:`perflab.io.memory_snapshot` into columns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.errors import SchemaError

if TYPE_CHECKING:
    from perflab.model.display import SnapshotSummary

MAX_BYTES = 2**53  # the most bytes one amount may say (an exact float64 too)
MAX_DEVICE_TYPE = 127  # c10::DeviceType is a small enum (int8 here)

MEMORY_COLUMNS: dict[str, type[np.generic]] = {
    "ts_ns": np.int64,
    "pid": np.int64,
    "tid": np.int64,
    "addr": np.int64,
    "bytes": np.int64,
    "total_allocated": np.int64,
    "total_reserved": np.int64,
    "device_type": np.int8,
    "device_id": np.int32,
}

#: c10::DeviceType names of the device types a trace may name (by their number)
DEVICE_TYPES: dict[int, str] = {
    0: "CPU",
    1: "CUDA",
    6: "HIP",
    9: "XLA",
    12: "XPU",
    13: "MPS",
    19: "MTIA",
    20: "PrivateUse1",
}


def device_label(device_type: int, device_id: int) -> str:
    """``"CPU"``, ``"CUDA 0"``, ``"device type 15, 2"`` for one the table does not name."""
    name = DEVICE_TYPES.get(device_type)
    if name is None:
        return f"device type {device_type}, {device_id}"
    return name if device_id < 0 else f"{name} {device_id}"


# -- saved with a trace (see Trace.save / Trace.load) ---------------------------------------

SAVED_COUNT_KEY = "memory_events"  # in the saved trace's header: rows of trace.memory_events


def saved_memory(columns: dict[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
    """The arrays a saved trace holds for its memory events (none when it has none, so a
    file without them reads as before)."""
    if len(columns["ts_ns"]) == 0:
        return {}
    return {f"memory.{name}": values for name, values in columns.items()}


def loaded_memory(
    path: str | os.PathLike[str], header: dict[str, Any]
) -> dict[str, npt.NDArray[Any]] | None:
    """A saved trace's memory columns, checked as the importer checks them (SchemaError
    otherwise); None when the file has none."""
    from perflab.model.serialize import load_arrays

    source = str(path)
    count = header.get(SAVED_COUNT_KEY, 0)
    if type(count) is not int or not 0 <= count < 2**63:
        raise SchemaError("damaged trace file: not a count", source=source, position="header")
    if count == 0:
        return None
    arrays, _ = load_arrays(path, [f"memory.{name}" for name in MEMORY_COLUMNS])
    columns = {name: arrays[f"memory.{name}"] for name in MEMORY_COLUMNS}
    for name, dtype in MEMORY_COLUMNS.items():
        values = columns[name]
        if values.dtype != np.dtype(dtype) or values.shape != (count,):
            raise SchemaError(
                f"damaged trace file: not {count} values of type {np.dtype(dtype)}",
                source=source,
                position=f"memory.{name}",
            )
    found = memory_problem(columns)
    if found is not None:
        row, what = found
        raise SchemaError(f"damaged trace file: {what}", source=source, position=f"memory {row}")
    return columns


def memory_problem(columns: dict[str, npt.NDArray[Any]]) -> tuple[int, str] | None:
    """The first memory event whose values lie outside their ranges, and what is wrong
    with it; None when all are inside."""
    from perflab.model.trace import TIME_MAX_NS, TIME_MIN_NS  # trace.py imports this module

    ts, amount = columns["ts_ns"], columns["bytes"]
    allocated, reserved = columns["total_allocated"], columns["total_reserved"]
    problems = (
        ((ts < TIME_MIN_NS) | (ts > TIME_MAX_NS), "time outside the time window"),
        ((amount < -MAX_BYTES) | (amount > MAX_BYTES), "bytes beyond 2**53"),
        ((allocated < 0) | (allocated > MAX_BYTES), "total allocated outside 0 to 2**53"),
        ((reserved < -1) | (reserved > MAX_BYTES), "total reserved outside 0 to 2**53"),
        (columns["device_type"] < 0, "a negative device type"),
        (columns["device_id"] < -1, "a device id below -1"),
    )
    for bad, what in problems:
        if bad.any():
            return int(np.flatnonzero(bad)[0]), what
    return None


# -- a CUDA caching-allocator snapshot ----------------------------------------------------

#: block states of a snapshot, by their code in ``MemorySnapshot.blocks["state"]``
BLOCK_STATES = ("active_allocated", "active_awaiting_free", "inactive")
#: allocator trace actions, by their code in ``MemorySnapshot.actions["action"]``
TRACE_ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "snapshot",
    "oom",
)

SnapshotColumns = dict[str, npt.NDArray[Any]]
#: a call stack: frames innermost first, each (file name, line, function name)
Stack = tuple[tuple[str, int, str], ...]


@dataclass(frozen=True)
class MemorySnapshot:
    """A caching allocator's state (``torch.cuda.memory._snapshot()``), as columns.

    - ``segments`` (one row per cudaMalloc'd segment): ``device`` int32, ``address``
      uint64, ``total_size``, ``allocated_size``, ``active_size`` int64 (-1: not given),
      ``stream`` uint64, ``large`` bool (a "large" pool segment);
    - ``blocks`` (the pieces of the segments): ``segment`` int64 (row of ``segments``),
      ``address`` uint64, ``size``, ``requested_size`` int64 (-1: not given), ``state`` int8
      (index into :data:`BLOCK_STATES`), ``stack`` int32 (index into ``stacks``, -1: none);
    - ``actions`` (the allocator's trace, when ``_record_memory_history`` was on, in order per
      device): ``device`` int32, ``action`` int8 (index into :data:`TRACE_ACTIONS`),
      ``addr`` uint64, ``size`` int64, ``stream`` uint64, ``time_us`` int64 (-1: not
      given), ``stack`` int32, ``device_free`` int64 (an OOM's free bytes; -1 otherwise);
    - ``stacks``: the distinct call stacks, frames innermost first.
    """

    source: str
    segments: SnapshotColumns
    blocks: SnapshotColumns
    actions: SnapshotColumns
    stacks: list[Stack] = field(default_factory=list)

    def summary(self, top: int = 10) -> SnapshotSummary:
        """Reserved memory by segment and stream, blocks by state, the ``top`` largest
        allocations with their stacks and the allocator's trace: a
        :class:`perflab.analysis.memory_snapshot.SnapshotSummary`."""
        from perflab.model.display import snapshot_summary

        return snapshot_summary(self, top=top)
