"""Collectives matched across the ranks of a distributed job: which NCCL kernel of each rank
is the same collective instance.

Collectives: the NCCL kernels (the summary's definition: the name starts with "nccl") of every
rank, matched across ranks in the first way the traces allow (``collectives.matched_by``):

- ``"sequence numbers"``: every NCCL kernel carries its process group and ``Seq`` number
  (recent PyTorch copies them from ``record_param_comms`` into the kernel's args; see
  ``collective_args`` in :mod:`perflab.model.trace`): the kernels with the same (group, Seq)
  are one instance. A (group, Seq) some member ranks of the group lack is left out (a warning
  says how many); a rank that holds one twice keeps its first.
- ``"order per process group"``: the kernels carry their process group but no Seq: per group,
  in start order;
- ``"order per stream"``: per stream, in start order. Streams are matched across ranks by
  stream id when every rank has the same set of NCCL streams, else by the order of their first
  NCCL kernel.

A way the kernels offer only in part is not taken, and ``collectives.fallback`` says why: a
``Seq`` without its process group pairs nothing (each group counts its own), so kernels that
carry a Seq but no group are matched by order per stream; kernels of which only some carry
a group or a Seq go to the next way down.

In start order, the k-th kernel of a group (or stream) on every rank is one instance. When
ranks have different numbers of kernels there, each rank's sequence is placed in the longest
one where their kernel ends agree best (up to 64 collectives in) and only instances found on
every rank are counted (a warning says so); a collective whose kernel names disagree across
ranks ends the matching of that group.

Kernels travel as columns of numbers (:class:`CommKernels`: a few bytes per kernel), which is
what a cluster worker holds per rank; :func:`match_kernels` builds the (instances x ranks)
table of starts and ends, :class:`Collectives`, from which the job summary reads skews and
stragglers (:mod:`perflab.analysis.job`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import is_comm_name
from perflab.model.job import Job, RankTrace
from perflab.model.trace import EventKind, Trace, TrackKind, distinct

_NCCL_OP = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
MAX_SHIFT = 64  # leading collectives one rank may lack (a later profiler start) that are tried


@dataclass
class CommStream:
    """One rank's NCCL kernels of one stream or process group, in start order (job clock,
    ns); ``rows`` are the kernels' rows in the rank's trace, ``op_code`` indexes
    ``op_names`` (one vocabulary for the whole job, so codes compare across ranks)."""

    key: tuple[int, int]  # (device, stream) of its first kernel
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    op_code: npt.NDArray[np.int32]
    op_names: list[str]
    rows: npt.NDArray[np.int64]
    group: str | None = None  # the process group, when matched by group

    def __len__(self) -> int:
        return len(self.rows)

    def ops(self, picked: npt.NDArray[np.int64]) -> list[str]:
        return [self.op_names[c] for c in self.op_code[picked].tolist()]


@dataclass
class CommKernels:
    """One rank's NCCL kernels (rows of its trace, in start order) with what matching needs:
    their start and end on the job's clock, op, track, and, where the trace has them, their
    process group and sequence number (-1 where not). Columns of numbers, with the few
    distinct op and group names and track keys on the side: this is what a cluster worker
    sends back per rank, so it stays a few bytes per kernel."""

    rows: npt.NDArray[np.int64]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    op_code: npt.NDArray[np.int32]  # index into op_names
    op_names: list[str]
    track: npt.NDArray[np.int64]
    track_keys: dict[int, tuple[int, int]]  # track -> (device, stream)
    group_code: npt.NDArray[np.int32]  # index into group_names; -1: no process group
    group_names: list[str]  # in order of first use
    seq: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.rows)

    def shifted(self, offset_ns: int) -> CommKernels:
        """The same kernels with ``offset_ns`` added to their start and end."""
        if offset_ns == 0:
            return self
        shift = np.int64(offset_ns)
        return replace(self, start=self.start + shift, end=self.end + shift)

    def recoded(self, vocabulary: dict[str, int]) -> CommKernels:
        """The same kernels with their ops coded in ``vocabulary`` (name -> code), shared by
        every rank of a job."""
        lut = np.array([vocabulary[name] for name in self.op_names], np.int32)
        return replace(self, op_code=lut[self.op_code], op_names=list(vocabulary))

    def in_group(self, name: str) -> npt.NDArray[np.int64]:
        """The kernels of process group ``name``, in start order."""
        if name not in self.group_names:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.group_code == self.group_names.index(name))

    def part(self, picked: npt.NDArray[np.int64], group: str | None = None) -> CommStream:
        picked = np.asarray(picked, dtype=np.int64)
        first, n = int(picked[0]), len(picked)
        # a run of consecutive kernels (often all of them) is a view, not a copy
        at: slice | npt.NDArray[np.int64] = (
            slice(first, first + n) if int(picked[-1]) - first + 1 == n else picked
        )
        return CommStream(
            self.track_keys[int(self.track[first])],
            self.start[at],
            self.end[at],
            self.op_code[at],
            self.op_names,
            self.rows[at],
            group,
        )


@dataclass
class Collectives:
    """Matched collective instances: ``start``/``end`` are (instances x ranks) on the job's
    clock in ns relative to ``origin_ns``, NaN where a rank takes no part; ``ranks`` are the
    rank numbers of the columns."""

    ranks: list[int]
    start: npt.NDArray[np.float64]
    end: npt.NDArray[np.float64]
    op: list[str]
    stream: list[str]  # per instance: the stream or process group it was matched in
    origin_ns: int
    warnings: list[str] = field(default_factory=list)
    # (instances x ranks): each kernel's row in its rank's trace, -1 where a rank takes no part
    rows: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    matched_by: str = "order per stream"
    fallback: str = ""  # why a way the kernels offered in part was not the one taken

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


MATCHED_BY = ("sequence numbers", "order per process group", "order per stream")


def comm_kernels(rank: RankTrace) -> CommKernels:
    """The rank's NCCL kernels on GPU tracks, in start order, on the job's clock."""
    return trace_comm_kernels(rank.trace).shifted(rank.clock_offset_ns)


def trace_comm_kernels(trace: Trace) -> CommKernels:
    """The trace's NCCL kernels on GPU tracks, in start order (its own clock), with their
    collective args."""
    rows = np.flatnonzero((trace.kind == EventKind.KERNEL) & _is_comm(trace.strings)[trace.name])
    rows = rows[trace.tracks["kind"][trace.track[rows]] == TrackKind.GPU]
    start = trace.start_ns[rows]
    order = np.lexsort((rows, start))
    rows, start = rows[order], start[order]
    track = trace.track[rows].astype(np.int64)
    tracks = trace.tracks
    track_keys = {
        t: (int(tracks["device"][t]), int(tracks["stream"][t])) for t in distinct(track).tolist()
    }
    names, op_code = np.unique(trace.name[rows], return_inverse=True)
    op_names = [_op(trace.strings[n]) for n in names.tolist()]
    group_code, group_names, seq = _collective_args(
        trace.meta.get("collective_args"), trace.correlation[rows]
    )
    return CommKernels(
        rows.astype(np.int64),
        start,
        start + trace.dur_ns[rows],
        op_code.astype(np.int32),
        op_names,
        track,
        track_keys,
        group_code,
        group_names,
        seq,
    )


def _collective_args(
    args: object, correlation: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int32], list[str], npt.NDArray[np.int64]]:
    """Process group (a code into the names, in order of first use; -1 where none) and Seq
    (-1 where none) of each kernel, by correlation id (see ``collective_args`` in
    perflab.model.trace)."""
    n = len(correlation)
    codes = np.full(n, -1, np.int32)
    seq = np.full(n, -1, np.int64)
    if not isinstance(args, dict) or not args.get("correlation") or n == 0:
        return codes, [], seq
    known = np.asarray(args["correlation"], dtype=np.int64)
    order = np.argsort(known, kind="stable")
    at = np.minimum(np.searchsorted(known[order], correlation), len(known) - 1)
    found = (known[order][at] == correlation) & (correlation >= 0)
    index = order[at]
    names, numbers = args["group"], np.asarray(args["seq"], dtype=np.int64)
    code_of: dict[str, int] = {}
    for i in np.flatnonzero(found).tolist():
        name = names[int(index[i])]
        if name:  # None or "": a kernel with a Seq but no process group
            codes[i] = code_of.setdefault(name, len(code_of))
    seq[found] = numbers[index[found]]
    return codes, list(code_of), seq


def _is_comm(strings: list[str]) -> npt.NDArray[np.bool_]:
    return is_comm_name(strings) if strings else np.zeros(0, bool)


def _op(name: str) -> str:
    """``ncclKernel_AllReduce_RING_LL_Sum_float(...)`` -> ``AllReduce``."""
    found = _NCCL_OP.match(name)
    return found.group(1) if found else name


def match_collectives(job: Job) -> Collectives:
    return match_kernels({r.rank: comm_kernels(r) for r in job})


def match_kernels(per_rank: dict[int, CommKernels]) -> Collectives:
    """Collectives matched across the ranks' NCCL kernels (on the job's clock)."""
    ranks = [r for r, kernels in per_rank.items() if len(kernels)]
    notes: list[str] = []
    silent = [str(r) for r, kernels in per_rank.items() if not len(kernels)]
    if silent and ranks:
        notes.append(f"no NCCL kernels on rank(s) {', '.join(silent)}; matched among the others")
    vocabulary = {
        name: i for i, name in enumerate(sorted({n for r in ranks for n in per_rank[r].op_names}))
    }
    active = {r: per_rank[r].recoded(vocabulary) for r in ranks}
    how, fallback = _matching(active)
    origin = min((int(k.start[0]) for k in active.values()), default=0)
    matched: list[Matched | None]
    if how == MATCHED_BY[0]:
        matched = list(_match_by_sequence(active, notes))
    else:
        if how == MATCHED_BY[1]:
            groups = _group_streams(active)
        else:
            groups = _stream_groups({r: _streams(k) for r, k in active.items()}, notes)
        matched = [_match_group(label, members, notes) for label, members in groups]
    collectives = _collectives(ranks, matched, origin, notes, how)
    collectives.fallback = fallback
    return collectives


def _matching(per_rank: dict[int, CommKernels]) -> tuple[str, str]:
    """How the ranks' kernels can be matched: by (group, Seq) when every kernel has both,
    by process group when every kernel has one, else by stream; and, when the kernels
    offered a way in part only, why it was not taken ("" otherwise)."""
    kernels = list(per_rank.values())
    every = sum(len(k) for k in kernels)
    grouped = sum(int((k.group_code >= 0).sum()) for k in kernels)
    numbered = sum(int((k.seq >= 0).sum()) for k in kernels)
    if every and grouped == every:
        if numbered in (0, every):
            return MATCHED_BY[0 if numbered else 1], ""
        return MATCHED_BY[1], _lacking(every - numbered, every, "Seq")
    if grouped:
        return MATCHED_BY[2], _lacking(every - grouped, every, "process group")
    return MATCHED_BY[2], SEQ_WITHOUT_GROUP if numbered else ""


SEQ_WITHOUT_GROUP = (
    "the NCCL kernels carry a Seq but no process group, and a Seq counts within its group "
    "only, so it cannot pair kernels by itself"
)


def _lacking(missing: int, every: int, what: str) -> str:
    return f"{missing} of the {every} NCCL kernels carry no {what}"


def _streams(kernels: CommKernels) -> list[CommStream]:
    """A rank's NCCL kernels per GPU track, ordered by their first kernel."""
    out = [kernels.part(np.flatnonzero(kernels.track == t)) for t in distinct(kernels.track)]
    out.sort(key=lambda c: int(c.start[0]))
    return out


