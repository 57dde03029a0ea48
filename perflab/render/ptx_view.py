"""A CompileResult as text and as HTML: resources, occupancy, instruction mix and insights
above three panes (Source | PTX | SASS) whose lines are coloured by source line.

Hovering a line highlights its counterparts in every pane with CSS alone (``:has``), so
it works in JupyterLab, in static nbconvert HTML and where scripts do not run; a small
inline script adds click-to-pin and scrolls the other panes to the counterparts. The
directive/label filters are CSS checkboxes. Every string from the compiler or the user
goes through :func:`esc`; nothing is loaded from outside.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from perflab.analysis.insights import Insight, KernelDiff
from perflab.analysis.kernel_report import KernelReport, kernel_reports
from perflab.analysis.ptx import line_kind
from perflab.errors import InputError
from perflab.model.kernel import CompileResult, KernelArtifacts
from perflab.model.units import format_bytes
from perflab.render.html import esc, table, text_table, wrap

PANES = ("source", "ptx", "sass")
STAGES = ("ttir", "ttgir", "llir")
MIX_ROWS = 12

_CSS = """<style>
.pv-pane h4{margin:0;padding:2px 6px;background:#f3f3f3;font-size:12px;font-weight:600}
.pv-code{font-family:var(--jp-code-font-family,monospace)!important}
.pv-code div{padding:0 6px;cursor:default}
.pv-code .n{display:inline-block;min-width:3.5em;user-select:none}
.pv-code .pin{outline:2px solid #d62728}.pv-code .pinp{box-shadow:inset 4px 0 #d62728}
.pv-filters{font-size:12px;margin:4px 0}.pv-filters label{margin-right:12px}
.pv-ins li{margin:1px 0}
</style>"""

_SCRIPT = """<script>(function(){var r=document.getElementById("%s");if(!r)return;
r.addEventListener("click",function(e){var t=e.target.closest("[data-l],[data-p]");
r.querySelectorAll(".pin,.pinp").forEach(function(x){x.classList.remove("pin","pinp")});
if(!t)return;var l=t.getAttribute("data-l"),p=t.getAttribute("data-p");
function mark(sel,c){r.querySelectorAll(sel).forEach(function(x,i){x.classList.add(c);
if(x!==t&&!x.parentNode.dataset.done){x.parentNode.dataset.done=1;
x.parentNode.scrollTop=x.offsetTop-x.parentNode.offsetTop-40}})}
if(l)mark('[data-l="'+l+'"]',"pin");if(p)mark('[data-p="'+p+'"]',"pinp");
r.querySelectorAll("[data-done]").forEach(function(x){delete x.dataset.done})});})();
</script>"""


# Inline styles: JupyterLab drops <style> and <script> from an untrusted notebook's HTML
# but keeps style attributes (with plain values: hex colours, px sizes, flex), so the panes
# stay side by side, scroll, and keep their line colours there. The <style> rules above add
# what needs selectors (hover, pinning, filters) where the page is trusted.
INLINE = {
    "panes": "display: flex; gap: 6px; margin-top: 6px",
    "pane": "flex: 1 1 0px; min-width: 0px; border: 1px solid #cccccc; border-radius: 3px",
    "code": (
        "max-height: 480px; overflow: auto; font-family: monospace; font-size: 12px; "
        "line-height: 1.35; white-space: pre"
    ),
    "number": "color: #999999",
    "head": "display: flex; gap: 24px; flex-wrap: wrap",
    "insights": "flex: 1 1 280px; min-width: 280px",
    "filters": "font-size: 12px; margin: 4px 0px",
}
KIND_COLORS = {"directive": "#777777", "comment": "#777777", "label": "#7a3e9d"}
LEVEL_COLORS = {"good": "#2a7a2a", "warn": "#a15c00"}
DIFF_COLORS = {"+": "#2a7a2a", "-": "#b22222"}


@dataclass
class ViewOptions:
    kernel: str | None = None  # None: every kernel
    show: Sequence[str] = PANES
    block_size: int | None = None  # None: Triton's num_warps * 32, else 256 (resolve_block_size)
    dynamic_shared: int | None = None
    diff_with: CompileResult | None = None
    notes: list[str] = field(default_factory=list)


def parse_show(text: str, lang: str) -> tuple[str, ...]:
    allowed = PANES + (STAGES if lang == "triton" else ())
    parts = tuple(p.strip().lower() for p in text.split(",") if p.strip())
    bad = [p for p in parts if p not in allowed]
    if bad or not parts:
        raise InputError(f"--show: {', '.join(bad) or 'nothing'} not one of {', '.join(allowed)}")
    return parts


def reports(result: CompileResult, opts: ViewOptions) -> tuple[KernelReport, ...]:
    """The analysis of the kernels ``opts`` chooses, which the text and HTML views format."""
    return kernel_reports(
        result,
        kernel=opts.kernel,
        block_size=opts.block_size,
        dynamic_shared=opts.dynamic_shared,
        previous=opts.diff_with,
    )


def _occupancy_text(report: KernelReport) -> str:
    return str(report.occupancy) if report.occupancy is not None else str(report.occupancy_error)


def _resource_rows(report: KernelReport) -> list[list[str]]:
    kernel = report.kernel
    r = kernel.resources
    dynamic = format_bytes(report.shared_dynamic) + (
        " (--smem)" if report.shared_dynamic_given else ""
    )
    return [
        ["registers / thread", str(r.registers)],
        ["spill stores / loads", f"{format_bytes(r.spill_stores)} / {format_bytes(r.spill_loads)}"],
        ["shared (static + dynamic)", f"{format_bytes(r.shared_static)} + {dynamic}"],
        ["stack frame", format_bytes(r.stack)],
        ["constant bank 0", format_bytes(r.constant)],
        ["barriers", str(r.barriers)],
        ["SASS instructions", str(kernel.instruction_count)],
    ]


# ---- text ---------------------------------------------------------------------------------


def options_line(result: CompileResult) -> str:
    """The options that compiled the kernels (Triton: warps, stages, FP fusion), or ""."""
    return f"compiled with: {', '.join(result.flags)}" if result.flags else ""


def compile_text(result: CompileResult, opts: ViewOptions | None = None) -> str:
    opts = opts or ViewOptions()
    return format_text(result, reports(result, opts), opts)


def format_text(result: CompileResult, kernels: Sequence[KernelReport], opts: ViewOptions) -> str:
    """The text view of ``result`` with its kernels' reports."""
    out = [result.summary_line(), *filter(None, [options_line(result)]), *opts.notes]
    out += [f"warning: {w}" for w in result.warnings]
    for report in kernels:
        out += ["", *_kernel_text(report)]
    out.append("(Source | PTX | SASS panes in the HTML view)")
    return "\n".join(out)


def _kernel_text(report: KernelReport) -> list[str]:
    kernel = report.kernel
    mix = list(kernel.instruction_mix.items())[:MIX_ROWS]
    out = [
        f"kernel {kernel.name} [{kernel.arch}]",
        text_table(["resource", "value"], _resource_rows(report)),
        f"occupancy: {_occupancy_text(report)}",
        "instruction mix: " + ", ".join(f"{op} {n}" for op, n in mix),
        *[str(i) for i in report.insights],
        schedule_line(report),
        *filter(None, [pressure_line(report)]),
        *spill_lines(report),
    ]
    if report.diff is not None:
        out.append(_diff_text(report.diff))
    return out


def schedule_line(report: KernelReport) -> str:
    """The schedule's totals in a line, or why there are none."""
    plan = report.schedule
    if plan is None:
        return f"schedule: {report.control_note}"
    return (
        f"schedule: {plan.stall_cycles} stall cycles over {len(plan.blocks)} basic blocks "
        f"(static lower bound, each block once), {plan.long_waits} "
        f"wait{'' if plan.long_waits == 1 else 's'} on long-latency instructions"
    )


def pressure_line(report: KernelReport) -> str | None:
    curve = report.pressure
    if curve is None:
        return None
    where = ", ".join(f"line {n}" for n in curve.peak_lines) or "no source line"
    return f"live registers: peak {curve.peak} of {curve.allocated} allocated per thread ({where})"


def spill_lines(report: KernelReport, rows: int = 5) -> list[str]:
    """The cause of the spills and their busiest source lines."""
    found = report.spills
    if found is None:
        return []
    out = [f"spills: {found.cause}"]
    for line, stores, loads, live in found.by_line()[:rows]:
        where = f"line {line}" if line is not None else "no source line"
        most = f", up to {live} registers live" if live is not None else ""
        out.append(f"  {where}: {stores} STL / {loads} LDL{most}")
    return out


def _diff_text(d: KernelDiff) -> str:
    if d.identical:
        return "diff: identical SASS and resources"
    res = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in d.resources.items()) or "same"
    mix = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in d.mix.items()) or "same"
    return "\n".join([f"diff resources: {res}", f"diff instruction mix: {mix}", *d.sass_diff])


