"""Roofline charts: ``perflab.roofline(points, device=...)`` (bokeh, imported lazily).

Ceilings come from measured ceilings (``perflab ceilings``) when the device has them, else
from the spec table (:mod:`perflab.analysis.specs`), and the chart says which. Points come
from TimingResults with ``flops``/``bytes``, from Nsight Compute reports (one point per
memory level) or from ``(name, flops, bytes, seconds)`` tuples.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from perflab.analysis.precision import PRECISIONS, UNKNOWN
from perflab.analysis.roofline import (
    Point,
    Roof,
    RooflineVerdict,
    assess_all,
    compute_label,
    level_label,
)
from perflab.analysis.specs import find_spec, spec_names
from perflab.errors import InputError
from perflab.model.ceilings import level_name
from perflab.model.serialize import write_text
from perflab.model.units import format_ns, format_rate, plain_number
from perflab.render.html import esc, printable, table, text_table, wrap
from perflab.render.labels import LabelPlacer, log_ticks
from perflab.render.work import count_flops_bytes as count_flops_bytes  # its former home

if TYPE_CHECKING:
    import pandas as pd
    from bokeh.models import Axis, Column
    from bokeh.plotting import figure as Figure

    from perflab.model.ceilings import Ceilings
    from perflab.model.ncu import NcuReport
    from perflab.render.timeline import PrettyPrinter

MIN_INTENSITY = 1e-3  # where points with no FLOPs are drawn (log axes cannot show 0)
LEVEL_ALIASES = {
    "dram": "hbm",
    "hbm": "hbm",
    "gddr": "hbm",
    "l2": "l2",
    "l1": "l1_shared",
    "l1_shared": "l1_shared",
    "shared": "l1_shared",
    "l1tex": "l1_shared",
}
MAX_LABELS = 40  # points named beside their marker; the hover box names every one
HEADERS = ("kernel", "level", "time", "FLOP/s", "bytes/s", "FLOP/B", "bound by", "of ceiling")


def _match_level(level: str, roof: Roof) -> str:
    """``level`` as ``roof`` names it: case-insensitive, and device memory (HBM, GDDR,
    DRAM) matches whichever of those the roof has."""
    key = level.strip().lower()
    if key in roof.memory:
        return key
    alias = LEVEL_ALIASES.get(key, key)
    if alias == "hbm":
        return next((k for k in ("hbm", "dram", "gddr") if k in roof.memory), alias)
    return alias


def roof_for(device: str, ceilings: Ceilings | None = None) -> Roof:
    """Measured ceilings of ``device`` if known (or given), else its spec-sheet values."""
    if ceilings is None:
        ceilings = _measured(device)
    if ceilings is not None:
        roof = Roof.from_ceilings(
            device, ceilings, f"measured on {device} ({getattr(ceilings, 'date', '?')})"
        )
        memory = {level_name(k).lower(): v for k, v in roof.memory.items()}
        return Roof(roof.device, roof.compute, memory, roof.source, measured=True)
    spec = find_spec(device)
    if spec is None:
        raise InputError(
            f"no ceilings for device {device!r}: not measured (run "
            f"`perflab ceilings` on it) and not in the spec table "
            f"({', '.join(spec_names())})"
        )
    return Roof.from_spec(spec)


def _measured(device: str) -> Ceilings | None:
    try:
        from perflab.model.ceilings import load_ceilings
    except ImportError:  # measured ceilings are optional
        return None
    return load_ceilings(device)


# --- points ------------------------------------------------------------------------------


class _Timed(Protocol):
    """What a point reads of a TimingResult (any object with ``samples_ns`` and ``flops``)."""

    name: str
    flops: float | None
    bytes: float | None
    median_ns: float
    device: str
    dtype: str | None
    dtype_why: str


def to_points(items: Iterable[object]) -> list[Point]:
    """Points from TimingResults (with flops/bytes), Points, or
    ``(name, flops, bytes, seconds)`` tuples."""
    out: list[Point] = []
    for i, item in enumerate(items):
        try:
            out.append(_to_point(item))
        except (TypeError, ValueError) as exc:
            raise InputError(f"roofline point {i}: {exc}") from None
    return out


def _to_point(item: object) -> Point:
    if isinstance(item, Point):
        return item
    if hasattr(item, "samples_ns") and hasattr(item, "flops"):
        timed = cast("_Timed", item)
        if timed.flops is None and timed.bytes is None:
            raise ValueError(f"{timed.name}: needs flops and/or bytes (--flops, --bytes)")
        return Point(
            str(timed.name),
            float(timed.flops or 0),
            float(timed.bytes or 0),
            timed.median_ns / 1e9,
            dtype=timed.dtype,
            extra={"device": timed.device},
            dtype_why=timed.dtype_why or ("" if timed.dtype else UNKNOWN),
        )
    if isinstance(item, tuple | list) and len(item) == 4:
        name, flops, nbytes, seconds = item
        return Point(str(name), float(flops), float(nbytes), float(seconds))
    raise TypeError(
        f"expected a TimingResult, a Point or (name, flops, bytes, seconds), "
        f"not {type(item).__name__}"
    )


_NCU_FLOPS = {  # raw metric -> FLOPs per instruction
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum": 2,
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": 2,
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum": 2,
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum": 1,
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum": 1,
}
_NCU_BYTES = {"dram__bytes.sum": "hbm", "lts__t_bytes.sum": "l2", "l1tex__t_bytes.sum": "l1_shared"}


def points_from_ncu(report: NcuReport) -> list[Point]:
    """One point per kernel and memory level from an ``NcuReport``: bytes from the raw
    ``dram__/lts__/l1tex__ bytes`` metrics (or DRAM throughput x duration), FLOPs from the
    SASS FP instruction counters (0 when the report has none: such points sit at the left
    edge of the chart and are compared on bandwidth)."""
    points: list[Point] = []
    by_kernel = _numeric_metrics(report)
    for k, launch in enumerate(report.kernels):
        values = by_kernel.get(k, {})
        seconds = _ncu_seconds(values)
        if seconds is None:
            continue
        flops = sum(values[m][0] * n for m, n in _NCU_FLOPS.items() if m in values)
        per_level = {lvl: values[m][0] for m, lvl in _NCU_BYTES.items() if m in values}
        dram_rate = _ncu_dram_rate(values)
        if "hbm" not in per_level and dram_rate is not None:
            per_level["hbm"] = dram_rate * seconds
        name = str(launch.get("Kernel Name", f"kernel {k}"))
        for level, nbytes in per_level.items():
            if nbytes > 0 or flops > 0:
                points.append(
                    Point(
                        name,
                        float(flops),
                        float(nbytes),
                        seconds,
                        level=level,
                        extra={"source": "ncu"},
                    )
                )
    return points


def _numeric_metrics(report: NcuReport) -> dict[int, dict[str, tuple[float, str]]]:
    """Each kernel's numeric metrics, name -> (value, unit) and "section: name" -> (value,
    unit), in one pass over the report (a pass per kernel made a report of thousands of
    kernels take minutes). Sections reuse names: "Memory Throughput" is a percentage of peak
    in the Speed Of Light section and a rate in Memory Workload Analysis."""
    by_kernel: dict[int, dict[str, tuple[float, str]]] = {}
    for m in report.metrics:
        if m.value is not None:
            values = by_kernel.setdefault(m.kernel, {})
            values[m.name] = values[f"{m.section}: {m.name}"] = (m.value, m.unit)
    return by_kernel


_RATE_UNITS = {"byte/s": 1.0, "Kbyte/s": 1e3, "Mbyte/s": 1e6, "Gbyte/s": 1e9, "Tbyte/s": 1e12}


def _ncu_dram_rate(values: dict[str, tuple[float, str]]) -> float | None:
    """DRAM bytes per second: Memory Workload Analysis's "Memory Throughput" in its unit."""
    value, unit = values.get("Memory Workload Analysis: Memory Throughput", (0.0, ""))
    scale = _RATE_UNITS.get(unit)
    return value * scale if scale is not None and value > 0 else None


