"""Goodput analyses over a :class:`Trace`: idle gaps and their causes (as tables; the
analysis itself is :mod:`perflab.analysis.idle_causes`), per-stream utilisation, launch
statistics, kernel tables, MFU and achieved bandwidth. Pure and vectorised.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, SupportsFloat, TypedDict

import numpy as np
import numpy.typing as npt

from perflab.analysis.host_stacks import HOST_KINDS
from perflab.analysis.idle_classify import CAUSES
from perflab.analysis.idle_evidence import thread_name
from perflab.analysis.trace_intervals import union_length
from perflab.model.display import Shown
from perflab.model.optable import OpTable
from perflab.model.trace import GPU_WORK_KINDS, EventKind, Trace, TrackKind, distinct
from perflab.model.trace_keys import device_pairs, launch_links
from perflab.model.units import format_ns, us_from_ns

if TYPE_CHECKING:
    import pandas as pd

# the causes of idle gaps (perflab.analysis.idle_causes has their rules)
GAP_CAUSES = CAUSES
# a Frame's column: numbers or texts, as a list or a numpy array
Column = Sequence[SupportsFloat | str] | npt.NDArray[np.generic]


# What a Frame column holds, for its text/HTML views (its data stay plain numbers)
SINCE_START = "since start"  # an absolute timestamp (ns), shown as time since the trace start
NS, US, SHARE = "ns", "us", "share"  # a duration in ns or us; a fraction


@dataclass
class Frame(Shown):
    """A small columnar result (dict of equal-length lists/arrays) with ``to_pandas()``.

    ``units`` says which columns are times (:data:`SINCE_START`, :data:`NS`, :data:`US`) or
    fractions (:data:`SHARE`): the text and HTML views show them as the trace summary does;
    ``origin_ns`` is the trace start that :data:`SINCE_START` counts from."""

    columns: Mapping[str, Column]
    units: dict[str, str] = field(default_factory=dict)
    origin_ns: int = 0
    title: str = ""

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def to_dict(self) -> dict[str, list[object]]:
        return {k: np.asarray(v).tolist() for k, v in self.columns.items()}

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.columns)

    def take(self, rows: npt.ArrayLike) -> Frame:
        """The rows at ``rows`` (indices), in that order."""
        idx = np.asarray(rows, dtype=np.int64)
        cols = {k: [v[i] for i in idx.tolist()] for k, v in self.columns.items()}
        return Frame(cols, self.units, self.origin_ns, self.title)

    def sorted_by(self, column: str, descending: bool = True) -> Frame:
        order = np.argsort(np.asarray(self.columns[column]), kind="stable")
        return self.take(order[::-1] if descending else order)

    def head(self, n: int = 10) -> Frame:
        return self.take(np.arange(min(n, len(self))))


def launch_start(trace: Trace) -> npt.NDArray[np.int64]:
    """Per event: start of the runtime call that launched it (same rank and correlation),
    or -1. Runtime calls themselves and CPU events get -1."""
    links = launch_links(trace)
    return np.where(links >= 0, trace.start_ns[links], -1)


class LaunchDelays(TypedDict):
    """Percentiles and mean of the launch-to-start delay, in us."""

    p50: float
    p90: float
    p99: float
    mean: float


class LaunchStats(TypedDict):
    """What :func:`launch_stats` counts."""

    kernels: int
    linked: int
    delay_us: LaunchDelays
    shorter_than_launch: int
    launch_total_us: float


def launch_stats(trace: Trace) -> LaunchStats:
    """Launch-to-start delay of kernels (kernel start - start of its launch call) and how many
    kernels run for less time than their launch call took."""
    is_kernel = trace.kind == EventKind.KERNEL
    links = launch_links(trace)
    rows = np.flatnonzero(is_kernel & (links >= 0))
    call = links[rows]  # the runtime call that launched each linked kernel
    delay = trace.start_ns[rows] - trace.start_ns[call]
    launch_dur = np.asarray(trace.dur_ns[call], dtype=np.int64)
    shorter = int((trace.dur_ns[rows] < launch_dur).sum())
    pct = np.percentile(delay, [50, 90, 99]) if len(delay) else np.full(3, np.nan)
    return {
        "kernels": int(is_kernel.sum()),
        "linked": len(rows),
        "delay_us": {
            "p50": us_from_ns(float(pct[0])),
            "p90": us_from_ns(float(pct[1])),
            "p99": us_from_ns(float(pct[2])),
            "mean": us_from_ns(float(delay.mean())) if len(delay) else float("nan"),
        },
        "shorter_than_launch": shorter,
        "launch_total_us": us_from_ns(float(launch_dur.sum())),
    }


def stream_utilisation(trace: Trace) -> Frame:
    """Per GPU track: busy time of the stream (union of its kernels, copies and memsets) and
    that as a share of its device's span."""
    work = trace.mask(*GPU_WORK_KINDS)
    tracks = trace.tracks
    start, end = trace.start_ns, trace.end_ns
    _, dev_of_track = device_pairs(trace)
    cols: dict[str, list[SupportsFloat | str]] = {
        k: [] for k in ("track", "label", "busy_us", "share")
    }
    for t in np.flatnonzero(tracks["kind"] == TrackKind.GPU).tolist():
        on = work & (trace.track == t)
        if not on.any():
            continue
        same_dev = np.isin(trace.track, np.flatnonzero(dev_of_track == dev_of_track[t])) & work
        span = int(end[same_dev].max() - start[same_dev].min())
        busy = union_length(start[on], end[on])
        cols["track"].append(t)
        cols["label"].append(trace.track_label(t))
        cols["busy_us"].append(busy / 1e3)
        cols["share"].append(busy / span if span else 0.0)
    units = {"busy_us": US, "share": SHARE}
    return Frame(cols, units, title="GPU streams: busy time and share of their device's span")


