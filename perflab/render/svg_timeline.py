"""What a timeline's page scripts draw, read for a static SVG picture: the page fills its
visible sources in the browser, so :mod:`perflab.render.svg` reads the bars, the busy strip
and a job's collectives from the page's pre-computed levels the way those scripts do for the
whole range.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.model.trace import distinct

Floats = npt.NDArray[np.float64]


Args = dict[str, object]  # a page script's arguments: bokeh models, and its meta table
Filled = dict[int, dict[str, object]]  # columns by the id of the source they fill


def _script_args(fig: Any, names: set[str]) -> Args | None:
    """The arguments of the first script on ``fig``'s time axis that takes all of
    ``names``, if any."""
    callbacks: object = getattr(fig.x_range, "js_property_callbacks", None)
    for items in callbacks.values() if isinstance(callbacks, Mapping) else ():
        for cb in items:
            args: object = getattr(cb, "args", None)
            if isinstance(args, Mapping) and names <= set(args):
                return {str(k): v for k, v in args.items()}
    return None


def _columns(model: object) -> Mapping[str, object]:
    """The columns of a page's data source (a bokeh ColumnDataSource), or of its meta."""
    data: object = model if isinstance(model, Mapping) else getattr(model, "data", None)
    if not isinstance(data, Mapping):
        raise TypeError(f"not a data source: {type(model).__name__}")
    return data


def _number(value: object) -> float:
    if not isinstance(value, int | float):
        raise TypeError(f"not a number: {type(value).__name__}")
    return float(value)


def _texts(value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"not a list: {type(value).__name__}")
    return [str(v) for v in value]


def timeline_args(fig: Any) -> Args | None:
    """The arguments of a timeline page script (bars filled in the browser), if any."""
    return _script_args(fig, {"events", "levels", "rows", "tiles", "busy", "meta"})


def timeline_sources(args: Args) -> Filled:
    """What the page script draws for the whole range: the coarsest level's events as bars
    and its busy fractions as the strip (see ``timeline-refresh.js``), keyed by the id of
    the source the script would fill."""
    lv = {k: np.asarray(v, np.int64) for k, v in _columns(args["levels"]).items()}
    level = max((i for i, t in enumerate(lv["tiles"].tolist()) if t <= 2), default=0)
    offsets = np.asarray(_columns(args["tiles"])["offsets"])
    base, tiles = int(lv["tile_base"][level]), int(lv["tiles"][level])
    rows = np.asarray(_columns(args["rows"])["rows"])[offsets[base] : offsets[base + tiles]]
    ev = _columns(args["events"])
    meta = _columns(args["meta"])
    label_table = _columns(args["labels"])
    classes = np.asarray(label_table.get("cls", label_table["kind"]))  # the colour class
    picked = distinct(rows)
    start = np.asarray(ev["start"], np.float64)[picked]
    lane = np.asarray(ev["lane"], np.float64)[picked]
    colors = _texts(meta["colors"])
    kind = classes[np.asarray(ev["label"])[picked]]
    bars = {
        "left": start,
        "right": start + np.asarray(ev["dur"], np.float64)[picked],
        "bottom": lane + 0.38,
        "top": lane - 0.38,
        "color": [colors[k] if 0 <= k < len(colors) else "#bab0ac" for k in kind.tolist()],
    }
    bins = int(lv["bins"][level])
    nl = len(_texts(meta["lanes"]))
    cells = np.asarray(_columns(args["busy"])["cells"])
    base = int(lv["busy_base"][level])
    frac = cells[base : base + (nl + 1) * bins].astype(np.float64).reshape(nl + 1, bins) / 255
    edges = np.linspace(0, _number(meta["span"]), bins + 1)
    cover = _outlines(
        busy_outline(edges, frac[k], k + 0.4, k + 0.4 - 0.8 * np.maximum(frac[k], 0.25))
        for k in range(nl)
    )
    strip = _outlines([busy_outline(edges, frac[nl], 0.0, frac[nl])])
    return {id(args["shown"]): bars, id(args["summary"]): strip, id(args["cover"]): cover}


