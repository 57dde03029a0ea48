"""Microbenchmark results, collectives and ceilings as text and HTML; sweeps and collectives
get a log-log chart (:mod:`perflab.render.sweep_chart`) above their tables, with a static
picture for viewers that run no script."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable

import numpy as np

from perflab.model.ceilings import Ceilings
from perflab.model.machine import BenchResult, CollectiveResult, Series, Topology
from perflab.model.units import format_bytes, format_ns, format_rate, format_us, plain_number
from perflab.render.html import esc, table, text_table, wrap

RATE_LABEL = {"GBps": "GB/s", "GFLOPs": "GFLOP/s"}
# a rate unit of the results: its scale to per second, and the unit format_rate prefixes
RATE_SCALE = {"GBps": (1e9, "B/s"), "GFLOPs": (1e9, "FLOP/s")}
UNIT_LABEL = {"GBps": "GB/s", "GFLOPs": "GFLOP/s", "ns": "time", "us": "time"}


def format_value(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return "n/a"
    if unit == "ns":
        return format_ns(value)
    if unit == "us":
        return format_us(value)
    if unit in RATE_SCALE:  # 10050 GB/s is "10.1 TB/s", not "1.005e+04 GB/s"
        scale, per_s = RATE_SCALE[unit]
        return format_rate(value * scale, per_s)
    return f"{plain_number(value, 4)} {unit}"


def format_x(value: float, unit: str) -> str:
    return format_bytes(value) if unit == "bytes" else plain_number(value, 6)


def _series_rows(s: Series) -> list[list[str]]:
    extra = list(s.extra)
    return [
        [
            format_x(float(x), s.x_unit),
            format_value(float(y), s.y_unit),
            *(plain_number(float(s.extra[k][i]), 4) for k in extra),
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


X_LABELS = {
    "latency": "working set",
    "bandwidth": "array size",
    "h2d": "copy size",
    "collectives": "message size",
    "launch": "kernels per batch",
    "matmul": "matrix size n",
}
Y_LABELS = {
    "ns": "time per access",
    "us": "time per kernel",
    "GBps": "bandwidth",
    "GFLOPs": "throughput",
}


def _y_label(unit: str) -> str:
    return f"{Y_LABELS.get(unit, 'value')} ({RATE_LABEL.get(unit, unit)})"


def _formatters(s: Series) -> tuple[Callable[[float], str], Callable[[float], str]]:
    return (lambda v: format_x(v, s.x_unit)), (lambda v: format_value(v, s.y_unit))


def chart_bundle(
    series: list[Series], *, benchmark: str, device: str, title: str, text: str, after: str
) -> dict[str, str]:
    """The bundle of a sweep: its chart (when bokeh is installed and there are points to
    draw) above ``after``, the tables."""
    usable = [s for s in series if np.any(np.isfinite(s.y) & (s.y > 0) & (s.x > 0))]
    if not usable or importlib.util.find_spec("bokeh") is None:
        hint = "" if not usable else "charts need bokeh: pip install 'perflab[lab]'"
        note = f'<div class="note">{esc(hint)}</div>' if hint else ""
        return {"text/plain": text, "text/html": wrap(note) + after}
    from perflab.render.bokeh_embed import notebook_bundle
    from perflab.render.sweep_chart import cache_marks, sweep_figure

    x_fmt, y_fmt = _formatters(usable[0])
    fig = sweep_figure(
        usable,
        title=title,
        x_label=X_LABELS.get(benchmark, usable[0].x_unit),
        y_label=_y_label(usable[0].y_unit),
        x_fmt=x_fmt,
        y_fmt=y_fmt,
        device=device,
    )
    caches = ""
    if usable[0].x_unit == "bytes":
        caches = wrap(f'<div class="note">{esc(cache_marks(device)[1])}</div>')
    return notebook_bundle(fig, text, after=caches + after)


def _warnings_html(warnings: list[str]) -> str:
    return "".join(f'<div class="warn">⚠ {esc(w)}</div>' for w in warnings)


def bench_html(r: BenchResult) -> str:
    """The tables of a sweep (the chart comes first in :func:`bench_bundle`)."""
    body = [
        f'<div><b>{esc(r.benchmark)}</b> <span class="note">{esc(r.provenance_line())}'
        "</span></div>",
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
    return chart_bundle(
        r.series,
        benchmark=r.benchmark,
        device=r.device,
        title=f"{r.benchmark} on {r.device} [{r.backend}]",
        text=bench_text(r),
        after=bench_html(r),
    )


COLLECTIVE_HEADERS = ("op", "bytes", "ranks", "time", "algbw", "busbw", "ok")


def _collective_rows(r: CollectiveResult) -> list[list[str]]:
    return [
        [
            row.op,
            format_bytes(row.bytes),
            str(row.world_size),
            format_us(row.time_us),
            format_rate(row.algbw_GBps * 1e9),
            format_rate(row.busbw_GBps * 1e9),
            "yes" if row.verified else "NO",
        ]
        for row in r.rows
    ]


def _fit_rows(r: CollectiveResult) -> list[list[str]]:
    return [
        [
            op,
            format_ns(f.alpha_s * 1e9),
            format_rate(f.beta_Bps),
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


def _bus_bandwidth_curves(r: CollectiveResult) -> list[Series]:
    by_op: dict[str, list[tuple[float, float]]] = {}
    for row in r.rows:
        by_op.setdefault(row.op, []).append((row.bytes, row.busbw_GBps))
    return [
        Series(
            op, np.asarray([p[0] for p in pts]), np.asarray([p[1] for p in pts]), "bytes", "GBps"
        )
        for op, pts in by_op.items()
    ]


def collectives_html(r: CollectiveResult) -> str:
    """The tables of a collectives run (the chart comes first in the bundle)."""
    body = (
        f'<div><b>collectives</b> <span class="note">{esc(r.provenance_line())}</span></div>'
        f"{table(COLLECTIVE_HEADERS, _collective_rows(r))}"
    )
    if r.fits:
        body += "<div>alpha-beta fit: time = alpha + bytes / beta</div>" + table(
            FIT_HEADERS, _fit_rows(r)
        )
    return wrap(body + _warnings_html(r.warnings))


def collectives_bundle(r: CollectiveResult) -> dict[str, str]:
    return chart_bundle(
        _bus_bandwidth_curves(r),
        benchmark="collectives",
        device=r.device,
        title=f"bus bandwidth by message size on {r.device} [{r.backend}]",
        text=collectives_text(r),
        after=collectives_html(r),
    )


def _ceiling_rows(c: Ceilings) -> list[list[str]]:
    return [["compute", k, format_value(v, "GFLOPs")] for k, v in c.flops.items()] + [
        ["bandwidth", k, format_value(v, "GBps")] for k, v in c.bandwidth.items()
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
