"""The JSON documents of the analyses (``perflab trace ... --json``, ``perflab compile
--json`` with its kernels' reports, and each result's ``to_dict()``, a roofline's too), each
declared once as a msgspec Struct: a document is the Struct's encoding
(:func:`perflab.model.schema.encode`), its keys in the order of the fields.

The analyses import this module only when a document is made, so that reading and
analysing a trace needs msgspec only when something is written. A field written under
another key (``"marked_by_nvdisasm"``) is renamed, so that :func:`perflab.model.schema.view`
can fill it from the result's attribute; a map whose keys are data (a device, a cause, a
category) is a ``dict``. A result's own dataclass is its part of a document where its fields
are the keys.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from perflab.analysis.critical_path import CriticalDoc
from perflab.analysis.idle_causes import CauseTotal
from perflab.analysis.insights import Insight
from perflab.analysis.job import JobDoc, KernelRow
from perflab.analysis.memory import Growth
from perflab.analysis.memory_snapshot import StreamMemory
from perflab.analysis.registers import RegisterCap, Spill
from perflab.analysis.sass_control import BasicBlock
from perflab.analysis.trace_stats import HostActivity
from perflab.analysis.trace_summary import CommTotals, CopyTotals, DeviceTime, Totals
from perflab.model.saved import CompileDoc, KernelDoc, SassLineDoc


class Document(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A printed document: every key declared, none other accepted when one is read back.
    Documents hold only values and other documents, never themselves, so the garbage
    collector need not track them (an idle report makes one per gap and per fact)."""


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


# -- perflab compile: a kernel's report ---------------------------------------------------


class OccupancyView(Document, kw_only=True):
    """Blocks and warps per SM for the block size, the limit each factor sets, the factors
    that set it, and the occupancy (warps per SM over the most an SM holds)."""

    arch: str
    block_size: int
    registers: int
    shared_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limits: dict[str, int]
    limiting: list[str]
    occupancy: float


class SpillsView(Document, kw_only=True):
    """Why the kernel spilled, the register cap behind it, and each spill instruction."""

    cause: str
    heuristic: bool
    cap: RegisterCap | None
    marked: bool = msgspec.field(name="marked_by_nvdisasm")
    spills: list[Spill] = msgspec.field(name="instructions")


class ScheduleView(Document, kw_only=True):
    """The control bits' totals and the basic blocks."""

    stall_cycles: int
    long_waits: int = msgspec.field(name="long_latency_waits")
    blocks: list[BasicBlock] = msgspec.field(name="basic_blocks")


class PressureView(Document, kw_only=True):
    """The peak of live general registers, where it is, and the registers allocated."""

    peak: int
    peak_offsets: list[int]
    peak_lines: list[int]
    allocated: int
    entry: int = msgspec.field(name="live_at_entry")


class KernelReportView(Document, kw_only=True):
    """A kernel's report in ``perflab compile --json`` (null parts: not known, see
    ``occupancy_error`` and ``control_note``)."""

    block_size: int
    shared_dynamic: int
    occupancy: OccupancyView | None
    occupancy_error: str | None
    instruction_mix: dict[str, int]
    insights: list[Insight]
    spills: SpillsView | None
    schedule: ScheduleView | None
    control_note: str | None
    live_registers: PressureView | None


# -- perflab compile FILE --json -------------------------------------------------------


class SassLineView(SassLineDoc, kw_only=True):
    """A SASS line as printed: the saved line, and the offsets of the instructions it waits
    for and that wait for it (null where the control bits are not known)."""

    waits_for: list[int] | UnsetType | None = UNSET
    waited_by: list[int] | UnsetType | None = UNSET


class KernelView(KernelDoc, kw_only=True):
    """A kernel as printed: the saved kernel and, for a reported kernel, its report
    (occupancy, instruction mix, insights, spills, schedule, live registers)."""

    sass_lines: list[SassLineView] | UnsetType = UNSET  # type: ignore[assignment]  # printed lines extend the saved ones
    report: KernelReportView | UnsetType = UNSET


class CompileJson(CompileDoc, kw_only=True):
    """``perflab compile FILE --json`` (one per file): the saved result, its kernels as
    printed, and whether it came from the compile cache."""

    kernels: list[KernelView]  # type: ignore[assignment]  # printed kernels extend the saved ones
    cached: bool


# -- a roofline (its ``to_dict()``) ---------------------------------------------------------


class RoofView(Document, kw_only=True):
    """A device's ceilings: FLOP/s per data type, B/s per memory level, and their source."""

    device: str
    compute: dict[str, float] = msgspec.field(name="compute_flops")
    memory: dict[str, float] = msgspec.field(name="memory_bytes_per_s")
    source: str
    measured: bool


class VerdictView(Document, kw_only=True):
    """A point under the roof: what it did, the ceiling that bounds it and how far below."""

    name: str
    level: str
    dtype: str
    flops: float
    bytes: float
    seconds: float
    intensity: float | None  # null: no bytes moved
    flops_per_s: float
    bytes_per_s: float
    attainable_flops_per_s: float
    bound: str
    ceiling: str
    fraction_of_ceiling: float
    headroom: float
    compute_ceiling: str


class RooflineView(Document, kw_only=True):
    roof: RoofView
    points: list[VerdictView]


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
