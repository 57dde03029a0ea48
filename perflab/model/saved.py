"""The saved form of each result kind, declared once: every key a file holds, in the order
written, with its bounds (see :mod:`perflab.model.schema`). The model classes convert to and
from these types; they import this module only when they read or write a file, so that the
models themselves import without msgspec (a GPU machine installs it after it starts)."""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from perflab.model.fields import MAX_FLOAT
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


class TimingDoc(msgspec.Struct, kw_only=True):
    """A saved TimingResult. ``summary`` is what the samples give (written for readers of
    the file, recomputed when loaded)."""

    missing_first: ClassVar[tuple[str, ...]] = ("samples_ns",)

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
    floor_ns: Amount | None = None
    resolution_ns: Amount | None = None
    summary: Options | None = None
    kernels: OpTableDoc | None = None
    flops: Amount | None = None
    bytes: Amount | None = None

    def validate(self) -> None:
        """Samples a timer can report, as many host times as samples (when kept), and
        timer steps that are measurable times (or unknown: saved before they were kept)."""
        if len(self.samples_ns) == 0:
            raise Invalid("samples_ns", "has no samples")
        bad = first_unmeasurable(self.samples_ns)
        if bad is not None:
            raise Invalid(f"samples_ns[{bad}]", unmeasurable_text(self.samples_ns[bad]))
        if self.host_ns is not None:
            require_length("host_ns", self.host_ns, len(self.samples_ns))
        for key in ("floor_ns", "resolution_ns"):
            step = getattr(self, key)
            if step is not None and first_unmeasurable([step]) is not None:
                raise Invalid(key, unmeasurable_text(step))


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


class AlphaBetaDoc(msgspec.Struct):
    """A saved AlphaBetaFit, in the units people read: us and GB/s (null: no slope)."""

    alpha_us: Signed
    beta_GBps: Amount | None
    rel_rms: Amount
    points: Count


class CollectiveRowDoc(msgspec.Struct, kw_only=True):
    op: Text
    bytes: Count
    world_size: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)]
    backend: Text
    time_us: Amount
    algbw_GBps: Amount
    busbw_GBps: Amount
    dtype: Text = "float32"
    iters: Count = 0
    verified: bool = False


class CollectivesDoc(ProvenanceDoc, kw_only=True):
    """A saved CollectiveResult: where it was measured, its rows and a fit per op."""

    rows: list[CollectiveRowDoc]
    fits: dict[str, AlphaBetaDoc] = {}


# -- ceilings ------------------------------------------------------------------------------

Rate = Annotated[float, msgspec.Meta(gt=0, le=MAX_FLOAT)]  # measured: positive, finite


class CeilingsDoc(msgspec.Struct, kw_only=True):
    """One device's saved ceilings: GFLOP/s per dtype, GB/s per memory level."""

    device: Text
    backend: Text
    flops: dict[str, Rate] = {}
    bandwidth: dict[str, Rate] = {}
    date: Text = ""
    versions: TextMap = {}
    notes: Texts = []


class CeilingsFile(msgspec.Struct):
    """The cache file: each measured device's ceilings under its name."""

    devices: dict[str, CeilingsDoc]
