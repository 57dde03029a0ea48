"""Views of :class:`perflab.analysis.trace_diff.TraceDiff`: text, HTML (tables sorted by the
size of the change, with bars) and a static SVG picture of the largest changes. Every name
from a trace is escaped: :func:`perflab.render.html.printable` in text, ``esc`` in HTML and
:func:`perflab.render.svg.text_element` in the picture."""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Sequence

from perflab.analysis.trace_diff import DiffRows, Split, TraceDiff
from perflab.model.units import format_ns, shorten
from perflab.render.html import (
    esc,
    printable,
    static_text,
    svg_image,
    table,
    text_table,
    wrap,
)
from perflab.render.svg import text_element
from perflab.render.svg_chart import TextProps

ROWS = 25  # rows of each table
SORTABLE = "perflab-sortable"  # static/sortable-table.js sorts these by a clicked header
MAX_NAME = 80  # characters of a name in a table
PICTURE_ROWS = 15
PICTURE_NAME = 48
SLOWER, FASTER = "#d62728", "#2ca02c"  # more time in the test / less
ARROW = " -> "
HTML_ARROW = "\u00a0\u2192\u00a0"  # no line break inside a count cell


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + format_ns(abs(ns))


def _title(d: TraceDiff) -> str:
    if d.per_step:
        how = f"per step over {len(d.control.steps)} and {len(d.test.steps)} ProfilerSteps"
    else:
        how = d.scope
    return f"trace diff: {d.test.source} against {d.control.source} ({how})"


def _step_line(d: TraceDiff) -> str:
    """The host step time of each side (the ProfilerStep ranges), where there are steps."""
    if not d.control.step_ns or not d.test.step_ns:
        return ""
    c = statistics.median(d.control.step_ns)
    t = statistics.median(d.test.step_ns)
    word = "median " if len(d.control.step_ns) > 1 or len(d.test.step_ns) > 1 else ""
    return (
        f"step time (host ProfilerStep range): control {word}{format_ns(c)}, test "
        f"{word}{format_ns(t)} ({_signed(t - c)})"
    )


def _gpu_line(d: TraceDiff) -> str:
    per = " per step" if d.per_step else ""
    c, t = d.gpu_control_ns, d.gpu_test_ns
    return (
        f"GPU time{per} (summed kernel, memcpy and memset durations): control "
        f"{format_ns(c)}, test {format_ns(t)} ({_signed(t - c)})"
    )


def _idle_line(d: TraceDiff) -> str:
    """The GPUs' idle time on each side, where the diff split it by cause."""
    if not d.idle_by_cause:
        return ""
    per = " per step" if d.per_step else ""
    c, t = d.idle_ns
    return (
        f"GPU idle time{per} (gaps in each GPU's busy time, by cause below): control "
        f"{format_ns(c)}, test {format_ns(t)} ({_signed(t - c)})"
    )


def _count_line(what: str, rows: DiffRows) -> str:
    counts = rows.counts()
    status = ", ".join(f"{n} {k}" for k, n in counts["status"].items())
    line = f"{what}: {len(rows)} names: {status or 'none'}"
    if rows.per_step:
        tests = [(k, n) for k, n in counts["verdict"].items() if k not in ("new", "gone")]
        line += "; verdicts: " + ", ".join(f"{n} {k}" for k, n in tests)
    return line


def _headers(rows: DiffRows) -> list[str]:
    if rows.per_step:
        return [
            "name",
            "kind",
            "count in trace",
            "control/step",
            "test/step",
            "change/step",
            "verdict",
        ]
    return ["name", "kind", "count", "control", "test", "change", "verdict"]


def _time(ns: float, count: int) -> str:
    """A side's time, or "-" where the name is not on that side."""
    return format_ns(ns) if count else "-"


def _cells(rows: DiffRows, i: int) -> list[str]:
    if rows.per_step:
        c = float(rows.control_steps[i].mean())
        t = float(rows.test_steps[i].mean())
    else:
        c, t = float(rows.control_ns[i]), float(rows.test_ns[i])
    c_count, t_count = int(rows.control_count[i]), int(rows.test_count[i])
    return [
        shorten(rows.names[i], MAX_NAME),
        rows.kinds[i],
        f"{c_count}{ARROW}{t_count}",
        _time(c, c_count),
        _time(t, t_count),
        _signed(float(rows.change_ns[i])),
        rows.verdict[i],
    ]


def _split_rows(splits: Sequence[Split]) -> list[list[str]]:
    return [
        [s.name, format_ns(s.control_ns), format_ns(s.test_ns), _signed(s.change_ns)]
        for s in splits
    ]


def _idle_table(d: TraceDiff) -> tuple[list[str], list[list[str]]]:
    """The idle-by-cause table: headers and rows (with per-step medians where there are)."""
    medians = any(s.control_median_ns is not None for s in d.idle_by_cause)
    head = ["cause", "control", "test", "change"]
    if medians:
        head += ["control median", "test median"]
    rows = _split_rows(d.idle_by_cause)
    if medians:
        for row, s in zip(rows, d.idle_by_cause, strict=True):
            row += [format_ns(s.control_median_ns or 0.0), format_ns(s.test_median_ns or 0.0)]
    return head, rows


def _more(rows: DiffRows, limit: int) -> str:
    return f"({len(rows) - limit} more rows: --json or to_pandas() has them all)"


