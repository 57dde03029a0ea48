"""Text and HTML of a job summary (:class:`perflab.analysis.job.JobSummary`), and the job's
timeline with its collectives linked across ranks. Every string from the traces (file names,
warnings) is escaped in HTML; in the timeline they are data of bokeh models."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import numpy.typing as npt

from perflab.analysis.collective_match import Collectives, match_collectives
from perflab.analysis.job import (
    CollectivesDoc,
    EngineDoc,
    JobDoc,
    JobSummary,
    KernelRow,
    job_alignment,
    stragglers,
)
from perflab.model.job import Job
from perflab.model.trace import Trace
from perflab.model.units import counted, format_ns, format_us, shorten
from perflab.render.html import esc, static_text, table, text_table, wrap

if TYPE_CHECKING:
    from perflab.render.timeline import Timeline
    from perflab.render.timeline_data import Lanes
    from perflab.render.timeline_figure import Page

RANK_HEADERS = ["rank", "busy", "idle", "span", "busy %", "kernels", "comm", "comm time", "overlap"]
STRAGGLER_HEADERS = ["rank", "last", "mean lateness", "others' wait"]


def _time(us: float | None) -> str:
    return "n/a" if us is None else format_us(us)


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def rank_rows(doc: JobDoc) -> list[list[str]]:
    rows = []
    for rank, v in doc["ranks"].items():
        c = v["comm"]
        rows.append(
            [
                rank,
                _time(v["busy_us"]),
                _time(v["idle_us"]),
                _time(v["span_us"]),
                _share(v["busy_us"], v["span_us"]),
                str(v["kernels"]),
                str(c["count"]),
                _time(c["total_us"]),
                _share(c["overlapped_us"], c["total_us"]),
            ]
        )
    return rows


def straggler_rows(doc: JobDoc) -> list[list[str]]:
    return [
        [
            str(s["rank"]),
            str(s["last_count"]),
            _time(s["mean_late_us"]),
            _time(s["wait_caused_us"]),
        ]
        for s in doc["stragglers"]
    ]


def headline(doc: JobDoc) -> list[str]:
    """The lines that say what matters: clocks, whether the ranks are one job on one clock
    (said first where not), collectives, the worst straggler."""
    c = doc["collectives"]
    lines = [f"{len(doc['ranks'])} ranks; clocks aligned on {doc['clock']['aligned_on']}"]
    if not doc["alignment"]["one_job"]:
        lines.append(not_one_job_line(doc["alignment"]["why"]))
    if "engine" in doc:
        lines.append(_engine_line(doc["engine"]))
    lines.append(collectives_line(c))
    if doc["stragglers"]:
        s = doc["stragglers"][0]
        lines.append(
            f"straggler: rank {s['rank']} arrived last in {s['last_count']} of {c['count']} "
            f"collectives; the others waited {_time(s['wait_caused_us'])} for it"
        )
    return lines


NOT_ONE_JOB = "these ranks are not one job on one clock"


def not_one_job_line(why: list[str]) -> str:
    """That the ranks are not one job on one clock, why, and what is not said of them."""
    return (
        f"{NOT_ONE_JOB} ({'; '.join(why)}), so nothing here compares their times: no "
        "arrival skew, stragglers or waits"
    )


def collectives_line(c: CollectivesDoc) -> str:
    """How many collectives were matched, how (and why so, where the kernels offered a
    better way in part only), and their arrival skew (none for ranks not on one clock)."""
    how = f" by {c['matched_by']} ({c['fallback']})" if "fallback" in c else ""
    if not c["count"]:
        return f"no collectives matched across ranks{how}"
    if c["skew_us"]["median"] is None:
        return f"{c['count']} collectives paired across ranks{how}; no arrival skew (see above)"
    return (
        f"{c['count']} collectives matched across ranks{how}; arrival skew median "
        f"{_time(c['skew_us']['median'])}, p99 {_time(c['skew_us']['p99'])}"
    )


def _engine_line(engine: EngineDoc) -> str:
    """Where the ranks were read, and how many files could not be."""
    failed = len(engine.get("failed", []))
    line = (
        f"read on a {engine['name'].capitalize()} cluster: "
        f"{counted(engine['workers'], 'worker')}, {counted(engine['tasks'], 'task')}"
    )
    return line + (
        f"; {counted(failed, 'rank file')} not read (see the warnings)" if failed else ""
    )


def summary_text(summary: JobSummary) -> str:
    doc = summary.to_dict()
    parts = [
        "\n".join(headline(doc)),
        text_table(RANK_HEADERS, rank_rows(doc)),
    ]
    if doc["stragglers"]:
        parts.append(
            "stragglers (worst first):\n" + text_table(STRAGGLER_HEADERS, straggler_rows(doc))
        )
    if doc["warnings"]:
        parts.append("\n".join(f"warning: {w}" for w in doc["warnings"]))
    return "\n\n".join(parts)


def summary_bundle(summary: JobSummary) -> dict[str, str]:
    doc = summary.to_dict()
    body = "".join(
        f'<div class="warn">{esc(line)}</div>'
        if line.startswith(NOT_ONE_JOB)
        else f"<div>{esc(line)}</div>"
        for line in headline(doc)
    )
    body += table(RANK_HEADERS, rank_rows(doc))
    if doc["stragglers"]:
        body += "<div>stragglers (worst first)</div>" + table(
            STRAGGLER_HEADERS, straggler_rows(doc)
        )
    body += "".join(f'<div class="warn">warning: {esc(w)}</div>' for w in doc["warnings"])
    return {"text/plain": summary_text(summary), "text/html": wrap(body)}


KERNEL_HEADERS = ["kernel", "rank", "calls", "total", "mean"]


def kernel_text(rows: list[KernelRow]) -> str:
    """The job's kernel rows (rank, name, calls, total_ns), as a text table."""
    cells = [
        [
            shorten(r["name"], 80),
            str(r["rank"]),
            str(r["calls"]),
            format_ns(r["total_ns"]),
            format_ns(r["total_ns"] / max(r["calls"], 1)),
        ]
        for r in rows
    ]
    return text_table(KERNEL_HEADERS, cells)


