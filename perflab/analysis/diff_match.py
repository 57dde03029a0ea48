"""The matching of :func:`perflab.analysis.trace_diff.diff_traces`: each side's steps and
compared events, their names coded by one vocabulary per group (GPU work, host events), and
the rows of matched names with their counts, times, status and verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import categorize
from perflab.analysis.diff_names import Rename, canonical
from perflab.analysis.diff_rows import F64, I64, DiffRows, Side
from perflab.analysis.diff_stats import verdicts
from perflab.analysis.steps import Steps, profiler_steps, work_steps
from perflab.errors import InputError
from perflab.model.trace import (
    GPU_WORK_KINDS,
    KIND_NAMES,
    EventKind,
    Trace,
    TrackKind,
    distinct,
    kind_mask,
)
from perflab.model.trace_keys import launch_links

HOST_KINDS = (EventKind.CPU_OP, EventKind.RUNTIME, EventKind.SYNC, EventKind.ANNOTATION)


@dataclass
class Prepared:
    trace: Trace
    side: Side
    step_of: I64  # per event: position in side.steps, -1 outside them
    in_scope: npt.NDArray[np.bool_]
    steps: Steps  # every ProfilerStep of the trace
    links: I64  # per event: the runtime call that launched it (launch_links)
    chosen: int = -1  # the index in ``steps`` of the step compared, -1 for the whole trace

    @classmethod
    def of(cls, trace: Trace, step: int | None) -> Prepared:
        source = str(trace.meta.get("source") or trace.meta.get("format") or "trace")
        steps = profiler_steps(trace)
        links = launch_links(trace)
        step_of = _event_steps(trace, steps, links)
        if step is None:
            side = Side(source, steps.number.tolist(), (steps.end - steps.start).tolist())
            return cls(trace, side, step_of, np.ones(len(trace), dtype=bool), steps, links)
        try:
            index = steps.index_of(step)
        except InputError as exc:
            raise InputError(str(exc), source=source) from None
        in_scope = step_of == index
        step_of = np.where(in_scope, 0, -1)
        span = int(steps.end[index] - steps.start[index])
        return cls(trace, Side(source, [step], [span]), step_of, in_scope, steps, links, index)


def _event_steps(trace: Trace, steps: Steps, links: I64) -> I64:
    """Per event: the step (index) it belongs to (module docstring), -1 for none."""
    out = work_steps(trace, steps, links)
    if len(steps):
        on_cpu = _on_cpu(trace)
        host = np.flatnonzero(on_cpu & ~trace.mask(*GPU_WORK_KINDS))
        out[host] = steps.containing(trace.start_ns[host])
    return out


def _on_cpu(trace: Trace) -> npt.NDArray[np.bool_]:
    if len(trace) == 0:
        return np.zeros(0, dtype=bool)
    return np.asarray(trace.tracks["kind"][trace.track] == TrackKind.CPU)


def _compared(side: Prepared, gpu: bool) -> I64:
    """The rows of one side that are compared: GPU work, or host events without the
    ProfilerStep ranges."""
    trace = side.trace
    if gpu:
        return np.flatnonzero(trace.mask(*GPU_WORK_KINDS) & side.in_scope)
    step_names = np.array([s.startswith("ProfilerStep#") for s in trace.strings], dtype=bool)
    is_step = step_names[trace.name] if len(trace.strings) else np.zeros(len(trace), bool)
    host = kind_mask(trace.kind, HOST_KINDS) & _on_cpu(trace) & ~is_step
    return np.flatnonzero(host & side.in_scope)


class Vocabulary:
    """Matched names of one group (GPU or host), in first-seen order."""

    def __init__(self, short_names: bool, renames: Sequence[Rename]) -> None:
        self.short_names = short_names
        self.renames = renames
        self.index: dict[str, int] = {}

    def codes(self, trace: Trace, name_ids: npt.NDArray[np.int32]) -> I64:
        """Per event of ``name_ids``: the code of its matched name."""
        used = distinct(name_ids)
        names = canonical([trace.strings[i] for i in used.tolist()], self.short_names, self.renames)
        lookup = np.full(len(trace.strings), -1, dtype=np.int64)
        lookup[used] = [self.index.setdefault(k, len(self.index)) for k in names]
        return lookup[name_ids]

    @property
    def names(self) -> list[str]:
        return list(self.index)


def grouped_sum(key: I64, values: I64, size: int) -> F64:
    """The exact sum of ``values`` per ``key`` in ``range(size)``, as floats (the int64 halves
    are summed apart, so no sum wraps; floats hold it exactly below 2**53 ns, 104 days)."""
    out = np.zeros(size, dtype=np.float64)
    if len(key) == 0:
        return out
    order = np.argsort(key, kind="stable")
    k, v = key[order], np.asarray(values, dtype=np.int64)[order]
    starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
    high = np.add.reduceat(v >> 32, starts).astype(np.float64)
    low = np.add.reduceat(v & 0xFFFFFFFF, starts).astype(np.float64)
    out[k[starts]] = high * float(1 << 32) + low
    return out


@dataclass
class Group:
    """One side's compared events of one group: name code, duration, step, kind, track."""

    code: I64
    dur: I64
    step: I64
    kind: npt.NDArray[np.int8]
    track: npt.NDArray[np.int32]
    n_steps: int

    @classmethod
    def of(cls, side: Prepared, gpu: bool, vocab: Vocabulary) -> Group:
        rows = _compared(side, gpu)
        t = side.trace
        code = vocab.codes(t, t.name[rows])
        return cls(
            code,
            t.dur_ns[rows],
            side.step_of[rows],
            t.kind[rows],
            t.track[rows],
            len(side.side.steps),
        )

    def totals(self, size: int) -> tuple[I64, F64]:
        return np.bincount(self.code, minlength=size).astype(np.int64), grouped_sum(
            self.code, self.dur, size
        )

    def per_step(self, size: int) -> F64:
        """Per name and step: total ns (names x steps)."""
        inside = self.step >= 0
        cells = self.code[inside] * self.n_steps + self.step[inside]
        return grouped_sum(cells, self.dur[inside], size * self.n_steps).reshape(size, -1)


