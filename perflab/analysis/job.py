"""Where the time of a distributed job went: each rank's summary, and the collectives matched
across ranks with who arrived last.

Per rank (``ranks``): the single-file summary of the rank's trace
(:func:`perflab.analysis.trace_summary.summarize`, called as it is), with ``busy_us``,
``idle_us`` and ``span_us`` summed over the rank's GPUs (one GPU per rank: that GPU's
numbers), ``kernels`` its kernel count, and its ``comm`` and ``memcpy`` entries unchanged.

Collectives: the NCCL kernels of every rank matched across ranks
(:mod:`perflab.analysis.collective_match`, which says how: by sequence numbers, by order per
process group or per stream).

Per instance, on the job's clock (:meth:`perflab.model.job.Job.aligned_start_ns`): arrival
skew = last start - first start; the last rank is the one with the latest start (the lowest
rank on a tie). Per rank: ``last_count`` = instances it arrived last in; ``mean_late_us`` =
mean over the instances it took part in of (its start - the first start); ``wait_caused_us`` =
over the instances it arrived last in, the sum over the other ranks of (its start - their
start): the time the others' GPUs spent in the collective waiting for it. ``stragglers`` lists
the ranks that arrived last at least once, the largest ``wait_caused_us`` first.

Clocks: a collective ends at about the same moment on every rank, so a rank whose collective
ends are consistently off the others' (median over instances, beyond 20 us or 5% of the
median collective) gets a warning that its clock is probably off by that much.

One job (``alignment``): the ranks are taken as one job on one clock unless their traces do
not overlap in time on the job's clock, a rank's clock could only be guessed (put at the
others' first event), or their distributedInfo disagrees about the job (different world
sizes, a rank beyond the world size, a rank other than its file name's, a process group of
different sizes). Then ``alignment.one_job`` is false with a sentence per reason, and the
summary makes no claim that rests on comparing the ranks' times: the collectives are counted
but have no arrival skew, there are no stragglers and no clock-offset warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NotRequired, TypedDict

import numpy as np

from perflab.analysis.collective_match import (
    Collectives,
    CommKernels,
    match_kernels,
    trace_comm_kernels,
)
from perflab.analysis.trace_stats import kernel_table
from perflab.analysis.trace_summary import RankOrigin, TraceSummary, rank_origin, summarize
from perflab.model.display import Shown
from perflab.model.job import ALIGNED_ON, Job, rank_in_file_name
from perflab.model.trace import Trace
from perflab.model.units import format_ns, us_from_ns

if TYPE_CHECKING:
    import pandas as pd

KEYS = ("ranks", "collectives", "stragglers", "clock", "alignment", "warnings")
RANK_KEYS = ("busy_us", "idle_us", "span_us", "kernels", "comm", "memcpy")
CLOCK_TOLERANCE_NS = 20_000  # collective ends further apart than this suggest a clock offset


class CommDoc(TypedDict):
    """A rank's NCCL kernels (:class:`perflab.analysis.trace_summary.CommTotals`)."""

    count: int
    total_us: float
    overlapped_us: float


class CopyKindDoc(TypedDict):
    count: int
    total_us: float
    bytes: int
    pageable: int
    pinned: int


class CopyDoc(TypedDict):
    """A rank's copies (:class:`perflab.analysis.trace_summary.CopyTotals`)."""

    count: int
    total_us: float
    bytes: int
    by_kind: dict[str, CopyKindDoc]


class RankDoc(TypedDict):
    busy_us: float
    idle_us: float
    span_us: float
    kernels: int
    comm: CommDoc
    memcpy: CopyDoc


class SkewDoc(TypedDict):
    median: float | None
    p99: float | None


class CollectivesDoc(TypedDict):
    """The matched collectives: how many, their arrival skew, how they were matched
    (:data:`perflab.analysis.collective_match.MATCHED_BY`) and, where the kernels offered
    a better way only in part, why it was not taken (``fallback``)."""

    count: int
    skew_us: SkewDoc
    matched_by: str
    fallback: NotRequired[str]


class StragglerDoc(TypedDict):
    rank: int
    last_count: int
    mean_late_us: float
    wait_caused_us: float


class RankClockDoc(TypedDict):
    aligned_on: str
    offset_ns: int


class ClockDoc(TypedDict):
    aligned_on: str
    ranks: dict[str, RankClockDoc]


class AlignmentDoc(TypedDict):
    """Whether the ranks are one job on one clock and, where not, why (a sentence per
    reason; see the module docstring)."""

    one_job: bool
    why: list[str]


class FailedDoc(TypedDict):
    file: str
    error: str


class EngineDoc(TypedDict):
    """Where the job was summarised: ``{"name": "dask", "workers": N, "tasks": M}``, and
    the rank files that failed there."""

    name: str
    workers: int
    tasks: int
    failed: NotRequired[list[FailedDoc]]


