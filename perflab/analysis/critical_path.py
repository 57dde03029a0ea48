"""What bounds each training step, and what a faster host, GPU or network would buy: each
``ProfilerStep#N``'s critical path through a dependency graph of the trace (or of every rank of
a job), and what-ifs answered by replaying that graph with changed durations.

The graph (:mod:`perflab.analysis.critical_graph`; its host side in
:mod:`~perflab.analysis.critical_host`, its GPU side in :mod:`~perflab.analysis.critical_gpu`):

- nodes: host time, lane by lane (a thread, or the threads that take turns running one
  program), cut where launches, syncs and steps begin or end; kernels, copies, memsets and
  collectives, each GPU stream a lane; a collective matched across a job's ranks is its arrival
  and its transfer on each rank, and the instance, which is ready when the last rank arrived;
- edges: program order along a host lane; stream order along a stream; a launch call to the
  work it launched (by correlation id, a ``cudaGraphLaunch`` to every kernel of its graph);
  work to the sync call or blocking copy call that waited for it; waits between streams (from
  ``cudaEventRecord``/``cudaStreamWaitEvent`` where the trace records them, otherwise inferred
  from a start that coincides with another stream's end); every rank's arrival to the
  collective instance and the instance to every rank's transfer.

The critical path of a step: from the node that ends the step (the step's host range or the GPU
work it launched, whichever ends last; over every rank of a job) back through the input that
set each node's start, to the step's start (its earliest over the ranks). Its stretches add up
to the step's duration: nodes (host own time, launch calls, kernels, copies, collectives'
transfers), launch latencies and gaps no dependency explains, each with its rank.

A what-if (:mod:`perflab.analysis.critical_whatif`) scales durations and replays the whole
graph (:mod:`perflab.analysis.critical_replay`): each node starts when its inputs are ready,
with the recorded lags, so the step times it predicts follow from the dependencies alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NotRequired, TypedDict

import numpy as np
import numpy.typing as npt

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.critical_graph import Graph, build_graph, rank_graph
from perflab.analysis.critical_replay import replay
from perflab.analysis.critical_walk import KINDS, PathColumns, path_columns, walk_paths
from perflab.analysis.critical_whatif import Change, durations, parse_change
from perflab.errors import InputError
from perflab.model.display import Shown
from perflab.model.trace import distinct

if TYPE_CHECKING:
    import pandas as pd

    from perflab.model.job import Job
    from perflab.model.trace import Trace

I64 = npt.NDArray[np.int64]

ESTIMATE = (
    "Estimated by replaying the dependency graph with the changed durations: every node "
    "starts when the last of its recorded inputs is ready, after the recorded lags (launch "
    "latency, stream gaps, waits between streams), and a collective ends when its last rank "
    "arrives plus its transfer. It ignores contention (kernels that share SMs or memory "
    "bandwidth, copies that share a link), queue limits, locks, work the trace does not show "
    "and dependencies it does not record (data the host reads, a thread's other work); "
    "untraced host time counts as host time."
)
EDGE_KIND_NAMES = {
    gpu.LAUNCH: "launch",
    gpu.SYNC_WAIT: "sync",
    gpu.STREAM_WAIT: "stream wait",
    gpu.INFERRED_WAIT: "inferred stream wait",
    gpu.PEER: "collective across ranks",
}
WHOLE = "whole recording"


class PathEntry(TypedDict):
    """A stretch of a critical path: its rank (None for a single trace), what it was, its
    kind (:data:`perflab.analysis.critical_walk.KINDS`), its start on its trace's own clock
    and its length."""

    rank: int | None
    name: str
    kind: str
    start_ns: int
    dur_ns: int


class StepPathDoc(TypedDict):
    """A step: its name, duration (earliest start to latest end over the ranks), its path
    (the stretches add up to the duration), and the path's time by kind and, in a job, by
    rank."""

    step: str
    duration_ns: int
    path: list[PathEntry]
    by_kind: dict[str, int]
    by_rank: NotRequired[dict[str, int]]


class WhatIfDoc(TypedDict):
    change: str
    mean_step_ns: float


class GraphDoc(TypedDict):
    """The size of the graph: nodes, edges by kind, and edges left out (against the order
    of :mod:`perflab.analysis.critical_graph`)."""

    nodes: int
    edges: dict[str, int]
    left_out: int


class CriticalDoc(TypedDict):
    """``perflab trace critical --json``: the steps, their mean duration (ns), the
    what-ifs, how they were estimated, the graph and the warnings."""

    steps: list[StepPathDoc]
    mean_step_ns: float
    what_if: list[WhatIfDoc]
    estimate: str
    graph: GraphDoc
    warnings: list[str]


@dataclass
class StepPath:
    """One step's critical path as columns, and its time by kind and by rank."""

    step: str
    duration_ns: int
    path: PathColumns
    by_kind: dict[str, int]
    by_rank: dict[int, int] | None = None  # a job's

    def entries(self) -> list[PathEntry]:
        p = self.path
        return [
            PathEntry(
                rank=None if r < 0 else r,
                name=p.names[n],
                kind=KINDS[k],
                start_ns=t,
                dur_ns=d,
            )
            for r, n, k, t, d in zip(
                p.rank.tolist(),
                p.name.tolist(),
                p.kind.tolist(),
                p.start.tolist(),
                p.dur.tolist(),
                strict=True,
            )
        ]

    def longest(self, n: int = 10) -> list[tuple[str, str, int | None, int]]:
        """The ``n`` names with the most time on the path: (name, kind, rank, ns)."""
        p = self.path
        keys = np.stack([p.name, p.kind.astype(np.int64), p.rank], axis=1)
        if len(keys) == 0:
            return []
        distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
        total = np.bincount(inverse.ravel(), weights=p.dur, minlength=len(distinct))
        top = np.argsort(-total, kind="stable")[:n]
        return [
            (
                p.names[int(distinct[i, 0])],
                KINDS[int(distinct[i, 1])],
                None if distinct[i, 2] < 0 else int(distinct[i, 2]),
                int(total[i]),
            )
            for i in top.tolist()
        ]

    def to_dict(self) -> StepPathDoc:
        doc = StepPathDoc(
            step=self.step, duration_ns=self.duration_ns, path=self.entries(), by_kind=self.by_kind
        )
        if self.by_rank is not None:
            doc["by_rank"] = {str(r): ns for r, ns in self.by_rank.items()}
        return doc


