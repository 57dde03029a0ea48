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
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict

import numpy as np
import numpy.typing as npt

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.critical_graph import Graph, build_graph, rank_graph
from perflab.analysis.critical_host import HOST, START, SYNC
from perflab.analysis.critical_names import UNTRACED, host_pieces
from perflab.analysis.critical_replay import Segment, replay, walk_back
from perflab.analysis.critical_whatif import Change, durations, parse_change
from perflab.errors import InputError
from perflab.model.display import Shown

if TYPE_CHECKING:
    import pandas as pd

    from perflab.model.job import Job
    from perflab.model.trace import Trace

I64 = npt.NDArray[np.int64]

ESTIMATE = (
    "Estimated by replaying the step's dependency graph with the changed durations: every "
    "node starts when the last of its recorded inputs is ready, after the recorded lags "
    "(launch latency, stream gaps, waits between streams), and a collective ends when its "
    "last rank arrives plus its transfer. It ignores contention (kernels that share SMs or "
    "memory bandwidth, copies that share a link), queue limits, locks, work the trace does not "
    "show and dependencies it does not record (data the host reads, a thread's other work); "
    "untraced host time counts as host time."
)
GPU_KIND_NAMES = {
    gpu.KERNEL: "kernel",
    gpu.COPY: "copy",
    gpu.COLLECTIVE: "collective",
    gpu.TRANSFER: "collective transfer",
}
EDGE_KIND_NAMES = {
    gpu.LAUNCH: "launch",
    gpu.SYNC_WAIT: "sync",
    gpu.STREAM_WAIT: "stream wait",
    gpu.INFERRED_WAIT: "inferred stream wait",
    gpu.PEER: "collective across ranks",
}
UNEXPLAINED = "unexplained"


class PathEntry(TypedDict):
    """A stretch of a critical path: its rank (None for a single trace), what it was, its
    kind, its start on its trace's own clock and its length."""

    rank: int | None
    name: str
    kind: str
    start_ns: int
    dur_ns: int


class StepPathDoc(TypedDict):
    step: str
    duration_ns: int
    path: list[PathEntry]
    by_kind: dict[str, int]
    by_rank: NotRequired[dict[str, int]]


class WhatIfDoc(TypedDict):
    change: str
    mean_step_ns: float


class GraphDoc(TypedDict):
    """The size of the graph: nodes, edges by kind, edges left out (against the order)."""

    nodes: int
    edges: dict[str, int]
    left_out: int


class CriticalDoc(TypedDict):
    """``perflab trace critical --json``."""

    steps: list[StepPathDoc]
    mean_step_ns: float
    what_if: list[WhatIfDoc]
    estimate: str
    graph: GraphDoc
    warnings: list[str]


@dataclass
class CriticalPaths(Shown):
    """Each step's critical path and the what-ifs (``to_dict()``: :class:`CriticalDoc`)."""

    doc: CriticalDoc

    def to_dict(self) -> CriticalDoc:
        return self.doc

    def to_pandas(self) -> pd.DataFrame:
        """One row per stretch of every step's path."""
        import pandas as pd

        return pd.DataFrame(
            [{"step": s["step"], **e} for s in self.doc["steps"] for e in s["path"]]
        )


@dataclass
class StepWindow:
    """A step over every rank that has it: its name, its recorded start, the nodes whose
    end is its start on each rank, and the nodes that may end it."""

    name: str
    begins: I64
    ends: I64


def critical_path(
    trace: Trace, step: int | None = None, what_if: Sequence[str] = ()
) -> CriticalPaths:
    """Each ``ProfilerStep#N`` of ``trace`` (only ``step`` if given): its critical path, and
    the mean step under each change of ``what_if`` (module docstring)."""
    changes = [parse_change(text) for text in what_if]
    g = build_graph([rank_graph(trace)])
    return _analysed(g, step, changes, job=False, warnings=[])


def job_critical_path(
    job: Job, step: int | None = None, what_if: Sequence[str] = ()
) -> CriticalPaths:
    """:func:`critical_path` over every rank of ``job``, collectives linked across ranks."""
    from perflab.analysis.critical_job import job_graph

    changes = [parse_change(text) for text in what_if]
    g, warnings = job_graph(job)
    return _analysed(g, step, changes, job=True, warnings=warnings)