def _ncu_seconds(values: dict[str, tuple[float, str]]) -> float | None:
    for metric in ("gpu__time_duration.sum", "Duration"):
        if metric in values:
            value, unit = values[metric]
            scale = {
                "ns": 1e-9,
                "nsecond": 1e-9,
                "us": 1e-6,
                "usecond": 1e-6,
                "ms": 1e-3,
                "msecond": 1e-3,
                "s": 1.0,
                "second": 1.0,
            }.get(unit.lower())
            if scale and value > 0:
                return value * scale
    return None


# --- the chart ---------------------------------------------------------------------------


@dataclass
class Roofline:
    """Points under a roof, with a chart, a table and a text view."""

    roof: Roof
    verdicts: list[RooflineVerdict]

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.RooflineView` declares."""
        from perflab.analysis.json_views import RooflineView, RoofView
        from perflab.model.schema import encode, view

        roof = view(self.roof, RoofView)
        return encode(RooflineView(roof=roof, points=[v.document() for v in self.verdicts]))

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([v.to_dict() for v in self.verdicts])

    def text(self) -> str:
        head = f"Roofline on {self.roof.device}: {self.roof.source}"
        ceilings = "; ".join(
            [f"{compute_label(k)} {format_rate(v, 'FLOP/s')}" for k, v in self.roof.compute.items()]
            + [f"{level_label(k)} {format_rate(v, 'B/s')}" for k, v in self.roof.memory.items()]
        )
        rows = [_row(v) for v in self.verdicts]
        body = text_table(HEADERS, rows) if rows else "no points"
        notes = "".join(f"\n{n}" for n in compute_ceiling_lines(self))
        notes += "".join(f"\nnote: {n}" for n in above_roof_notes(self))
        return f"{head}\nceilings: {ceilings}\n{body}{notes}"

    def _repr_pretty_(self, p: PrettyPrinter, cycle: bool) -> None:
        p.text(self.text())

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return roofline_bundle(self)

    def figure(self, width: int = 760, height: int = 480) -> Figure:
        return _figure(self, width, height)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """A standalone HTML file (bokeh inlined; no server, no network)."""
        from perflab.render.bokeh_embed import standalone_html

        return write_text(path, standalone_html(_with_table(self), f"roofline: {self.roof.device}"))


def above_roof_notes(r: Roofline) -> list[str]:
    """Why a point can sit above its ceiling, for each point that does: a measured ceiling
    is only what its benchmark reached, a spec-sheet one is the hardware's limit, so above it
    the point's own counts or time are off."""
    notes = []
    for v in r.verdicts:
        if v.fraction <= 1.0:
            continue
        name = printable(v.point.name)[:60]
        head = f"{name} is at {100 * v.fraction:.0f}% of its ceiling ({v.ceiling})"
        if r.roof.measured:
            why = (
                "the ceiling is a measurement, and this kernel beat it: the benchmark did not "
                "reach the hardware's limit (another data type or instruction, a lower clock "
                "while measuring). Measure them again with `perflab ceilings`."
            )
        else:
            why = (
                "no kernel can beat a spec-sheet peak, so its counts or time are off: FLOPs "
                "counted that the hardware skipped, bytes served from a cache counted at "
                f"{level_label(v.memory_key)}, or a time that missed "
                "part of the work (no synchronisation)."
            )
        notes.append(f"{head}: {why}")
    return notes


def _row(v: RooflineVerdict) -> list[str]:
    p = v.point
    intensity = "no FLOPs" if p.flops == 0 else plain_number(p.intensity)
    return [
        p.name[:60],
        level_label(v.memory_key),
        format_ns(p.seconds * 1e9),
        format_rate(p.flops_per_s, "FLOP/s"),
        format_rate(p.bytes_per_s, "B/s"),
        intensity,
        v.ceiling,
        f"{100 * v.fraction:.1f}%",
    ]


def roofline(
    points: Iterable[object],
    device: str = "H200",
    *,
    ceilings: Ceilings | None = None,
    dtype: str | None = None,
    dtype_why: str = "dtype=",
) -> Roofline:
    """Place ``points`` under the ceilings of ``device`` (measured ones when known).

    Each point is judged against the compute ceiling of the precision it ran in: its own
    ``dtype`` (a TimingResult's counted or given precision), or ``dtype`` here for every
    point (``"fp32"``, ``"tf32"``, ``"bf16"``... or a ceiling's key), which must be one the
    device has (``dtype_why``: how it is known, as the chart says it; a point that already
    says it ran in ``dtype`` keeps its own words). A point of unknown precision is judged
    against the highest ceiling, and the chart says so."""
    roof = roof_for(device, ceilings)
    if dtype is not None and roof.compute_key(dtype) is None:
        raise InputError(f"dtype={dtype!r}: {roof.device} has no such ceiling ({roof.known()})")
    pts = [_placed(p, roof, dtype, dtype_why) for p in to_points(points)]
    return Roofline(roof, assess_all(pts, roof))


def _placed(p: Point, roof: Roof, dtype: str | None, dtype_why: str) -> Point:
    """``p`` with its level as ``roof`` names it, and ``dtype`` when one is given; a level
    or a precision the roof cannot hold is an InputError."""
    level = _match_level(p.level, roof) if p.level else None
    if level is not None and level not in roof.memory:
        raise InputError(
            f"{printable(p.name)}: no {p.level!r} bandwidth ceiling for {roof.device} "
            f"(known: {', '.join(roof.memory)})"
        )
    if dtype is not None:
        why = p.dtype_why if p.dtype == dtype and p.dtype_why else dtype_why
        return Point(p.name, p.flops, p.bytes, p.seconds, level, dtype, p.extra, why)
    unheard = p.dtype is not None and p.dtype not in PRECISIONS
    if unheard and roof.compute_key(str(p.dtype)) is None:
        raise InputError(
            f"{printable(p.name)}: no {p.dtype!r} compute ceiling for {roof.device} "
            f"(known: {roof.known()}; precisions: {', '.join(PRECISIONS)})"
        )
    return Point(p.name, p.flops, p.bytes, p.seconds, level, p.dtype, p.extra, p.dtype_why)


def compute_ceiling_lines(r: Roofline, most: int = 3) -> list[str]:
    """Which compute ceiling judged the points and why: one line per reason, naming up
    to ``most`` of its points."""
    by_why: dict[str, list[str]] = {}
    for v in r.verdicts:
        by_why.setdefault(v.compute_why, []).append(printable(v.point.name)[:60])
    lines = []
    for why, names in by_why.items():
        shown = ", ".join(dict.fromkeys(names[:most]))
        more = f" and {len(names) - most:,} more" if len(names) > most else ""
        lines.append(f"compute ceiling for {shown}{more}: {why}")
    return lines


@dataclass
class Axes:
    """The chart's log-log ranges: every point and ceiling with room around them."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    @classmethod
    def of(cls, r: Roofline) -> Axes:
        roof = r.roof
        top = max(roof.compute.values())
        x_lo = MIN_INTENSITY / 2
        ridge_max = top / min(roof.memory.values())
        finite = [v for v in r.verdicts if math.isfinite(v.point.intensity)]
        x_hi = max([ridge_max * 20] + [v.point.intensity * 4 for v in finite])
        ys = [y for y in _point_xy(r.verdicts)[1] if y > 0] if r.verdicts else []
        y_lo = min([min(roof.memory.values()) * x_lo, *ys]) / 3
        y_hi = max([top, *ys]) * 3
        return cls(x_lo, x_hi, y_lo, y_hi)


def _figure(r: Roofline, width: int, height: int) -> Figure:
    from bokeh.models import Range1d
    from bokeh.plotting import figure

    axes = Axes.of(r)
    fig = figure(
        width=width,
        height=height,
        x_axis_type="log",
        y_axis_type="log",
        x_range=Range1d(start=axes.x_lo, end=axes.x_hi),
        y_range=Range1d(start=axes.y_lo, end=axes.y_hi),
        x_axis_label="arithmetic intensity (FLOP/byte)",
        y_axis_label="performance (FLOP/s)",
        tools="pan,wheel_zoom,box_zoom,reset",
        title=f"{r.roof.device}: {_provenance(r.roof)}{_names_shown(r.verdicts)}",
    )
    _flops_ticks(fig.yaxis[0], axes)
    placer = LabelPlacer((axes.x_lo, axes.x_hi), (axes.y_lo, axes.y_hi), width, height)
    _memory_roofs(fig, r.roof, axes)
    _compute_ceilings(fig, r.roof, axes, placer)
    if r.verdicts:
        _points(fig, r.verdicts, placer)
    fig.legend.location = "top_left"
    fig.legend.label_text_font_size = "9pt"
    return fig


def _flops_ticks(axis: Axis, axes: Axes) -> None:
    """Performance ticks at powers of ten, labelled with SI prefixes (``10 TFLOP/s``)."""
    from bokeh.models import FixedTicker

    ticks = log_ticks(axes.y_lo, axes.y_hi, base=10)
    axis.ticker = FixedTicker(ticks=ticks, minor_ticks=[])
    axis.major_label_overrides = {t: format_rate(t, "FLOP/s") for t in ticks}


def _memory_roofs(fig: Figure, roof: Roof, axes: Axes) -> None:
    import numpy as np

    top = max(roof.compute.values())
    xs = np.geomspace(axes.x_lo, axes.x_hi, 200)
    for i, (level, bw) in enumerate(roof.memory.items()):
        fig.line(
            xs,
            np.minimum(bw * xs, top),
            line_width=2,
            line_dash="solid" if i == 0 else "dashed",
            color="#555555",
            legend_label=f"{level_label(level)} {format_rate(bw, 'B/s')}",
        )


def _compute_ceilings(fig: Figure, roof: Roof, axes: Axes, placer: LabelPlacer) -> None:
    """One line per distinct peak, labelled at its right end; labels of close peaks are
    stacked so that none overlaps another, and their room is taken from ``placer``."""
    from bokeh.models import ColumnDataSource
    from bokeh.models.annotations import LabelSet

    from perflab.render.labels import stack

    same_peak: dict[float, list[str]] = {}  # equal peaks share one line and one label
    for key, peak in roof.compute.items():
        same_peak.setdefault(peak, []).append(compute_label(key))
    peaks = list(same_peak)
    for peak in peaks:
        fig.line(
            [peak / max(roof.memory.values()), axes.x_hi],
            [peak, peak],
            color="#e45756",
            line_width=1.5,
            alpha=0.7,
        )
    texts = [f"{' = '.join(same_peak[p])} {format_rate(p, 'FLOP/s')}" for p in peaks]
    offsets = [2 + dy for dy in stack([placer.px(axes.x_hi, p)[1] for p in peaks])]
    for peak, text, dy in zip(peaks, texts, offsets, strict=True):
        placer.take_text(axes.x_hi, peak, text, -4, dy, left=True)
    source = ColumnDataSource(
        {"x": [axes.x_hi] * len(peaks), "y": peaks, "text": texts, "dy": offsets}
    )
    fig.add_layout(
        LabelSet(
            x="x",
            y="y",
            text="text",
            y_offset="dy",
            x_offset=-4,
            source=source,
            text_font_size="9pt",
            text_align="right",
            text_color="#b03a3a",
        )
    )


def _points(fig: Figure, verdicts: list[RooflineVerdict], placer: LabelPlacer) -> None:
    """The kernels as markers with their names beside them (each where it covers no other
    label or marker), and a hover box."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.models.annotations import LabelSet

    xs, ys = _point_xy(verdicts)
    cols = _point_columns(verdicts, xs, ys)
    src = ColumnDataSource(cols)
    dots = fig.scatter(
        "x", "y", source=src, size=10, color="color", line_color="black", marker="marker"
    )
    for x, y in zip(xs, ys, strict=True):
        placer.take_marker(x, y)
    sides: dict[bool, dict[str, list[float | str]]] = {
        side: {"x": [], "y": [], "label": [], "dx": [], "dy": []} for side in (False, True)
    }
    for i in labelled(verdicts):
        x, y, label = xs[i], ys[i], verdicts[i].point.name[:40]
        spot = placer.place(x, y, label)
        row: dict[str, float | str] = {"x": x, "y": y, "label": label, "dx": spot.dx, "dy": spot.dy}
        for key, value in row.items():
            sides[spot.left][key].append(value)
    for left, data in sides.items():
        if data["x"]:
            fig.add_layout(
                LabelSet(
                    x="x", y="y", text="label", x_offset="dx", y_offset="dy",
                    source=ColumnDataSource(data), text_font_size="9pt", text_color="#222222",
                    text_align="right" if left else "left",
                )
            )  # fmt: skip
    tips = [
        ("kernel", "@name"), ("level", "@level"), ("time", "@time"), ("achieved", "@flops_s"),
        ("bandwidth", "@bw"), ("intensity", "@ai"), ("bound by", "@bound"),
        ("of ceiling", "@fraction"), ("compute ceiling", "@compute"),
    ]  # fmt: skip
    fig.add_tools(HoverTool(renderers=[dots], tooltips=tips))


def labelled(verdicts: list[RooflineVerdict]) -> list[int]:
    """The points named on the chart: the :data:`MAX_LABELS` longest-running, in their
    order. More names would cover the plot (the hover box and the table name every point),
    and each label is placed clear of every marker and label before it, so naming them all
    would take time that grows with the square of the number of points."""
    if len(verdicts) <= MAX_LABELS:
        return list(range(len(verdicts)))
    longest = heapq.nlargest(
        MAX_LABELS, range(len(verdicts)), key=lambda i: verdicts[i].point.seconds
    )
    return sorted(longest)


def _names_shown(verdicts: list[RooflineVerdict]) -> str:
    """What the title says when not every point is named on the chart."""
    if len(verdicts) <= MAX_LABELS:
        return ""
    return f"; names beside the {MAX_LABELS} longest of {len(verdicts):,} points"


def _provenance(roof: Roof) -> str:
    return "measured ceilings" if roof.measured else "spec-sheet ceilings (not measured)"


def _point_xy(verdicts: list[RooflineVerdict]) -> tuple[list[float], list[float]]:
    """Where each point is drawn: a pure copy (no FLOPs) at the left edge, where its
    bandwidth would meet the memory roof line."""
    xs: list[float] = []
    ys: list[float] = []
    for v in verdicts:
        p = v.point
        no_flops = p.flops == 0
        xs.append(MIN_INTENSITY if no_flops else p.intensity)
        ys.append(v.bandwidth * MIN_INTENSITY * v.fraction if no_flops else p.flops_per_s)
    return xs, ys


def _point_columns(
    verdicts: list[RooflineVerdict], xs: list[float], ys: list[float]
) -> dict[str, list[float] | list[str]]:
    """The markers' data source: positions (see :func:`_point_xy`) and what the hover box
    shows."""
    palette = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b")
    colour_of = {name: i for i, name in enumerate(dict.fromkeys(v.point.name for v in verdicts))}
    markers = {"hbm": "circle", "l2": "square", "l1_shared": "triangle", "dram": "circle"}
    cols: dict[str, list[str]] = {
        k: []
        for k in (
            "name",
            "level",
            "time",
            "flops_s",
            "bw",
            "ai",
            "bound",
            "fraction",
            "compute",
            "color",
            "marker",
        )
    }
    for v in verdicts:
        p = v.point
        no_flops = p.flops == 0
        cols["name"].append(p.name)
        cols["level"].append(level_label(v.memory_key))
        cols["time"].append(format_ns(p.seconds * 1e9))
        cols["flops_s"].append(format_rate(p.flops_per_s, "FLOP/s"))
        cols["bw"].append(format_rate(p.bytes_per_s, "B/s"))
        cols["ai"].append("no FLOPs counted" if no_flops else f"{plain_number(p.intensity)} FLOP/B")
        cols["bound"].append(f"{v.ceiling} ({plain_number(v.headroom)}x headroom)")
        cols["fraction"].append(f"{100 * v.fraction:.1f}%")
        cols["compute"].append(v.compute_why)
        cols["color"].append(palette[colour_of[p.name] % len(palette)])
        cols["marker"].append(markers.get(v.memory_key, "diamond"))
    return {"x": xs, "y": ys, **cols}


def _with_table(r: Roofline) -> Column:
    from bokeh.layouts import column
    from bokeh.models.widgets import Div

    # Div text is HTML: every value goes through esc() (via table()).
    note = f"<p>{esc(r.roof.source)}</p>"
    return column(r.figure(), Div(text=wrap(note + _points_html(r))))


def _points_html(r: Roofline) -> str:
    """The table of placed kernels; a roofline of ceilings alone says so instead of showing
    an empty table."""
    rows = [_row(v) for v in r.verdicts]
    if not rows:
        return "<div>no points</div>"
    ceilings = "".join(f'<div class="note">{esc(n)}</div>' for n in compute_ceiling_lines(r))
    return table(HEADERS, rows) + ceilings


def roofline_bundle(r: Roofline) -> dict[str, str]:
    """MIME bundle of a :class:`Roofline`: text, HTML (chart and table) and a static SVG."""
    from perflab.render.bokeh_embed import notebook_bundle

    notes = "".join(f'<div class="warn">{esc(n)}</div>' for n in above_roof_notes(r))
    source = f'<div class="note">{esc(r.roof.source)}</div>'
    listing = wrap(source + _points_html(r) + notes)
    return notebook_bundle(r.figure(), r.text(), after=listing)