# -- the job's timeline -------------------------------------------------------------------------

LINK_PX = 6  # at most one collective link per this many pixels of the view


@dataclass
class CollectiveLinks:
    """The job's matched collectives over its timeline (a :class:`timeline.Overlay`): each
    instance links its ranks' NCCL kernel starts, the last arrival marked (red when it is the
    straggler's). The page draws, per few pixels, the most skewed instance of the visible
    range, so any zoom shows a bounded number of links."""

    merged: Trace
    job: Job
    collectives: Collectives
    straggler: int | None

    def draw(self, page: Page, lanes: Lanes, origin_ns: int) -> None:
        from bokeh.models import ColumnDataSource, CustomJS, HoverTool

        from perflab.render.timeline import tooltip_template

        inst, cells, meta = self.page_data(lanes, origin_ns)
        links = ColumnDataSource({k: [] for k in ("xs", "ys", "color", *_LINK_FIELDS)})
        late = ColumnDataSource({k: [] for k in ("x", "y", "color", *_LINK_FIELDS)})
        main = page.main
        drawn = main.multi_line(
            xs="xs", ys="ys", source=links, line_color="color", line_width=1.5, line_alpha=0.8
        )
        marks = main.scatter(
            x="x", y="y", source=late, marker="triangle", size=8, color="color", alpha=0.9
        )
        rows = [("collective", "op"), ("number", "number"), ("arrival skew", "skew"),
                ("last to arrive", "last")]  # fmt: skip
        main.add_tools(HoverTool(renderers=[drawn, marks], tooltips=tooltip_template(rows)))
        refresh = CustomJS(
            args={
                "inst": ColumnDataSource(inst),
                "cells": ColumnDataSource(cells),
                "links": links,
                "late": late,
                "xr": page.x_range,
                "main": main,
                "cmeta": meta,
            },
            code=static_text("timeline-collectives.js"),
        )
        page.x_range.js_on_change("start", refresh)
        page.x_range.js_on_change("end", refresh)
        main.js_on_change("inner_width", refresh)

    def page_data(
        self, lanes: Lanes, origin_ns: int
    ) -> tuple[dict[str, npt.NDArray[np.generic]], dict[str, npt.NDArray[np.generic]], LinkMeta]:
        """Per instance (ordered by first arrival): first start (ms since ``origin_ns``),
        last rank's column, skew (ms), op; per instance and rank: start offset from the
        first (ms, NaN where the rank takes no part) and lane (-1 there)."""
        from perflab.render.timeline import track_lanes

        c = self.collectives
        n, width = c.start.shape
        lane_of_track = track_lanes(self.merged, lanes)
        base = dict(zip(self.job.rank_numbers, _track_bases(self.job), strict=True))
        lane = np.full((n, width), -1, np.int64)
        for col, rank in enumerate(c.ranks):
            rows = c.rows[:, col] if c.rows.size else np.zeros(0, np.int64)
            took_part = rows >= 0
            trace = self.job[rank]
            tracks = trace.track[rows[took_part]].astype(np.int64) + base[rank]
            lane[took_part, col] = lane_of_track[tracks]
        first = np.nanmin(c.start, 1) if n else np.zeros(0)
        order = np.argsort(first, kind="stable")
        shift = (c.origin_ns - origin_ns) / 1e6
        off = (c.start - first[:, None]) / 1e6
        ops = sorted(set(c.op))
        op_code = {op: i for i, op in enumerate(ops)}
        inst: dict[str, npt.NDArray[np.generic]] = {
            "first": first[order] / 1e6 + shift,
            "last": c.last_rank[order].astype(np.int16),
            "skew": (c.skew_ns[order] / 1e6).astype(np.float32),
            "op": np.array([op_code[c.op[i]] for i in order.tolist()], np.int16),
        }
        cells: dict[str, npt.NDArray[np.generic]] = {
            "off": off[order].astype(np.float32).ravel(),
            # -1 where a rank takes no part, so signed: one byte while the lanes fit
            "lane": lane[order].astype(np.int8 if lane.max(initial=0) < 128 else np.int16).ravel(),
        }
        skew = inst["skew"]
        meta: LinkMeta = {
            "ranks": list(c.ranks),
            "ops": ops,
            "straggler": self.straggler,
            "max_skew": float(skew.max()) if n else 0.0,
            "px_per_link": LINK_PX,
        }
        return inst, cells, meta

    def describe(self) -> list[str]:
        c = self.collectives
        if not len(c):
            return ["collectives: none matched across ranks"]
        why = f": {c.fallback}" if c.fallback else ""
        line = (
            f"collectives: {len(c)} matched across ranks ({c.matched_by}{why}), each linked "
            "through its ranks' NCCL kernel starts; a marker where the last rank arrived"
        )
        if self.straggler is not None:
            line += f" (red: rank {self.straggler}, the straggler)"
        return [line]