def _group_streams(
    per_rank: dict[int, CommKernels],
) -> list[tuple[str, dict[int, CommStream]]]:
    """Per process group (in order of first use on the lowest rank), each member rank's
    kernels of that group."""
    names: list[str] = []
    for kernels in per_rank.values():
        names += [g for g in kernels.group_names if g not in names]
    out = []
    for name in names:
        members = {}
        for rank, kernels in per_rank.items():
            picked = kernels.in_group(name)
            if len(picked):
                members[rank] = kernels.part(picked, name)
        out.append((f"process group {name}", members))
    return out


@dataclass
class Matched:
    """The instances of one stream or process group: per member rank, the index of its
    kernel of each instance (in that rank's CommStream), and each instance's op."""

    label: str
    members: dict[int, CommStream]
    picks: dict[int, npt.NDArray[np.int64]]
    ops: list[str]


def _match_by_sequence(per_rank: dict[int, CommKernels], notes: list[str]) -> list[Matched]:
    """Per process group, the Seqs every member rank has, in order of their earliest start
    (each rank's first kernel of a Seq; columns of numbers throughout, as a job has
    thousands of ranks times thousands of collectives)."""
    out = []
    for label, members in _group_streams(per_rank):
        if len(members) < 2:
            notes.append(f"{label}: NCCL kernels on rank {next(iter(members))} only; not matched")
            continue
        name = label.removeprefix("process group ")
        firsts = {}  # rank -> (its Seqs, sorted; the index of each one's first kernel)
        repeats = 0
        for rank in members:
            kernels = per_rank[rank]
            seqs = kernels.seq[kernels.in_group(name)]
            unique, first = np.unique(seqs, return_index=True)
            repeats += len(seqs) - len(unique)
            firsts[rank] = (unique, first)
        every = functools.reduce(np.intersect1d, (u for u, _ in firsts.values()))
        some = functools.reduce(np.union1d, (u for u, _ in firsts.values()))
        if len(some) > len(every):
            notes.append(
                f"{label}: {len(some) - len(every)} sequence numbers are missing on some of "
                f"its ranks (a rank that stopped early or started tracing late?); only the "
                f"{len(every)} found on every rank are matched"
            )
        if repeats:
            notes.append(
                f"{label}: {repeats} sequence numbers repeat on a rank; the first kernel of "
                "each is kept"
            )
        at = {r: first[np.searchsorted(unique, every)] for r, (unique, first) in firsts.items()}
        earliest = functools.reduce(np.minimum, (members[r].start[i] for r, i in at.items()))
        order = np.lexsort((every, earliest))
        picks = {r: i[order].astype(np.int64) for r, i in at.items()}
        low = min(members)
        out.append(Matched(label, members, picks, members[low].ops(picks[low])))
    return out


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