class JobDoc(TypedDict):
    """The job summary document (``perflab trace summary DIR --json``)."""

    ranks: dict[str, RankDoc]
    collectives: CollectivesDoc
    stragglers: list[StragglerDoc]
    clock: ClockDoc
    alignment: AlignmentDoc
    warnings: list[str]
    engine: NotRequired[EngineDoc]


class KernelRow(TypedDict):
    rank: int
    name: str
    calls: int
    total_ns: int


@dataclass
class JobSummary(Shown):
    """The job summary document (``to_dict()``), the rank summaries it came from, and the
    matched collectives (``None`` when the job was summarised on a cluster: the table of
    every rank's kernel per collective stays with the worker that matched them)."""

    doc: JobDoc
    rank_summaries: dict[int, TraceSummary]
    collectives: Collectives | None

    def to_dict(self) -> JobDoc:
        return self.doc

    def to_pandas(self) -> pd.DataFrame:
        """One row per rank: busy/idle/span (us), kernels, comm count/time/overlap."""
        import pandas as pd

        rows = [
            {
                "rank": int(rank),
                **{k: v[k] for k in ("busy_us", "idle_us", "span_us", "kernels")},
                **{f"comm_{k}": v["comm"][k] for k in ("count", "total_us", "overlapped_us")},
            }
            for rank, v in self.doc["ranks"].items()
        ]
        return pd.DataFrame(rows)


@dataclass
class RankPart:
    """One rank's share of the job summary, worked out where its trace is (this process, or
    the cluster worker that read the file): its single-file summary and its NCCL kernels on
    its own clock. Small: arrays and counts, not events."""

    summary: TraceSummary
    comm: CommKernels


@dataclass(frozen=True)
class RankClock:
    """How a rank's clock was put on the job's: offset (ns) and what it rests on."""

    offset_ns: int
    aligned_on: str


@dataclass
class CollectiveFindings:
    """What the matched collectives put in a job summary: their count and skew, the
    stragglers, and the warnings of matching and of the clock check. A few numbers per
    straggler: this is all that a cluster's matching task sends back."""

    stats: CollectivesDoc
    stragglers: list[StragglerDoc]
    warnings: list[str]
    clock_warnings: list[str] = field(default_factory=list)

    def without_times(self) -> CollectiveFindings:
        """These findings less all that rests on comparing the ranks' times (skew,
        stragglers, clock offsets): what is left to say of ranks not on one clock."""
        stats = self.stats.copy()
        stats["skew_us"] = SkewDoc(median=None, p99=None)
        return CollectiveFindings(stats, [], self.warnings)


def summarize_job(job: Job) -> JobSummary:
    parts = {r.rank: summarize_rank(r.trace) for r in job}
    return merge_ranks(parts, rank_clocks(job), job.clock, job.warnings)


def rank_clocks(job: Job) -> dict[int, RankClock]:
    return {r.rank: RankClock(r.clock_offset_ns, r.aligned_on) for r in job}


def summarize_rank(trace: Trace) -> RankPart:
    """The per-rank step of :func:`summarize_job` (also what a cluster worker runs)."""
    return RankPart(summarize(trace), trace_comm_kernels(trace))


def merge_ranks(
    parts: dict[int, RankPart], clocks: dict[int, RankClock], clock: str, warnings: list[str]
) -> JobSummary:
    """The merge step of :func:`summarize_job`: collectives matched across the ranks'
    :class:`RankPart`, stragglers, the document. ``clock`` and ``warnings``: the job's."""
    parts = dict(sorted(parts.items()))
    offsets = {rank: clocks[rank].offset_ns for rank in parts}
    collectives, findings = match_ranks({rank: part.comm for rank, part in parts.items()}, offsets)
    summaries = {rank: part.summary for rank, part in parts.items()}
    return JobSummary(
        job_document(summaries, clocks, clock, warnings, findings), summaries, collectives
    )


def match_ranks(
    comm: dict[int, CommKernels], offsets: dict[int, int]
) -> tuple[Collectives, CollectiveFindings]:
    """The ranks' NCCL kernels (each on its own clock, put on the job's by ``offsets``)
    matched into collectives, and what the summary says of them."""
    collectives = match_kernels(
        {rank: kernels.shifted(offsets[rank]) for rank, kernels in sorted(comm.items())}
    )
    findings = CollectiveFindings(
        collective_stats(collectives),
        stragglers(collectives),
        list(collectives.warnings),
        clock_check(collectives),
    )
    return collectives, findings


