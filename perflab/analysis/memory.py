"""Where the memory went: the allocator's ``[memory]`` events of a trace (recorded with
``torch.profiler.profile(profile_memory=True)``), per device.

For each device: the allocated and reserved curves (the events' ``Total Allocated`` and
``Total Reserved``); the peak of allocated memory, when it happened and in which op (the
op of the allocation that reached it); what was live at the peak, by the op that allocated
it and by category (:data:`RULES`); fragmentation, the bytes reserved but not allocated at
the peak; the final figures. Over the steps: memory that an op allocates step after step and
that is never freed (:data:`GROWTH_RULE`).

An allocation is paired with the next event at its address on its device when that event
is a free; an allocation with no such free is live to the end of the trace. Memory live at
the peak that no allocation of the trace accounts for was allocated before the trace began
(the device's total at its first event, less that event's bytes, less what the trace
freed of it). Where each event happened (its op, top-level op, phase and step) is worked
out by :mod:`perflab.analysis.memory_attribution`. Every amount is bounded (see
:mod:`perflab.model.memory`) and all of a trace's together must stay under 2**62 bytes
(:data:`MAX_TOTAL`), so no sum here can wrap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.analysis.memory_attribution import (
    BACKWARD,
    FORWARD,
    OPTIMIZER,
    PHASE_RULE,
    Places,
    places,
)
from perflab.errors import InputError
from perflab.model.display import Shown
from perflab.model.memory import device_label
from perflab.model.trace import Table, Trace

if TYPE_CHECKING:
    from perflab.analysis.json_views import DeviceMemoryView

I64 = npt.NDArray[np.int64]
MAX_TOTAL = 2**62  # the most bytes all of a trace's memory events may say together
OUTSIDE = "(outside any op)"
BEFORE = "(allocated before the trace)"
NO_MEMORY = (
    "this trace has no memory events: record it with "
    "torch.profiler.profile(profile_memory=True) to see where the memory went"
)
#: each category of memory live at the peak and the rule that puts an allocation in it, in
#: the order the rules are tried
RULES: dict[str, str] = {
    "before the trace": "allocated before the trace began: the total at the first event, "
    "less its own bytes, less what the trace freed of it",
    "temporaries": "freed before the top-level op that allocated it returned (an op called "
    "from Python, not from another op)",
    "parameters": "allocated before the first ProfilerStep began (weights, buffers, inputs "
    "made at set-up)",
    "activations": "allocated in the forward pass and freed in the backward pass",
    "gradients": "allocated in the backward pass and not freed in it",
    "optimizer state": "allocated in the optimizer and not freed in it",
    "other": "everything else (freed in the phase that allocated it, or outside the phases)",
}
GROWTH_RULE = (
    "an op grows memory when, in every ProfilerStep but the last (at least two), it "
    "allocates memory that is never freed; bytes per step: the median of those steps"
)
HEURISTIC_NOTE = (
    "categories and phases are heuristics over the names of the ranges around each "
    "allocation and its free (rules: perflab.analysis.memory)"
)


@dataclass(frozen=True)
class NamedBytes:
    """Bytes and a count under one name: memory live at the peak that one op (or one
    category) allocated, a snapshot's blocks of one state."""

    name: str
    bytes: int
    count: int


@dataclass(frozen=True)
class DeviceMemory:
    """One device's memory: its curves (per event, in time order) and figures. Reserved
    figures are -1 where the trace does not say them."""

    label: str
    device_type: int
    device_id: int
    time_ns: I64
    allocated: I64
    reserved: I64
    peak_allocated: int
    peak_ns: int
    peak_op: str
    reserved_at_peak: int
    peak_reserved: int
    final_allocated: int
    final_reserved: int
    live_at_peak: tuple[NamedBytes, ...]  # by op, largest first
    by_category: tuple[NamedBytes, ...]  # in RULES order, categories with memory only
    unfollowed: int  # events whose Total Allocated does not follow the one before + Bytes

    @property
    def fragmentation(self) -> int:
        """Bytes reserved but not allocated at the peak (-1: reserved not known)."""
        if self.reserved_at_peak < 0:
            return -1
        return self.reserved_at_peak - self.peak_allocated

    def document(self) -> DeviceMemoryView:
        """The device as ``perflab trace memory --json`` lists it (reserved figures null
        where the trace does not say them)."""
        from perflab.analysis.json_views import DeviceMemoryView, LiveCategoryView, LiveOpView

        return DeviceMemoryView(
            device=self.device_id,
            device_type=self.device_type,
            label=self.label,
            events=len(self.time_ns),
            peak_allocated_bytes=self.peak_allocated,
            peak_ns=self.peak_ns,
            peak_op=self.peak_op,
            reserved_at_peak_bytes=_known(self.reserved_at_peak),
            fragmentation_bytes=_known(self.fragmentation),
            peak_reserved_bytes=_known(self.peak_reserved),
            live_at_peak=[
                LiveOpView(op=r.name, bytes=r.bytes, count=r.count) for r in self.live_at_peak
            ],
            live_at_peak_by_category=[
                LiveCategoryView(category=r.name, bytes=r.bytes, count=r.count, rule=RULES[r.name])
                for r in self.by_category
            ],
            final_allocated_bytes=self.final_allocated,
            final_reserved_bytes=_known(self.final_reserved),
        )


