"""TimingResult and Comparison as text and HTML."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from perflab.model.timing import Comparison, TimingResult, ratio_text
from perflab.model.units import format_ns
from perflab.render.html import esc, svg_image, wrap
from perflab.render.tables import optable_html, optable_text

HIST_BINS = 24


def provenance(r: TimingResult) -> str:
    vers = ", ".join(f"{k} {v}" for k, v in r.versions.items() if k in ("torch", "triton", "cupy"))
    base = f"{r.device}, {r.created}" + (f", {vers}" if vers else "")
    if r.replayed_from:
        return f"replayed from {r.replayed_from}: {base} (not measured now)"
    return base


def method_line(r: TimingResult) -> str:
    """How the samples were taken: why sampling stopped, which calls ran cold, an empty
    sample's window and the clock's tick, whether the clocks were checked (each left out
    when the result was saved before it was recorded)."""
    parts = []
    if r.stop_reason:
        rse = r.options.get("relative_standard_error")
        noise = f", relative standard error {100 * rse:.2f}%" if isinstance(rse, float) else ""
        parts.append(f"stopped: {r.stop_reason}{_cut(r)}{noise}")
    cold = r.options.get("cold")
    if cold:
        parts.append(f"cold: {cold}")
    if r.empty_window_ns is not None or r.tick_ns is not None:
        parts.append(
            f"empty window {_known_ns(r.empty_window_ns)} (samples near it are mostly the "
            f"timer's own overhead), tick {_known_ns(r.tick_ns)} per sample"
        )
    if r.throttle:
        checked = r.throttle.get("checked")
        parts.append(
            "clocks checked" if checked else f"clocks not checked: {r.throttle.get('why')}"
        )
    return "; ".join(str(p) for p in parts)


def _known_ns(ns: float | None) -> str:
    return "unknown" if ns is None else format_ns(ns)


def _cut(r: TimingResult) -> str:
    """What ``budget-cut`` cut: the ``-r`` count, by the budget."""
    repeat, budget = r.options.get("repeat"), r.options.get("budget_ms")
    if r.stop_reason != "budget-cut" or not isinstance(repeat, int):
        return ""
    spent = f"the {budget:g} ms budget" if isinstance(budget, (int, float)) else "the budget"
    return f" ({r.n:,} of -r {repeat:,} samples: {spent} ran out first)"


def timing_text(r: TimingResult) -> str:
    lines = [
        r.summary_line(),
        f"  min {format_ns(r.min_ns)}  max {format_ns(r.max_ns)}  ({r.number} call(s) per sample)",
        f"  {provenance(r)}",
    ]
    method = method_line(r)
    if method:
        lines.append(f"  {method}")
    lines += [f"  warning: {w}" for w in r.warnings]
    if r.kernels is not None:
        lines.append(optable_text(r.kernels))
    return "\n".join(lines)


def histogram_counts(samples: npt.ArrayLike, bins: int = HIST_BINS) -> npt.NDArray[np.int64]:
    """Counts of the finite samples in ``bins`` equal bins from their least to their
    greatest. Binned by offset from the least, so that close values of any size get
    bins (``np.histogram`` cannot make 24 distinct edges between 1e300 and its
    neighbours); equal samples fill the middle bin, as np.histogram puts them."""
    values = np.asarray(samples, dtype=np.float64).reshape(-1)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return np.zeros(bins, dtype=np.int64)
    with np.errstate(over="ignore"):  # an infinite span draws one bar
        offsets = values - values.min()
    span = float(offsets.max())
    if not 0 < span < np.inf:
        index = np.full(values.size, bins // 2, dtype=np.int64)
    else:
        index = np.minimum((offsets / span * bins).astype(np.int64), bins - 1)
    return np.bincount(index, minlength=bins).astype(np.int64)


def _histogram_svg(r: TimingResult) -> str:
    """A tiny SVG histogram of the samples, as an image (no JavaScript needed, and kept by
    the sanitiser of an untrusted notebook)."""
    counts = histogram_counts(r.samples_ns)
    top = max(int(counts.max()), 1)
    width, height, bar = HIST_BINS * 6, 36, 5
    rects = "".join(
        f'<rect x="{i * 6}" y="{height - 34 * c / top:.1f}" width="{bar}" '
        f'height="{34 * c / top:.1f}" fill="#4c78a8"/>'
        for i, c in enumerate(counts)
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
        f"<title>histogram of samples</title>{rects}</svg>"
    )
    return svg_image(svg, "histogram of samples")


def timing_html(r: TimingResult) -> str:
    lo, hi = r.ci95_ns
    stats = (
        f"<b>{esc(r.name)}</b>: median <b>{esc(format_ns(r.median_ns))}</b> "
        f"(95% CI {esc(format_ns(lo))} – {esc(format_ns(hi))}), "
        f"IQR {esc(format_ns(r.iqr_ns))}, min {esc(format_ns(r.min_ns))}, "
        f"n={r.n} [{esc(r.backend)}]{esc(r._ran_in())}"
    )
    warns = "".join(f'<div class="warn">⚠ {esc(w)}</div>' for w in r.warnings)
    prov = f'<div class="note">{esc(provenance(r))}</div>'
    method = method_line(r)
    if method:
        prov += f'<div class="note">{esc(method)}</div>'
    kernels = optable_html(r.kernels) if r.kernels is not None else ""
    return wrap(
        f'<div style="display:flex;gap:12px;align-items:center">{_histogram_svg(r)}'
        f"<div>{stats}{prov}</div></div>{warns}{kernels}"
    )


def timing_bundle(r: TimingResult) -> dict[str, str]:
    return {"text/plain": timing_text(r), "text/html": timing_html(r)}


def comparison_text(c: Comparison) -> str:
    """One line: the ratio with its interval and the verdict, or why there is none; then
    a line per note."""
    head = f"{c.name} vs {c.baseline_name}: "
    if not c.comparable:
        return f"{head}not comparable: {c.why}"
    subsampled = " [interval from random subsamples]" if "subsample" in c.method else ""
    line = (
        f"{head}time ratio {ratio_text(c.ratio)} (95% CI {ratio_text(c.low)}-"
        f"{ratio_text(c.high)}): {c.verdict}{subsampled}"
    )
    return "\n".join([line, *(f"  note: {n}" for n in c.notes)])


def comparison_html(c: Comparison) -> str:
    """The verdict in bold (or "not comparable" and why, with no ratio), notes below."""
    names = f"{esc(c.name)} vs {esc(c.baseline_name)}"
    if not c.comparable:
        return wrap(f'<div class="warn"><b>not comparable</b>: {names}: {esc(c.why)}</div>')
    ratio = (
        f"time ratio {esc(ratio_text(c.ratio))} (95% CI {esc(ratio_text(c.low))}"
        f"–{esc(ratio_text(c.high))})"
    )
    notes = "".join(f'<div class="warn">{esc(n)}</div>' for n in c.notes)
    return wrap(f"<div>{names}: <b>{esc(c.verdict)}</b>, {ratio}</div>{notes}")