def _match_group(label: str, members: dict[int, CommStream], notes: list[str]) -> Matched | None:
    """The instances of one stream or group by order (see the module docstring)."""
    if len(members) < 2:
        notes.append(f"{label}: NCCL kernels on rank {next(iter(members))} only; not matched")
        return None
    counts = {r: len(c) for r, c in members.items()}
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
    picks = {r: np.arange(first - at[r], first - at[r] + n, dtype=np.int64) for r in order}
    codes = np.stack([members[r].op_code[picks[r]] for r in order])  # ranks x instances
    differs = np.flatnonzero((codes != codes[0]).any(axis=0))
    if len(differs):
        k = int(differs[0])
        names = members[order[0]].op_names
        which = ", ".join(
            f"rank {r}: {names[c]}" for r, c in zip(order, codes[:, k].tolist(), strict=True)
        )
        notes.append(
            f"{label}: collective #{k + 1} differs across ranks ({which}); "
            f"only the {k} before it are matched"
        )
        picks = {r: p[:k] for r, p in picks.items()}
    first_rank = order[0]
    return Matched(label, members, picks, members[first_rank].ops(picks[first_rank]))


def _collectives(
    ranks: list[int],
    matched: Sequence[Matched | None],
    origin: int,
    notes: list[str],
    how: str,
) -> Collectives:
    """The matched instances of every stream or group as one table (rank columns)."""
    column = {r: i for i, r in enumerate(ranks)}
    starts, ends, rows, ops, labels = [], [], [], [], []
    for m in matched:
        if m is None or not m.ops:
            continue
        n = len(m.ops)
        start = np.full((n, len(ranks)), np.nan)
        end = np.full((n, len(ranks)), np.nan)
        row = np.full((n, len(ranks)), -1, np.int64)
        for r, stream in m.members.items():
            pick = m.picks[r]
            start[:, column[r]] = (stream.start[pick] - origin).astype(np.float64)
            end[:, column[r]] = (stream.end[pick] - origin).astype(np.float64)
            row[:, column[r]] = stream.rows[pick]
        starts.append(start)
        ends.append(end)
        rows.append(row)
        ops += m.ops
        labels += [m.label] * n
    empty = np.zeros((0, len(ranks)))
    return Collectives(
        ranks,
        np.concatenate(starts) if starts else empty,
        np.concatenate(ends) if ends else empty,
        ops,
        labels,
        origin,
        notes,
        np.concatenate(rows) if rows else empty.astype(np.int64),
        how,
    )


def _position(longest: CommStream, other: CommStream) -> int:
    """Where ``other``'s collectives start within ``longest``'s: the shift at which their
    kernel ends agree best (a collective ends at about the same time on every rank)."""
    n = len(other)
    spare = min(len(longest) - n, MAX_SHIFT)
    if spare <= 0:
        return 0
    misfit = [
        float(np.median(np.abs(longest.end[k : k + n] - other.end))) for k in range(spare + 1)
    ]
    return int(np.argmin(misfit))