@dataclass
class CriticalPaths(Shown):
    """Each step's critical path and the what-ifs (``to_dict()``: :class:`CriticalDoc`)."""

    steps: list[StepPath]
    mean_step_ns: float
    what_if: list[WhatIfDoc]
    graph: GraphDoc
    warnings: list[str] = field(default_factory=list)
    job: bool = False
    estimate: str = ESTIMATE

    def to_dict(self) -> CriticalDoc:
        return CriticalDoc(
            steps=[s.to_dict() for s in self.steps],
            mean_step_ns=self.mean_step_ns,
            what_if=self.what_if,
            estimate=self.estimate,
            graph=self.graph,
            warnings=self.warnings,
        )

    def to_pandas(self) -> pd.DataFrame:
        """One row per stretch of every step's path."""
        import pandas as pd

        rows = [{"step": s.step, **e} for s in self.steps for e in s.entries()]
        return pd.DataFrame(rows)


@dataclass
class StepWindow:
    """A step over every rank that has it: its name, the nodes whose end is its start on
    each rank (a whole recording: whose start is), and the nodes that may end it."""

    name: str
    begins: I64
    ends: I64

    def span(self, start: I64, end: I64) -> tuple[int, int]:
        """Its start and end when nodes start and end at ``start``/``end``."""
        first = start[self.begins] if self.name == WHOLE else end[self.begins]
        return int(first.min()), int(end[self.ends].max())


def critical_path(
    trace: Trace, step: int | None = None, what_if: Sequence[str] = ()
) -> CriticalPaths:
    """Each ``ProfilerStep#N`` of ``trace`` (only ``step`` if given): its critical path, and
    the mean step under each change of ``what_if`` (module docstring)."""
    changes = [parse_change(text) for text in what_if]
    return analysed(build_graph([rank_graph(trace)]), step, changes)


def job_critical_path(
    job: Job, step: int | None = None, what_if: Sequence[str] = ()
) -> CriticalPaths:
    """:func:`critical_path` over every rank of ``job``, collectives tied across ranks
    (:mod:`perflab.analysis.critical_job`)."""
    from perflab.analysis.critical_job import job_graph

    changes = [parse_change(text) for text in what_if]
    g, warnings = job_graph(job)
    return analysed(g, step, changes, job=True, warnings=warnings)


def analysed(
    g: Graph,
    step: int | None,
    changes: list[Change],
    job: bool = False,
    warnings: Sequence[str] = (),
) -> CriticalPaths:
    """The critical paths and what-ifs of graph ``g`` (its steps, or only ``step``)."""
    if len(g) == 0:
        raise InputError("the trace has no host or GPU events: there is no path to follow")
    windows, notes = step_windows(g, step)
    said = [*warnings, *notes]
    if g.dropped:
        said.append(f"{g.dropped} dependencies ran backwards on the recorded clocks; left out")
    steps = step_paths(g, windows, job)
    recorded = float(np.mean([s.duration_ns for s in steps]))
    names, name_of_node = node_names(g)
    what = []
    for change in changes:
        start, end = replay(g, durations(g, change, names, name_of_node))
        spans = [w.span(start, end) for w in windows]
        what.append(
            WhatIfDoc(change=change.text, mean_step_ns=float(np.mean([b - a for a, b in spans])))
        )
    return CriticalPaths(steps, recorded, what, _graph_doc(g), said, job)


