"""The overview timeline of a large job (:class:`perflab.analysis.job_activity.JobActivity`):
a lane per group of ranks in two panels, GPU busy and NCCL, each bin coloured by the fraction
of it the group's GPUs spent busy (mean over the group's ranks).

It opens on the whole job at a coarse level and refines on zoom: the page holds the fractions
at several bin counts (:data:`LEVEL_STEP` apart, the finest being the activity's own) and
shows the coarsest one with at least a bin per pixel. Finer than the finest bins needs the
ranks' own events: their timeline (``perflab.load_job`` of those files, ``.timeline()``).
The static picture (untrusted notebooks, GitHub) draws the coarse level as rectangles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.analysis.job_activity import ROWS, JobActivity
from perflab.model.units import format_ns
from perflab.render.html import static_text
from perflab.render.timeline import Timeline

if TYPE_CHECKING:
    from bokeh.plotting import figure as Figure

LEVEL_STEP = 4
COARSEST_BINS = 64
STATIC_SHAPES = 2400  # under the static picture's shape budget per figure
PALETTES = {"GPU busy": "Blues", "NCCL": "Oranges"}
SHADES = 10  # the static picture's colour steps


@dataclass(frozen=True)
class ZoomLevel:
    """The fractions of one panel at ``bins`` bins: ``(groups, bins)``, covering the first
    ``covers`` of the finest level's bins."""

    bins: int
    covers: int
    values: npt.NDArray[np.float32]


def levels(fractions: npt.NDArray[np.float64]) -> list[ZoomLevel]:
    """``fractions`` (groups x bins) and its means over :data:`LEVEL_STEP` neighbours, again
    and again down to :data:`COARSEST_BINS` (bins that do not divide evenly are cut off the
    coarser levels' end: the level's last bin covers less than the span's end)."""
    out = [ZoomLevel(fractions.shape[1], fractions.shape[1], fractions.astype(np.float32))]
    current, width = fractions, 1  # width: finest bins per bin of the current level
    while current.shape[1] // LEVEL_STEP >= COARSEST_BINS:
        n = current.shape[1] // LEVEL_STEP
        current = current[:, : n * LEVEL_STEP].reshape(len(current), n, LEVEL_STEP).mean(axis=2)
        width *= LEVEL_STEP
        out.append(ZoomLevel(n, n * width, current.astype(np.float32)))
    return out


def job_overview(activity: JobActivity, *, title: str | None = None, width: int = 1100) -> Timeline:
    """The overview page of ``activity`` (see the module docstring)."""
    from bokeh.layouts import column

    if title is None:
        ranks = sum(len(g) for g in activity.groups)
        title = (
            f"Job of {ranks} ranks: GPU busy and NCCL fraction per group of "
            f"{len(activity.groups[0])} ranks (mean over each group's ranks)"
        )
    panels = [_panel(activity, row, width, title if row == 0 else None) for row in range(len(ROWS))]
    panels[1].x_range = panels[0].x_range
    return Timeline(column(*panels, sizing_mode="stretch_width"), overview_text(activity))


def _panel(activity: JobActivity, row: int, width: int, title: str | None) -> Figure:
    from bokeh.models import (
        ColumnDataSource,
        CustomJS,
        HoverTool,
        Image,
        LinearColorMapper,
        Range1d,
    )
    from bokeh.models.annotations import ColorBar
    from bokeh.models.renderers import DataRenderer
    from bokeh.palettes import all_palettes
    from bokeh.plotting import figure

    name = ROWS[row]
    n = len(activity.groups)
    span_ms = (activity.grid.t1_ns - activity.grid.t0_ns) / 1e6
    fig = figure(
        title=title,
        width=width,
        height=90 + 22 * n,
        x_range=Range1d(start=0.0, end=span_ms),
        y_range=Range1d(start=n, end=0),
        x_axis_label=f"ms since the first GPU work ({name})",
        tools="xpan,xwheel_zoom,reset,save",
        active_scroll="xwheel_zoom",
        sizing_mode="stretch_width",
    )
    fig.yaxis.ticker = [g + 0.5 for g in range(n)]
    fig.yaxis.major_label_overrides = {g + 0.5: activity.group_label(g) for g in range(n)}
    palette = list(reversed(all_palettes[PALETTES[name]][9]))
    mapper = LinearColorMapper(palette=palette, low=0.0, high=1.0)
    _static_cells(fig, activity, row, span_ms, palette)
    steps = levels(activity.fractions[:, row, :])
    images: list[DataRenderer] = [
        fig.add_glyph(
            ColumnDataSource({"image": [level.values]}),
            Image(
                image="image",
                x=0.0,
                y=0.0,
                dw=span_ms * level.covers / activity.grid.bins,
                dh=n,
                color_mapper=mapper,
            ),
            visible=False,
        )
        for level in steps
    ]
    fig.add_tools(
        HoverTool(
            renderers=images,
            tooltips=[("time", "$x{0,0.000} ms"), (name, "@image{0%}")],
        )
    )
    fig.add_layout(ColorBar(color_mapper=mapper, title=f"{name} fraction", width=10), "right")
    pick = CustomJS(
        args={
            "images": images,
            "bins": [level.bins for level in steps],
            "span": span_ms,
            "xr": fig.x_range,
            "fig": fig,
        },
        code=static_text("job-overview.js"),
    )
    fig.x_range.js_on_change("start", pick)
    fig.x_range.js_on_change("end", pick)
    fig.js_on_change("inner_width", pick)
    images[-1].visible = True  # the coarsest, until the page's width is known
    return fig


def _static_cells(
    fig: Figure, activity: JobActivity, row: int, span_ms: float, palette: list[str]
) -> None:
    """Rectangles of a coarse level, neighbours of the same shade joined: the static
    picture's drawing (the page draws the images over them)."""
    n = len(activity.groups)
    fractions = activity.fractions[:, row, :]
    chosen = min(levels(fractions), key=lambda lv: abs(lv.bins * n - STATIC_SHAPES))
    shade = np.minimum((chosen.values * SHADES).astype(np.int64), SHADES - 1)
    left, right, top, colour = [], [], [], []
    step = span_ms / chosen.bins
    for g in range(n):
        cuts = np.flatnonzero(np.diff(shade[g])) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [chosen.bins]))
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            left.append(a * step)
            right.append(b * step)
            top.append(g)
            colour.append(palette[int(shade[g, a]) * (len(palette) - 1) // (SHADES - 1)])
    fig.quad(
        left=left,
        right=right,
        top=top,
        bottom=[t + 1 for t in top],
        fill_color=colour,
        line_color=None,
    )


def overview_text(activity: JobActivity) -> str:
    """Each group's share of the span busy and in NCCL, the least busy first."""
    means = activity.means()
    span = format_ns(activity.grid.t1_ns - activity.grid.t0_ns)
    lines = [
        f"Job overview: {sum(len(g) for g in activity.groups)} ranks in "
        f"{len(activity.groups)} groups over {span}, {activity.grid.bins} bins "
        f"of {format_ns((activity.grid.t1_ns - activity.grid.t0_ns) / activity.grid.bins)}",
        f"{'group':<16}{'GPU busy':>10}{'NCCL':>8}",
    ]
    for g in np.argsort(means[:, 0], kind="stable").tolist():
        lines.append(f"{activity.group_label(g):<16}{means[g, 0]:>10.1%}{means[g, 1]:>8.1%}")
    lines += [f"warning: {w}" for w in activity.warnings]
    return "\n".join(lines)
