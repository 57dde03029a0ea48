"""Views of where the memory went: :class:`perflab.analysis.memory.MemoryReport` (text, HTML
with a static SVG of each device's allocated and reserved curves, and the tables of what was
live at the peak) and :class:`perflab.analysis.memory_snapshot.SnapshotSummary` (text and
HTML). Every name from a trace or snapshot is escaped."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from perflab.analysis.memory import GROWTH_RULE, RULES, DeviceMemory, MemoryReport, NamedBytes
from perflab.analysis.memory_snapshot import SnapshotSummary
from perflab.model.memory import Stack
from perflab.model.units import format_bytes, format_ns
from perflab.render.html import esc, svg_image, table, text_table, wrap
from perflab.render.svg_chart import nice_ticks, text_element

OP_HEADERS = ("op", "bytes", "count", "share")
CATEGORY_HEADERS = ("category", "bytes", "count", "share")
STACK_FRAMES = 5  # frames shown of an allocation's stack


# -- the trace's memory -------------------------------------------------------------------


def _title(report: MemoryReport) -> str:
    where = f" ({report.source})" if report.source else ""
    return f"where the memory went{where}"


def _reserved(value: int) -> str:
    return format_bytes(value) if value >= 0 else "not recorded"


def _device_head(report: MemoryReport, d: DeviceMemory) -> list[str]:
    since = format_ns(d.peak_ns - report.origin_ns)
    lines = [
        f"{d.label}: peak {format_bytes(d.peak_allocated)} allocated at {since} since the "
        f"trace's start, in {d.peak_op}",
        f"  reserved at the peak: {_reserved(d.reserved_at_peak)}"
        + (
            f" (fragmentation: {format_bytes(d.fragmentation)} reserved but not allocated)"
            if d.fragmentation >= 0
            else ""
        ),
        f"  at the end: {format_bytes(d.final_allocated)} allocated, reserved "
        f"{_reserved(d.final_reserved)}; {len(d.time_ns)} memory events",
    ]
    return lines


def _rows(rows: Sequence[NamedBytes], peak: int) -> list[list[str]]:
    return [
        [r.name, format_bytes(r.bytes), str(r.count) if r.count else "", _share(r.bytes, peak)]
        for r in rows
    ]


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else ""


def _growth_lines(report: MemoryReport) -> list[str]:
    return [
        f"{g.device}: {g.op} leaves {format_bytes(g.bytes_per_step)} per step "
        f"({g.steps} steps, {format_bytes(g.total_bytes)} in all)"
        for g in report.growth
    ]


def memory_text(report: MemoryReport) -> str:
    lines = [_title(report)]
    for d in report.devices:
        lines += _device_head(report, d)
        lines.append("  live at the peak, by the op that allocated it:")
        lines.append(_indent(text_table(OP_HEADERS, _rows(d.live_at_peak, d.peak_allocated))))
        lines.append("  live at the peak, by category:")
        lines.append(_indent(text_table(CATEGORY_HEADERS, _rows(d.by_category, d.peak_allocated))))
    if report.devices:
        growth = _growth_lines(report)
        lines.append("memory that grows step after step and is never freed:")
        lines += [f"  {g}" for g in growth] or ["  none found"]
        lines.append("rules:")
        lines += [f"  {name}: {rule}" for name, rule in RULES.items()]
        lines.append(f"  growth: {GROWTH_RULE}")
    lines += [f"({note})" if report.devices else note for note in report.notes]
    return "\n".join(lines)


def _indent(block: str) -> str:
    return "\n".join(f"  {line}" for line in block.splitlines())


def memory_html(report: MemoryReport) -> str:
    parts = [f"<div><b>{esc(_title(report))}</b></div>"]
    for d in report.devices:
        head = _device_head(report, d)
        parts.append(f"<div><b>{esc(head[0])}</b><br>{'<br>'.join(esc(h) for h in head[1:])}</div>")
        parts.append("<div>live at the peak, by the op that allocated it</div>")
        parts.append(table(OP_HEADERS, _rows(d.live_at_peak, d.peak_allocated)))
        parts.append("<div>live at the peak, by category</div>")
        parts.append(table(CATEGORY_HEADERS, _rows(d.by_category, d.peak_allocated)))
    if report.devices:
        growth = (
            "".join(f"<li>{esc(g)}</li>" for g in _growth_lines(report)) or "<li>none found</li>"
        )
        parts.append(
            f"<div>memory that grows step after step and is never freed</div><ul>{growth}</ul>"
        )
        rules = "".join(f"<li><b>{esc(n)}</b>: {esc(r)}</li>" for n, r in RULES.items())
        parts.append(f'<ul class="note">{rules}<li><b>growth</b>: {esc(GROWTH_RULE)}</li></ul>')
    parts += [f'<div class="note">{esc(note)}</div>' for note in report.notes]
    return wrap("".join(parts))


# -- the static picture: each device's allocated and reserved curves ----------------------

_SVG_OPEN = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
    'viewBox="0 0 {width} {height}" font-family="Helvetica,Arial,sans-serif" font-size="11">'
)
CHART = {"left": 80, "right": 20, "top": 26, "height": 150, "gap": 62, "width": 640}
ALLOCATED, RESERVED, PEAK = "#3c7fb1", "#edae49", "#d1495b"
HEADROOM = 1.15  # the value axis reaches this much past the highest value: room for labels


def memory_svg(report: MemoryReport) -> str:
    """One panel per device: allocated (and reserved, when recorded) bytes over time, the
    peak marked; empty when the trace has no memory events."""
    if not report.devices:
        return ""
    panel = CHART["height"] + CHART["gap"]
    width = CHART["left"] + CHART["width"] + CHART["right"]
    height = CHART["top"] + panel * len(report.devices)
    out = [
        _SVG_OPEN.format(width=width, height=height),
        f"<title>{esc(_title(report))}</title>",
        text_element(CHART["left"], 14, _title(report), {"size": "12px"}),
    ]
    for i, d in enumerate(report.devices):
        out += _panel(report, d, CHART["top"] + i * panel)
    return "\n".join([*out, "</svg>"])


def _panel(report: MemoryReport, d: DeviceMemory, y0: int) -> list[str]:
    x0, w, h = CHART["left"], CHART["width"], CHART["height"]
    t0 = report.origin_ns
    t1 = max(int(d.time_ns[-1]), t0 + 1)
    highest = max(d.peak_allocated, d.peak_reserved, 1)
    top = highest * HEADROOM
    out = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>']
    for tick in _byte_ticks(highest):
        y = y0 + h - h * tick / top
        out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(
            text_element(x0 - 6, y, format_bytes(tick), {"align": "right", "baseline": "middle"})
        )
    for tick in nice_ticks(0.0, float(t1 - t0), False, want=6):
        x = x0 + w * tick / (t1 - t0)
        out.append(
            text_element(x, y0 + h + 4, format_ns(tick), {"align": "center", "baseline": "top"})
        )
    curves = [(d.allocated, ALLOCATED, "allocated")]
    if d.peak_reserved >= 0:
        curves.insert(0, (d.reserved, RESERVED, "reserved"))
    for values, colour, _ in curves:
        path = _step_path(d.time_ns, values, (t0, t1), top, (x0, y0, w, h))
        out.append(f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    px = x0 + w * (d.peak_ns - t0) / (t1 - t0)
    py = y0 + h - h * d.peak_allocated / top
    out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{PEAK}"/>')
    label = f"peak {format_bytes(d.peak_allocated)} in {d.peak_op}"
    align = "right" if px > x0 + w / 2 else "left"
    out.append(text_element(px + (-6 if align == "right" else 6), py - 4, label, {"align": align}))
    legend = ", ".join(name for _, _, name in curves)
    caption = f"{d.label}: {legend} bytes over time since the trace's start"
    out.append(text_element(x0, y0 + h + 22, caption, {"baseline": "top"}))
    x = x0 + w - 75 * len(curves)
    for _, colour, name in curves:  # the legend, beside the caption
        out.append(f'<rect x="{x}" y="{y0 + h + 23}" width="10" height="10" fill="{colour}"/>')
        out.append(text_element(x + 14, y0 + h + 22, name, {"baseline": "top"}))
        x += 75
    return out


def _byte_ticks(highest: int) -> list[float]:
    """Ticks at round numbers of the unit the largest value is written in (KiB, MiB...)."""
    unit = 1024 ** max(0, min(5, (max(highest, 1).bit_length() - 1) // 10))
    return [t * unit for t in nice_ticks(0.0, highest / unit, False, want=4)]


def _step_path(
    t: npt.NDArray[np.int64],
    values: npt.NDArray[np.int64],
    span: tuple[int, int],
    top: float,
    box: tuple[int, int, int, int],
) -> str:
    """A step line through the curve, one step per pixel column holding events (their
    largest value, so that no peak is lost however many events share a column)."""
    x0, y0, w, h = box
    t0, t1 = span
    column = ((t - t0) * (w / (t1 - t0))).astype(np.int64).clip(0, w)
    starts = np.flatnonzero(np.concatenate(([True], column[1:] != column[:-1])))
    high = np.maximum.reduceat(values, starts) if len(values) else values
    xs = (x0 + column[starts]).tolist()
    ys = (y0 + h - h * high / top).tolist()
    if not xs:
        return ""
    steps = [f"M{xs[0]:.1f},{ys[0]:.1f}"]
    for x, y in zip(xs[1:], ys[1:], strict=True):
        steps.append(f"H{x:.1f}V{y:.1f}")
    steps.append(f"H{x0 + w:.1f}")
    return "".join(steps)


def memory_bundle(report: MemoryReport) -> dict[str, str]:
    """Text, HTML (the curves as an image, then the tables) and the SVG."""
    svg = memory_svg(report)
    html = memory_html(report)
    if svg:
        picture = svg_image(svg, _title(report))
        html = html.replace('<div class="perflab">', f'<div class="perflab">{picture}', 1)
    bundle = {"text/plain": memory_text(report), "text/html": html}
    if svg:
        bundle["image/svg+xml"] = svg
    return bundle


# -- a memory snapshot --------------------------------------------------------------------


def _frames(stack: Stack) -> list[str]:
    """The first STACK_FRAMES frames, innermost first, Python's when it has any."""
    python = [f for f in stack if f[0].endswith(".py")]
    shown = (python or list(stack))[:STACK_FRAMES]
    return [f"{name} ({filename}:{line})" for filename, line, name in shown]