def _analysed(
    g: Graph, step: int | None, changes: list[Change], job: bool, warnings: list[str]
) -> CriticalPaths:
    windows, notes = step_windows(g, step)
    warnings = [*warnings, *notes]
    if g.dropped:
        warnings.append(
            f"{g.dropped} dependencies ran backwards on the recorded clocks and were left out"
        )
    steps = [_step_doc(g, w, job) for w in windows]
    recorded = float(np.mean([s["duration_ns"] for s in steps]))
    names, name_of_node = node_names(g)
    what = []
    for change in changes:
        start, end = replay(g, durations(g, change, names, name_of_node))
        mean = float(np.mean([_span(w, start, end) for w in windows]))
        what.append(WhatIfDoc(change=change.text, mean_step_ns=mean))
    return CriticalPaths(
        CriticalDoc(
            steps=steps,
            mean_step_ns=recorded,
            what_if=what,
            estimate=ESTIMATE,
            graph=_graph_doc(g),
            warnings=warnings,
        )
    )


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
        notes = ["no ProfilerStep#N ranges: the whole recording is taken as one step"]
        if step is not None:
            raise InputError(f"the trace has no ProfilerStep#{step} range; it has none at all")
        every = np.arange(len(g), dtype=np.int64)
        return [StepWindow("whole recording", every[g.anchored], every)], notes
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
    windows.sort(key=lambda w: int(g.end[w.begins].min()))
    return windows, []


def _span(w: StepWindow, start: I64, end: I64) -> int:
    """A step's duration for nodes that start and end at ``start``/``end``: its earliest
    start over the ranks to its latest end (the whole recording: first start to last end)."""
    first = start[w.begins] if w.name == "whole recording" else end[w.begins]
    return int(end[w.ends].max()) - int(first.min())


def _step_doc(g: Graph, w: StepWindow, job: bool) -> StepPathDoc:
    since = (
        int(g.start[w.begins].min()) if w.name == "whole recording" else int(g.end[w.begins].min())
    )
    last = int(w.ends[np.argmax(g.end[w.ends])])
    segments = walk_back(g, last, since)[::-1]
    path = path_entries(g, segments, job)
    by_kind: dict[str, int] = {}
    by_rank: dict[str, int] = {}
    for e in path:
        by_kind[e["kind"]] = by_kind.get(e["kind"], 0) + e["dur_ns"]
        by_rank[str(e["rank"])] = by_rank.get(str(e["rank"]), 0) + e["dur_ns"]
    doc = StepPathDoc(
        step=w.name,
        duration_ns=int(g.end[last]) - since,
        path=path,
        by_kind=dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
    )
    if job:
        doc["by_rank"] = dict(sorted(by_rank.items(), key=lambda kv: int(kv[0])))
    return doc


def path_entries(g: Graph, segments: list[Segment], job: bool) -> list[PathEntry]:
    """The stretches of a path (earliest first) as entries: host stretches cut and named
    (:mod:`perflab.analysis.critical_names`), a lag's default share folded into the node it
    precedes, its unexplained share an entry of its own."""
    out: list[PathEntry] = []
    carry = 0  # a lag's default share, added to the node that follows it
    hosts: list[tuple[int, int, Segment]] = []  # (place in out, part, stretch)
    for seg in segments:
        if seg.via == -3:
            name = "(before the recording of its lane)"
            out.append(_entry(g, seg.node, name, UNEXPLAINED, seg.start, seg.end - seg.start, job))
            continue
        if seg.via != -1:
            total = seg.end - seg.start
            if seg.via >= 0 and g.edge_kind[seg.via] == gpu.LAUNCH:
                name = _launch_name(g, seg.node)
                out.append(_entry(g, seg.node, name, "launch", seg.start, total, job))
                continue
            extra = min(max(seg.extra, 0), max(total, 0))
            if extra:
                name = _node_name(g, seg.node)
                out.append(_entry(g, seg.node, name, UNEXPLAINED, seg.start, extra, job))
            carry = total - extra
            continue
        kind = int(g.kind[seg.node])
        begin, length = seg.start - carry, seg.end - seg.start + carry
        carry = 0
        if kind in (START, HOST, SYNC):
            hosts.append(
                (len(out), int(g.part[seg.node]), Segment(seg.node, begin, begin + length))
            )
            out.append(_entry(g, seg.node, UNTRACED, "host", begin, length, job))
        elif kind in GPU_KIND_NAMES and length:
            name = _node_name(g, seg.node)
            out.append(_entry(g, seg.node, name, GPU_KIND_NAMES[kind], begin, length, job))
    out = _named_hosts(g, out, hosts)
    return [e for e in out if e["dur_ns"] != 0]


