"""Microbenchmark results, collectives and ceilings as text and HTML (with a small inline
SVG log-log plot per result; no JavaScript, so it renders in any saved notebook)."""

from __future__ import annotations

import math

import numpy as np

from perflab.model.bench import BenchResult, CollectiveResult, Series, Topology
from perflab.model.ceilings import Ceilings
from perflab.model.units import format_bytes, format_ns
from perflab.render.html import esc, table, text_table, wrap

RATE_LABEL = {"GBps": "GB/s", "GFLOPs": "GFLOP/s"}
UNIT_LABEL = {"GBps": "GB/s", "GFLOPs": "GFLOP/s", "ns": "time", "us": "time"}
PLOT_W, PLOT_H, PAD = 360, 170, 34
COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")


def format_value(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return "n/a"
    if unit == "ns":
        return format_ns(value)
    if unit == "us":
        return format_ns(value * 1e3)
    return f"{value:.4g} {RATE_LABEL.get(unit, unit)}"


def format_x(value: float, unit: str) -> str:
    return format_bytes(value) if unit == "bytes" else f"{value:g}"


def _series_rows(s: Series) -> list[list[str]]:
    extra = list(s.extra)
    return [
        [
            format_x(float(x), s.x_unit),
            format_value(float(y), s.y_unit),
            *(f"{float(s.extra[k][i]):.4g}" for k in extra),
        ]
        for i, (x, y) in enumerate(zip(s.x, s.y, strict=True))
    ]


def _headers(s: Series) -> list[str]:
    return [s.x_unit, UNIT_LABEL.get(s.y_unit, s.y_unit), *s.extra]


def _level_rows(s: Series) -> list[list[str]]:
    return [
        [
            lv.name,
            f"{format_x(lv.x_min, s.x_unit)} - {format_x(lv.x_max, s.x_unit)}",
            format_value(lv.value, s.y_unit),
            str(lv.points),
        ]
        for lv in s.levels
    ]


LEVEL_HEADERS = ("level", "range", "value", "points")


def _title(r: BenchResult | CollectiveResult) -> str:
    return f"{r.benchmark}: {r.provenance_line()}"


def bench_text(r: BenchResult) -> str:
    lines = [_title(r)]
    for s in r.series:
        lines += ["", f"[{s.name}]", text_table(_headers(s), _series_rows(s))]
        if s.levels:
            lines += ["plateaus:", text_table(LEVEL_HEADERS, _level_rows(s))]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def _scale(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    logs = np.log10(values)
    span = logs.max() - logs.min()
    unit = (logs - logs.min()) / span if span > 0 else np.full_like(logs, 0.5)
    return np.asarray(lo + unit * (hi - lo), dtype=np.float64)


def _plottable(s: Series) -> Series:
    """The points of ``s`` a log-log plot can show (sizes that failed are NaN)."""
    keep = np.isfinite(s.x) & np.isfinite(s.y) & (s.x > 0) & (s.y > 0)
    return Series(s.name, s.x[keep], s.y[keep], s.x_unit, s.y_unit)


def loglog_svg(series: list[Series], label: str) -> str:
    """All series on shared log axes, levels as dashed lines; empty when nothing to plot."""
    usable = [p for p in (_plottable(s) for s in series) if len(p)]
    if not usable:
        return ""
    xs = np.concatenate([s.x for s in usable])
    ys = np.concatenate([s.y for s in usable])
    parts = [
        f'<svg width="{PLOT_W + PAD}" height="{PLOT_H + PAD}" role="img" '
        f'aria-label="{esc(label)}" style="font-size:10px">'
    ]
    x_all = _scale(xs, PAD, PLOT_W)
    y_all = _scale(ys, PLOT_H, 8)
    start = 0
    for i, s in enumerate(usable):
        colour = COLOURS[i % len(COLOURS)]
        px, py = x_all[start : start + len(s)], y_all[start : start + len(s)]
        start += len(s)
        points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py, strict=True))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}"/>')
        parts.append(f'<text x="{PAD + 4}" y="{12 + 11 * i}" fill="{colour}">{esc(s.name)}</text>')
    lo_x, hi_x = (
        format_x(float(xs.min()), usable[0].x_unit),
        format_x(float(xs.max()), usable[0].x_unit),
    )
    unit = usable[0].y_unit
    parts.append(
        f'<text x="{PAD}" y="{PLOT_H + 16}">{esc(lo_x)}</text>'
        f'<text x="{PLOT_W}" y="{PLOT_H + 16}" text-anchor="end">{esc(hi_x)}</text>'
        f'<text x="2" y="{PLOT_H}">{esc(format_value(float(ys.min()), unit))}</text>'
        f'<text x="2" y="14">{esc(format_value(float(ys.max()), unit))}</text>'
        f'<line x1="{PAD}" y1="{PLOT_H + 4}" x2="{PLOT_W}" y2="{PLOT_H + 4}" '
        'stroke="#999"/></svg>'
    )
    return "".join(parts)


def _warnings_html(warnings: list[str]) -> str:
    return "".join(f'<div class="warn">⚠ {esc(w)}</div>' for w in warnings)