# ---- HTML ---------------------------------------------------------------------------------


def _hue(line: int) -> int:
    return int(line * 137.508) % 360  # golden angle: neighbouring lines get distant hues


def line_color(line: int, *, hover: bool = False) -> str:
    """The background of source line ``line``'s rows, as hex (the sanitiser of untrusted
    notebooks keeps hex colours in style attributes)."""
    import colorsys

    light, sat = (0.78, 0.85) if hover else (0.91, 0.75)
    r, g, b = colorsys.hls_to_rgb(_hue(line) / 360, light, sat)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def _line_css(root: str, lines: AbstractSet[int]) -> str:
    """Hovering a row highlights its counterparts (rows carry their plain colour inline)."""
    rules = []
    for n in sorted(lines):
        sel = f'[data-l="{n}"]'
        hover = line_color(n, hover=True)
        rules.append(f"#{root}:has({sel}:hover) {sel}{{background-color:{hover}!important}}")
    return "<style>" + "".join(rules) + "</style>"


def _row(
    number: str,
    text: str,
    *,
    line: int | None = None,
    ptx: int | None = None,
    kind: str = "instruction",
) -> str:
    attrs = f' class="k-{esc(kind)}"'
    styles = []
    if line is not None:
        attrs += f' data-l="{line}"'
        styles.append(f"background-color: {line_color(line)}")
    if ptx is not None:
        attrs += f' data-p="{ptx}"'
    if kind in KIND_COLORS:
        styles.append(f"color: {KIND_COLORS[kind]}")
    if styles:
        attrs += f' style="{"; ".join(styles)}"'
    number_style = INLINE["number"]
    return (
        f'<div{attrs}><span class="n" style="{number_style}">{esc(number)} </span>{esc(text)}</div>'
    )


