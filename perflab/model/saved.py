"""The saved form of each result kind, declared once: every key a file holds, in the order
written, with its bounds (see :mod:`perflab.model.schema`). The model classes convert to and
from these types; they import this module only when they read or write a file, so that the
models themselves import without msgspec (a GPU machine installs it after it starts)."""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from perflab.model.ceilings import level_names
from perflab.model.fields import MAX_FLOAT, MAX_ITEMS
from perflab.model.machine import Provenance, provenance_of
from perflab.model.schema import (
    Amount,
    Amounts,
    Count,
    Invalid,
    Options,
    Signed,
    Text,
    TextMap,
    Texts,
    require_length,
)
from perflab.model.timing import MAX_CALLS, first_unmeasurable, unmeasurable_text

# -- timings -------------------------------------------------------------------------------

Int64Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]  # an int64 column's value


class OpRow(msgspec.Struct):
    name: Text
    calls: Int64Count
    total_ns: Int64Count


class OpTableDoc(msgspec.Struct, kw_only=True):
    """A saved OpTable: what its rows are and each row, longest first."""

    kind: Text = "kernel"
    rows: list[OpRow]


Clocks = Annotated[list[Amount | None], msgspec.Meta(max_length=MAX_ITEMS)]  # null: not read


class TimingDoc(msgspec.Struct, kw_only=True):
    """A saved TimingResult. ``summary`` is what the samples give (written for readers of
    the file, recomputed when loaded). ``sm_clock_min_mhz`` and ``sm_clock_median_mhz``
    hold one clock per sample (null where none was read)."""

    missing_first: ClassVar[tuple[str, ...]] = ("samples_ns",)
    timer_steps: ClassVar[tuple[str, ...]] = ("empty_window_ns", "tick_ns")

    name: Text = "cell"
    backend: Text
    device: Text
    number: Annotated[int, msgspec.Meta(ge=1, le=MAX_CALLS)] = 1
    created: Text = ""
    versions: TextMap = {}
    options: Options = {}
    warnings: Texts = []
    samples_ns: Amounts
    host_ns: Amounts | None = None
    stop_reason: Text = ""
    throttle: Options = {}
    empty_window_ns: Amount | None = None
    tick_ns: Amount | None = None
    sm_clock_min_mhz: Clocks | None = None
    sm_clock_median_mhz: Clocks | None = None
    summary: Options | None = None
    kernels: OpTableDoc | None = None
    flops: Amount | None = None
    bytes: Amount | None = None
    # what the code ran on beside backend and device; left out where unknown, as in
    # files saved before they were kept
    interpreter: Text | msgspec.UnsetType = msgspec.UNSET
    dtype: Text | msgspec.UnsetType = msgspec.UNSET
    dtype_why: Text | msgspec.UnsetType = msgspec.UNSET

    def validate(self) -> None:
        """Samples a timer can report, as many host times as samples (when kept), and
        timer steps that are measurable times (or unknown: saved before they were kept)."""
        if len(self.samples_ns) == 0:
            raise Invalid("samples_ns", "has no samples")
        bad = first_unmeasurable(self.samples_ns)
        if bad is not None:
            raise Invalid(f"samples_ns[{bad}]", unmeasurable_text(self.samples_ns[bad]))
        for column in ("host_ns", "sm_clock_min_mhz", "sm_clock_median_mhz"):
            values = getattr(self, column)
            if values is not None:
                require_length(column, values, len(self.samples_ns))
        for key in self.timer_steps:
            step = getattr(self, key)
            if step is not None and first_unmeasurable([step]) is not None:
                raise Invalid(key, unmeasurable_text(step))


def unless_unknown(value: str | None) -> str | msgspec.UnsetType:
    """A text as saved: left out of the file where unknown (None or empty)."""
    return value if value else msgspec.UNSET


def known(value: str | msgspec.UnsetType) -> str | None:
    """A saved text, None where the file leaves it out."""
    return None if isinstance(value, msgspec.UnsetType) else value


