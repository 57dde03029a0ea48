"""Kernel/op tables, trace analysis tables and Nsight Compute reports as text and HTML."""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import SupportsFloat

from perflab.analysis.copies import CopyKind, copy_advice
from perflab.analysis.trace_stats import NS, SHARE, SINCE_START, US, Frame, IdleBreakdown
from perflab.analysis.trace_summary import Totals, TraceSummary
from perflab.model.ncu import NcuReport, NcuRule
from perflab.model.optable import OpTable
from perflab.model.units import format_bytes, format_ns, format_us, plain_number, shorten
from perflab.render.html import esc, printable, table, text_table, wrap

HEADERS = ("name", "calls", "total", "mean", "share")
MAX_NAME = 80


def _table_name(name: str) -> str:
    return shorten(name, MAX_NAME)


def _rows(t: OpTable) -> list[list[str]]:
    return [
        [_table_name(n), str(int(c)), format_ns(float(tot)), format_ns(float(m)), f"{100 * s:.1f}%"]
        for n, c, tot, m, s in zip(t.names, t.calls, t.total_ns, t.mean_ns, t.share, strict=True)
    ]


def _title(t: OpTable) -> str:
    what = "GPU kernels" if t.kind == "kernel" else "CPU ops (self time; no GPU)"
    every = f"{t.all_rows} distinct, {format_ns(float(t.all_ns))} in all"
    if len(t) < t.all_rows:  # a top() table: say what it leaves out
        shown = format_ns(float(t.total_ns.sum()))
        return f"{what}: the longest {len(t)} of {every} ({shown} shown)"
    return f"{what}: {every}"


def optable_text(t: OpTable, limit: int = 25) -> str:
    shown = t.top(limit)
    more = f"\n... {len(t) - len(shown)} more" if len(t) > len(shown) else ""
    return f"{_title(t)}\n{text_table(HEADERS, _rows(shown))}{more}"


def optable_html(t: OpTable, limit: int = 25) -> str:
    shown = t.top(limit)
    rows = []
    for row, share in zip(_rows(shown), shown.share, strict=True):
        bar = f'<span class="bar" style="width:{60 * float(share):.0f}px"></span> {esc(row[4])}'
        rows.append([*row[:4], bar])
    left = len(t) - len(shown)
    more = f'<div class="note">{left} more not shown</div>' if left > 0 else ""
    body = f"<div><b>{esc(_title(t))}</b></div>" + table(HEADERS, rows, raw_cols=1) + more
    return wrap(body)


# --- Nsight Compute: each kernel's launch and the rules' advice, in full -------------------

ADVICE_TYPES = ("OPT", "WRN")  # rule results that give advice (INF ones only inform)
TEXT_WIDTH = 100


def _advice(report: NcuReport) -> dict[int, list[NcuRule]]:
    """Each kernel's advice, in one pass over the rules (not one per kernel)."""
    by_kernel: dict[int, list[NcuRule]] = {}
    for r in report.rules:
        if r.type in ADVICE_TYPES:
            by_kernel.setdefault(r.kernel, []).append(r)
    return by_kernel


def _rule_head(rule: NcuRule) -> str:
    gain = f" (est. speedup {rule.speedup:g}%)" if rule.speedup is not None else ""
    return f"[{rule.type}] {rule.rule}{gain}"


def _launches(report: NcuReport) -> list[str]:
    """Each kernel's grid, block and number of metrics, in one pass over the metrics."""
    counts = Counter(m.kernel for m in report.metrics)
    return [
        f"grid {launch.get('Grid Size', '?')} block {launch.get('Block Size', '?')} "
        f"({counts[k]} metrics)"
        for k, launch in enumerate(report.kernels)
    ]


def ncu_text(report: NcuReport) -> str:
    """Per kernel: its launch, then each rule's whole advice, wrapped (never cut). Text from
    the report is :func:`printable`: a control character in a name is shown escaped."""
    lines = []
    advice = _advice(report)
    for k, (launch, shape) in enumerate(zip(report.kernels, _launches(report), strict=True)):
        name = printable(launch.get("Kernel Name", "?"))
        lines.append(f"kernel {k}: {_table_name(name)} {printable(shape)}")
        for rule in advice.get(k, []):
            head = f"  {printable(_rule_head(rule))}: "
            lines.append(
                textwrap.fill(
                    printable(" ".join(rule.description.split())),
                    width=TEXT_WIDTH,
                    initial_indent=head,
                    subsequent_indent=" " * 6,
                    break_long_words=True,
                    break_on_hyphens=False,
                )
            )
    return "\n".join(lines) or "no kernels"


