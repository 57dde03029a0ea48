"""Where each of the allocator's memory events happened: the op, the top-level op, the phase
(forward, backward, optimizer) and the ``ProfilerStep#N`` range around it.

An allocation belongs to the innermost op (a CPU op, or else a user range) on its own
thread that contains its time, passing over the bare allocating ops (:data:`FACTORIES`,
``aten::empty`` and its kin) when an op encloses them: the op that asked for the memory is
named. Its top-level op is the outermost CPU op there (one called from Python, not from
another op). Its phase is that of the innermost range or op on its
thread whose name says one (:data:`PHASE_WORDS`); where its thread has none (the autograd
engine runs backward on a thread of its own on a GPU), a range of any thread that contains
its time decides. Where no name says a phase, an event inside a step before the step's
first backward is in the forward pass. Its step is the ``ProfilerStep#N`` range that
contains its time, on any thread. These are heuristics over names: the report states them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.host_stacks import HostStacks
from perflab.analysis.steps import Steps, profiler_steps
from perflab.model.trace import EventKind, Table, Trace, TrackKind, unique_rows

I64 = npt.NDArray[np.int64]

NO_PHASE, FORWARD, BACKWARD, OPTIMIZER = 0, 1, 2, 3
PHASES = ("", "forward", "backward", "optimizer")
#: what a range's or op's name must contain (any case) to say its phase, checked in this order
PHASE_WORDS = (
    (BACKWARD, re.compile("backward", re.IGNORECASE)),
    (OPTIMIZER, re.compile(r"optimi[sz]er|zero_grad", re.IGNORECASE)),
    (FORWARD, re.compile("forward", re.IGNORECASE)),
)
PHASE_RULE = (
    "an allocation's phase is that of the innermost range or op on its thread whose name "
    "contains 'forward', 'backward' or 'optimizer'/'zero_grad' (any case), else of such a "
    "range on another thread at that time; inside a ProfilerStep with neither, before the "
    "step's first backward is forward"
)
_KINDS = (EventKind.CPU_OP, EventKind.ANNOTATION)  # what memory is attributed to
#: ops that only allocate: memory they allocate inside another op is that op's
FACTORIES = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::resize_",
    }
)


@dataclass(frozen=True)
class Places:
    """Per memory event: the event row of its innermost op and of its top-level op (-1:
    none), its phase (:data:`PHASES` code) and its step (index into ``steps``, -1: none)."""

    op: I64
    top: I64
    phase: npt.NDArray[np.int8]
    step: I64
    steps: Steps


def places(trace: Trace, memory: Table) -> Places:
    """Where each of ``memory``'s events happened in ``trace`` (see the module docstring)."""
    n = len(memory)
    op, top = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    phase = np.zeros(n, np.int8)
    rows = np.flatnonzero(trace.mask(*_KINDS))
    said_by_name = _phase_of_name(trace)
    phase_of_row = said_by_name[trace.name[rows]]
    track = _memory_tracks(trace, memory)
    asked = np.flatnonzero(track >= 0)
    if len(rows) and len(asked):
        stacks = HostStacks(trace.select(rows))
        query, found, _ = stacks.containing(track[asked], memory["ts_ns"][asked])
        event = rows[stacks.rows[found]]  # the trace's rows, outermost first per query
        at = asked[query]
        _per_query(op, at, event, last=True)  # the innermost, factory or not
        named = ~_factory_names(trace)[trace.name[event]]
        _per_query(op, at[named], event[named], last=True)
        is_op = trace.kind[event] == EventKind.CPU_OP
        _per_query(top, at[is_op], event[is_op], last=False)
        said = phase_of_row[np.searchsorted(rows, event)]
        _per_query(phase, at[said > 0], said[said > 0], last=True)
    steps = profiler_steps(trace)
    step = steps.containing(memory["ts_ns"])
    _phase_elsewhere(trace, rows[phase_of_row > 0], said_by_name, memory["ts_ns"], phase)
    _forward_by_position(trace, rows[phase_of_row == BACKWARD], steps, memory, step, phase)
    return Places(op, top, phase, step, steps)