class TimingFile(TimingDoc, kw_only=True):
    """What a saved TimingResult is read as: :class:`TimingDoc`, and the names that
    files written before carry for its timer steps (an empty sample's window was saved
    as ``floor_ns``, the clock's tick as ``resolution_ns``), checked alike; the current
    name wins where a file holds both."""

    timer_steps: ClassVar[tuple[str, ...]] = (*TimingDoc.timer_steps, "floor_ns", "resolution_ns")

    floor_ns: Amount | None = None
    resolution_ns: Amount | None = None

    def empty_window(self) -> float | None:
        return self.empty_window_ns if self.empty_window_ns is not None else self.floor_ns

    def tick(self) -> float | None:
        return self.tick_ns if self.tick_ns is not None else self.resolution_ns


# -- microbenchmarks -----------------------------------------------------------------------

Column = list[Amount | None]  # null where a point was not measured


class LevelDoc(msgspec.Struct):
    name: Text
    x_min: Amount
    x_max: Amount
    value: Amount
    points: Count


class SeriesDoc(msgspec.Struct, kw_only=True):
    """A saved Series: its columns as lists of numbers, as long as x."""

    name: Text
    x_unit: Text = "bytes"
    y_unit: Text = "ns"
    x: Column
    y: Column
    extra: dict[str, Column] = {}
    levels: list[LevelDoc] = []

    def validate(self) -> None:
        if None in self.x:
            raise Invalid(f"x[{self.x.index(None)}]", "must be a finite number, not null")
        require_length("y", self.y, len(self.x))
        for key, column in self.extra.items():
            require_length(f"extra.{key}", column, len(self.x))


class ProvenanceDoc(msgspec.Struct, kw_only=True):
    """Where and when a saved result was measured: the first keys of both kinds."""

    benchmark: Text
    device: Text
    backend: Text
    created: Text = ""
    versions: TextMap = {}
    options: Options = {}
    warnings: Texts = []

    def provenance(self) -> Provenance:
        return provenance_of(self)


class BenchDoc(ProvenanceDoc, kw_only=True):
    """A saved BenchResult: where it was measured, then its series."""

    series: list[SeriesDoc]


# a bandwidth in GB/s: up to a million TB/s, far above any link, so that the views' B/s
# (x 1e9) stay finite
MAX_GBPS = 1e9
Bandwidth = Annotated[float, msgspec.Meta(ge=0, le=MAX_GBPS)]


class AlphaBetaDoc(msgspec.Struct):
    """A saved AlphaBetaFit, in the units people read: us and GB/s (null: no slope)."""

    alpha_us: Signed
    beta_GBps: Bandwidth | None
    rel_rms: Amount
    points: Count


class CollectiveRowDoc(msgspec.Struct, kw_only=True):
    op: Text
    bytes: Count
    world_size: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)]
    backend: Text
    time_us: Amount
    algbw_GBps: Bandwidth
    busbw_GBps: Bandwidth
    dtype: Text = "float32"
    iters: Count = 0
    verified: bool = False


class CollectiveResultDoc(ProvenanceDoc, kw_only=True):
    """A saved CollectiveResult: where it was measured, its rows and a fit per op."""

    rows: list[CollectiveRowDoc]
    fits: dict[str, AlphaBetaDoc] = {}


# -- ceilings ------------------------------------------------------------------------------

Rate = Annotated[float, msgspec.Meta(gt=0, le=MAX_FLOAT)]  # measured: positive, finite


class CeilingsDoc(msgspec.Struct, kw_only=True):
    """One device's saved ceilings: GFLOP/s per dtype, GB/s per memory level (each level
    once, however a file spells it: ``"l2"`` loads as ``"L2"``)."""

    device: Text
    backend: Text
    flops: dict[str, Rate] = {}
    bandwidth: dict[str, Rate] = {}
    date: Text = ""
    versions: TextMap = {}
    notes: Texts = []

    def validate(self) -> None:
        try:
            level_names(self.bandwidth)
        except ValueError as exc:
            raise Invalid("bandwidth", str(exc)) from None