def idle_gaps(trace: Trace, min_ns: int = 0) -> Frame:
    """Every gap in a device's busy time (longer than ``min_ns``) with its cause, the work
    before and after it, and the first piece of evidence (``why``): a table view of
    :func:`perflab.analysis.idle_causes.idle_causes`, which has the rules and all the
    evidence."""
    from perflab.analysis.idle_causes import idle_causes

    found = idle_causes(trace, min_ns)
    g = found.gaps
    names = found.trace.strings
    cols: dict[str, Column] = {
        "device": [found.device_labels[d] for d in g.device.tolist()],
        "start_ns": g.start.tolist(),
        "dur_ns": (g.end - g.start).tolist(),
        "cause": [GAP_CAUSES[c] for c in g.cause.tolist()],
        "before": [names[n] for n in trace.name[g.prev].tolist()],
        "after": [names[n] for n in trace.name[g.next].tolist()],
        "why": [found.evidence(i)[0].text for i in range(len(found))],
    }
    origin = int(trace.start_ns.min()) if len(trace) else 0
    longer = f" longer than {format_ns(min_ns)}" if min_ns else ""
    title = f"idle gaps{longer} in GPU busy time, with their causes (heuristics: see idle_causes)"
    return Frame(cols, {"start_ns": SINCE_START, "dur_ns": NS}, origin, title)


class IdleBreakdown(Shown, dict[str, float]):
    """Idle microseconds per cause (a plain dict, as ever: JSON-able) whose text and HTML
    views show times with units; ``gaps`` counts the gaps per cause."""

    def __init__(self, idle_us: dict[str, float], gaps: dict[str, int]):
        super().__init__(idle_us)
        self.gaps = gaps

    def to_dict(self) -> dict[str, float]:
        return dict(self)


def idle_breakdown(trace: Trace, min_ns: int = 0) -> IdleBreakdown:
    """Total idle microseconds per cause, and the number of gaps, every cause of
    :data:`GAP_CAUSES` listed (see :func:`perflab.analysis.idle_causes.idle_causes`)."""
    from perflab.analysis.idle_causes import idle_causes

    by_cause = idle_causes(trace, min_ns).by_cause()
    return IdleBreakdown(
        {cause: total.idle_us for cause, total in by_cause.items()},
        {cause: total.gaps for cause, total in by_cause.items()},
    )


def kernel_table(trace: Trace) -> OpTable:
    """Kernels by name (calls, total time), longest first; with no kernels in the trace,
    CPU ops by self time instead (kind ``"cpu_op"``)."""
    is_kernel = trace.kind == EventKind.KERNEL
    if is_kernel.any():
        return _by_name(trace, np.flatnonzero(is_kernel), trace.dur_ns, "kernel")
    rows = np.flatnonzero(trace.kind == EventKind.CPU_OP)
    return _by_name(trace, rows, cpu_self_time(trace), "cpu_op")