def bench_html(r: BenchResult) -> str:
    body = [
        f'<div><b>{esc(r.benchmark)}</b> <span class="note">{esc(r.provenance_line())}'
        "</span></div>",
        loglog_svg(r.series, f"{r.benchmark} sweep"),
    ]
    for s in r.series:
        body.append(f"<div><b>{esc(s.name)}</b></div>")
        if s.levels:
            body.append(table(LEVEL_HEADERS, _level_rows(s)))
        body.append(
            f"<details><summary>{len(s)} points</summary>"
            f"{table(_headers(s), _series_rows(s))}</details>"
        )
    return wrap("".join(body) + _warnings_html(r.warnings))


def bench_bundle(r: BenchResult) -> dict[str, str]:
    return {"text/plain": bench_text(r), "text/html": bench_html(r)}


COLLECTIVE_HEADERS = ("op", "bytes", "ranks", "time", "algbw GB/s", "busbw GB/s", "ok")


def _collective_rows(r: CollectiveResult) -> list[list[str]]:
    return [
        [
            row.op,
            format_bytes(row.bytes),
            str(row.world_size),
            format_ns(row.time_us * 1e3),
            f"{row.algbw_GBps:.4g}",
            f"{row.busbw_GBps:.4g}",
            "yes" if row.verified else "NO",
        ]
        for row in r.rows
    ]


def _fit_rows(r: CollectiveResult) -> list[list[str]]:
    return [
        [
            op,
            format_ns(f.alpha_s * 1e9),
            f"{f.beta_Bps / 1e9:.4g} GB/s" if math.isfinite(f.beta_Bps) else "n/a",
            f"{100 * f.rel_rms:.0f}%",
            str(f.points),
        ]
        for op, f in r.fits.items()
    ]


FIT_HEADERS = ("op", "alpha (latency)", "beta (bandwidth)", "rel. RMS error", "points")


def collectives_text(r: CollectiveResult) -> str:
    lines = [_title(r), text_table(COLLECTIVE_HEADERS, _collective_rows(r))]
    if r.fits:
        lines += [
            "alpha-beta fit: time = alpha + bytes / beta",
            text_table(FIT_HEADERS, _fit_rows(r)),
        ]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def collectives_html(r: CollectiveResult) -> str:
    by_op: dict[str, list[tuple[float, float]]] = {}
    for row in r.rows:
        by_op.setdefault(row.op, []).append((row.bytes, row.busbw_GBps))
    curves = [
        Series(
            op, np.asarray([p[0] for p in pts]), np.asarray([p[1] for p in pts]), "bytes", "GBps"
        )
        for op, pts in by_op.items()
    ]
    body = (
        f'<div><b>collectives</b> <span class="note">{esc(r.provenance_line())}</span>'
        f"</div>{loglog_svg(curves, 'bus bandwidth by message size')}"
        f"{table(COLLECTIVE_HEADERS, _collective_rows(r))}"
    )
    if r.fits:
        body += "<div>alpha-beta fit: time = alpha + bytes / beta</div>" + table(
            FIT_HEADERS, _fit_rows(r)
        )
    return wrap(body + _warnings_html(r.warnings))


def collectives_bundle(r: CollectiveResult) -> dict[str, str]:
    return {"text/plain": collectives_text(r), "text/html": collectives_html(r)}


def _ceiling_rows(c: Ceilings) -> list[list[str]]:
    return [["compute", k, f"{v:.4g} GFLOP/s"] for k, v in c.flops.items()] + [
        ["bandwidth", k, f"{v:.4g} GB/s"] for k, v in c.bandwidth.items()
    ]


def ceilings_text(c: Ceilings) -> str:
    lines = [
        f"measured ceilings of {c.device} [{c.backend}], {c.date}",
        text_table(("kind", "name", "measured"), _ceiling_rows(c)),
    ]
    return "\n".join(lines + [f"note: {n}" for n in c.notes])


def ceilings_html(c: Ceilings) -> str:
    notes = "".join(f'<div class="note">{esc(n)}</div>' for n in c.notes)
    return wrap(
        f"<div><b>measured ceilings</b> of {esc(c.device)} [{esc(c.backend)}], "
        f"{esc(c.date)}</div>{table(('kind', 'name', 'measured'), _ceiling_rows(c))}"
        f"{notes}"
    )


def ceilings_bundle(c: Ceilings) -> dict[str, str]:
    return {"text/plain": ceilings_text(c), "text/html": ceilings_html(c)}


def topology_text(t: Topology) -> str:
    lines = [f"topology ({t.source})"]
    if t.devices:
        rows = [[d, *row] for d, row in zip(t.devices, t.links, strict=True)]
        lines.append(text_table(["", *t.devices], rows))
    if t.nccl_transports:
        lines.append(
            "NCCL channels via: " + ", ".join(f"{k} x{v}" for k, v in t.nccl_transports.items())
        )
    if t.nccl_network:
        lines.append(f"NCCL network: {t.nccl_network}")
    return "\n".join(lines)
