"""Where the time of a distributed job went: each rank's summary, and the collectives matched
across ranks with who arrived last.

Per rank (``ranks``): the single-file summary of the rank's trace
(:func:`perflab.analysis.trace_summary.summarize`, called as it is), with ``busy_us``,
``idle_us`` and ``span_us`` summed over the rank's GPUs (one GPU per rank: that GPU's
numbers), ``kernels`` its kernel count, and its ``comm`` and ``memcpy`` entries unchanged.

Collectives: the NCCL kernels (the summary's definition: the name starts with "nccl") of every
rank, grouped by stream, in start order; the k-th kernel of a stream on every rank is one
collective instance. Streams are matched across ranks by stream id when every rank has the
same set of NCCL streams, else by the order of their first NCCL kernel. When ranks have
different numbers of kernels on a stream, each rank's sequence is placed in the longest one
where their kernel ends agree best (up to 64 collectives in) and only instances found on every
rank of that stream are counted (a warning says so); a collective whose kernel names
disagree across ranks ends the matching of that stream.
(Kineto traces carry no NCCL sequence numbers perflab reads today, so the order is the match.)

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import is_comm_name
from perflab.analysis.trace_stats import kernel_table
from perflab.analysis.trace_summary import TraceSummary, summarize
from perflab.model.job import Job, RankTrace
from perflab.model.trace import EventKind, TrackKind

KEYS = ("ranks", "collectives", "stragglers", "clock", "warnings")
RANK_KEYS = ("busy_us", "idle_us", "span_us", "kernels", "comm", "memcpy")
_NCCL_OP = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
CLOCK_TOLERANCE_NS = 20_000  # collective ends further apart than this suggest a clock offset
MAX_SHIFT = 64  # leading collectives one rank may lack (a later profiler start) that are tried


@dataclass
class CommStream:
    """One rank's NCCL kernels on one stream, in start order (job clock, ns)."""

    key: tuple[int, int]  # (device, stream)
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    op: list[str]


@dataclass
class Collectives:
    """Matched collective instances: ``start``/``end`` are (instances x ranks) on the job's
    clock in ns relative to ``origin_ns``, NaN where a rank takes no part; ``ranks`` are the
    rank numbers of the columns."""

    ranks: list[int]
    start: npt.NDArray[np.float64]
    end: npt.NDArray[np.float64]
    op: list[str]
    stream: list[str]
    origin_ns: int
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.op)

    @property
    def skew_ns(self) -> npt.NDArray[np.float64]:
        if len(self) == 0:
            return np.zeros(0)
        skew: npt.NDArray[np.float64] = np.nanmax(self.start, 1) - np.nanmin(self.start, 1)
        return skew

    @property
    def last_rank(self) -> npt.NDArray[np.int64]:
        """Per instance: the column of the rank that started last (lowest rank on a tie)."""
        if len(self) == 0:
            return np.zeros(0, np.int64)
        filled = np.where(np.isnan(self.start), -np.inf, self.start)
        last: npt.NDArray[np.int64] = np.argmax(filled, axis=1)
        return last


@dataclass
class JobSummary:
    """The job summary document (``to_dict()``), the rank summaries it came from, and the
    matched collectives."""

    doc: dict[str, Any]
    rank_summaries: dict[int, TraceSummary]
    collectives: Collectives

    def to_dict(self) -> dict[str, Any]:
        return self.doc

    def to_pandas(self) -> Any:
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


def summarize_job(job: Job) -> JobSummary:
    summaries = {r.rank: summarize(r.trace) for r in job}
    collectives = match_collectives(job)
    doc = {
        "ranks": {str(rank): rank_entry(s) for rank, s in summaries.items()},
        "collectives": collective_stats(collectives),
        "stragglers": stragglers(collectives),
        "clock": {
            "aligned_on": job.clock,
            "ranks": {
                str(r.rank): {"aligned_on": r.aligned_on, "offset_ns": r.clock_offset_ns}
                for r in job
            },
        },
        "warnings": [*job.warnings, *collectives.warnings, *clock_check(collectives)],
    }
    return JobSummary(doc, summaries, collectives)