def _snapshot_lines(summary: SnapshotSummary) -> list[tuple[str, list[str]]]:
    """Each paragraph's head and its lines."""
    out = []
    for d in summary.devices:
        state = {s.name: s for s in d.by_state}
        alloc, waiting, free = (
            state[k] for k in ("active_allocated", "active_awaiting_free", "inactive")
        )
        head = (
            f"device {d.device}: {d.segments} segments, {format_bytes(d.reserved)} reserved; "
            f"{format_bytes(alloc.bytes)} allocated in {alloc.count} blocks, "
            f"{format_bytes(waiting.bytes)} waiting to be freed, "
            f"{format_bytes(free.bytes)} cached and free in {free.count} inactive blocks"
        )
        lines = [
            f"stream {s.stream:#x}: {s.segments} segments, {format_bytes(s.reserved)}"
            for s in d.by_stream
        ]
        if d.unaccounted:
            lines.append(f"{format_bytes(d.unaccounted)} of the segments in no block")
        out.append((head, lines))
    for rank, a in enumerate(summary.largest, start=1):
        asked = f", asked for {format_bytes(a.requested)}" if a.requested >= 0 else ""
        head = f"{rank}. {format_bytes(a.size)} on device {a.device}{asked}"
        out.append((head, _frames(a.stack) or ["(no stack recorded)"]))
    for t in summary.traces:
        actions = ", ".join(f"{name} {n}" for name, n in t.actions.items())
        span = f" over {format_ns(t.span_us * 1000)}" if t.span_us >= 0 else ""
        head = (
            f"allocator trace, device {t.device}: {t.entries} entries{span} ({actions}); "
            f"at most {format_bytes(t.peak_live)} allocated at once"
        )
        ooms = [
            f"out of memory: asked for {format_bytes(size)} with {format_bytes(free)} free"
            for size, free in t.ooms
        ]
        out.append((head, ooms))
    return out


def snapshot_text(summary: SnapshotSummary) -> str:
    lines = [f"memory snapshot ({summary.source})"]
    if not summary.devices and not summary.traces:
        lines.append("no segments and no allocator trace")
    for head, body in _snapshot_lines(summary):
        lines.append(head)
        lines += [f"   {line}" for line in body]
    return "\n".join(lines)


def snapshot_html(summary: SnapshotSummary) -> str:
    parts = [f"<div><b>memory snapshot ({esc(summary.source)})</b></div>"]
    for head, body in _snapshot_lines(summary):
        items = "".join(f"<li>{esc(line)}</li>" for line in body)
        parts.append(f"<div>{esc(head)}</div>" + (f"<ul>{items}</ul>" if items else ""))
    return wrap("".join(parts))