def _per_query(
    out: npt.NDArray[np.generic], query: I64, value: npt.NDArray[np.integer], *, last: bool
) -> None:
    """``out[q]`` = the last (innermost) or first (outermost) ``value`` given for query
    ``q``; ``query`` is grouped, outermost first within each group."""
    if len(query) == 0:
        return
    edge = np.ones(len(query), dtype=bool)
    if last:
        edge[:-1] = query[1:] != query[:-1]
    else:
        edge[1:] = query[1:] != query[:-1]
    out[query[edge]] = value[edge]


def _factory_names(trace: Trace) -> npt.NDArray[np.bool_]:
    """Per string of the trace: whether it names one of FACTORIES."""
    return np.array([text in FACTORIES for text in trace.strings], dtype=bool)


def _phase_of_name(trace: Trace) -> npt.NDArray[np.int8]:
    """Per string of the trace: the phase its name says (0: none)."""
    said = np.zeros(len(trace.strings) + 1, np.int8)
    for i, text in enumerate(trace.strings):
        for code, word in PHASE_WORDS:
            if word.search(text):
                said[i] = code
                break
    return said


def _memory_tracks(trace: Trace, memory: Table) -> I64:
    """Per memory event: the CPU track of its thread (-1: its thread has no events)."""
    tracks = trace.tracks
    cpu = np.flatnonzero(tracks["kind"] == TrackKind.CPU)
    lookup = {
        (int(d), int(s)): int(t)
        for d, s, t in zip(tracks["device"][cpu], tracks["stream"][cpu], cpu, strict=True)
    }
    pairs = np.stack([memory["pid"], memory["tid"]], axis=1)
    if len(pairs) == 0:
        return np.zeros(0, np.int64)
    distinct, inverse = unique_rows(pairs)
    found = np.array([lookup.get((int(p), int(t)), -1) for p, t in distinct.tolist()], np.int64)
    return found[inverse]


def _phase_elsewhere(
    trace: Trace,
    ranged: I64,
    said_by_name: npt.NDArray[np.int8],
    t: I64,
    phase: npt.NDArray[np.int8],
) -> None:
    """Events whose thread said no phase take that of a range or op of any thread that says
    one and contains their time (of those begun by then, one that reaches furthest)."""
    lacking = np.flatnonzero(phase == NO_PHASE)
    if len(lacking) == 0 or len(ranged) == 0:
        return
    ranged = ranged[np.argsort(trace.start_ns[ranged], kind="stable")]
    start, end = trace.start_ns[ranged], trace.end_ns[ranged]
    reach = np.maximum.accumulate(end)
    holder = np.maximum.accumulate(np.where(end == reach, np.arange(len(end)), 0))
    last = np.searchsorted(start, t[lacking], side="right") - 1
    ok = last >= 0
    ok[ok] = reach[last[ok]] > t[lacking][ok]
    chosen = ranged[holder[last[ok]]]
    phase[lacking[ok]] = said_by_name[trace.name[chosen]]


def _forward_by_position(
    trace: Trace,
    backward: I64,
    steps: Steps,
    memory: Table,
    step: I64,
    phase: npt.NDArray[np.int8],
) -> None:
    """Inside a step, an event of no phase before the step's first backward range or op
    (``backward``: their rows) is in the forward pass."""
    if len(steps) == 0:
        return
    t = memory["ts_ns"]
    first = np.full(len(steps), np.iinfo(np.int64).max, np.int64)
    if len(backward):
        start = trace.start_ns[backward]
        inside = steps.containing(start)
        np.minimum.at(first, inside[inside >= 0], start[inside >= 0])
    lacking = (phase == NO_PHASE) & (step >= 0)
    before = np.zeros(len(t), dtype=bool)
    before[lacking] = t[lacking] < first[step[lacking]]
    phase[before] = FORWARD
