"""Views of :class:`perflab.analysis.critical_path.CriticalPaths`: per step what its critical path
was made of (by kind, by rank, the names with the most time on it), the what-ifs against the
recorded mean, and how they were estimated. Names come from trace files: text through the
terminal-safe table, HTML escaped."""

from __future__ import annotations

import textwrap

from perflab.analysis.critical_path import CriticalPaths, StepPath
from perflab.model.units import format_ns, shorten
from perflab.render.html import esc, table, text_table, wrap

STEPS = 8  # steps shown; to_dict() / --json has them all
LONGEST = 5  # names per step
NAME_CHARS = 70
KIND_COLOURS = {
    "host": "#4c72b0",
    "launch": "#8172b2",
    "kernel": "#55a868",
    "copy": "#ccb974",
    "collective": "#c44e52",
    "collective transfer": "#dd8452",
    "unexplained": "#999999",
}


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _kinds(step: StepPath) -> str:
    shares = " · ".join(f"{k} {_share(ns, step.duration_ns)}" for k, ns in step.by_kind.items())
    return shares or "no time"


def _ranks(step: StepPath) -> str:
    if not step.by_rank:
        return ""
    ordered = sorted(step.by_rank.items(), key=lambda kv: -kv[1])
    return ", ".join(f"rank {r} {_share(ns, step.duration_ns)}" for r, ns in ordered)


def _title(result: CriticalPaths) -> str:
    n = len(result.steps)
    what = "step" if n == 1 else "steps"
    return f"Critical path of {n} {what}: mean {format_ns(result.mean_step_ns)} per step"


def _what_if_rows(result: CriticalPaths) -> list[list[str]]:
    base = result.mean_step_ns
    return [
        [
            w["change"],
            format_ns(w["mean_step_ns"]),
            f"{100 * (w['mean_step_ns'] - base) / base:+.1f}%" if base else "-",
        ]
        for w in result.what_if
    ]


def _longest_rows(step: StepPath) -> list[list[str]]:
    return [
        [shorten(name, NAME_CHARS), kind, "" if rank is None else str(rank), format_ns(ns)]
        for name, kind, rank, ns in step.longest(LONGEST)
    ]


def critical_text(result: CriticalPaths) -> str:
    lines = [_title(result), ""]
    for step in result.steps[:STEPS]:
        lines.append(f"{step.step}  {format_ns(step.duration_ns)}: {_kinds(step)}")
        if step.by_rank:
            lines.append(f"  on the path: {_ranks(step)}")
        headers = ["longest on the path", "kind", "rank", "time"]
        rows = _longest_rows(step)
        if not step.by_rank:
            headers, rows = headers[:2] + headers[3:], [r[:2] + r[3:] for r in rows]
        lines += ["  " + line for line in text_table(headers, rows).splitlines()]
        lines.append("")
    if len(result.steps) > STEPS:
        lines += [f"({len(result.steps) - STEPS} more steps: --json or to_dict() has them all)", ""]
    if result.what_if:
        rows = _what_if_rows(result)
        lines += [text_table(["what if", "mean step", "vs recorded"], rows), ""]
        lines += textwrap.wrap(result.estimate, 100)
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines).rstrip()


def _bar(step: StepPath) -> str:
    """The step's time by kind as one stacked bar (plain divs: no script, no SVG)."""
    whole = step.duration_ns or 1
    cells = "".join(
        f'<div title="{esc(kind)} {esc(format_ns(ns))}" style="width:{100 * ns / whole:.2f}%;'
        f'background:{KIND_COLOURS.get(kind, "#999")};height:12px"></div>'
        for kind, ns in step.by_kind.items()
    )
    return f'<div style="display:flex;width:100%;max-width:640px">{cells}</div>'


def critical_html(result: CriticalPaths) -> str:
    parts = [f"<h4>{esc(_title(result))}</h4>"]
    for step in result.steps[:STEPS]:
        head = f"{step.step}: {format_ns(step.duration_ns)}: {_kinds(step)}"
        parts.append(f"<div><b>{esc(head)}</b></div>{_bar(step)}")
        if step.by_rank:
            parts.append(f'<div class="note">on the path: {esc(_ranks(step))}</div>')
        parts.append(table(["longest on the path", "kind", "rank", "time"], _longest_rows(step)))
    if len(result.steps) > STEPS:
        more = f"{len(result.steps) - STEPS} more steps: to_dict() has them all"
        parts.append(f'<div class="note">{esc(more)}</div>')
    if result.what_if:
        parts.append(table(["what if", "mean step", "vs recorded"], _what_if_rows(result)))
        parts.append(f'<div class="note">{esc(result.estimate)}</div>')
    parts += [f'<div class="note">warning: {esc(w)}</div>' for w in result.warnings]
    return wrap("".join(parts))
