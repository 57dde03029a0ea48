"""Views of :class:`perflab.analysis.idle_causes.IdleCauses`: the idle time by cause, the
causes' rules, and the longest gaps with their evidence, as text and HTML (every name from
the trace escaped)."""

from __future__ import annotations

from collections.abc import Sequence

from perflab.analysis.idle_causes import CAUSES, HEURISTIC_NOTE, RULES, CauseTotal, IdleCauses
from perflab.model.units import format_ns, format_us
from perflab.render.html import esc, printable, style, svg_image, table, text_table, wrap
from perflab.render.svg import nice_ticks, text_element
from perflab.render.svg_chart import TextProps
from perflab.render.tables import frame_html, frame_text

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


def _evidence_lines(result: IdleCauses, gap: int, rank: int) -> list[str]:
    """A gap's head and evidence for a terminal: names from the trace escaped."""
    head = printable(_gap_head(result, gap, rank))
    return [head, *(f"   - {printable(e.text)}" for e in result.evidence(gap))]


def _rules_shown(totals: dict[str, CauseTotal]) -> list[tuple[str, str]]:
    """The rule of each cause that has gaps (the reader needs those to judge them)."""
    return [(cause, RULES[cause]) for cause, t in totals.items() if t.gaps]


def idle_text(result: IdleCauses, longest: int = LONGEST) -> str:
    totals = result.by_cause()
    rows = _rows(totals)
    lines = [_title(result), *([text_table(HEADERS, rows)] if rows else [])]
    lines += [f"  {cause}: {rule}" for cause, rule in _rules_shown(totals)]
    lines.append(f"({HEURISTIC_NOTE})")
    if result.by_step is not None and result.step is None:
        lines.append(frame_text(result.by_step))
    shown = result.longest(longest).tolist()
    if shown:
        lines.append(f"the longest {len(shown)} gaps and their evidence:")
    for rank, gap in enumerate(shown, start=1):
        lines += _evidence_lines(result, gap, rank)
    return "\n".join(lines)


def idle_html(result: IdleCauses, longest: int = LONGEST) -> str:
    totals = result.by_cause()
    rules = "".join(f"<li><b>{esc(c)}</b>: {esc(r)}</li>" for c, r in _rules_shown(totals))
    parts = [
        f"<div><b>{esc(_title(result))}</b></div>",
        table(HEADERS, _rows(totals)) if any(t.gaps for t in totals.values()) else "",
        f'<ul class="note">{rules}</ul>' if rules else "",
        f'<div class="note">{esc(HEURISTIC_NOTE)}</div>',
        _steps_html(result),
        _gaps_html(result, result.longest(longest).tolist()),
    ]
    return wrap("".join(parts))


def _steps_html(result: IdleCauses) -> str:
    if result.by_step is None or result.step is not None:
        return ""
    inner = frame_html(result.by_step)
    return inner.removeprefix(style()) if inner.startswith(style()) else inner


def _gaps_html(result: IdleCauses, shown: Sequence[int]) -> str:
    if not shown:
        return ""
    items = []
    for rank, gap in enumerate(shown, start=1):
        evidence = "".join(f"<li>{esc(e.text)}</li>" for e in result.evidence(gap))
        items.append(f"<li>{esc(_gap_head(result, gap, rank))}<ul>{evidence}</ul></li>")
    head = f"<div><b>the longest {len(shown)} gaps and their evidence</b></div>"
    return f'{head}<ul class="wrap">{"".join(items)}</ul>'


# -- the static picture: one strip per GPU, gaps coloured by cause ----------------------------

#: colour of each strip state: busy, then the causes in CAUSES order
COLOURS = ("#4c9a5f", "#d1495b", "#edae49", "#8e6bbf", "#8c564b", "#3c7fb1", "#b0b0b0")
STRIP = {"left": 70, "right": 20, "top": 24, "row": 22, "gap": 8, "axis": 40}


def idle_svg(result: IdleCauses) -> str:
    """Each GPU's span as a strip of ``STRIP_PIXELS`` bins coloured by what held most of
    each bin (busy, or a cause), with a time axis and a legend; empty when there is no
    GPU work."""
    strip = result.strip
    if strip is None or not strip.devices:
        return ""
    pixels = strip.state.shape[1]
    width = STRIP["left"] + pixels + STRIP["right"]
    rows_h = len(strip.devices) * (STRIP["row"] + STRIP["gap"])
    height = STRIP["top"] + rows_h + STRIP["axis"] + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica,Arial,sans-serif" '
        'font-size="11">',
        f"<title>{esc(_title(result))}</title>",
        text_element(STRIP["left"], 14, _title(result), {"size": "12px"}),
    ]
    for row, device in enumerate(strip.devices):
        y = STRIP["top"] + row * (STRIP["row"] + STRIP["gap"])
        out.append(text_element(STRIP["left"] - 6, y + STRIP["row"] / 2, f"GPU {device}", _RIGHT))
        out += _runs(strip.state[row], STRIP["left"], y)
    out += _axis(result, pixels, STRIP["top"] + rows_h)
    out += _legend(STRIP["left"], height - 8)
    return "\n".join([*out, "</svg>"])


_RIGHT: TextProps = {"align": "right", "baseline": "middle"}


def _runs(states: Sequence[int], x0: int, y: int) -> list[str]:
    """One rect per run of bins in the same state."""
    out = []
    start = 0
    for i in range(1, len(states) + 1):
        if i == len(states) or states[i] != states[start]:
            out.append(
                f'<rect x="{x0 + start}" y="{y}" width="{i - start}" height="{STRIP["row"]}" '
                f'fill="{COLOURS[int(states[start])]}"/>'
            )
            start = i
    return out


def _axis(result: IdleCauses, pixels: int, y: int) -> list[str]:
    """Time since the start of the first strip, with readable ticks."""
    strip = result.strip
    assert strip is not None
    span = float(strip.end.max() - strip.start.min())
    x0, x1 = STRIP["left"], STRIP["left"] + pixels
    out = [f'<line x1="{x0}" x2="{x1}" y1="{y}" y2="{y}" stroke="#444"/>']
    for tick in nice_ticks(0.0, span, False) if span > 0 else []:
        x = STRIP["left"] + pixels * tick / span
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + 4}" stroke="#444"/>')
        out.append(text_element(x, y + 6, format_ns(tick), {"align": "center", "baseline": "top"}))
    origin = format_ns(float(strip.start.min()) - result.origin_ns)
    label = f"time since the strip's start ({origin} after the trace's start)"
    out.append(text_element(STRIP["left"], y + 22, label, {"baseline": "top"}))
    return out


def _legend(x: int, y: int) -> list[str]:
    out = []
    for name, colour in zip(("busy", *CAUSES), COLOURS, strict=True):
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        out.append(text_element(x + 14, y, name, {}))
        x += 14 + 7 * len(name) + 16
    return out


def idle_bundle(result: IdleCauses) -> dict[str, str]:
    """Text, HTML (the strip as an image, then the tables and evidence) and the SVG."""
    svg = idle_svg(result)
    picture = svg_image(svg, _title(result)) if svg else ""
    html = idle_html(result)
    if picture:
        html = html.replace('<div class="perflab">', f'<div class="perflab">{picture}', 1)
    bundle = {"text/plain": idle_text(result), "text/html": html}
    if svg:
        bundle["image/svg+xml"] = svg
    return bundle