def _kind_names(groups: Sequence[Group], size: int) -> list[str]:
    kinds = np.zeros(size, dtype=np.int64)
    for g in groups:
        kinds[g.code] = g.kind
    return [KIND_NAMES[k] for k in kinds.tolist()]


def _status(c_count: I64, t_count: I64, c_ns: F64, t_ns: F64) -> npt.NDArray[np.object_]:
    new, gone = (c_count == 0) & (t_count > 0), (t_count == 0) & (c_count > 0)
    same = (c_count == t_count) & (c_ns == t_ns)
    return np.select([new, gone, same], ["new", "gone", "unchanged"], "changed").astype(object)


def match_rows(c: Group, t: Group, names: list[str], per_step: bool, gpu: bool) -> DiffRows:
    size = len(names)
    c_count, c_ns = c.totals(size)
    t_count, t_ns = t.totals(size)
    status = _status(c_count, t_count, c_ns, t_ns)
    no_steps = np.zeros((size, 0), dtype=np.float64)
    c_steps, t_steps = (c.per_step(size), t.per_step(size)) if per_step else (no_steps, no_steps)
    verdict = status.copy()
    p = np.full(size, np.nan)
    if per_step:
        stat, p = verdicts(c_steps, t_steps)
        both = (status != "new") & (status != "gone")
        verdict[both] = np.asarray(stat, dtype=object)[both]
        change = t_steps.sum(axis=1) / t.n_steps - c_steps.sum(axis=1) / c.n_steps
    else:
        change = t_ns - c_ns
    kinds = _kind_names((c, t), size)
    categories = categorize(names) if gpu else kinds
    order = np.lexsort((np.array(names, dtype=object), -np.abs(change)))
    pick = order.tolist()
    return DiffRows(
        [names[i] for i in pick],
        [kinds[i] for i in pick],
        [categories[i] for i in pick],
        c_count[order],
        t_count[order],
        c_ns[order],
        t_ns[order],
        change[order],
        c_steps[order],
        t_steps[order],
        p[order],
        [str(s) for s in status[order].tolist()],
        [str(v) for v in verdict[order].tolist()],
    )


def paired_groups(
    sides: tuple[Prepared, Prepared], gpu: bool, vocab: Vocabulary
) -> tuple[tuple[Group, Group], list[str]]:
    """Both sides' events of one group, coded by one vocabulary, and its names."""
    groups = (Group.of(sides[0], gpu, vocab), Group.of(sides[1], gpu, vocab))
    return groups, vocab.names
