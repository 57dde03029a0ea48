"""What a CUDA caching-allocator snapshot says (see :class:`perflab.model.memory.MemorySnapshot`):
per device, the memory reserved from the device (its segments, by stream), what the blocks in
them hold (allocated, waiting to be freed, inactive: cached and free for reuse), the largest
allocations with the stacks that made them, and, when the allocator's history was recorded,
its trace: actions by kind, the most memory its allocations held at once, and the
out-of-memory errors it met.

Sums of blocks are made in Python's integers; the allocator trace's running total in int64,
once its sizes are known to add up to less than 2**62.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.analysis.memory import MAX_TOTAL, NamedBytes
from perflab.errors import InputError
from perflab.model.display import Shown
from perflab.model.memory import BLOCK_STATES, TRACE_ACTIONS, MemorySnapshot, Stack

if TYPE_CHECKING:
    from perflab.analysis.json_views import AllocationView, AllocatorTraceView, SnapshotDeviceView

_ALLOCATED, _AWAITING, _INACTIVE = range(3)
_ALLOC, _FREE_COMPLETED = TRACE_ACTIONS.index("alloc"), TRACE_ACTIONS.index("free_completed")
_OOM = TRACE_ACTIONS.index("oom")


@dataclass(frozen=True)
class StreamMemory:
    """Segments of one stream on one device."""

    stream: int
    segments: int
    reserved: int


@dataclass(frozen=True)
class LargeAllocation:
    """One of the largest allocated blocks and the stack that allocated it."""

    device: int
    size: int
    requested: int  # -1: not recorded
    address: int
    stack: Stack


@dataclass(frozen=True)
class AllocatorTrace:
    """One device's recorded allocator history."""

    device: int
    entries: int
    actions: dict[str, int]  # action -> entries
    peak_live: int  # the most bytes its allocations held at once (allocs - completed frees)
    ooms: tuple[tuple[int, int], ...]  # (bytes asked for, bytes the device had free)
    span_us: int  # from its first to its last entry (-1: no times recorded)


@dataclass(frozen=True)
class SnapshotDevice:
    """One device's segments and blocks."""

    device: int
    segments: int
    reserved: int
    by_stream: tuple[StreamMemory, ...]
    by_state: tuple[NamedBytes, ...]  # per state in BLOCK_STATES: its bytes and blocks
    unaccounted: int  # segment bytes no block covers (0 in a whole snapshot)

    @property
    def allocated(self) -> int:
        return self.by_state[_ALLOCATED].bytes

    @property
    def cached_free(self) -> int:
        """Reserved but not allocated: inactive blocks, cached for reuse."""
        return self.by_state[_INACTIVE].bytes