def _entry(g: Graph, node: int, name: str, kind: str, start: int, dur: int, job: bool) -> PathEntry:
    part = g.parts[int(g.part[node])] if node >= 0 and g.part[node] >= 0 else None
    offset = part.offset if part is not None else 0
    rank = part.rank if (part is not None and job) else None
    return PathEntry(rank=rank, name=name, kind=kind, start_ns=start - offset, dur_ns=dur)


def _node_name(g: Graph, node: int) -> str:
    """A GPU node's event name (host nodes are named by their pieces, an instance by the
    collective it joins)."""
    if g.part[node] < 0:
        return "(a collective's last arrival)"
    part, local = g.local(node)
    if local < len(part.host):
        return UNTRACED
    row = int(part.gpu.row[local - len(part.host)])
    return str(part.trace.strings[part.trace.name[row]])


def _launch_name(g: Graph, node: int) -> str:
    """``cudaLaunchKernel -> kernel``: the call that launched a GPU node's work, and it."""
    part, local = g.local(node)
    at = local - len(part.host)
    work = int(np.searchsorted(part.gpu.last, at))
    call = int(part.launch_call[min(work, len(part.launch_call) - 1)])
    strings, names = part.trace.strings, part.trace.name
    called = strings[names[call]] if call >= 0 else "launch"
    return f"{called} -> {_node_name(g, node)}"


def _named_hosts(
    g: Graph, out: list[PathEntry], hosts: list[tuple[int, int, Segment]]
) -> list[PathEntry]:
    """``out`` with each host stretch replaced by its named pieces."""
    if not hosts:
        return out
    replaced: dict[int, list[PathEntry]] = {}
    for p, part in enumerate(g.parts):
        mine = [(at, seg) for at, q, seg in hosts if q == p]
        if not mine:
            continue
        local = np.array([seg.node - int(g.base[p]) for _, seg in mine], np.int64)
        a = np.array([seg.start for _, seg in mine], np.int64) - part.offset
        b = np.array([seg.end for _, seg in mine], np.int64) - part.offset
        pieces = host_pieces(part.trace, part.host.lane_of_track, part.host.lane[local], a, b)
        calls = set(part.launch_call[part.launch_call >= 0].tolist())
        rank = out[mine[0][0]]["rank"]
        strings, names = part.trace.strings, part.trace.name
        for i, row, s, e in zip(
            pieces.stretch.tolist(),
            pieces.row.tolist(),
            pieces.start.tolist(),
            pieces.end.tolist(),
            strict=True,
        ):
            name = strings[names[row]] if row >= 0 else UNTRACED
            kind = "launch" if row in calls else "host"
            replaced.setdefault(mine[i][0], []).append(
                PathEntry(rank=rank, name=name, kind=kind, start_ns=s, dur_ns=e - s)
            )
    return [piece for k, e in enumerate(out) for piece in replaced.get(k, [e])]


def node_names(g: Graph) -> tuple[list[str], I64]:
    """The distinct names of the graph's GPU nodes, and per node the index of its name
    (-1 for host nodes and instances)."""
    names: dict[str, int] = {}
    out = np.full(len(g), -1, np.int64)
    for p, part in enumerate(g.parts):
        ids = part.trace.name[part.gpu.row]
        distinct_ids, inverse = np.unique(ids, return_inverse=True)
        codes = np.array(
            [names.setdefault(part.trace.strings[i], len(names)) for i in distinct_ids.tolist()],
            np.int64,
        )
        first = int(g.base[p]) + len(part.host)
        out[first : first + len(part.gpu)] = codes[inverse] if len(codes) else codes
    return list(names), out


def _graph_doc(g: Graph) -> GraphDoc:
    counts = np.bincount(g.edge_kind.astype(np.int64), minlength=len(EDGE_KIND_NAMES))
    return GraphDoc(
        nodes=len(g),
        edges={name: int(counts[k]) for k, name in EDGE_KIND_NAMES.items()},
        left_out=g.dropped,
    )