def job_document(
    summaries: dict[int, TraceSummary],
    clocks: dict[int, RankClock],
    clock: str,
    warnings: list[str],
    findings: CollectiveFindings,
) -> JobDoc:
    """The job summary's document from its parts (the same on every path). Of ranks that
    are not one job on one clock (:func:`alignment_doubts`), it says so and why, and
    leaves out what rests on comparing their times."""
    ranks = sorted(summaries)
    why = alignment_doubts({rank: summaries[rank].origin for rank in ranks}, clocks)
    if why:
        findings = findings.without_times()
    return {
        "ranks": {str(rank): rank_entry(summaries[rank]) for rank in ranks},
        "collectives": findings.stats,
        "stragglers": findings.stragglers,
        "clock": {
            "aligned_on": clock,
            "ranks": {
                str(rank): {
                    "aligned_on": clocks[rank].aligned_on,
                    "offset_ns": clocks[rank].offset_ns,
                }
                for rank in ranks
            },
        },
        "alignment": {"one_job": not why, "why": why},
        "warnings": [*warnings, *findings.warnings, *findings.clock_warnings],
    }


def rank_entry(summary: TraceSummary) -> RankDoc:
    """A rank's line of the job summary, from its single-file summary."""
    devices = summary.devices.values()
    comm, copies = summary.comm, summary.memcpy
    return {
        "busy_us": sum(v.busy_us for v in devices),
        "idle_us": sum(v.idle_us for v in devices),
        "span_us": sum(v.span_us for v in devices),
        "kernels": summary.kernels.count,
        "comm": CommDoc(count=comm.count, total_us=comm.total_us, overlapped_us=comm.overlapped_us),
        "memcpy": CopyDoc(
            count=copies.count,
            total_us=copies.total_us,
            bytes=copies.bytes,
            by_kind={
                kind: CopyKindDoc(
                    count=k.count,
                    total_us=k.total_us,
                    bytes=k.bytes,
                    pageable=k.pageable,
                    pinned=k.pinned,
                )
                for kind, k in copies.by_kind.items()
            },
        ),
    }


# -- one job on one clock? --------------------------------------------------------------------

_GUESSED = ALIGNED_ON[2]  # a rank's clock put at the others' first event
_HOUR_NS = 3600 * 10**9
_SHOWN = 3  # examples a reason names before counting the rest


def job_alignment(job: Job) -> list[str]:
    """:func:`alignment_doubts` of a job whose traces are at hand."""
    return alignment_doubts({r.rank: rank_origin(r.trace) for r in job}, rank_clocks(job))


def alignment_doubts(
    origins: dict[int, RankOrigin | None], clocks: dict[int, RankClock]
) -> list[str]:
    """Why the ranks (the job's rank numbers -> where each trace came from) are not one job
    on one clock, a sentence per reason; empty when nothing says so."""
    known = {rank: o for rank, o in sorted(origins.items()) if o is not None}
    return [
        *_apart_in_time(known, clocks),
        *_guessed_clocks(clocks),
        *_world_sizes(known),
        *_names(known),
        *_groups(known),
    ]


def _apart_in_time(origins: dict[int, RankOrigin], clocks: dict[int, RankClock]) -> list[str]:
    """No moment that every rank's trace covers, on the job's clock."""
    spans = {
        rank: (o.span_ns[0] + clocks[rank].offset_ns, o.span_ns[1] + clocks[rank].offset_ns)
        for rank, o in origins.items()
        if o.span_ns is not None
    }
    if len(spans) < 2:
        return []
    late = max(spans, key=lambda r: spans[r][0])
    early = min(spans, key=lambda r: spans[r][1])
    gap = spans[late][0] - spans[early][1]
    if gap < 0:
        return []
    return [
        f"the traces do not overlap in time: rank {early}'s ends {_duration(gap)} before "
        f"rank {late}'s begins"
    ]


def _guessed_clocks(clocks: dict[int, RankClock]) -> list[str]:
    guessed = sorted(rank for rank, c in clocks.items() if c.aligned_on == _GUESSED)
    if not guessed:
        return []
    return [
        f"{_ranks(guessed)} no baseTimeNanoseconds and times outside the others': its "
        "clock was only guessed (its first event put at theirs)"
    ]


def _world_sizes(origins: dict[int, RankOrigin]) -> list[str]:
    sizes = sorted({o.world_size for o in origins.values() if o.world_size is not None})
    if len(sizes) > 1:
        return [f"distributedInfo gives different world sizes ({', '.join(map(str, sizes))})"]
    beyond = [rank for rank in origins if sizes and rank >= sizes[0]]
    if beyond:
        return [f"{_ranks(beyond, 'is', 'are')} outside the world size {sizes[0]}"]
    return []