def _by_name(
    trace: Trace, rows: npt.NDArray[np.integer], dur: npt.NDArray[np.int64], kind: str
) -> OpTable:
    ids = trace.name[rows]
    calls = np.bincount(ids, minlength=len(trace.strings))
    total = np.bincount(ids, weights=dur[rows], minlength=len(trace.strings))
    present = np.flatnonzero(calls)
    return OpTable.from_rows(
        ((trace.strings[i], int(calls[i]), round(float(total[i]))) for i in present.tolist()),
        kind=kind,
    )


def cpu_self_time(trace: Trace) -> npt.NDArray[np.int64]:
    """Per event: for CPU ops, duration minus that of direct child CPU ops on the same
    thread (nesting by time); other events keep their duration."""
    self_ns = trace.dur_ns.copy()
    ops = np.flatnonzero(trace.kind == EventKind.CPU_OP)
    # sort by thread, then start, longer first so a parent precedes the children it encloses
    order = ops[np.lexsort((-trace.dur_ns[ops], trace.start_ns[ops], trace.track[ops]))]
    stack: list[tuple[int, int, int]] = []  # (track, end, event)
    for i, t, s, e in zip(
        order.tolist(),
        trace.track[order].tolist(),
        trace.start_ns[order].tolist(),
        trace.end_ns[order].tolist(),
        strict=True,
    ):
        while stack and (stack[-1][0] != t or stack[-1][1] <= s):
            stack.pop()
        if stack:
            self_ns[stack[-1][2]] -= e - s
        stack.append((t, e, i))
    return np.maximum(self_ns, 0)