def _collective_args(fig: Any) -> Args | None:
    """The arguments of a job timeline's collectives script (lines filled in the browser),
    when it draws on ``fig`` (the strip shares the time axis, not the lanes)."""
    args = _script_args(fig, {"inst", "cells", "links", "late", "cmeta", "main"})
    return args if args is not None and args["main"] is fig else None


def collective_sources(fig: Any) -> Filled:
    """A job timeline's collectives as ``timeline-collectives.js`` draws them for the whole
    range: per few pixels the most skewed instance, a line through its ranks' kernel starts
    and a marker on the last arrival (red when that is the straggler)."""
    args = _collective_args(fig)
    if args is None:
        return {}
    inst, cells, meta = _columns(args["inst"]), _columns(args["cells"]), _columns(args["cmeta"])
    first = np.asarray(inst["first"], np.float64)
    names = _texts(meta["ranks"])
    ranks = len(names)
    if first.size == 0 or ranks == 0:
        return {}
    lo, hi = float(fig.x_range.start), float(fig.x_range.end)
    bins = max(1, int(float(fig.width or 600) / _number(meta["px_per_link"])))
    which = np.clip(((first - lo) / max(hi - lo, 1e-12) * bins).astype(np.int64), 0, bins - 1)
    skew = np.asarray(inst["skew"], np.float64)
    order = np.lexsort((-skew, which))  # per bin, the most skewed first
    best = order[np.r_[True, which[order][1:] != which[order][:-1]]]
    off = np.asarray(cells["off"], np.float64).reshape(-1, ranks)
    lane = np.asarray(cells["lane"], np.int64).reshape(-1, ranks)
    last_of = np.asarray(inst["last"], np.int64)
    straggler = str(meta["straggler"])
    lines: dict[str, list[object]] = {"xs": [], "ys": [], "color": []}
    marks: dict[str, list[object]] = {"x": [], "y": [], "color": []}
    for i in best.tolist():
        took = (lane[i] >= 0) & np.isfinite(off[i])
        if np.count_nonzero(took) < 2:
            continue
        by_lane = np.argsort(lane[i][took], kind="stable")
        last = int(last_of[i])
        late = names[last] == straggler
        color = "#d62728" if late else "#4a5a70"
        lines["xs"].append((first[i] + off[i][took][by_lane]).tolist())
        lines["ys"].append(lane[i][took][by_lane].tolist())
        lines["color"].append(color)
        marks["x"].append(float(first[i] + off[i][last]))
        marks["y"].append(int(lane[i][last]))
        marks["color"].append(color)
    return {id(args["links"]): {**lines}, id(args["late"]): {**marks}}


def _outlines(outlines: Iterable[tuple[list[float], list[float]]]) -> dict[str, list[list[float]]]:
    """Patches columns of the outlines that hold any point."""
    kept = [(xs, ys) for xs, ys in outlines if xs]
    return {"xs": [xs for xs, _ in kept], "ys": [ys for _, ys in kept]}


def busy_outline(
    edges: Floats, frac: Floats, baseline: float, tops: Floats
) -> tuple[list[float], list[float]]:
    """Busy time as the page draws it (``timeline-refresh.js``): one outline along
    ``baseline``, a step up to ``tops[i]`` for each bin ``i`` (``edges[i]`` to
    ``edges[i + 1]``) with any work (``frac > 0``). Empty lists when no bin has work."""
    xs: list[float] = []
    ys: list[float] = []
    end = -math.inf
    busy = np.flatnonzero(frac > 0)
    for i, top in zip(busy.tolist(), np.asarray(tops)[busy].tolist(), strict=True):
        left, right = float(edges[i]), float(edges[i + 1])
        if left > end:  # after a gap: down to the baseline, along it, up again
            if xs:
                xs.append(end)
                ys.append(baseline)
            xs.append(left)
            ys.append(baseline)
        xs += [left, right]
        ys += [top, top]
        end = right
    if xs:
        xs.append(end)
        ys.append(baseline)
    return xs, ys
