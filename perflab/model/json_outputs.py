"""The JSON documents the command line prints of model results (a microbenchmark, the
ceilings), each declared once as a msgspec Struct whose encoding is the document, its keys
in the order of the fields. The saved files' own shapes are in :mod:`perflab.model.saved`
(a compile's printed document extends its saved one in :mod:`perflab.analysis.json_views`,
with the kernels' reports). Imported only when a document is made or read."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class Printed(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A printed document: every key declared, none other accepted when one is read back."""


# -- a comparison of two timings (its ``to_dict()``) -------------------------------------


class ComparisonView(Printed, kw_only=True):
    """The ratio of median times and its 95% CI (null where the two are not comparable:
    ``why`` says so), whether it is significant, how it was worked out, and notes."""

    name: str
    baseline: str
    comparable: bool
    why: str
    ratio: float | None
    ci95: tuple[float | None, float | None]
    significant: bool
    method: str
    notes: list[str]


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
