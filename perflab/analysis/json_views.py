"""The JSON documents of the trace analyses (``perflab trace ... --json``, and each result's
``to_dict()``), each declared once as a msgspec Struct: a document is the Struct's encoding
(:func:`perflab.model.schema.encode`), its keys in the order of the fields.

The analyses import this module only when a document is made, so that reading and
analysing a trace needs msgspec only when something is written. A field whose name is not
a Python name (``"host-busy"``) is renamed; a map whose keys are data (a device, a cause, a
category) is a ``dict``. A result's own dataclass is its part of a document where its fields
are the keys.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from perflab.analysis.critical_path import CriticalDoc
from perflab.analysis.idle_causes import CauseTotal
from perflab.analysis.job import JobDoc, KernelRow
from perflab.analysis.memory import Growth
from perflab.analysis.memory_snapshot import StreamMemory
from perflab.analysis.trace_stats import HostActivity
from perflab.analysis.trace_summary import CommTotals, CopyTotals, DeviceTime, Totals


class Document(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A printed document: every key declared, none other accepted when one is read back."""


# -- perflab trace summary FILE ------------------------------------------------------------


class SummaryView(Document, kw_only=True, omit_defaults=True):
    """``perflab trace summary FILE --json`` (definitions in
    :mod:`perflab.analysis.trace_summary`)."""

    events: int
    kernels: Totals
    devices: dict[str, DeviceTime]
    comm: CommTotals
    memcpy: CopyTotals
    categories: dict[str, Totals]
    idle: dict[str, CauseTotal]
    host: HostActivity | None = None  # only in a trace without GPU work


# -- perflab trace idle --------------------------------------------------------------------


class EvidenceView(Document, kw_only=True):
    """One fact a gap's cause rests on (times None for a note)."""

    role: str
    name: str
    start_ns: int | None
    dur_ns: int | None
    text: str


class GapView(Document, kw_only=True):
    device: str
    start_ns: int
    dur_ns: int
    cause: str
    before: str
    after: str
    evidence: list[EvidenceView]


# the per-step table, column by column (a step, a device, times; a column per cause)
StepColumns = dict[str, list[Any]]


class IdleView(Document, kw_only=True):
    """``perflab trace idle --json``: every gap with its cause and evidence, the idle time
    by cause, the per-step table (columns), the rules and the note on heuristics."""

    gaps: list[GapView]
    by_cause: dict[str, CauseTotal]
    idle_ns: int
    min_ns: int
    step: int | None
    steps: StepColumns | None
    rules: dict[str, str]
    note: str
    no_gpu_work: str | UnsetType = UNSET  # a trace with no GPU work: why there are no gaps


# -- perflab trace memory ------------------------------------------------------------------


class LiveOpView(Document, kw_only=True):
    op: str
    bytes: int
    count: int


class LiveCategoryView(Document, kw_only=True):
    category: str
    bytes: int
    count: int
    rule: str


class DeviceMemoryView(Document, kw_only=True):
    """One device's memory; a reserved figure is null where the trace does not say it."""

    device: int
    device_type: int
    label: str
    events: int
    peak_allocated_bytes: int
    peak_ns: int
    peak_op: str
    reserved_at_peak_bytes: int | None
    fragmentation_bytes: int | None
    peak_reserved_bytes: int | None
    live_at_peak: list[LiveOpView]
    live_at_peak_by_category: list[LiveCategoryView]
    final_allocated_bytes: int
    final_reserved_bytes: int | None


class MemoryView(Document, kw_only=True):
    """``perflab trace memory TRACE --json``."""

    source: str
    devices: list[DeviceMemoryView]
    growth: list[Growth]
    steps: int
    notes: list[str]
    rules: dict[str, str]


class StateView(Document, kw_only=True):
    state: str
    blocks: int
    bytes: int


class SnapshotDeviceView(Document, kw_only=True):
    device: int
    segments: int
    reserved_bytes: int
    allocated_bytes: int
    cached_free_bytes: int
    by_stream: list[StreamMemory]
    by_state: list[StateView]
    unaccounted_bytes: int


class FrameView(Document, kw_only=True):
    filename: str
    line: int
    name: str


class AllocationView(Document, kw_only=True):
    device: int
    bytes: int
    requested_bytes: int | None  # null: not recorded
    address: int
    frames: list[FrameView]


class OomView(Document, kw_only=True):
    bytes: int
    device_free: int


class AllocatorTraceView(Document, kw_only=True):
    device: int
    entries: int
    actions: dict[str, int]
    peak_live: int
    ooms: list[OomView]
    span_us: int


class SnapshotView(Document, kw_only=True):
    """``perflab trace memory SNAPSHOT.pickle --json``."""

    source: str
    devices: list[SnapshotDeviceView]
    largest: list[AllocationView]
    traces: list[AllocatorTraceView]


# -- perflab trace diff --------------------------------------------------------------------


class SideView(Document, kw_only=True):
    source: str
    steps: list[int]
    step_us: list[float]


class ChangeView(Document, kw_only=True):
    control_us: float
    test_us: float
    change_us: float


class SplitView(Document, kw_only=True):
    name: str
    control_us: float
    test_us: float
    change_us: float


class CauseChangeView(Document, kw_only=True):
    control_us: float
    test_us: float
    delta_us: float
    control_step_median_us: float | UnsetType = UNSET  # with per-step statistics
    test_step_median_us: float | UnsetType = UNSET


class TallyView(Document, kw_only=True):
    status: dict[str, int]
    verdict: dict[str, int]


class DiffCountsView(Document, kw_only=True):
    kernels: TallyView
    ops: TallyView


class DiffRowsView(Document, kw_only=True):
    kernels: int
    ops: int


class DiffRowView(Document, kw_only=True):
    name: str
    kind: str
    category: str
    control_count: int
    test_count: int
    control_us: float
    test_us: float
    change_us: float
    status: str
    verdict: str
    # with per-step statistics
    control_step_median_us: float | UnsetType = UNSET
    test_step_median_us: float | UnsetType = UNSET
    change_per_step_us: float | UnsetType = UNSET
    p_value: float | UnsetType = UNSET
    control_per_step_us: list[float] | UnsetType = UNSET
    test_per_step_us: list[float] | UnsetType = UNSET


class DiffView(Document, kw_only=True):
    """``perflab trace diff --json``."""

    kind: str
    control: SideView
    test: SideView
    scope: str
    per_step: bool
    method: str
    headline: str
    notes: list[str]
    gpu: ChangeView
    idle: ChangeView
    idle_by_cause: dict[str, CauseChangeView]
    counts: DiffCountsView
    by_category: list[SplitView]
    by_stream: list[SplitView]
    rows: DiffRowsView
    kernels: list[DiffRowView]
    ops: list[DiffRowView]


# -- perflab trace sql, kernels ------------------------------------------------------------


class SqlView(Document, kw_only=True):
    """``perflab trace sql --json``: the query's columns, their SQL types, and its rows."""

    columns: list[str]
    types: dict[str, str]
    rows: list[list[Any]]  # each value as its column's SQL type gives it (null: NULL, NaN)


class JobKernelsView(Document, kw_only=True):
    """``perflab trace kernels DIR --json``: the kernels of every rank, longest first."""

    kind: str
    rows: list[KernelRow]


__all__ = [
    "CriticalDoc",
    "DiffView",
    "IdleView",
    "JobDoc",
    "JobKernelsView",
    "MemoryView",
    "SnapshotView",
    "SqlView",
    "SummaryView",
]