def _source_pane(result: CompileResult, used: AbstractSet[int]) -> str:
    rows = [
        _row(str(n), text, line=n if n in used else None)
        for n, text in enumerate(result.source.splitlines(), start=1)
    ]
    return "".join(rows)


def _ptx_pane(kernel: KernelArtifacts) -> str:
    first = kernel.ptx_span[0]
    rows = []
    for i, text in enumerate(kernel.ptx.splitlines()):
        src = kernel.ptx_lines_source[i] if i < len(kernel.ptx_lines_source) else None
        rows.append(_row(str(first + i), text, line=src, ptx=first + i, kind=line_kind(text)))
    return "".join(rows)


def _sass_pane(kernel: KernelArtifacts) -> str:
    rows = []
    for s in kernel.sass_lines:
        if s.is_label:
            rows.append(_row("", s.text, kind="label"))
        else:
            rows.append(_row(f"{s.offset:04x}", s.text, line=s.line, ptx=s.ptx_line))
    return "".join(rows)


def _pane(title: str, body: str) -> str:
    return (
        f'<div class="pv-pane" style="{INLINE["pane"]}"><h4>{esc(title)}</h4>'
        f'<div class="pv-code" style="{INLINE["code"]}">{body}</div></div>'
    )


def _mix_html(kernel: KernelArtifacts) -> str:
    mix = list(kernel.instruction_mix.items())
    top = max((n for _, n in mix), default=1)
    rows = [[op, str(n), _bar(80 * n / top)] for op, n in mix[:MIX_ROWS]]
    hidden = len(mix) - MIX_ROWS
    more = f'<div class="note">{hidden} more families</div>' if hidden > 0 else ""
    return table(["opcode", "count", ""], rows, raw_cols=1) + more