def rank_entry(summary: TraceSummary) -> dict[str, Any]:
    """A rank's line of the job summary, from its single-file summary."""
    d = summary.to_dict()
    devices = d["devices"].values()
    return {
        "busy_us": sum(v["busy_us"] for v in devices),
        "idle_us": sum(v["idle_us"] for v in devices),
        "span_us": sum(v["span_us"] for v in devices),
        "kernels": d["kernels"]["count"],
        "comm": dict(d["comm"]),
        "memcpy": dict(d["memcpy"]),
    }


# -- collectives ------------------------------------------------------------------------------


def comm_streams(rank: RankTrace) -> list[CommStream]:
    """The rank's NCCL kernels per (device, stream), ordered by their first kernel."""
    trace = rank.trace
    rows = np.flatnonzero((trace.kind == EventKind.KERNEL) & _is_comm(trace.strings)[trace.name])
    tracks = trace.tracks
    on_gpu = tracks["kind"][trace.track[rows]] == TrackKind.GPU
    rows = rows[on_gpu]
    if len(rows) == 0:
        return []
    start = trace.start_ns[rows] + np.int64(rank.clock_offset_ns)
    end = start + trace.dur_ns[rows]
    track = trace.track[rows]  # a GPU track is one (device, stream)
    order = np.lexsort((rows, start, track))
    ops = np.array([_op(s) for s in trace.strings], dtype=object)
    out = []
    for t in np.unique(track).tolist():
        picked = order[track[order] == t]
        key = (int(tracks["device"][t]), int(tracks["stream"][t]))
        out.append(
            CommStream(key, start[picked], end[picked], ops[trace.name[rows[picked]]].tolist())
        )
    out.sort(key=lambda c: int(c.start[0]))
    return out


def _is_comm(strings: list[str]) -> npt.NDArray[np.bool_]:
    return is_comm_name(strings) if strings else np.zeros(0, bool)


def _op(name: str) -> str:
    """``ncclKernel_AllReduce_RING_LL_Sum_float(...)`` -> ``AllReduce``."""
    found = _NCCL_OP.match(name)
    return found.group(1) if found else name


def match_collectives(job: Job) -> Collectives:
    per_rank = {r.rank: comm_streams(r) for r in job}
    ranks = [r for r, streams in per_rank.items() if streams]
    notes: list[str] = []
    silent = [str(r) for r, streams in per_rank.items() if not streams]
    if silent and ranks:
        notes.append(f"no NCCL kernels on rank(s) {', '.join(silent)}; matched among the others")
    groups = _stream_groups({r: per_rank[r] for r in ranks}, notes)
    origin = min((int(c.start[0]) for r in ranks for c in per_rank[r]), default=0)
    starts, ends, ops, names = [], [], [], []
    for label, members in groups:
        s, e, op = _match_group(label, members, notes)
        if not len(op):
            continue
        col = np.array([ranks.index(r) for r in members])
        full_s = np.full((len(op), len(ranks)), np.nan)
        full_e = np.full((len(op), len(ranks)), np.nan)
        full_s[:, col] = (s - origin).astype(np.float64)
        full_e[:, col] = (e - origin).astype(np.float64)
        starts.append(full_s)
        ends.append(full_e)
        ops += op
        names += [label] * len(op)
    empty = np.zeros((0, len(ranks)))
    return Collectives(
        ranks,
        np.concatenate(starts) if starts else empty,
        np.concatenate(ends) if ends else empty,
        ops,
        names,
        origin,
        notes,
    )


def _stream_groups(
    per_rank: dict[int, list[CommStream]], notes: list[str]
) -> list[tuple[str, dict[int, CommStream]]]:
    """Streams that carry the same collectives on every rank: by stream id when all ranks
    have the same NCCL streams, else by order of first use."""
    if not per_rank:
        return []
    keys = {r: [c.key[1] for c in streams] for r, streams in per_rank.items()}
    same = len({tuple(sorted(k)) for k in keys.values()}) == 1 and all(
        len(set(k)) == len(k) for k in keys.values()
    )
    if same:
        ids = sorted(next(iter(keys.values())))
        return [
            (f"stream {s}", {r: next(c for c in cs if c.key[1] == s) for r, cs in per_rank.items()})
            for s in ids
        ]
    notes.append(
        "the ranks' NCCL streams differ ("
        + "; ".join(f"rank {r}: {k}" for r, k in keys.items())
        + "): streams are matched by the order of their first NCCL kernel"
    )
    most = max(len(cs) for cs in per_rank.values())
    return [
        (f"NCCL stream #{i + 1}", {r: cs[i] for r, cs in per_rank.items() if i < len(cs)})
        for i in range(most)
    ]