def mfu(flops: float, seconds: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s over the device's peak FLOP/s."""
    if seconds <= 0 or peak_flops <= 0:
        raise ValueError("seconds and peak_flops must be positive")
    return flops / seconds / peak_flops


def achieved_bandwidth(
    nbytes: float, seconds: float, peak_bytes_per_s: float | None = None
) -> dict[str, float]:
    """Bytes per second, and the fraction of ``peak_bytes_per_s`` when given."""
    if seconds <= 0:
        raise ValueError("seconds must be positive")
    bw = nbytes / seconds
    out = {"bytes_per_s": bw}
    if peak_bytes_per_s:
        out["fraction_of_peak"] = bw / peak_bytes_per_s
    return out


def trace_mfu(trace: Trace, peak_flops: float) -> dict[str, float]:
    """MFU from the FLOPs torch.profiler recorded on ops (``with_flops=True``) over the
    GPU span of the trace (first start to last end of GPU work)."""
    flops = trace.ops["flops"]
    total = float(np.nansum(flops)) if len(flops) else 0.0
    work = trace.mask(*GPU_WORK_KINDS)
    if not work.any() or total == 0.0:
        return {"flops": total, "seconds": 0.0, "mfu": float("nan")}
    seconds = float(trace.end_ns[work].max() - trace.start_ns[work].min()) / 1e9
    return {"flops": total, "seconds": seconds, "mfu": mfu(total, seconds, peak_flops)}


# -- what the host did: the summary of a trace without GPU work ---------------------------------

NO_GPU_WORK = "this trace has no GPU work (no kernels, copies or memsets)"
TOP_OPS = 15  # CPU ops a summary lists (by self time)
TOP_RANGES = 10  # user ranges a summary lists (by total time)
STEP_RANGES = "ProfilerStep#*"  # torch.profiler's step ranges, counted as one name
_STEP_NAME = re.compile(r"ProfilerStep#\d+")


@dataclass(frozen=True)
class OpTime:
    """A CPU op by name: its calls, self time (each call's duration less its direct child
    ops' on the same thread, summed) and total time (the calls' durations summed: an op that
    calls itself counts both, as torch.profiler's tables do)."""

    name: str
    calls: int
    self_us: float
    total_us: float


@dataclass(frozen=True)
class HostOps:
    """Every CPU op call (``count``, of ``distinct`` names, ``self_us`` their self time in
    all) and the ``top`` names by self time."""

    count: int
    distinct: int
    self_us: float
    top: list[OpTime]


@dataclass(frozen=True)
class ThreadTime:
    """A host thread (named as the timeline names it): its CPU ops, the time inside them
    (the union of their intervals) and its span (first start to last end of its host
    events: ops, ranges, runtime calls, Python functions)."""

    thread: str
    ops: int
    in_ops_us: float
    span_us: float


@dataclass(frozen=True)
class RangeTime:
    """A user range by name (``record_function``, ``perflab.range``, NVTX): how many there
    are and their durations summed. torch.profiler's ``ProfilerStep#N`` ranges count as one
    name, :data:`STEP_RANGES`."""

    name: str
    count: int
    total_us: float


@dataclass(frozen=True)
class HostRanges:
    """Every user range on a host thread (``count``, of ``distinct`` names) and the ``top``
    names by total time."""

    count: int
    distinct: int
    top: list[RangeTime]


@dataclass(frozen=True)
class HostActivity:
    """What a trace without GPU work shows instead: a note that says so (:data:`NO_GPU_WORK`),
    its CPU ops by self time, its threads and its user ranges."""

    note: str
    ops: HostOps
    threads: list[ThreadTime]
    ranges: HostRanges


def host_activity(
    trace: Trace, top_ops: int = TOP_OPS, top_ranges: int = TOP_RANGES
) -> HostActivity:
    """The CPU ops (self time as :func:`cpu_self_time`), threads and user ranges of
    ``trace``: the summary of a trace that has no GPU work."""
    ops = np.flatnonzero(trace.kind == EventKind.CPU_OP)
    self_ns = cpu_self_time(trace)[ops]
    return HostActivity(
        NO_GPU_WORK,
        _host_ops(trace, ops, self_ns, top_ops),
        _threads(trace, ops),
        _host_ranges(trace, top_ranges),
    )


def _host_ops(
    trace: Trace, ops: npt.NDArray[np.int64], self_ns: npt.NDArray[np.int64], top: int
) -> HostOps:
    ids = trace.name[ops]
    size = len(trace.strings)
    calls = np.bincount(ids, minlength=size)
    own = np.bincount(ids, weights=self_ns, minlength=size)
    total = np.bincount(ids, weights=trace.dur_ns[ops], minlength=size)
    present = np.flatnonzero(calls)
    rows = sorted(
        (
            OpTime(
                trace.strings[i],
                int(calls[i]),
                us_from_ns(float(own[i])),
                us_from_ns(float(total[i])),
            )
            for i in present.tolist()
        ),
        key=lambda op: (-op.self_us, op.name),
    )
    return HostOps(len(ops), len(present), us_from_ns(float(self_ns.sum())), rows[:top])


def _threads(trace: Trace, ops: npt.NDArray[np.int64]) -> list[ThreadTime]:
    """Every CPU track with host events, the one with the most time in ops first."""
    on_cpu = trace.tracks["kind"][trace.track] == TrackKind.CPU
    host = np.flatnonzero(trace.mask(*HOST_KINDS) & on_cpu)
    start, end = trace.start_ns, trace.end_ns
    out = []
    for t in distinct(trace.track[host]).tolist():
        mine = host[trace.track[host] == t]
        its_ops = ops[trace.track[ops] == t]
        span = int(end[mine].max()) - int(start[mine].min())
        in_ops = union_length(start[its_ops], end[its_ops])
        out.append(
            ThreadTime(thread_name(trace, t), len(its_ops), us_from_ns(in_ops), us_from_ns(span))
        )
    out.sort(key=lambda th: (-th.in_ops_us, -th.span_us, th.thread))
    return out


def _host_ranges(trace: Trace, top: int) -> HostRanges:
    on_cpu = trace.tracks["kind"][trace.track] == TrackKind.CPU
    rows = np.flatnonzero((trace.kind == EventKind.ANNOTATION) & on_cpu)
    ids = trace.name[rows]
    counts = np.bincount(ids, minlength=len(trace.strings))
    totals = np.bincount(ids, weights=trace.dur_ns[rows], minlength=len(trace.strings))
    count: dict[str, int] = {}
    total_ns: dict[str, float] = {}
    for i in np.flatnonzero(counts).tolist():  # each distinct name once
        name = trace.strings[i]
        name = STEP_RANGES if _STEP_NAME.fullmatch(name) else name
        count[name] = count.get(name, 0) + int(counts[i])
        total_ns[name] = total_ns.get(name, 0.0) + float(totals[i])
    ranked = sorted(count, key=lambda name: (-total_ns[name], name))
    shown = [RangeTime(name, count[name], us_from_ns(total_ns[name])) for name in ranked[:top]]
    return HostRanges(len(rows), len(count), shown)
