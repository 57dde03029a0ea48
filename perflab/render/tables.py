"""Kernel/op tables as text and HTML."""

from __future__ import annotations

from perflab.model.optable import OpTable
from perflab.model.units import format_ns
from perflab.render.html import esc, table, text_table, wrap

HEADERS = ("name", "calls", "total", "mean", "share")
MAX_NAME = 80


def _short(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def _rows(t: OpTable) -> list[list[str]]:
    return [
        [_short(n), str(int(c)), format_ns(float(tot)), format_ns(float(m)), f"{100 * s:.1f}%"]
        for n, c, tot, m, s in zip(t.names, t.calls, t.total_ns, t.mean_ns, t.share, strict=True)
    ]


def _title(t: OpTable) -> str:
    what = "GPU kernels" if t.kind == "kernel" else "CPU ops (self time; no GPU)"
    return f"{what}: {len(t)} distinct, {format_ns(float(t.total_ns.sum()))} in all"


def optable_text(t: OpTable, limit: int = 25) -> str:
    rows = _rows(t.top(limit))
    more = f"\n... {len(t) - limit} more" if len(t) > limit else ""
    return f"{_title(t)}\n{text_table(HEADERS, rows)}{more}"


def optable_html(t: OpTable, limit: int = 25) -> str:
    rows = []
    for row, share in zip(_rows(t.top(limit)), t.share[:limit], strict=True):
        bar = f'<span class="bar" style="width:{60 * float(share):.0f}px"></span> {esc(row[4])}'
        rows.append([*row[:4], bar])
    more = f'<div class="note">{len(t) - limit} more not shown</div>' if len(t) > limit else ""
    body = f"<div><b>{esc(_title(t))}</b></div>" + table(HEADERS, rows, raw_cols=1) + more
    return wrap(body)