@dataclass(frozen=True)
class SnapshotSummary(Shown):
    """A memory snapshot summarised (see the module docstring)."""

    source: str
    devices: tuple[SnapshotDevice, ...]
    largest: tuple[LargeAllocation, ...]
    traces: tuple[AllocatorTrace, ...]

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.SnapshotView` declares."""
        from perflab.analysis.json_views import SnapshotView
        from perflab.model.schema import encode

        return encode(
            SnapshotView(
                source=self.source,
                devices=[_device_view(d) for d in self.devices],
                largest=[_allocation_view(a) for a in self.largest],
                traces=[_trace_view(t) for t in self.traces],
            )
        )


def _device_view(d: SnapshotDevice) -> SnapshotDeviceView:
    from perflab.analysis.json_views import SnapshotDeviceView, StateView

    return SnapshotDeviceView(
        device=d.device,
        segments=d.segments,
        reserved_bytes=d.reserved,
        allocated_bytes=d.allocated,
        cached_free_bytes=d.cached_free,
        by_stream=list(d.by_stream),
        by_state=[StateView(state=b.name, blocks=b.count, bytes=b.bytes) for b in d.by_state],
        unaccounted_bytes=d.unaccounted,
    )


def _allocation_view(a: LargeAllocation) -> AllocationView:
    from perflab.analysis.json_views import AllocationView, FrameView

    return AllocationView(
        device=a.device,
        bytes=a.size,
        requested_bytes=a.requested if a.requested >= 0 else None,
        address=a.address,
        frames=[FrameView(filename=f, line=n, name=fn) for f, n, fn in a.stack],
    )


def _trace_view(t: AllocatorTrace) -> AllocatorTraceView:
    from perflab.analysis.json_views import AllocatorTraceView, OomView

    return AllocatorTraceView(
        device=t.device,
        entries=t.entries,
        actions=t.actions,
        peak_live=t.peak_live,
        ooms=[OomView(bytes=size, device_free=free) for size, free in t.ooms],
        span_us=t.span_us,
    )


def summarize_snapshot(snapshot: MemorySnapshot, top: int = 10) -> SnapshotSummary:
    """The summary of ``snapshot`` (see the module docstring); ``top``: allocations listed."""
    seg, blocks = snapshot.segments, snapshot.blocks
    block_device = seg["device"][blocks["segment"]] if len(blocks["segment"]) else np.zeros(0)
    devices = tuple(
        _device(snapshot, int(d), block_device == d) for d in sorted(set(seg["device"].tolist()))
    )
    return SnapshotSummary(
        snapshot.source,
        devices,
        _largest(snapshot, block_device, top),
        tuple(_trace(snapshot, int(d)) for d in sorted(set(snapshot.actions["device"].tolist()))),
    )


def _total(values: npt.NDArray[np.integer]) -> int:
    return sum(values.tolist())


def _device(snapshot: MemorySnapshot, device: int, mine: npt.NDArray[np.bool_]) -> SnapshotDevice:
    seg, blocks = snapshot.segments, snapshot.blocks
    on = seg["device"] == device
    streams = seg["stream"][on]
    by_stream = tuple(
        StreamMemory(int(s), int((streams == s).sum()), _total(seg["total_size"][on][streams == s]))
        for s in sorted(set(streams.tolist()))
    )
    state = blocks["state"][mine]
    size = blocks["size"][mine]
    by_state = tuple(
        NamedBytes(name, _total(size[state == code]), int((state == code).sum()))
        for code, name in enumerate(BLOCK_STATES)
    )
    reserved = _total(seg["total_size"][on])
    return SnapshotDevice(
        device,
        int(on.sum()),
        reserved,
        by_stream,
        by_state,
        reserved - _total(size),
    )


def _largest(
    snapshot: MemorySnapshot, block_device: npt.NDArray[np.generic], top: int
) -> tuple[LargeAllocation, ...]:
    blocks = snapshot.blocks
    rows = np.flatnonzero(blocks["state"] == _ALLOCATED)
    rows = rows[np.argsort(-blocks["size"][rows], kind="stable")][: max(top, 0)]
    return tuple(
        LargeAllocation(
            int(block_device[i]),
            int(blocks["size"][i]),
            int(blocks["requested_size"][i]),
            int(blocks["address"][i]),
            snapshot.stacks[int(blocks["stack"][i])] if blocks["stack"][i] >= 0 else (),
        )
        for i in rows.tolist()
    )


def _trace(snapshot: MemorySnapshot, device: int) -> AllocatorTrace:
    actions = snapshot.actions
    on = actions["device"] == device
    code, size, when = actions["action"][on], actions["size"][on], actions["time_us"][on]
    counted = {
        (TRACE_ACTIONS[c] if c >= 0 else "other"): int((code == c).sum())
        for c in sorted(set(code.tolist()))
    }
    change = np.where(code == _ALLOC, size, 0) - np.where(code == _FREE_COMPLETED, size, 0)
    if float(np.abs(change).sum(dtype=np.float64)) > MAX_TOTAL:
        raise InputError(
            "the allocator trace's sizes add up to more than 2**62 bytes", source=snapshot.source
        )
    live = np.cumsum(change) if len(change) else np.zeros(1, np.int64)
    ooms = tuple(
        (int(s), int(f))
        for s, f in zip(size[code == _OOM], actions["device_free"][on][code == _OOM], strict=True)
    )
    timed = when[when >= 0]
    span = int(timed.max() - timed.min()) if len(timed) else -1
    return AllocatorTrace(device, int(on.sum()), counted, max(int(live.max()), 0), ooms, span)