def diff_text(d: TraceDiff, limit: int = ROWS) -> str:
    lines = [printable(_title(d)), printable(d.headline)]
    lines += [line for line in (_step_line(d), _gpu_line(d), _idle_line(d)) if line]
    split_head = ["", "control", "test", "change"]
    if d.by_category:
        lines += [
            "GPU time by category:",
            text_table(["category", *split_head[1:]], _split_rows(d.by_category)),
        ]
    if d.by_stream:
        lines += [
            "GPU time by stream:",
            text_table(["stream", *split_head[1:]], _split_rows(d.by_stream)),
        ]
    if d.idle_by_cause:
        per = " per step" if d.per_step else ""
        lines += [f"GPU idle time{per} by cause:", text_table(*_idle_table(d))]
    for what, rows in (("GPU work", d.kernels), ("host events", d.ops)):
        lines.append(_count_line(what, rows))
        if len(rows):
            shown = [_cells(rows, i) for i in range(min(limit, len(rows)))]
            lines.append(text_table(_headers(rows), shown, left=(0, 1, 6)))
            if len(rows) > limit:
                lines.append(_more(rows, limit))
    lines += [f"note: {n}" for n in d.notes]
    lines.append(f"verdicts: {d.method}")
    return "\n".join(lines)


def _bar(change: float, largest: float) -> str:
    width = 80 * abs(change) / largest if largest else 0.0
    color = SLOWER if change > 0 else FASTER
    return f'<span class="bar" style="width:{width:.0f}px;background:{color}"></span>'


def _rows_html(rows: DiffRows, limit: int) -> str:
    if not len(rows):
        return ""
    shown = range(min(limit, len(rows)))
    largest = max((abs(float(rows.change_ns[i])) for i in shown), default=0.0)
    body = []
    for i in shown:
        cells = _cells(rows, i)
        bar = _bar(float(rows.change_ns[i]), largest)
        # the full name as a tooltip: the cell shows it shortened
        name = f'<span title="{esc(rows.names[i])}">{esc(cells[0])}</span>'
        cells[2] = cells[2].replace(ARROW, HTML_ARROW)
        body.append([name, *(esc(c) for c in cells[1:]), bar])
    headers = [*_headers(rows), ""]
    html = table(headers, body, raw_cols=len(body[0]), left=(0, 1, 6), css_class=SORTABLE)
    more = f'<div class="note">{esc(_more(rows, limit))}</div>' if len(rows) > limit else ""
    return html + more


def diff_html(d: TraceDiff, limit: int = ROWS) -> str:
    picture = diff_svg(d)
    parts = [
        f"<div><b>{esc(_title(d))}</b></div>",
        f"<div><b>{esc(d.headline)}</b></div>",
        *(
            f"<div>{esc(line)}</div>"
            for line in (_step_line(d), _gpu_line(d), _idle_line(d))
            if line
        ),
        svg_image(picture, "largest changes of GPU time") if picture else "",
        table(["category", "control", "test", "change"], _split_rows(d.by_category))
        if d.by_category
        else "",
        table(["stream", "control", "test", "change"], _split_rows(d.by_stream))
        if d.by_stream
        else "",
        table(*_idle_table(d)) if d.idle_by_cause else "",
    ]
    for what, rows in (("GPU work", d.kernels), ("host events", d.ops)):
        parts.append(f"<div><b>{esc(_count_line(what, rows))}</b></div>")
        parts.append(_rows_html(rows, limit))
    parts += [f'<div class="note">note: {esc(n)}</div>' for n in d.notes]
    parts.append(f'<div class="note">verdicts: {esc(d.method)}</div>')
    root = f"perflab-diff-{uuid.uuid4().hex[:12]}"
    script = f'<script>{static_text("sortable-table.js")}\nperflabSortable("{root}");</script>'
    return f'<div id="{root}">{wrap("".join(parts))}</div>{script}'


def diff_svg(d: TraceDiff, rows: int = PICTURE_ROWS) -> str:
    """The largest changes of GPU time as bars left (less time) and right (more) of zero;
    empty when nothing changed."""
    k = d.kernels
    shown = [i for i in range(min(rows, len(k))) if float(k.change_ns[i])]
    if not shown:
        return ""
    label_w, bar_w, value_w, row_h, top = 330, 300, 90, 18, 26
    width, height = label_w + bar_w + value_w, top + row_h * len(shown) + 6
    largest = max(abs(float(k.change_ns[i])) for i in shown)
    middle = label_w + bar_w / 2
    title = "change of GPU time" + (" per step" if d.per_step else "") + " (test - control)"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="Helvetica,Arial,sans-serif">',
        text_element(8, 16, title, {"size": "13px", "color": "#222222"}),
        f'<line x1="{middle}" y1="{top - 4}" x2="{middle}" y2="{height}" stroke="#999999"/>',
    ]
    for row, i in enumerate(shown):
        change = float(k.change_ns[i])
        y = top + row * row_h
        length = (bar_w / 2 - 4) * abs(change) / largest
        x = middle if change > 0 else middle - length
        color = SLOWER if change > 0 else FASTER
        label = shorten(f"{k.names[i]} ({k.verdict[i]})", PICTURE_NAME)
        out.append(text_element(label_w - 6, y + row_h / 2, label, _label_props("right", "11px")))
        out.append(
            f'<rect x="{x:.1f}" y="{y + 3}" width="{max(length, 0.5):.1f}" '
            f'height="{row_h - 6}" fill="{color}"/>'
        )
        out.append(
            text_element(
                label_w + bar_w + 4, y + row_h / 2, _signed(change), _label_props("left", "11px")
            )
        )
    out.append("</svg>")
    return "".join(out)


def _label_props(align: str, size: str) -> TextProps:
    return {"align": align, "baseline": "middle", "size": size, "color": "#333333"}


def diff_bundle(d: TraceDiff) -> dict[str, str]:
    bundle = {"text/plain": diff_text(d), "text/html": diff_html(d)}
    picture = diff_svg(d)
    if picture:
        bundle["image/svg+xml"] = picture
    return bundle
