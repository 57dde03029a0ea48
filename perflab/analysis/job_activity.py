"""A whole job's GPU activity as busy fractions in time bins, per group of ranks: what the
overview timeline of a job too large for its events draws (a thousand ranks of a million
events each do not fit one page, or one machine).

Per rank, where its trace was read (:func:`rank_activity`): the union of its GPU work
(kernels, copies and memsets on GPU tracks: the job summary's "busy") and the union of its
NCCL kernels, as disjoint intervals on its own clock. Per group of consecutive ranks
(:func:`group_activity`): for each of ``bins`` equal bins of the job's span (on the job's
clock), the fraction of the bin a rank's GPUs were busy, and spent in NCCL kernels, averaged
over the group's ranks. A group of one rank is that rank's own busy fraction; a mean hides
which rank of a group idled, so the page names its groups and a smaller group (or the ranks'
own timeline) answers that.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import is_comm_name
from perflab.analysis.lod import busy_before
from perflab.analysis.trace_intervals import merge
from perflab.errors import InputError
from perflab.model.job import Job
from perflab.model.trace import GPU_WORK_KINDS, EventKind, Trace
from perflab.model.trace_keys import event_device_pairs

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
ROWS = ("GPU busy", "NCCL")  # what each of a group's two rows of fractions is
MAX_BINS = 1 << 16


@dataclass(frozen=True)
class RankActivity:
    """One rank's GPU work and NCCL kernels as disjoint, sorted intervals (its own clock,
    ns): a few bytes per gap, whatever the number of events."""

    work_start: I64
    work_end: I64
    comm_start: I64
    comm_end: I64

    @property
    def span(self) -> tuple[int, int] | None:
        """First start and last end of its GPU work (own clock), None when it has none."""
        if not len(self.work_start):
            return None
        return int(self.work_start[0]), int(self.work_end[-1])


@dataclass(frozen=True)
class Grid:
    """``bins`` equal bins from ``t0_ns`` to ``t1_ns`` on the job's clock."""

    t0_ns: int
    t1_ns: int
    bins: int

    def __post_init__(self) -> None:
        if not 1 <= self.bins <= MAX_BINS or self.t1_ns <= self.t0_ns:
            raise ValueError(f"a grid needs 1..{MAX_BINS} bins over a span > 0, not {self}")

    def edges(self) -> F64:
        """The bins' edges in ns from ``t0_ns``."""
        return np.linspace(0.0, float(self.t1_ns - self.t0_ns), self.bins + 1)


def rank_activity(trace: Trace) -> RankActivity:
    """The rank's GPU work (the job summary's busy) and NCCL kernels as unions."""
    work = trace.mask(*GPU_WORK_KINDS) & (event_device_pairs(trace) >= 0)
    names = is_comm_name(trace.strings) if trace.strings else np.zeros(0, bool)
    comm = work & (trace.kind == EventKind.KERNEL) & names[trace.name]
    work_start, work_end = merge(trace.start_ns[work], trace.end_ns[work])
    comm_start, comm_end = merge(trace.start_ns[comm], trace.end_ns[comm])
    return RankActivity(work_start, work_end, comm_start, comm_end)


def job_grid(spans: list[tuple[int, int] | None], offsets: list[int], bins: int) -> Grid | None:
    """The grid over every rank's GPU work on the job's clock (``offsets`` put each rank's
    span there); None when no rank has any."""
    shifted = [(s[0] + o, s[1] + o) for s, o in zip(spans, offsets, strict=True) if s]
    if not shifted:
        return None
    t0, t1 = min(s for s, _ in shifted), max(e for _, e in shifted)
    return Grid(t0, max(t1, t0 + 1), bins)


def busy_fractions(starts: I64, ends: I64, offset_ns: int, grid: Grid) -> F64:
    """The fraction of each bin that disjoint sorted intervals (own clock, put on the job's
    by ``offset_ns``) cover."""
    if not len(starts):
        return np.zeros(grid.bins)
    # relative to the grid's start: epoch nanoseconds as float64 would round to 256 ns
    shift = np.int64(grid.t0_ns - offset_ns)  # the grid's start on the rank's own clock
    edges = grid.edges()
    covered = busy_before(
        (starts - shift).astype(np.float64), (ends - shift).astype(np.float64), edges
    )
    fraction: F64 = np.clip(np.diff(covered) / np.diff(edges), 0.0, 1.0)
    return fraction


def group_activity(activities: list[RankActivity], offsets: list[int], grid: Grid) -> F64:
    """A group's two rows (:data:`ROWS`): busy and NCCL fractions per bin, averaged over its
    ranks. Runs where the ranks' activities are (a cluster worker) and returns
    ``2 x bins`` numbers, however many ranks and events the group has."""
    rows = np.zeros((len(ROWS), grid.bins))
    for activity, offset in zip(activities, offsets, strict=True):
        rows[0] += busy_fractions(activity.work_start, activity.work_end, offset, grid)
        rows[1] += busy_fractions(activity.comm_start, activity.comm_end, offset, grid)
    result: F64 = rows / max(len(activities), 1)
    return result


def rank_groups(ranks: list[int], most: int) -> list[list[int]]:
    """``ranks`` (sorted) cut into at most ``most`` groups of consecutive ranks, of equal size
    but the last."""
    if most < 1:
        raise ValueError(f"need at least one group, not {most}")
    size = max(1, -(-len(ranks) // most))
    return [ranks[i : i + size] for i in range(0, len(ranks), size)]


@dataclass
class JobActivity:
    """A job's overview: ``fractions[g, row, bin]`` for each group of ranks ``groups[g]``
    (rows as :data:`ROWS`) over ``grid`` (the job's clock); ``warnings`` of reading and
    aligning the ranks."""

    groups: list[list[int]]
    grid: Grid
    fractions: F64
    warnings: list[str]

    def group_label(self, index: int) -> str:
        ranks = self.groups[index]
        return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks[0]}-{ranks[-1]}"

    def means(self) -> F64:
        """Per group and row: the fraction of the whole span (the mean over the bins)."""
        means: F64 = self.fractions.mean(axis=2)
        return means


def job_activity(job: Job, *, groups: int = 64, bins: int = 4096) -> JobActivity:
    """The overview of a job read here (what a Dask cluster computes for a large one)."""
    activity = {r.rank: rank_activity(r.trace) for r in job}
    offset = {r.rank: r.clock_offset_ns for r in job}
    return activity_of(activity, offset, groups, bins, list(job.warnings))


def activity_of(
    activity: dict[int, RankActivity],
    offset: dict[int, int],
    groups: int,
    bins: int,
    warnings: list[str],
) -> JobActivity:
    ranks = sorted(activity)
    grid = job_grid([activity[r].span for r in ranks], [offset[r] for r in ranks], bins)
    if grid is None:
        raise InputError("no rank has GPU work to draw")
    lanes = rank_groups(ranks, groups)
    rows = [
        group_activity([activity[r] for r in lane], [offset[r] for r in lane], grid)
        for lane in lanes
    ]
    return JobActivity(lanes, grid, np.stack(rows), warnings)