def _bar(width: float) -> str:
    style = f"display: inline-block; height: 9px; width: {width:.0f}px; background-color: #4c78a8"
    return f'<span class="bar" style="{style}"></span>'


def _insights_html(insights: Sequence[Insight]) -> str:
    def color(level: str) -> str:
        return f' style="color: {LEVEL_COLORS[level]}"' if level in LEVEL_COLORS else ""

    items = "".join(
        f'<li class="{esc(i.level)}"{color(i.level)}><b>{esc(i.topic)}</b>: {esc(i.text)}</li>'
        for i in insights
    )
    return f'<ul class="pv-ins">{items}</ul>'


def _diff_html(d: KernelDiff) -> str:
    if d.identical:
        return '<div class="note">diff: identical SASS and resources</div>'
    res = (
        table(
            ["resource", "before", "after"],
            [[k, str(a), str(b)] for k, (a, b) in d.resources.items()],
        )
        if d.resources
        else ""
    )
    mix = table(
        ["opcode", "before", "after", "delta"],
        [[k, str(a), str(b), f"{b - a:+d}"] for k, (a, b) in d.mix.items()],
    )

    def row(t: str) -> str:
        cls = "add" if t.startswith("+") else "del" if t.startswith("-") else ""
        color = f' style="color: {DIFF_COLORS[t[0]]}"' if cls else ""
        return f'<div class="{cls}"{color}>{esc(t)}</div>'

    lines = "".join(row(t) for t in d.sass_diff)
    return (
        f"<details open><summary><b>diff</b> against the earlier result</summary>{res}{mix}"
        f'<div class="pv-code pv-diff" style="{INLINE["code"]}">{lines}</div></details>'
    )


# spaced by inline styles: a sanitised (untrusted) notebook output drops the <style> block
_GAP = 'style="margin: 0px 12px 0px 0px"'
FILTERS = (
    f'<div class="pv-filters" style="{INLINE["filters"]}">hide: '
    f'<label {_GAP}><input type="checkbox" class="f-dir" checked> directives</label>'
    f'<label {_GAP}><input type="checkbox" class="f-lab"> labels</label>'
    f'<label {_GAP}><input type="checkbox" class="f-cmt" checked> comments</label>'
    '<span class="note">hover a line to see its counterparts; click to pin</span></div>'
)


def _hide_css(root: str) -> str:
    """Rows of the kinds whose filter box is ticked are hidden."""
    return (
        f"<style>#{root}:has(.f-dir:checked) .k-directive,"
        f"#{root}:has(.f-lab:checked) .k-label,"
        f"#{root}:has(.f-cmt:checked) .k-comment,"
        f"#{root}:has(.f-cmt:checked) .k-blank{{display:none}}"
        "</style>"
    )