class CeilingsFile(msgspec.Struct):
    """The cache file: each measured device's ceilings under its name."""

    devices: dict[str, CeilingsDoc]


# -- compiled kernels ----------------------------------------------------------------------


def _upto(top: int) -> object:
    return msgspec.Meta(ge=0, le=top)


Stall = Annotated[int, _upto(15)]  # cycles
Barrier = Annotated[int, _upto(5)]  # one of the six scoreboards (7, none, is saved as null)
WaitMask = Annotated[int, _upto(0x3F)]  # bit b: wait for barrier b
ReuseMask = Annotated[int, _upto(0xF)]  # bit i: operand i kept in the reuse cache
Live = Annotated[int, _upto(255)]  # registers of one kind per thread


class ResourcesDoc(msgspec.Struct, kw_only=True):
    registers: Count = 0
    spill_stores: Count = 0
    spill_loads: Count = 0
    shared_static: Count = 0
    shared_dynamic: Count = 0
    stack: Count = 0
    constant: Count = 0
    barriers: Count = 0


class ControlDoc(msgspec.Struct, kw_only=True):
    stall: Stall
    yields: bool = msgspec.field(name="yield")
    write_barrier: Barrier | None = None
    read_barrier: Barrier | None = None
    wait_mask: WaitMask
    reuse: ReuseMask


class LiveDoc(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    gpr: Live = 0
    pred: Live = 0
    ugpr: Live = 0
    upred: Live = 0


class SassLineDoc(msgspec.Struct, kw_only=True):
    """One saved SASS line; ``control`` and ``live_registers`` are absent in older files."""

    offset: Count | None = None
    text: Text
    opcode: Text = ""
    line: Count | None = None
    ptx_line: Count | None = None
    control: ControlDoc | None = None
    live: LiveDoc | None = msgspec.field(name="live_registers", default=None)


class DiagnosticDoc(msgspec.Struct, kw_only=True):
    file: Text
    line: Count | None = None
    severity: Text
    message: Text


class KernelDoc(msgspec.Struct, kw_only=True):
    """One saved kernel; ``sass_lines`` is left out where it can be rebuilt from the cubin."""

    name: Text
    mangled: Text
    arch: Text
    ptx_span: tuple[Count, Count]
    ptx_lines_source: list[Count | None]
    resources: ResourcesDoc
    sass_lines: list[SassLineDoc] | msgspec.UnsetType = msgspec.UNSET


class CompileDoc(msgspec.Struct, kw_only=True):
    """A saved CompileResult. Source, PTX, log and stages are whole files: only the file
    size bounds them."""

    lang: Text
    arch: Text
    source: str
    source_name: Text
    source_path: Text = ""
    flags: Texts = []
    ptx: str
    cubin: bytes = msgspec.field(name="cubin_b64", default=b"")
    stages: dict[str, str] = {}
    log: str = ""
    warnings: list[DiagnosticDoc] = []
    versions: TextMap = {}
    compile_s: Amount = 0.0
    kernels: list[KernelDoc]


class CacheReadDoc(msgspec.Struct, kw_only=True):
    """The files a cached compile read: their paths joined by NUL, their sha256 digests end
    to end, and one line of status per file ("-": none)."""

    paths: str
    sha256: str
    status: str


class CacheEntryDoc(msgspec.Struct, kw_only=True):
    """A compile cache entry: the result (without SASS, rebuilt from the cubin) and the
    files the compile read, which must hold the same bytes for the entry to be used."""

    result: CompileDoc
    read: CacheReadDoc


# -- the lab extension's history -----------------------------------------------------------


class HistoryEntryDoc(msgspec.Struct, kw_only=True):
    """One timing of a notebook's history; ``replayed_from``: the recording it replays."""

    id: Text
    result: TimingDoc
    replayed_from: Text | msgspec.UnsetType = msgspec.UNSET


class HistoryDoc(msgspec.Struct, kw_only=True):
    """A notebook's timing results, oldest first, and the one marked as baseline."""

    notebook: Text
    baseline: Text | None
    entries: list[HistoryEntryDoc]