def _match_group(
    label: str, members: dict[int, CommStream], notes: list[str]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[str]]:
    """(instances x member ranks) starts and ends, and the op of each instance."""
    if len(members) < 2:
        only = next(iter(members))
        notes.append(f"{label}: NCCL kernels on rank {only} only; not matched")
        return np.zeros((0, 1), np.int64), np.zeros((0, 1), np.int64), []
    counts = {r: len(c.op) for r, c in members.items()}
    ref = max(counts, key=lambda r: (counts[r], -r))
    # where each rank's sequence sits in the longest one; instances all ranks have
    at = {r: _position(members[ref], c) for r, c in members.items()}
    first = max(at.values())
    n = max(0, min(at[r] + counts[r] for r in members) - first)
    if len(set(counts.values())) > 1:
        notes.append(
            f"{label}: the ranks have different numbers of NCCL kernels ("
            + ", ".join(f"rank {r}: {k}" for r, k in sorted(counts.items()))
            + f"); only the {n} found on every rank are matched (a rank that stopped early "
            "or started tracing late?)"
        )
    order = sorted(members)
    skip = {r: first - at[r] for r in order}
    start = np.stack([members[r].start[skip[r] : skip[r] + n] for r in order], 1)
    end = np.stack([members[r].end[skip[r] : skip[r] + n] for r in order], 1)
    ops = [members[r].op[skip[r] : skip[r] + n] for r in order]
    agree = [len({o[i] for o in ops}) == 1 for i in range(n)]
    if not all(agree):
        k = agree.index(False)
        which = ", ".join(f"rank {r}: {o[k]}" for r, o in zip(order, ops, strict=True))
        notes.append(
            f"{label}: collective #{k + 1} differs across ranks ({which}); "
            f"only the {k} before it are matched"
        )
        start, end, n = start[:k], end[:k], k
    return start, end, ops[0][:n]


def _position(longest: CommStream, other: CommStream) -> int:
    """Where ``other``'s collectives start within ``longest``'s: the shift at which their
    kernel ends agree best (a collective ends at about the same time on every rank)."""
    n = len(other.op)
    spare = min(len(longest.op) - n, MAX_SHIFT)
    if spare <= 0:
        return 0
    misfit = [
        float(np.median(np.abs(longest.end[k : k + n] - other.end))) for k in range(spare + 1)
    ]
    return int(np.argmin(misfit))


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


def collective_stats(c: Collectives) -> dict[str, Any]:
    skew = c.skew_ns / 1000.0
    return {
        "count": len(c),
        "skew_us": {
            "median": float(np.median(skew)) if len(skew) else None,
            "p99": float(np.percentile(skew, 99)) if len(skew) else None,
        },
    }


def stragglers(c: Collectives) -> list[dict[str, Any]]:
    """Ranks that arrived last at least once, the one that cost the others most first."""
    if len(c) == 0:
        return []
    start = c.start
    last = c.last_rank
    first = np.nanmin(start, 1)
    latest = start[np.arange(len(c)), last]
    waited = np.nansum(latest[:, None] - start, 1)  # the others' wait in each instance
    late = start - first[:, None]
    out = []
    for col, rank in enumerate(c.ranks):
        mine = last == col
        if not mine.any():
            continue
        took_part = ~np.isnan(late[:, col])
        out.append(
            {
                "rank": rank,
                "last_count": int(mine.sum()),
                "mean_late_us": float(late[took_part, col].mean()) / 1000.0,
                "wait_caused_us": float(waited[mine].sum()) / 1000.0,
            }
        )
    out.sort(key=lambda s: (-s["wait_caused_us"], -s["last_count"], s["rank"]))
    return out


def kernel_rows(job: Job) -> list[dict[str, Any]]:
    """Every rank's kernel table (:func:`perflab.analysis.trace_stats.kernel_table`) in one,
    with a rank column; the longest total first."""
    rows: list[dict[str, Any]] = []
    for r in job:
        table = kernel_table(r.trace)
        for name, calls, total in zip(
            table.names, table.calls.tolist(), table.total_ns.tolist(), strict=True
        ):
            rows.append({"rank": r.rank, "name": name, "calls": calls, "total_ns": total})
    rows.sort(key=lambda row: (-row["total_ns"], row["rank"], row["name"]))
    return rows