def _kernel_header(report: KernelReport) -> str:
    """Name, occupancy, then resources, instruction mix and insights side by side."""
    kernel = report.kernel
    resources = table(["resource", "value"], _resource_rows(report))
    return (
        f"<div><b>{esc(kernel.name)}</b> <code>{esc(kernel.mangled)}</code> "
        f"[{esc(kernel.arch)}]</div><div>occupancy: {esc(_occupancy_text(report))}</div>"
        f'<div style="{INLINE["head"]}"><div>{resources}</div>'
        f'<div>{_mix_html(kernel)}</div><div style="{INLINE["insights"]}">'
        f"{_insights_html(report.insights)}"
        "</div></div>"
    )


def _stage_pane(result: CompileResult, stage: str) -> str:
    rows = "".join(
        _row(str(n), t, kind="instruction")
        for n, t in enumerate(result.stages[stage].splitlines(), start=1)
    )
    return _pane(stage.upper(), rows)


def _panes(result: CompileResult, report: KernelReport, show: Sequence[str]) -> str:
    """The panes ``show`` asks for, in its order; a stage the result lacks is left out."""
    panes = []
    for what in show:
        if what == "source":
            source = _source_pane(result, report.mapped_lines)
            panes.append(_pane(f"Source ({result.source_name})", source))
        elif what == "ptx":
            panes.append(_pane("PTX", _ptx_pane(report.kernel)))
        elif what == "sass":
            panes.append(_pane("SASS", _sass_pane(report.kernel)))
        elif what in result.stages:
            panes.append(_stage_pane(result, what))
    return "".join(panes)


def kernel_html(result: CompileResult, report: KernelReport, opts: ViewOptions) -> str:
    root = f"perflab-pv-{uuid.uuid4().hex[:12]}"
    diff = _diff_html(report.diff) if report.diff is not None else ""
    return (
        f'<div id="{root}">{_line_css(root, report.mapped_lines)}{_hide_css(root)}'
        f"{_kernel_header(report)}{diff}{FILTERS}"
        f'<div class="pv-panes" style="{INLINE["panes"]}">{_panes(result, report, opts.show)}'
        f"</div></div>{_SCRIPT % root}"
    )


def compile_html(result: CompileResult, opts: ViewOptions | None = None) -> str:
    opts = opts or ViewOptions()
    return format_html(result, reports(result, opts), opts)


def format_html(result: CompileResult, kernels: Sequence[KernelReport], opts: ViewOptions) -> str:
    """The HTML view of ``result`` with its kernels' reports."""
    notes = "".join(
        f'<div class="note">{esc(n)}</div>'
        for n in filter(None, [options_line(result), *opts.notes])
    )
    warns = "".join(f'<div class="warn">{esc(w)}</div>' for w in result.warnings)
    body = "".join(kernel_html(result, r, opts) for r in kernels)
    if not result.kernels:
        body = '<div class="warn">no kernels in this source</div>'
    return wrap(f"{_CSS}<div><b>{esc(result.summary_line())}</b></div>{notes}{warns}{body}")


def standalone_page(body: str, title: str) -> str:
    """A complete HTML document around views from :func:`format_html` (nothing loaded
    from outside: styles and the view's small script are inline)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title></head><body>{body}</body></html>\n"
    )


def compile_bundle(result: CompileResult, opts: ViewOptions | None = None) -> dict[str, str]:
    """Text and HTML views, both formatting one analysis of the kernels."""
    opts = opts or ViewOptions()
    kernels = reports(result, opts)
    return {
        "text/plain": format_text(result, kernels, opts),
        "text/html": format_html(result, kernels, opts),
    }


@dataclass
class CompileView:
    """A CompileResult shown with options (kernel, panes, block size, diff)."""

    result: CompileResult
    options: ViewOptions = field(default_factory=ViewOptions)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return compile_bundle(self.result, self.options)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(compile_text(self.result, self.options))

    def occupancy_slider(self) -> Any:
        """A block-size slider showing this kernel's occupancy as it moves (ipywidgets)."""
        from perflab.render.occupancy_widget import occupancy_slider

        return occupancy_slider(
            self.result, self.options.kernel, dynamic_shared=self.options.dynamic_shared
        )