def ncu_html(report: NcuReport) -> str:
    """The same as :func:`ncu_text`, with full kernel names and advice (escaped)."""
    parts = []
    advice = _advice(report)
    for k, (launch, shape) in enumerate(zip(report.kernels, _launches(report), strict=True)):
        name = launch.get("Kernel Name", "?")
        parts.append(f'<div class="wrap">kernel {k}: <code>{esc(name)}</code> {esc(shape)}</div>')
        items = [
            f"<li><b>{esc(_rule_head(rule))}</b>: {esc(rule.description)}</li>"
            for rule in advice.get(k, [])
        ]
        if items:
            parts.append(f'<ul class="advice">{"".join(items)}</ul>')
    return wrap("".join(parts) or "no kernels")


# --- trace analysis tables: times as the trace summary shows them ---------------------------

FRAME_ROWS = 25  # rows a table view shows; to_pandas() has them all


def _cell(value: SupportsFloat | str, unit: str | None, origin_ns: int) -> str:
    if unit == SINCE_START:
        return format_ns(float(value) - origin_ns)
    if unit in (NS, US):
        return format_ns(float(value) * (1e3 if unit == US else 1.0))
    if unit == SHARE:
        return f"{100 * float(value):.1f}%"
    if isinstance(value, str):
        return _table_name(value)
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        return plain_number(value, 4)
    return str(value)


def _header(column: str, unit: str | None) -> str:
    name = column.removesuffix("_ns").removesuffix("_us")
    name = {"dur": "duration"}.get(name, name)
    return f"{name} (since trace start)" if unit == SINCE_START else name


@dataclass
class _Shown:
    """A Frame's first rows as text cells; ``left``: its text columns."""

    headers: list[str]
    rows: list[list[str]]
    left: set[int]


def _frame_rows(frame: Frame, limit: int) -> _Shown:
    units = frame.units
    headers = [_header(c, units.get(c)) for c in frame.columns]
    shown = frame.head(limit)
    columns = [
        [_cell(v, units.get(c), frame.origin_ns) for v in values]
        for c, values in shown.columns.items()
    ]
    left = {
        i
        for i, values in enumerate(frame.columns.values())
        if len(values) and isinstance(values[0], str)
    }
    return _Shown(headers, [list(row) for row in zip(*columns, strict=True)], left or {0})


def _more(total: int, limit: int) -> str:
    return f"{total - limit} more rows (to_pandas() has them all)" if total > limit else ""


def frame_text(frame: Frame, limit: int = FRAME_ROWS) -> str:
    s = _frame_rows(frame, limit)
    parts = [frame.title] if frame.title else []
    parts.append(text_table(s.headers, s.rows, left=s.left) if s.rows else "(no rows)")
    more = _more(len(frame), limit)
    return "\n".join([*parts, f"... {more}"] if more else parts)


def frame_html(frame: Frame, limit: int = FRAME_ROWS) -> str:
    s = _frame_rows(frame, limit)
    title = f"<div><b>{esc(frame.title)}</b></div>" if frame.title else ""
    more = _more(len(frame), limit)
    note = f'<div class="note">{esc(more)}</div>' if more else ""
    body = table(s.headers, s.rows, left=s.left) if s.rows else "(no rows)"
    return wrap(title + body + note)


IDLE_HEADERS = ("cause", "idle", "share", "gaps")


def _idle_rows(idle: IdleBreakdown) -> tuple[str, Sequence[Sequence[str]]]:
    total_us = sum(idle.values())
    gaps = sum(idle.gaps.values())
    rows = [
        [
            cause,
            format_us(us),
            f"{100 * us / total_us:.1f}%" if total_us else "-",
            str(idle.gaps[cause]),
        ]
        for cause, us in idle.items()
    ]
    return f"idle GPU time by cause: {format_us(total_us)} in {gaps} gaps", rows


def idle_breakdown_text(idle: IdleBreakdown) -> str:
    title, rows = _idle_rows(idle)
    return f"{title}\n{text_table(IDLE_HEADERS, rows)}"


def idle_breakdown_html(idle: IdleBreakdown) -> str:
    title, rows = _idle_rows(idle)
    return wrap(f"<div><b>{esc(title)}</b></div>" + table(IDLE_HEADERS, rows))


