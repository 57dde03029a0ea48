"""The JSON documents the command line prints of model results (a compile, a microbenchmark,
the ceilings), each declared once as a msgspec Struct whose encoding is the document, its
keys in the order of the fields. The saved files' own shapes are in
:mod:`perflab.model.saved`; a printed document that extends one (a compile's) extends its
Struct. Imported only when a document is made or read."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from perflab.model.saved import CompileDoc, KernelDoc, SassLineDoc


class Printed(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A printed document: every key declared, none other accepted when one is read back."""


# -- perflab compile/ptx FILE --json -------------------------------------------------------


class SassLineView(SassLineDoc, kw_only=True):
    """A SASS line as printed: the saved line, and the offsets of the instructions it waits
    for and that wait for it (null where the control bits are not known)."""

    waits_for: list[int] | UnsetType | None = UNSET
    waited_by: list[int] | UnsetType | None = UNSET


class KernelView(KernelDoc, kw_only=True):
    """A kernel as printed: the saved kernel and, for a reported kernel, its report
    (occupancy, instruction mix, insights, spills, schedule, live registers)."""

    sass_lines: list[SassLineView] | UnsetType = UNSET  # type: ignore[assignment]  # printed lines extend the saved ones
    report: dict[str, Any] | UnsetType = UNSET  # the parts are the analyses' own views


class CompileJson(CompileDoc, kw_only=True):
    """``perflab compile FILE --json`` (one per file): the saved result, its kernels as
    printed, and whether it came from the compile cache."""

    kernels: list[KernelView]  # type: ignore[assignment]  # printed kernels extend the saved ones
    cached: bool


# -- perflab machine ... --json ------------------------------------------------------------

# a point or level, keyed by the series' units ("bytes", "ns", "GB/s"): numbers, null where not
# measured, and a level's name
Row = dict[str, Any]


class SeriesView(Printed, kw_only=True):
    name: str
    x_unit: str
    y_unit: str
    points: list[Row]
    levels: list[Row]


class BenchView(Printed, kw_only=True):
    """``perflab machine latency|bandwidth|launch|matmul|h2d --json``: ``points`` and
    ``levels`` for a one-series result, else ``series``; rows are keyed by the units."""

    benchmark: str
    device: str
    backend: str
    points: list[Row] | UnsetType = UNSET
    levels: list[Row] | UnsetType = UNSET
    series: list[SeriesView] | UnsetType = UNSET
    warnings: list[str]


class CollectiveRowView(Printed, kw_only=True):
    """One row of ``perflab machine collectives --json``."""

    op: str
    bytes: int
    world_size: int
    backend: str
    time_us: float
    algbw_GBps: float
    busbw_GBps: float


class CeilingsView(Printed, kw_only=True):
    """``perflab ceilings --json``: GFLOP/s per dtype, GB/s per memory level."""

    device: str
    backend: str
    flops: dict[str, float]
    bandwidth: dict[str, float]
