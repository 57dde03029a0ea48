"""A CompileResult as text and as HTML: resources, occupancy, instruction mix and insights
above three panes (Source | PTX | SASS) whose lines are coloured by source line.

Hovering a line highlights its counterparts in every pane with CSS alone (``:has``), so
it works in JupyterLab, in static nbconvert HTML and where scripts do not run; the view's
script (``static/ptx-view.js``) adds click-to-pin, scrolls the other panes to the
counterparts and outlines barrier links. The directive/label filters are CSS checkboxes.

The SASS pane (:mod:`perflab.render.sass_pane`) shows the scheduler's view: each
instruction's control bits in a compact column and the registers live at it, with the peak
marked. Titles (kept by the sanitiser of untrusted notebooks) say what an opcode does and
which instructions set the barriers an instruction waits on and which wait on it; a static
SVG plots the register pressure. The panes wrap onto a new row where the view is too narrow
for them side by side; the script adds a layout toggle and drag handles between panes.
Every string from the compiler or the user goes through :func:`esc`; nothing is loaded
from outside.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perflab.analysis.insights import Insight, KernelDiff
from perflab.analysis.kernel_report import KernelReport, kernel_reports
from perflab.analysis.ptx import line_kind
from perflab.errors import InputError
from perflab.model.kernel import CompileResult, KernelArtifacts
from perflab.model.units import format_bytes
from perflab.render.code_rows import INLINE, code_row, line_color, numbered_rows, pane
from perflab.render.html import esc, static_text, svg_image, table, text_table, wrap
from perflab.render.sass_pane import entry_note, sass_pane

if TYPE_CHECKING:
    from perflab.render.timeline import PrettyPrinter

PANES = ("source", "ptx", "sass")
STAGES = ("ttir", "ttgir", "llir")
MIX_ROWS = 12

PLOT_SIZE = (420, 110)  # the pressure plot, px
SPILL_ROWS = 5


def _view_style() -> str:
    return f"<style>{static_text('ptx-view.css')}</style>"


def _view_script(root: str) -> str:
    """The view's script (a package file) and its call for this view's root element."""
    return f'<script>{static_text("ptx-view.js")}\nperflabPtxView("{esc(root)}");</script>'


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
        *filter(None, [pressure_line(report), entry_note(report)]),
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
        f"schedule: {plan.stall_cycles} stall cycles over {len(plan.blocks)} basic "
        f"block{'' if len(plan.blocks) == 1 else 's'} "
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


def _line_css(root: str, lines: AbstractSet[int]) -> str:
    """Hovering a row highlights its counterparts (rows carry their plain colour inline)."""
    rules = []
    for n in sorted(lines):
        sel = f'[data-l="{n}"]'
        hover = line_color(n, hover=True)
        rules.append(f"#{root}:has({sel}:hover) {sel}{{background-color:{hover}!important}}")
    return "<style>" + "".join(rules) + "</style>"


def _source_pane(result: CompileResult, used: AbstractSet[int]) -> tuple[str, str]:
    def row(number: str, i: int, text: str) -> str:
        return code_row(number, text, line=i + 1 if i + 1 in used else None)

    return numbered_rows(result.source.splitlines(), 1, row)


def _ptx_pane(kernel: KernelArtifacts) -> tuple[str, str]:
    first = kernel.ptx_span[0]
    sources = kernel.ptx_lines_source

    def row(number: str, i: int, text: str) -> str:
        src = sources[i] if i < len(sources) else None
        return code_row(number, text, line=src, ptx=first + i, kind=line_kind(text))

    return numbered_rows(kernel.ptx.splitlines(), first, row)


def _pressure_svg(report: KernelReport) -> str:
    """The live-register curve as a static picture: the allocated registers as a dashed
    line, spills as red ticks, the peak as a dot."""
    curve = report.pressure
    if curve is None or not curve.points:
        return ""
    width, height = PLOT_SIZE
    left, top, bottom = 30, 12, 14
    plot_w, plot_h = width - left - 6, height - top - bottom
    top_value = max(curve.allocated, curve.peak, 1)
    index = {offset: i for i, (offset, _) in enumerate(curve.points)}
    span = max(len(curve.points) - 1, 1)

    def x(i: int) -> float:
        return left + plot_w * i / span

    def y(value: float) -> float:
        return top + plot_h * (1 - value / top_value)

    path = " ".join(f"{x(i):.1f},{y(n):.1f}" for i, (_, n) in enumerate(curve.points))
    peak_i = index[curve.peak_offsets[0]]
    spills = report.spills.spills if report.spills is not None else ()
    columns = sorted({round(x(index[s.offset])) for s in spills if s.offset in index})
    ticks = "".join(  # one tick per pixel column: a spilling kernel has thousands
        f'<line x1="{c}" x2="{c}" y1="{height - 4}" y2="{height - bottom + 2}" stroke="#d62728"/>'
        for c in columns
    )
    where = ", ".join(f"line {n}" for n in curve.peak_lines[:3])
    label = f"peak {curve.peak}" + (f" ({where})" if where else "")
    anchor = "end" if peak_i > span / 2 else "start"
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="Helvetica,Arial,sans-serif" font-size="10">'
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>'
        f'<line x1="{left}" x2="{width - 6}" y1="{y(curve.allocated):.1f}" '
        f'y2="{y(curve.allocated):.1f}" stroke="#999999" stroke-dasharray="4 3"/>'
        f'<text x="2" y="{y(curve.allocated) + 3:.1f}" fill="#666666">{curve.allocated}</text>'
        f'<text x="2" y="{y(0):.1f}" fill="#666666">0</text>'
        f'<polyline points="{path}" fill="none" stroke="#4c78a8" stroke-width="1.2"/>{ticks}'
        f'<circle cx="{x(peak_i):.1f}" cy="{y(curve.peak):.1f}" r="3" fill="#d62728"/>'
        f'<text x="{x(peak_i):.1f}" y="{max(y(curve.peak) - 4, 9):.1f}" text-anchor="{anchor}" '
        f'fill="#d62728">{esc(label)}</text></svg>'
    )
    alt = f"live registers per SASS instruction: {label} of {curve.allocated} allocated"
    return svg_image(svg, alt, "display: block; margin: 4px 0px")


def source_title(result: CompileResult, kernel: KernelArtifacts) -> str:
    """A Triton source pane is named by its kernel's function (its file may be a
    notebook's temporary one); a CUDA one by its file."""
    if result.lang == "triton":
        return f"Source: {kernel.name}"
    return f"Source ({result.source_name})"


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
# hidden unless the view's <style> block survives: the boxes work through that block's
# :has() rules, so an untrusted notebook (which drops it) would show boxes that do nothing
FILTERS = (
    f'<div class="pv-filters" style="{INLINE["filters"]}; display: none">hide: '
    f'<label {_GAP}><input type="checkbox" class="f-dir" checked> directives</label>'
    f'<label {_GAP}><input type="checkbox" class="f-lab"> labels</label>'
    f'<label {_GAP}><input type="checkbox" class="f-cmt" checked> comments</label>'
    '<span class="note">hover a line to see its counterparts; click to pin</span></div>'
)
SASS_LEGEND = (
    "SASS columns: address; control (stall cycles, » yield hint, W2/R2 barrier 2 set when "
    "the result is written / the sources are read, w02 barriers 0 and 2 waited on); live "
    "general registers (the peak in red). Hover an instruction for what its opcode does, "
    "its control for the full decoding and the barrier links, a column's name for how to "
    "read it."
)


