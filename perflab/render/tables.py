"""Kernel/op tables and Nsight Compute reports as text and HTML."""

from __future__ import annotations

import textwrap

from perflab.model.ncu import NcuReport, NcuRule
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


# --- Nsight Compute: each kernel's launch and the rules' advice, in full -------------------

ADVICE_TYPES = ("OPT", "WRN")  # rule results that give advice (INF ones only inform)
TEXT_WIDTH = 100


def _advice(report: NcuReport, kernel: int) -> list[NcuRule]:
    return [r for r in report.rules if r.kernel == kernel and r.type in ADVICE_TYPES]


def _rule_head(rule: NcuRule) -> str:
    gain = f" (est. speedup {rule.speedup:g}%)" if rule.speedup is not None else ""
    return f"[{rule.type}] {rule.rule}{gain}"


def _launch(report: NcuReport, kernel: int) -> str:
    launch = report.kernels[kernel]
    n = sum(1 for m in report.metrics if m.kernel == kernel)
    return (
        f"grid {launch.get('Grid Size', '?')} block {launch.get('Block Size', '?')} ({n} metrics)"
    )


def ncu_text(report: NcuReport) -> str:
    """Per kernel: its launch, then each rule's whole advice, wrapped (never cut)."""
    lines = []
    for k, launch in enumerate(report.kernels):
        name = launch.get("Kernel Name", "?")
        lines.append(f"kernel {k}: {_short(name)} {_launch(report, k)}")
        for rule in _advice(report, k):
            head = f"  {_rule_head(rule)}: "
            lines.append(
                textwrap.fill(
                    " ".join(rule.description.split()),
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
    for k, launch in enumerate(report.kernels):
        name = launch.get("Kernel Name", "?")
        parts.append(
            f'<div class="wrap">kernel {k}: <code>{esc(name)}</code> '
            f"{esc(_launch(report, k))}</div>"
        )
        items = [
            f"<li><b>{esc(_rule_head(rule))}</b>: {esc(rule.description)}</li>"
            for rule in _advice(report, k)
        ]
        if items:
            parts.append(f'<ul class="advice">{"".join(items)}</ul>')
    return wrap("".join(parts) or "no kernels")