class LinkMeta(TypedDict):
    """What the page's collective-link script reads besides the columns."""

    ranks: list[int]
    ops: list[str]
    straggler: int | None
    max_skew: float
    px_per_link: int


_LINK_FIELDS = ("op", "skew", "last", "number")


def _track_bases(job: Job) -> list[int]:
    """Where each rank's tracks start in :meth:`Job.merged`'s track table (rank order)."""
    sizes = [len(r.trace.tracks) for r in job]
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist() if sizes else []


def job_timeline(job: Job, **options: Any) -> Timeline:
    """The timeline of every rank (ranks as groups of lanes) with the collectives linked
    across ranks (see :class:`CollectiveLinks`); ``options`` as for
    :func:`perflab.render.timeline.timeline`."""
    from perflab.render.timeline import timeline

    why = job_alignment(job)
    if why:
        return _own_clocks_timeline(job, why, **options)
    collectives = match_collectives(job)
    worst = stragglers(collectives)
    straggler = worst[0]["rank"] if worst else None
    if "title" not in options:
        title = job.describe().split(";")[0]
        if worst:
            title += (
                f"; straggler: rank {straggler}, last in {worst[0]['last_count']} of "
                f"{len(collectives)} collectives"
            )
        options["title"] = title
    merged = job.merged()
    links = CollectiveLinks(merged, job, collectives, straggler)
    return timeline(merged, overlay=links, **options)


def _own_clocks_timeline(job: Job, why: list[str], **options: Any) -> Timeline:
    """The timeline of ranks that are not one job on one clock: each rank on its own clock,
    from its own first event (a common axis would put them days apart, or line them up on a
    guess), no collectives linked, and a message that says so above it and first in its
    text."""
    from perflab.render.timeline import timeline

    message = (
        f"{NOT_ONE_JOB} ({'; '.join(why)}): each rank is drawn on its own clock, from its "
        "own first event, and no collectives are linked"
    )
    if "title" not in options:  # the page keeps 150 characters: what matters first
        options["title"] = (
            f"{job.describe().split(';')[0]}: {NOT_ONE_JOB}; the time axis is each rank's "
            f"time since its own first event; {'; '.join(why)}"
        )
    ranks = {r.rank: replace(r, clock_offset_ns=-_first_start(r.trace)) for r in job}
    own = Job(ranks, "each rank's own first event", job.warnings, job.world_size)
    view = timeline(own.merged(), **options)
    return replace(view, text=f"{message}\n{view.text}")


def _first_start(trace: Trace) -> int:
    return int(trace.start_ns.min()) if len(trace) else 0


def save_job_timeline(job: Job, path: str | os.PathLike[str], **options: Any) -> Path:
    return job_timeline(job, **options).save(path, title="perflab timeline: job")
