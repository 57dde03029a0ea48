"""Views of :class:`perflab.analysis.idle_causes.IdleCauses`: the idle time by cause, the
causes' rules, and the longest gaps with their evidence, as text and HTML (every name from
the trace escaped)."""

from __future__ import annotations

from collections.abc import Sequence

from perflab.analysis.idle_causes import HEURISTIC_NOTE, RULES, CauseTotal, IdleCauses
from perflab.model.units import format_ns, format_us
from perflab.render.html import esc, table, text_table, wrap

LONGEST = 10  # gaps shown with their evidence
HEADERS = ("cause", "idle", "share", "gaps")


def _title(result: IdleCauses) -> str:
    total = format_ns(result.total_ns)
    scope = [f"ProfilerStep#{result.step}"] if result.step is not None else []
    if result.min_ns:
        scope.append(f"gaps longer than {format_ns(result.min_ns)}")
    where = f" ({', '.join(scope)})" if scope else ""
    return f"idle GPU time by cause{where}: {total} in {len(result)} gaps"


def _rows(totals: dict[str, CauseTotal]) -> list[list[str]]:
    """The causes that have gaps (a table of zeros says nothing)."""
    return [
        [cause, format_us(t.idle_us), f"{100 * t.share:.1f}%", str(t.gaps)]
        for cause, t in totals.items()
        if t.gaps
    ]


def _gap_head(result: IdleCauses, gap: int, rank: int) -> str:
    g = result.gaps
    since = format_ns(int(g.start[gap]) - result.origin_ns)
    dur = format_ns(int(g.end[gap] - g.start[gap]))
    device = result.device_labels[int(g.device[gap])]
    return f"{rank}. GPU {device}, {dur} at {since} since trace start: {result.cause_of(gap)}"


def _rules_shown(totals: dict[str, CauseTotal]) -> list[tuple[str, str]]:
    """The rule of each cause that has gaps (the reader needs those to judge them)."""
    return [(cause, RULES[cause]) for cause, t in totals.items() if t.gaps]


def idle_text(result: IdleCauses, longest: int = LONGEST) -> str:
    totals = result.by_cause()
    rows = _rows(totals)
    lines = [_title(result), *([text_table(HEADERS, rows)] if rows else [])]
    lines += [f"  {cause}: {rule}" for cause, rule in _rules_shown(totals)]
    lines.append(f"({HEURISTIC_NOTE})")
    shown = result.longest(longest).tolist()
    if shown:
        lines.append(f"the longest {len(shown)} gaps and their evidence:")
    for rank, gap in enumerate(shown, start=1):
        lines.append(_gap_head(result, gap, rank))
        lines += [f"   - {e.text}" for e in result.evidence(gap)]
    return "\n".join(lines)


def idle_html(result: IdleCauses, longest: int = LONGEST) -> str:
    totals = result.by_cause()
    rules = "".join(f"<li><b>{esc(c)}</b>: {esc(r)}</li>" for c, r in _rules_shown(totals))
    parts = [
        f"<div><b>{esc(_title(result))}</b></div>",
        table(HEADERS, _rows(totals)) if any(t.gaps for t in totals.values()) else "",
        f'<ul class="note">{rules}</ul>' if rules else "",
        f'<div class="note">{esc(HEURISTIC_NOTE)}</div>',
        _gaps_html(result, result.longest(longest).tolist()),
    ]
    return wrap("".join(parts))


def _gaps_html(result: IdleCauses, shown: Sequence[int]) -> str:
    if not shown:
        return ""
    items = []
    for rank, gap in enumerate(shown, start=1):
        evidence = "".join(f"<li>{esc(e.text)}</li>" for e in result.evidence(gap))
        items.append(f"<li>{esc(_gap_head(result, gap, rank))}<ul>{evidence}</ul></li>")
    head = f"<div><b>the longest {len(shown)} gaps and their evidence</b></div>"
    return f'{head}<ul class="wrap">{"".join(items)}</ul>'