def step_windows(g: Graph, step: int | None) -> tuple[list[StepWindow], list[str]]:
    """The steps of the graph (every rank's ``ProfilerStep#N`` of one N as one step), or
    the whole recording as one step where there are none."""
    begins: dict[int, list[I64]] = {}
    ends: dict[int, list[I64]] = {}
    for p, part in enumerate(g.parts):
        base, n_host = int(g.base[p]), len(part.host)
        gpu_nodes = base + n_host + np.arange(len(part.gpu))
        by_step = np.argsort(part.gpu_step, kind="stable")
        bounds = np.searchsorted(part.gpu_step[by_step], np.arange(len(part.steps) + 1))
        for k, number in enumerate(part.steps.number.tolist()):
            if part.step_start_node[k] < 0 or part.step_end_node[k] < 0:
                continue
            begins.setdefault(number, []).append(np.array([base + part.step_start_node[k]]))
            mine = gpu_nodes[by_step[bounds[k] : bounds[k + 1]]]
            ends.setdefault(number, []).append(
                np.concatenate(([base + part.step_end_node[k]], mine))
            )
    if not begins:
        if step is not None:
            raise InputError(f"the trace has no ProfilerStep#{step} range; it has none at all")
        every = np.arange(len(g), dtype=np.int64)
        notes = ["no ProfilerStep#N ranges: the whole recording is taken as one step"]
        return [StepWindow(WHOLE, every[g.anchored], every)], notes
    numbers = sorted(begins)
    if step is not None:
        if step not in begins:
            shown = ", ".join(map(str, numbers[:20])) + (" ..." if len(numbers) > 20 else "")
            raise InputError(f"the trace has no ProfilerStep#{step} range; its steps are {shown}")
        numbers = [step]
    windows = [
        StepWindow(f"ProfilerStep#{n}", np.concatenate(begins[n]), np.concatenate(ends[n]))
        for n in numbers
    ]
    windows.sort(key=lambda w: w.span(g.start, g.end)[0])
    return windows, []


def step_paths(g: Graph, windows: list[StepWindow], job: bool) -> list[StepPath]:
    """Each step's path, walked back from the node that ends it to its start, with its
    time by kind and, in a job, by rank."""
    spans = [w.span(g.start, g.end) for w in windows]
    last = np.array([int(w.ends[np.argmax(g.end[w.ends])]) for w in windows], np.int64)
    since = np.array([a for a, _ in spans], np.int64)
    cols = path_columns(g, walk_paths(g, last, since), job)
    bounds = np.searchsorted(cols.walk, np.arange(len(windows) + 1))
    kind_time = np.zeros((len(windows), len(KINDS)), np.int64)
    np.add.at(kind_time, (cols.walk, cols.kind.astype(np.int64)), cols.dur)
    out = []
    for i, (w, (a, b)) in enumerate(zip(windows, spans, strict=True)):
        path = cols.take(np.arange(bounds[i], bounds[i + 1]))
        order = np.argsort(-kind_time[i], kind="stable")
        by_kind = {KINDS[k]: int(kind_time[i, k]) for k in order.tolist() if kind_time[i, k]}
        by_rank = None
        if job:
            ranks = distinct(path.rank)
            total = np.bincount(
                np.searchsorted(ranks, path.rank), weights=path.dur, minlength=len(ranks)
            )
            by_rank = {int(r): int(t) for r, t in zip(ranks.tolist(), total.tolist(), strict=True)}
        out.append(StepPath(w.name, b - a, path, by_kind, by_rank))
    return out


def node_names(g: Graph) -> tuple[list[str], I64]:
    """The distinct names of the graph's GPU nodes, and per node the index of its name
    (-1 for host nodes and instances)."""
    names: dict[str, int] = {}
    out = np.full(len(g), -1, np.int64)
    for p, part in enumerate(g.parts):
        ids = part.trace.name[part.gpu.row]
        present = distinct(ids)
        codes = np.array(
            [names.setdefault(part.trace.strings[i], len(names)) for i in present.tolist()],
            np.int64,
        )
        first = int(g.base[p]) + len(part.host)
        out[first : first + len(part.gpu)] = (
            codes[np.searchsorted(present, ids)] if len(codes) else codes
        )
    return list(names), out


def _graph_doc(g: Graph) -> GraphDoc:
    counts = np.bincount(g.edge_kind.astype(np.int64), minlength=len(EDGE_KIND_NAMES))
    return GraphDoc(
        nodes=len(g),
        edges={name: int(counts[k]) for k, name in EDGE_KIND_NAMES.items()},
        left_out=g.dropped,
    )