def _known(value: int) -> int | None:
    """A figure as written: None where it is not known (-1)."""
    return value if value >= 0 else None


@dataclass(frozen=True)
class Growth:
    """Memory an op allocates step after step and never frees."""

    device: str
    op: str
    bytes_per_step: int
    steps: int  # steps in which it left memory
    total_bytes: int  # never freed, over all steps


@dataclass(frozen=True)
class MemoryReport(Shown):
    """Where the memory of a trace went (see the module docstring)."""

    source: str
    origin_ns: int  # the trace's first time: views count from it
    devices: tuple[DeviceMemory, ...]
    growth: tuple[Growth, ...]
    steps: int  # ProfilerStep ranges in the trace
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """``{"devices": [...], "growth": [...], "notes": [...], "rules": {...}}``: the
        document :class:`perflab.analysis.json_views.MemoryView` declares."""
        from perflab.analysis.json_views import MemoryView
        from perflab.model.schema import encode

        return encode(
            MemoryView(
                source=self.source,
                devices=[d.document() for d in self.devices],
                growth=list(self.growth),
                steps=self.steps,
                notes=list(self.notes),
                rules={**RULES, "growth": GROWTH_RULE, "phase": PHASE_RULE},
            )
        )


def memory_report(trace: Trace) -> MemoryReport:
    """Where the memory of ``trace`` went (see the module docstring)."""
    memory = trace.memory_events
    source = str(trace.meta.get("source", ""))
    origin = _origin(trace)
    if len(memory) == 0:
        return MemoryReport(source, origin, (), (), 0, (NO_MEMORY,))
    _check_total(memory, source)
    where = places(trace, memory)
    name = _op_names(trace, where.op)
    free = paired_frees(memory)
    device_key = memory["device_type"].astype(np.int64) << 32 | (memory["device_id"] + 1)
    devices, growth, notes = [], [], []
    for key in np.unique(device_key).tolist():
        rows = np.flatnonzero(device_key == key)
        device = _device(trace, memory, where, name, free, rows)
        devices.append(device)
        growth += _growth(memory, where, name, free, rows, device.label)
        notes += _consistency(device, len(rows))
    if len(where.steps) < 3:
        notes.append("growth per step needs 3 ProfilerStep ranges or more")
    notes.append(HEURISTIC_NOTE)
    return MemoryReport(
        source, origin, tuple(devices), tuple(growth), len(where.steps), tuple(notes)
    )


def _consistency(device: DeviceMemory, events: int) -> list[str]:
    """What the report cannot vouch for when the events' totals and bytes disagree."""
    notes = []
    if device.unfollowed:
        notes.append(
            f"{device.label}: at {device.unfollowed} of {events} events, Total Allocated "
            "does not follow the event before it plus its Bytes (events missing, or threads "
            "interleaved)"
        )
    accounted = sum(r.bytes for r in device.live_at_peak)
    if accounted != device.peak_allocated:
        notes.append(
            f"{device.label}: the allocations live at the peak add up to {accounted} bytes, "
            f"not its {device.peak_allocated} (a free of another size than its allocation, "
            "or events missing)"
        )
    return notes


def _origin(trace: Trace) -> int:
    starts = [int(a.min()) for a in (trace.start_ns, trace.memory_events["ts_ns"]) if len(a)]
    return min(starts) if starts else 0


def _check_total(memory: Table, source: str) -> None:
    """Refuse amounts whose sum could wrap an int64 (every sum below is a subset's)."""
    total = float(np.abs(memory["bytes"]).sum(dtype=np.float64))
    if total > MAX_TOTAL:
        raise InputError(
            "the memory events' Bytes add up to more than 2**62: not an allocator's record",
            source=source or None,
        )


def _op_names(trace: Trace, op: I64) -> list[str]:
    """Per memory event: the name of its op (OUTSIDE where none)."""
    names = np.array([*trace.strings, OUTSIDE], dtype=object)
    ids = np.where(op >= 0, trace.name[np.maximum(op, 0)] if len(trace) else -1, len(names) - 1)
    listed: list[str] = names[ids].tolist()
    return listed


def paired_frees(memory: Table) -> I64:
    """Per event: for an allocation, the row of the free that ends it (the next event at
    its address on its device, when that event is a free); -1 otherwise."""
    n = len(memory)
    order = np.lexsort((np.arange(n), memory["addr"], memory["device_id"], memory["device_type"]))
    same = np.zeros(max(n - 1, 0), dtype=bool)
    if n > 1:
        a, b = order[:-1], order[1:]
        same = (
            (memory["addr"][a] == memory["addr"][b])
            & (memory["device_id"][a] == memory["device_id"][b])
            & (memory["device_type"][a] == memory["device_type"][b])
            & (memory["bytes"][a] > 0)
            & (memory["bytes"][b] < 0)
        )
    free = np.full(n, -1, np.int64)
    free[order[:-1][same]] = order[1:][same]
    return free