def _names(origins: dict[int, RankOrigin]) -> list[str]:
    """Files whose name says another rank than their distributedInfo does."""
    odd = []
    for o in origins.values():
        named = rank_in_file_name(o.file)
        if named is not None and o.rank is not None and named != o.rank:
            odd.append(f"{o.file} says rank {o.rank}")
    if not odd:
        return []
    return [f"distributedInfo disagrees with the file names ({_some(odd)})"]


def _groups(origins: dict[int, RankOrigin]) -> list[str]:
    """Process groups that ranks give different sizes (pg_config)."""
    first: dict[str, tuple[int, int]] = {}  # group -> (the first rank naming it, its size)
    clashes = []
    for rank, o in origins.items():
        for name, size in o.group_sizes.items():
            seen_on, seen_size = first.setdefault(name, (rank, size))
            if size != seen_size:
                clashes.append(
                    f"process group {name} has {seen_size} ranks on rank {seen_on}, "
                    f"{size} on rank {rank}"
                )
    if not clashes:
        return []
    return [f"their process groups disagree ({_some(clashes)})"]


def _some(items: list[str]) -> str:
    more = f"; and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return "; ".join(items[:_SHOWN]) + more


def _ranks(ranks: list[int], one: str = "has", many: str = "have") -> str:
    """``rank 3 has`` or ``ranks 3, 5 have``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]} {one}"
    return f"ranks {', '.join(map(str, ranks))} {many}"


def _duration(ns: int) -> str:
    """A gap between traces, in days or hours when that long (7.35e+05 s reads badly)."""
    if ns >= 48 * _HOUR_NS:
        return f"{ns / (24 * _HOUR_NS):.1f} days"
    if ns >= 2 * _HOUR_NS:
        return f"{ns / _HOUR_NS:.1f} h"
    return format_ns(ns)


# -- collectives ------------------------------------------------------------------------------


def clock_check(c: Collectives) -> list[str]:
    """A collective ends at about the same moment on every rank; a rank whose collectives
    end consistently earlier or later than the others' has a clock that is off by about
    that much (skews and lateness then mean little). One warning per such rank."""
    if len(c) < 3:
        return []
    reference = np.nanmedian(c.end, 1)
    duration = float(np.nanmedian(c.end - c.start))
    limit = max(CLOCK_TOLERANCE_NS, 0.05 * duration)
    notes = []
    for col, rank in enumerate(c.ranks):
        took_part = ~np.isnan(c.end[:, col])
        if took_part.sum() < 3:
            continue
        off = float(np.median(c.end[took_part, col] - reference[took_part]))
        if abs(off) > limit:
            notes.append(
                f"rank {rank}'s collectives end {abs(off) / 1000:.1f} us "
                f"{'later' if off > 0 else 'earlier'} than the others' (median): its clock is "
                "probably off by about that much, so its arrival times are too"
            )
    return notes


def collective_stats(c: Collectives) -> CollectivesDoc:
    skew = c.skew_ns
    stats: CollectivesDoc = {
        "count": len(c),
        "skew_us": {
            "median": us_from_ns(float(np.median(skew))) if len(skew) else None,
            "p99": us_from_ns(float(np.percentile(skew, 99))) if len(skew) else None,
        },
        "matched_by": c.matched_by,
    }
    if c.fallback:
        stats["fallback"] = c.fallback
    return stats


def stragglers(c: Collectives) -> list[StragglerDoc]:
    """Ranks that arrived last at least once, the one that cost the others most first."""
    if len(c) == 0:
        return []
    start = c.start
    last = c.last_rank
    first = np.nanmin(start, 1)
    latest = start[np.arange(len(c)), last]
    waited = np.nansum(latest[:, None] - start, 1)  # the others' wait in each instance
    late = start - first[:, None]
    out: list[StragglerDoc] = []
    for col, rank in enumerate(c.ranks):
        mine = last == col
        if not mine.any():
            continue
        took_part = ~np.isnan(late[:, col])
        out.append(
            StragglerDoc(
                rank=rank,
                last_count=int(mine.sum()),
                mean_late_us=us_from_ns(float(late[took_part, col].mean())),
                wait_caused_us=us_from_ns(float(waited[mine].sum())),
            )
        )
    out.sort(key=lambda s: (-s["wait_caused_us"], -s["last_count"], s["rank"]))
    return out


def kernel_rows(job: Job) -> list[KernelRow]:
    """Every rank's kernel table (:func:`perflab.analysis.trace_stats.kernel_table`) in one,
    with a rank column; the longest total first."""
    rows: list[KernelRow] = []
    for r in job:
        table = kernel_table(r.trace)
        for name, calls, total in zip(
            table.names, table.calls.tolist(), table.total_ns.tolist(), strict=True
        ):
            rows.append({"rank": r.rank, "name": name, "calls": calls, "total_ns": total})
    rows.sort(key=lambda row: (-row["total_ns"], row["rank"], row["name"]))
    return rows