def _sass_legend(report: KernelReport, show: Sequence[str]) -> str:
    if "sass" not in show:
        return ""
    note = f" ({report.control_note})" if report.control_note else ""
    return f'<div class="note" style="{INLINE["filters"]}">{esc(SASS_LEGEND + note)}</div>'


def _hide_css(root: str) -> str:
    """The filter boxes shown, and rows of the kinds whose box is ticked hidden."""
    return (
        f"<style>#{root} .pv-filters{{display:block!important}}"
        f"#{root}:has(.f-dir:checked) .k-directive,"
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
        f"</div></div>{_scheduler_html(report)}"
    )


def _scheduler_html(report: KernelReport) -> str:
    """The schedule's totals, the pressure line and plot, and the spills by line."""
    parts = [schedule_line(report), pressure_line(report)]
    lines = "".join(f"<div>{esc(t)}</div>" for t in parts if t)
    spills = spill_lines(report, SPILL_ROWS)
    listed = "".join(f"<li>{esc(t.strip())}</li>" for t in spills[1:])
    spill_html = (
        f'<div style="color: {LEVEL_COLORS["warn"]}">{esc(spills[0])}<ul>{listed}</ul></div>'
        if spills
        else ""
    )
    plot = _pressure_svg(report)
    return f'<div style="{INLINE["schedule"]}">{lines}{plot}{spill_html}</div>'


def _stage_pane(result: CompileResult, stage: str) -> str:
    def row(number: str, i: int, text: str) -> str:
        return code_row(number, text, kind="instruction")

    rows, style = numbered_rows(result.stages[stage].splitlines(), 1, row)
    return pane(stage.upper(), rows, kind=stage, code_style=style)


def _panes(result: CompileResult, report: KernelReport, show: Sequence[str]) -> str:
    """The panes ``show`` asks for, in its order; a stage the result lacks is left out."""
    panes = []
    for what in show:
        if what == "source":
            source, style = _source_pane(result, report.mapped_lines)
            title = source_title(result, report.kernel)
            where = result.source_name if result.lang == "triton" else ""
            panes.append(pane(title, source, kind="source", hint=where, code_style=style))
        elif what == "ptx":
            rows, style = _ptx_pane(report.kernel)
            panes.append(pane("PTX", rows, kind="ptx", code_style=style))
        elif what == "sass":
            rows, style, note = sass_pane(report)
            panes.append(pane("SASS", rows, kind="sass", code_style=style, foot=note))
        elif what in result.stages:
            panes.append(_stage_pane(result, what))
    return "".join(panes)


def kernel_html(result: CompileResult, report: KernelReport, opts: ViewOptions) -> str:
    root = f"perflab-pv-{uuid.uuid4().hex[:12]}"
    diff = _diff_html(report.diff) if report.diff is not None else ""
    return (
        f'<div id="{root}">{_line_css(root, report.mapped_lines)}{_hide_css(root)}'
        f"{_kernel_header(report)}{diff}{FILTERS}{_sass_legend(report, opts.show)}"
        f'<div class="pv-panes" style="{INLINE["panes"]}">{_panes(result, report, opts.show)}'
        f"</div></div>{_view_script(root)}"
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
    head = f"<div><b>{esc(result.summary_line())}</b></div>"
    return wrap(f"{_view_style()}{head}{notes}{warns}{body}")


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

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return compile_bundle(self.result, self.options)

    def _repr_pretty_(self, p: PrettyPrinter, cycle: bool) -> None:
        p.text(compile_text(self.result, self.options))

    def occupancy_slider(self) -> Any:  # an ipywidgets VBox (ipywidgets has no types)
        """A block-size slider showing this kernel's occupancy as it moves (ipywidgets)."""
        from perflab.render.occupancy_widget import occupancy_slider

        return occupancy_slider(
            self.result, self.options.kernel, dynamic_shared=self.options.dynamic_shared
        )