def _device(
    trace: Trace, memory: Table, where: Places, name: list[str], free: I64, rows: I64
) -> DeviceMemory:
    allocated, reserved = memory["total_allocated"][rows], memory["total_reserved"][rows]
    amount = memory["bytes"][rows]
    peak_at = int(np.argmax(allocated))
    peak = int(rows[peak_at])
    live = rows[(amount > 0) & (rows <= peak) & ((free[rows] > peak) | (free[rows] < 0))]
    live_bytes = memory["bytes"][live]
    before = int(allocated[peak_at]) - int(live_bytes.sum())
    by_op = _grouped([name[i] for i in live.tolist()], live_bytes)
    category = _categories(trace, memory, where, free, live)
    by_category = _grouped([list(RULES)[c] for c in category.tolist()], live_bytes)
    if before > 0:
        by_op = [*by_op, NamedBytes(BEFORE, before, 0)]
        by_category = [NamedBytes("before the trace", before, 0), *by_category]
    order = list(RULES)
    device_type, device_id = int(memory["device_type"][peak]), int(memory["device_id"][peak])
    # a CPU's allocator says 0 reserved throughout: not tracked, rather than none
    reserved_known = bool((reserved >= 0).all() and reserved.max() > 0)
    return DeviceMemory(
        label=device_label(device_type, device_id),
        device_type=device_type,
        device_id=device_id,
        time_ns=memory["ts_ns"][rows],
        allocated=allocated,
        reserved=reserved,
        peak_allocated=int(allocated[peak_at]),
        peak_ns=int(memory["ts_ns"][peak]),
        peak_op=name[peak],
        reserved_at_peak=int(reserved[peak_at]) if reserved_known else -1,
        peak_reserved=int(reserved.max()) if reserved_known else -1,
        final_allocated=int(allocated[-1]),
        final_reserved=int(reserved[-1]) if reserved_known else -1,
        live_at_peak=tuple(sorted(by_op, key=lambda r: (-r.bytes, r.name))),
        by_category=tuple(sorted(by_category, key=lambda r: order.index(r.name))),
        unfollowed=int(np.count_nonzero(allocated[1:] != allocated[:-1] + amount[1:])),
    )


def _grouped(names: list[str], amounts: I64) -> list[NamedBytes]:
    """Bytes and counts per name."""
    totals: dict[str, list[int]] = {}
    for text, value in zip(names, amounts.tolist(), strict=True):
        row = totals.setdefault(text, [0, 0])
        row[0] += value
        row[1] += 1
    return [NamedBytes(text, total, count) for text, (total, count) in totals.items()]


def _categories(trace: Trace, memory: Table, where: Places, free: I64, live: I64) -> I64:
    """Per allocation of ``live``: its category, an index into RULES (see RULES)."""
    ts = memory["ts_ns"]
    f = free[live]
    freed = f >= 0
    freed_at = np.where(freed, ts[np.maximum(f, 0)], -1)
    top = where.top[live]
    has_top = top >= 0
    top_end = np.where(has_top, trace.end_ns[np.maximum(top, 0)] if len(trace) else 0, -1)
    phase = where.phase[live]
    freed_phase = np.where(freed, where.phase[np.maximum(f, 0)], 0)
    setup_end = int(where.steps.start.min()) if len(where.steps) else None
    rules = [
        freed & has_top & (freed_at <= top_end),  # temporaries
        ts[live] < setup_end if setup_end is not None else np.zeros(len(live), bool),
        (phase == FORWARD) & freed & (freed_phase == BACKWARD),  # activations
        (phase == BACKWARD) & ~(freed & (freed_phase == BACKWARD)),  # gradients
        (phase == OPTIMIZER) & ~(freed & (freed_phase == OPTIMIZER)),  # optimizer state
    ]
    category = np.full(len(live), len(RULES) - 1, np.int64)  # other
    for index in range(len(rules) - 1, -1, -1):  # the first rule that holds wins
        category[rules[index]] = index + 1  # RULES[0] is the memory from before the trace
    return category


def _growth(
    memory: Table, where: Places, name: list[str], free: I64, rows: I64, device: str
) -> list[Growth]:
    """Ops that leave never-freed memory in every step but the last (see GROWTH_RULE)."""
    steps = len(where.steps)
    if steps < 3:
        return []
    kept = rows[(memory["bytes"][rows] > 0) & (free[rows] < 0) & (where.step[rows] >= 0)]
    per_op: dict[str, npt.NDArray[np.int64]] = {}
    for i, step, amount in zip(
        kept.tolist(), where.step[kept].tolist(), memory["bytes"][kept].tolist(), strict=True
    ):
        per_op.setdefault(name[i], np.zeros(steps, np.int64))[step] += amount
    found = []
    for op, left in per_op.items():
        evidence = left[:-1]
        if (evidence > 0).all():
            median = int(np.sort(evidence)[(len(evidence) - 1) // 2])
            steps_left = int(np.count_nonzero(left))
            found.append(Growth(device, op, median, steps_left, int(left.sum())))
    return sorted(found, key=lambda g: (-g.bytes_per_step, g.op))