def trace_summary_text(summary: TraceSummary) -> str:
    lines = [_summary_head(summary)]
    if summary.host is not None:  # no GPU work: what the host did instead
        from perflab.render.host_view import host_text

        return "\n".join([*lines, host_text(summary.host)])
    for dev, v in summary.devices.items():
        lines.append(
            f"{summary.gpu} {dev}: busy {format_us(v.busy_us)} of {format_us(v.span_us)} "
            f"({100 * v.utilisation:.1f}%), idle {format_us(v.idle_us)}, {v.kernels} kernels"
        )
    lines += _transfer_lines(summary)
    shares = (f"{k} {_kernel_share(summary, v)}" for k, v in _by_time(summary.categories))
    lines.append("categories: " + ", ".join(shares))
    return "\n".join(lines)


def _summary_head(summary: TraceSummary) -> str:
    read = f"{summary.events} events read"
    if 0 < summary.kept < summary.events:  # say why the trace itself counts fewer
        read = f"{summary.events} entries read, {summary.kept} kept as events"
        if summary.not_kept:
            read += f" (the others: {summary.not_kept})"
    return (
        f"{read}; {summary.kernels.count} kernels, "
        f"{format_us(summary.kernels.total_us)} of kernel time"
    )


def _transfer_lines(summary: TraceSummary) -> list[str]:
    """Communication and copies, which the summary's tables do not show."""
    lines = []
    c, m = summary.comm, summary.memcpy
    if c.count:
        share = 100 * c.overlapped_us / c.total_us if c.total_us else 0.0
        lines.append(
            f"communication: {c.count} NCCL kernels, {format_us(c.total_us)}, "
            f"{share:.1f}% overlapped with compute"
        )
    if m.count:
        kinds = "; ".join(_copy_kind(d, k) for d, k in m.by_kind.items())
        lines.append(
            f"memcpy: {m.count} copies, {format_us(m.total_us)}, {format_bytes(m.bytes)}"
            + (f" ({kinds})" if kinds else "")
        )
        lines += copy_advice(m.by_kind)
    idle = {cause: t for cause, t in summary.idle.items() if t.gaps}
    if idle:
        parts = (f"{c} {format_us(t.idle_us)} ({100 * t.share:.1f}%)" for c, t in idle.items())
        lines.append(
            f"idle by cause: {', '.join(parts)} (heuristics; each gap's evidence: "
            "perflab trace idle)"
        )
    return lines


def _copy_kind(direction: str, kind: CopyKind) -> str:
    """``DtoH 89, 322 us, 2.88 MB, 89 pageable``: a direction's copies and host memory."""
    memory = [f"{n} {what}" for n, what in ((kind.pageable, "pageable"), (kind.pinned, "pinned"))]
    host = [m for m in memory if not m.startswith("0 ")]
    parts = [f"{direction} {kind.count}", format_us(kind.total_us), format_bytes(kind.bytes)]
    return ", ".join(parts + host)


def _kernel_share(summary: TraceSummary, totals: Totals) -> str:
    return f"{100 * totals.total_us / (summary.kernels.total_us or 1.0):.1f}%"


def trace_summary_html(summary: TraceSummary) -> str:
    """The summary's tables with times as people read them (``to_dict()`` keeps the exact
    microseconds), then what the tables do not show."""
    if summary.host is not None:  # no GPU work: what the host did instead
        from perflab.render.host_view import host_html

        return wrap(f"<div>{esc(_summary_head(summary))}</div>" + host_html(summary.host))
    devices = [
        [
            dev,
            format_us(v.busy_us),
            format_us(v.idle_us),
            format_us(v.span_us),
            f"{100 * v.utilisation:.1f}%",
            str(v.kernels),
        ]
        for dev, v in summary.devices.items()
    ]
    cats = [
        [k, str(v.count), format_us(v.total_us), _kernel_share(summary, v)]
        for k, v in _by_time(summary.categories)
    ]
    return wrap(
        f"<div>{esc(_summary_head(summary))}</div>"
        + table(["device", "busy", "idle", "span", "busy %", "kernels"], devices)
        + table(["category", "kernels", "total", "share"], cats)
        + "".join(f"<div>{esc(line)}</div>" for line in _transfer_lines(summary))
    )


def _by_time(totals: dict[str, Totals]) -> list[tuple[str, Totals]]:
    return sorted(totals.items(), key=lambda kv: -kv[1].total_us)
