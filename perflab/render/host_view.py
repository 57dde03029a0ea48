"""Views of a trace that has no GPU work: what its host did (the trace summary's ``host``,
:class:`perflab.analysis.trace_stats.HostActivity`) and its idle-time answer
(:class:`perflab.analysis.idle_causes.IdleWithoutGpu`), as text and HTML. Every name from
the trace is escaped in HTML and made printable in text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perflab.analysis.idle_causes import IdleWithoutGpu
from perflab.analysis.trace_stats import HostActivity
from perflab.model.units import counted, format_us, shorten
from perflab.render.html import esc, table, text_table, wrap

MAX_NAME = 80
RANGE_KINDS = "record_function, perflab.range, NVTX"


@dataclass(frozen=True)
class HostTable:
    """One table of the host's activity: its title line, headers and rows of text."""

    title: str
    headers: Sequence[str]
    rows: list[list[str]]


def host_sections(host: HostActivity) -> list[HostTable]:
    """Threads, CPU ops by self time and user ranges, each a table with its title (a title
    alone where the trace has none)."""
    ops, ranges = host.ops, host.ranges
    share = ops.self_us or 1.0
    return [
        HostTable(
            f"threads: {len(host.threads)}"
            + (", the time each spent inside CPU ops" if host.threads else ""),
            ("thread", "ops", "in ops", "span"),
            [
                [t.thread, str(t.ops), format_us(t.in_ops_us), format_us(t.span_us)]
                for t in host.threads
            ],
        ),
        HostTable(
            f"CPU ops: {counted(ops.count, 'call')} of {counted(ops.distinct, 'op')}, "
            f"{format_us(ops.self_us)} of self time"
            + _order(len(ops.top), ops.distinct, "self time"),
            ("op", "calls", "self", "total", "self share"),
            [
                [
                    shorten(op.name, MAX_NAME),
                    str(op.calls),
                    format_us(op.self_us),
                    format_us(op.total_us),
                    f"{100 * op.self_us / share:.1f}%",
                ]
                for op in ops.top
            ],
        ),
        HostTable(
            f"ranges ({RANGE_KINDS}): {ranges.count} of {counted(ranges.distinct, 'name')}"
            + _order(len(ranges.top), ranges.distinct, "total time"),
            ("range", "count", "total"),
            [[shorten(r.name, MAX_NAME), str(r.count), format_us(r.total_us)] for r in ranges.top],
        ),
    ]


def _order(shown: int, every: int, by: str) -> str:
    """How a table's rows were picked: all of them or the longest, by what."""
    if shown == 0:
        return ""
    return f", by {by}" if shown == every else f"; the {shown} longest by {by}"


def host_text(host: HostActivity) -> str:
    """The note that the trace has no GPU work, then what its host did."""
    parts = [f"{host.note}; what its host did:"]
    for s in host_sections(host):
        parts.append(f"{s.title}\n{text_table(s.headers, s.rows)}" if s.rows else s.title)
    return "\n".join(parts)


def host_html(host: HostActivity) -> str:
    body = f"<div><b>{esc(host.note)}</b>; what its host did:</div>"
    for s in host_sections(host):
        body += f"<div>{esc(s.title)}</div>" + (table(s.headers, s.rows) if s.rows else "")
    return body


# -- idle time, where there is no GPU timeline -----------------------------------------------


def no_gpu_idle_text(result: IdleWithoutGpu) -> str:
    return f"idle GPU time: {result.message} (perflab trace summary shows what the host did)"


def no_gpu_idle_html(result: IdleWithoutGpu) -> str:
    return wrap(f"<div>{esc(no_gpu_idle_text(result))}</div>")
