"""Causes that hold: why each gap in a GPU's busy time happened, from the side that held the
next work back, with the trace's own events as evidence.

A gap is a stretch of a device's span in which none of its kernels, copies or memsets ran
(busy time is their union per device, as in the trace summary). For each gap this follows
the work that ended it (the *next work*) to the host runtime call that launched it (same
rank and correlation id), and looks at what the launching thread did from the moment the
GPU went idle to that launch. The cause is one of five. ``g0``/``g1`` are the gap's start and
end, ``launch`` the next work's launch call; the work counts as *queued* when the call
returned (a blocking copy call: when it began, since it queues its copy first). The first
rule that holds decides:

1. ``unknown``: no runtime call in the trace links to the next work (no correlation id).
2. ``launch-overhead``: the work was queued by ``g0``, on the same stream as the work
   before the gap, and the gap is at most ``QUEUED_START_NS`` (5 us): the device's own
   start-up between queued pieces of work.
3. ``gpu-dependency``: the work was queued by ``g0``, or it was queued during the gap and
   still waited more than ``QUEUE_WAIT_NS`` (50 us; work sent to an idle GPU starts within
   a few microseconds) before it started: the GPU side held it last (another stream's
   event, a collective's peers, a copy engine).
4. ``after-sync``: the launching thread was blocked in a synchronising call at ``g0``: one
   that ended no earlier than ``SYNC_SLACK_NS`` (10 us) before ``g0`` (and, ending before
   ``g0``, lasted at least 10 us: a call that returned at once while kernels still ran did
   not wait), began no later than 10 us after it, ended before the launch returned, and is
   not the launch itself. The GPU
   drained its queue while the host waited, then waited for the host's next work.
   Synchronising calls: ``cuda``/``cu`` + ``Stream``/``Device``/``Event``/``Ctx`` +
   ``Synchronize`` (nsys's ``_v3020`` suffixes ignored); ``cudaMemcpy`` without ``Async``
   (and ``cuMemcpy*``); a copy call that returned after its copy had finished when the
   copy has a host side (HtoD, DtoH, HtoH) whose memory is not pinned (a pageable
   ``cudaMemcpyAsync`` blocks; a device-to-device copy that finishes during its own call
   did not make it wait); the CPU ops ``aten::item`` and ``aten::_local_scalar_dense``.
5. ``launch-overhead``: the launch call was under way when the GPU went idle (began at or
   before ``g0``, returned after), or the thread began it at most ``LAUNCH_PATH_NS`` (10 us)
   after its previous launch of GPU work returned: back-to-back launches with nothing but
   the launch path between them (tiny kernels: what CUDA graphs and fusion remove).
6. ``host-busy``: the launching thread has recorded host work (CPU ops, Python functions,
   user or NVTX ranges): it was running other work between ``g0`` (or the sync's return)
   and the launch.
7. ``unknown``: the launching thread recorded nothing but CUDA runtime calls (e.g. an
   Nsight Systems export without CPU sampling): the trace cannot say what it did.

Evidence, per cause: the sync, the copy it waited for (direction, bytes, host memory) and
what the host did after it returned (``after-sync``); the host events over the stretch
from ``g0`` to the launch: the outermost and innermost covering all of it, the longest that
ran in it with their times and the chain of longest children below the first, and how much
of it no recorded event covers, i.e. untraced host code (``host-busy``); the launch call,
the thread's previous launch and the work before the gap (``launch-overhead``); when the
work was queued and what it waited for (``gpu-dependency``); why nothing can be said
(``unknown``).

These are heuristics over the events a profiler recorded: a trace without host events, or
with clocks that disagree by more than the slack above, can mislead them; the evidence is
there to check each verdict. Everything is vectorised: a few sorts of the trace's rows, no
Python object per event (evidence objects are built only for the gaps that are shown).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.copies import host_memory
from perflab.analysis.host_stacks import HostStacks
from perflab.analysis.idle_classify import (
    AFTER_SYNC,
    CAUSES,
    GPU_DEPENDENCY,
    HOST_BUSY,
    INSIDE,
    LAUNCH_OVERHEAD,
    LAUNCH_PATH_NS,
    QUEUE_WAIT_NS,
    QUEUED_START_NS,
    SYNC_SLACK_NS,
    UNKNOWN,
    WITHIN,
    WORK,
    GapColumns,
    HostEvidence,
    classify,
    find_gaps,
    host_evidence,
)
from perflab.analysis.idle_rules import HEURISTIC_NOTE, RULES
from perflab.analysis.steps import (
    Steps,
    StepSplit,
    gap_steps,
    idle_in_windows,
    profiler_steps,
    step_split,
    step_windows,
    work_steps,
)
from perflab.analysis.trace_intervals import exact_sum
from perflab.analysis.trace_stats import US, Frame
from perflab.errors import InputError
from perflab.model.display import Shown
from perflab.model.trace import GPU_WORK_KINDS, MEMCPY_DIRECTIONS, EventKind, Trace
from perflab.model.trace_keys import (
    device_pair_label,
    device_pairs,
    event_device_pairs,
    launch_links,
)
from perflab.model.units import format_bytes, format_ns, shorten

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CAUSES",
    "HEURISTIC_NOTE",
    "LAUNCH_PATH_NS",
    "QUEUED_START_NS",
    "QUEUE_WAIT_NS",
    "RULES",
    "SYNC_SLACK_NS",
    "CauseTotal",
    "Evidence",
    "IdleCauses",
    "cause_totals",
    "idle_causes",
    "step_window",
]

NAME_CHARS = 100  # an event's name in an evidence sentence (long C++ kernel names are cut)
MINOR_SHARE = 0.01  # host events below this share of the stretch are not named, but the first


@dataclass(frozen=True)
class CauseTotal:
    """Idle time of one cause: microseconds, gaps, and share of the idle time shown."""

    idle_us: float
    gaps: int
    share: float


@dataclass(frozen=True)
class Evidence:
    """One fact a verdict rests on: a role (``sync``, ``copy``, ``launch``, ``work``,
    ``inside``, ``within``, ``untraced``, ``queued``, ``previous-launch``, ``waits``,
    ``note``), the event's name and times on the trace's clock (None for a note), and a
    sentence saying it."""

    role: str
    text: str
    name: str = ""
    start_ns: int | None = None
    dur_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "name": self.name,
            "start_ns": self.start_ns,
            "dur_ns": self.dur_ns,
            "text": self.text,
        }


@dataclass
class IdleCauses(Shown):
    """Every gap in the GPUs' busy time with its cause and evidence (module docstring).

    ``gaps`` holds numpy columns (one entry per gap, in device then time order); the
    evidence of a gap is built when asked (:meth:`evidence`), so a trace of a million
    events costs a few sorts, not an object per gap. ``to_dict()`` is the document
    ``perflab trace idle --json`` prints; times are nanoseconds on the trace's own clock."""

    trace: Trace = field(repr=False)
    gaps: GapColumns = field(repr=False)
    host: HostEvidence = field(repr=False)
    stacks: HostStacks = field(repr=False)
    device_labels: dict[int, str]
    min_ns: int = 0
    step: int | None = None
    window: tuple[int, int] | None = None
    by_step: Frame | None = field(default=None, repr=False)
    strip: Strip | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # the host evidence of gap i is _host_order[_host_first[i]:_host_first[i + 1]]
        self._host_order = np.argsort(self.host.gap, kind="stable")
        self._host_first = np.searchsorted(
            self.host.gap[self._host_order], np.arange(len(self.gaps) + 1), side="left"
        )
        self._copy_row: npt.NDArray[np.int64] | None = None
        self.end_ns = self.trace.end_ns  # once: Trace.end_ns adds the columns on each call

    def __len__(self) -> int:
        return len(self.gaps)

    def host_entries(self, gap: int) -> npt.NDArray[np.int64]:
        """Indices into ``host`` of gap ``gap``'s host evidence."""
        return np.asarray(
            self._host_order[self._host_first[gap] : self._host_first[gap + 1]], dtype=np.int64
        )

    def copy_row(self, event: int) -> int:
        """The row of ``trace.memcpy`` of a copy event, -1 if it has none."""
        if self._copy_row is None:
            rows = np.full(len(self.trace), -1, dtype=np.int64)
            rows[self.trace.memcpy["event"]] = np.arange(len(self.trace.memcpy))
            self._copy_row = rows
        return int(self._copy_row[event])

    @property
    def origin_ns(self) -> int:
        """The trace's first timestamp (views show times since it)."""
        return int(self.trace.start_ns.min()) if len(self.trace) else 0

    @property
    def total_ns(self) -> int:
        return exact_sum(self.gaps.end - self.gaps.start)

    def by_cause(self) -> dict[str, CauseTotal]:
        """Idle time and gaps per cause, every cause listed (in :data:`CAUSES` order)."""
        return _totals(self.gaps.cause, self.gaps.end - self.gaps.start)

    def longest(self, n: int = 10) -> npt.NDArray[np.int64]:
        """Indices of the ``n`` longest gaps, longest first."""
        dur = self.gaps.end - self.gaps.start
        order = np.argsort(-dur, kind="stable")
        return np.asarray(order[:n], dtype=np.int64)

    def cause_of(self, gap: int) -> str:
        return CAUSES[int(self.gaps.cause[gap])]

    def evidence(self, gap: int) -> list[Evidence]:
        """What the verdict on gap ``gap`` rests on, most telling first."""
        return _Explainer(self, gap).evidence()

    def gap_dict(self, gap: int) -> dict[str, Any]:
        g = self.gaps
        return {
            "device": self.device_labels[int(g.device[gap])],
            "start_ns": int(g.start[gap]),
            "dur_ns": int(g.end[gap] - g.start[gap]),
            "cause": self.cause_of(gap),
            "before": self.trace.strings[int(self.trace.name[g.prev[gap]])],
            "after": self.trace.strings[int(self.trace.name[g.next[gap]])],
            "evidence": [e.to_dict() for e in self.evidence(gap)],
        }

    def to_dict(self) -> dict[str, Any]:
        """``{"gaps": [...], "by_cause": {...}, "rules": {...}, ...}``: every gap with its
        device, start (ns, the trace's clock), duration, cause and evidence."""
        return {
            "gaps": [self.gap_dict(i) for i in range(len(self))],
            "by_cause": {k: vars(v) for k, v in self.by_cause().items()},
            "idle_ns": self.total_ns,
            "min_ns": self.min_ns,
            "step": self.step,
            "steps": self.by_step.to_dict() if self.by_step is not None else None,
            "rules": dict(RULES),
            "note": HEURISTIC_NOTE,
        }

    def to_pandas(self) -> pd.DataFrame:
        """One row per gap: device, start_ns, dur_ns, cause, the work before and after,
        and the launching thread."""
        import pandas as pd

        g = self.gaps
        names = np.asarray(self.trace.strings, dtype=object)
        return pd.DataFrame(
            {
                "device": [self.device_labels[int(d)] for d in g.device.tolist()],
                "start_ns": g.start,
                "dur_ns": g.end - g.start,
                "cause": pd.Categorical.from_codes(g.cause, categories=list(CAUSES)),
                "before": names[self.trace.name[g.prev]] if len(g) else names[:0],
                "after": names[self.trace.name[g.next]] if len(g) else names[:0],
                "thread": [_thread(self.trace, int(t)) for t in g.thread.tolist()],
            }
        )


def _thread(trace: Trace, track: int) -> str:
    """A thread as the timeline names it: its name from the trace when it has one
    ("thread 2910249 (pt_main_thread)"), else its track label ("" for none)."""
    if track < 0:
        return ""
    names = trace.meta.get("thread_names") or {}
    pid, tid = int(trace.tracks["device"][track]), int(trace.tracks["stream"][track])
    named = names.get(f"{pid}:{tid}") if isinstance(names, dict) else None
    return str(named) if named else trace.track_label(track)


class _Explainer:
    """Builds the evidence sentences of one gap from the columns (only when shown)."""

    def __init__(self, result: IdleCauses, gap: int) -> None:
        self.r, self.t, self.i = result, result.trace, gap
        g = result.gaps
        self.g0, self.g1 = int(g.start[gap]), int(g.end[gap])
        self.cause = int(g.cause[gap])

    def name(self, row: int) -> str:
        """An event's name as sentences show it (cut to NAME_CHARS; Evidence.name is whole)."""
        return shorten(self.t.strings[int(self.t.name[row])], NAME_CHARS)

    def event(self, role: str, row: int, text: str) -> Evidence:
        name = self.t.strings[int(self.t.name[row])]
        return Evidence(role, text, name, int(self.t.start_ns[row]), int(self.t.dur_ns[row]))

    def found(self, role: str, row: int, text: Callable[[int], str]) -> list[Evidence]:
        """The evidence of ``row`` when the analysis found one (row >= 0), else none."""
        return [self.event(role, row, text(row))] if row >= 0 else []

    def took(self, row: int) -> str:
        return format_ns(int(self.t.dur_ns[row]))

    def when(self, t: int) -> str:
        """``t`` relative to the gap's start, in words."""
        delta = t - self.g0
        if delta == 0:
            return "as the GPU went idle"
        side = "after" if delta > 0 else "before"
        return f"{format_ns(abs(delta))} {side} the GPU went idle"

    def evidence(self) -> list[Evidence]:
        g, i = self.r.gaps, self.i
        if int(g.launch[i]) < 0:
            nxt = int(g.next[i])
            return [
                Evidence(
                    "note",
                    f"no runtime call in the trace links to {self.name(nxt)} (no correlation "
                    "id): what held it back is unknown",
                )
            ]
        build = {
            HOST_BUSY: self.host_busy,
            AFTER_SYNC: self.after_sync,
            LAUNCH_OVERHEAD: self.launch_overhead,
            GPU_DEPENDENCY: self.gpu_dependency,
            UNKNOWN: self.unrecorded,
        }[self.cause]
        return build()

    # -- per cause ---------------------------------------------------------------------
    def launch_line(self, since: int | None = None, what: str = "") -> Evidence:
        row = int(self.r.gaps.launch[self.i])
        start, dur = int(self.t.start_ns[row]), int(self.t.dur_ns[row])
        thread = _thread(self.t, int(self.r.gaps.thread[self.i]))
        after = (
            f"{format_ns(start - since)} after {what}" if since is not None else self.when(start)
        )
        text = (
            f"{self.name(row)} ({format_ns(dur)}) launched "
            f"{self.name(int(self.r.gaps.next[self.i]))} on {thread}, beginning {after}"
        )
        inside_gap = min(start + dur, self.g1) - max(start, self.g0)
        if inside_gap * 10 >= self.g1 - self.g0:  # the call itself is a tenth of the gap
            text += f"; the call itself took {inside_gap / (self.g1 - self.g0):.0%} of the gap"
        return self.event("launch", row, text)

    def host_busy(self) -> list[Evidence]:
        return [*self.host_work(), self.launch_line()]

    def after_sync(self) -> list[Evidence]:
        g, i = self.r.gaps, self.i
        out = []
        sync = int(g.sync[i])
        out.append(
            self.event(
                "sync",
                sync,
                f"the thread was blocked in {self.name(sync)} "
                f"({format_ns(int(self.t.dur_ns[sync]))}), which returned "
                f"{self.when(int(self.r.end_ns[sync]))}",
            )
        )
        out += self.found("copy", int(g.copy[i]), self.copy_text)
        out += self.found(
            "sync",
            int(g.sync_after[i]),
            lambda row: (
                f"then {self.name(row)} ({self.took(row)}), returning "
                f"{self.when(int(self.r.end_ns[row]))}"
            ),
        )
        out += self.host_work(after_sync=True)
        out.append(self.launch_line(int(g.host_from[i]), "the sync returned"))
        return out

    def copy_text(self, copy: int) -> str:
        row = self.r.copy_row(copy)
        direction, nbytes = "unknown", -1
        if row >= 0:
            direction = MEMCPY_DIRECTIONS[int(self.t.memcpy["direction"][row])]
            nbytes = int(self.t.memcpy["bytes"][row])
        name = self.name(copy)
        memory = host_memory(name, direction)
        parts = [] if direction in name else [direction]
        if nbytes >= 0:
            parts.append(format_bytes(nbytes))
        if memory and memory not in name.lower():
            parts.append(f"{memory} host memory")
        ended = self.when(int(self.r.end_ns[copy]))
        return (
            f"the copy it waited for: {name} ({', '.join(parts)}), "
            f"{format_ns(int(self.t.dur_ns[copy]))}, ending {ended}"
        )

    def host_work(self, after_sync: bool = False) -> list[Evidence]:
        """The host events over the examined stretch, and its untraced part."""
        g, h, i = self.r.gaps, self.r.host, self.i
        a, b = int(g.host_from[i]), int(g.host_to[i])
        if b <= a:
            return []
        span = b - a
        mine = self.r.host_entries(i)
        out: list[Evidence] = []
        lead = "then the host ran" if after_sync else "the thread ran"
        for n, k in enumerate(mine[h.role[mine] == WORK].tolist()):
            row = int(h.row[k])
            share = int(h.overlap[k]) / span
            if n and share < MINOR_SHARE:
                continue  # the longest is always named; others when they matter
            out.append(
                self.event(
                    "work",
                    row,
                    f"{lead} {self.label(row)} for {format_ns(int(h.overlap[k]))} of the "
                    f"{format_ns(span)} before the launch ({share:.0%})",
                )
            )
            if n == 0:
                out += self.mostly_in(int(h.index[k]), a, b)
        inside = [int(h.row[k]) for k in mine[h.role[mine] == INSIDE].tolist()]
        within = [int(h.row[k]) for k in mine[h.role[mine] == WITHIN].tolist()]
        for row in inside:
            out.append(self.event("inside", row, f"all of it inside {self.label(row)}"))
        for row in within:
            out.append(self.event("within", row, f"within {self.label(row)}"))
        untraced = span - int(g.traced_ns[i])
        if untraced * 10 >= span:  # a tenth or more: say what no event covers
            where = (
                f" inside {self.label(inside[-1] if inside else within[-1])}"
                if (inside or within)
                else ""
            )
            out.append(
                Evidence(
                    "untraced",
                    f"{format_ns(untraced)} of those {format_ns(span)}{where} is covered by no "
                    "recorded event (untraced host code: Python without python_function "
                    "events, I/O, the OS)",
                    start_ns=a,
                    dur_ns=span,
                )
            )
        return out

    def mostly_in(self, index: int, a: int, b: int) -> list[Evidence]:
        """Where the longest host event spent most of the stretch: its chain of longest
        children, each covering at least half of its parent's time."""
        chain = self.r.stacks.main_descendants(index, a, b)
        if not chain:
            return []
        rows = [int(self.r.stacks.rows[c]) for c in chain]
        path = " > ".join(self.name(r) for r in rows[:-1])
        deepest = rows[-1]
        over = min(int(self.r.end_ns[deepest]), b) - max(int(self.t.start_ns[deepest]), a)
        text = f"mostly in {self.label(deepest)}, {format_ns(over)} of it"
        return [self.event("deepest", deepest, text + (f" (via {path})" if path else ""))]

    def label(self, row: int) -> str:
        kind = int(self.t.kind[row])
        what = {
            EventKind.PYTHON: "Python ",
            EventKind.ANNOTATION: "range ",
            EventKind.RUNTIME: "",
            EventKind.CPU_OP: "",
        }.get(EventKind(kind), "")
        return f"{what}{self.name(row)} ({format_ns(int(self.t.dur_ns[row]))})"

    def launch_overhead(self) -> list[Evidence]:
        g, i = self.r.gaps, self.i
        launch, nxt, prev = int(g.launch[i]), int(g.next[i]), int(g.prev[i])
        ls, le = int(self.t.start_ns[launch]), int(self.r.end_ns[launch])
        if le <= self.g0:
            return [
                self.event(
                    "queued",
                    nxt,
                    f"{self.name(nxt)} was queued on the same stream as {self.name(prev)} and "
                    f"started {format_ns(self.g1 - self.g0)} after it ended: the device's "
                    f"own start-up between queued work (at most {format_ns(QUEUED_START_NS)})",
                ),
                self.launch_line(),
            ]
        out = [self.launch_line()]
        if ls <= self.g0:
            out.insert(
                0,
                self.event(
                    "launch",
                    launch,
                    f"{self.name(launch)} was under way when the GPU went idle: it began "
                    f"{format_ns(self.g0 - ls)} before and took {format_ns(le - ls)}",
                ),
            )
            out.pop()
        previous = int(g.previous_launch[i])
        if previous >= 0:
            pend = int(self.r.end_ns[previous])
            out.append(
                self.event(
                    "previous-launch",
                    previous,
                    f"the thread's previous launch, {self.name(previous)}, returned "
                    f"{format_ns(ls - pend)} before this one began",
                )
            )
        out.append(
            self.event(
                "work",
                prev,
                f"the work before the gap, {self.name(prev)}, ran "
                f"{format_ns(int(self.t.dur_ns[prev]))}; the launch call took "
                f"{format_ns(le - ls)}",
            )
        )
        return out

    def gpu_dependency(self) -> list[Evidence]:
        g, i = self.r.gaps, self.i
        launch, nxt, prev = int(g.launch[i]), int(g.next[i]), int(g.prev[i])
        le = int(self.r.end_ns[launch])
        if le <= self.g0:
            queued = (
                f"{self.name(nxt)} was already queued: {self.name(launch)} returned "
                f"{format_ns(self.g0 - le)} before the GPU went idle, and the work started "
                f"{format_ns(self.g1 - self.g0)} after"
            )
        else:
            queued = (
                f"{self.name(launch)} queued {self.name(nxt)} {format_ns(le - self.g0)} after "
                f"the GPU went idle, and the work then waited {format_ns(self.g1 - le)} in "
                f"the queue (more than {format_ns(QUEUE_WAIT_NS)}): the GPU side held it last"
            )
        return [
            self.event("queued", nxt, queued),
            Evidence("waits", self.waits_for(nxt, prev)),
            *self.found(
                "stream-wait",
                int(g.stream_wait[i]),
                lambda row: (
                    f"before launching it the thread called {self.name(row)}: the "
                    "stream waits for an event recorded on another stream"
                ),
            ),
        ]

    def waits_for(self, nxt: int, prev: int) -> str:
        from perflab.analysis.categories import is_comm_name

        name = self.name(nxt)
        if is_comm_name([name])[0]:
            return f"{name} is a collective: it waits until its peers (the other ranks) join"
        if self.t.track[nxt] != self.t.track[prev]:
            return (
                f"it runs on {self.t.track_label(int(self.t.track[nxt]))} after work on "
                f"{self.t.track_label(int(self.t.track[prev]))}: a wait for another stream's "
                "event or work"
            )
        if int(self.t.kind[nxt]) == EventKind.MEMCPY:
            return "a copy: it waits for a copy engine or for its source"
        return "queued on the same stream: a wait the trace does not show (an event, a peer)"

    def unrecorded(self) -> list[Evidence]:
        g, i = self.r.gaps, self.i
        launch = int(g.launch[i])
        thread = _thread(self.t, int(g.thread[i]))
        delay = int(self.t.start_ns[launch]) - self.g0
        return [
            Evidence(
                "note",
                f"{thread} recorded only CUDA runtime calls (no CPU ops, Python functions or "
                f"ranges): what it did for the {format_ns(max(delay, 0))} before the launch "
                "is not in the trace",
            ),
            self.launch_line(),
        ]


def step_window(trace: Trace, step: int) -> tuple[int, int]:
    """The GPU time of ``ProfilerStep#<step>``: from the start of the gap before the first
    GPU work it launched (or that work's start) to the end of the last (see
    :mod:`perflab.analysis.steps`)."""
    steps = profiler_steps(trace)
    index = steps.index_of(step)
    gaps = find_gaps(trace)
    links = launch_links(trace)
    mine = gap_steps(trace, steps, gaps, links) == index
    return _window(trace, steps, index, gaps, mine, links)


def _window(
    trace: Trace,
    steps: Steps,
    index: int,
    gaps: GapColumns,
    mine: npt.NDArray[np.bool_],
    links: npt.NDArray[np.int64],
) -> tuple[int, int]:
    first, last = step_windows(trace, steps, work_steps(trace, steps, links))
    return min([int(first[index]), *gaps.start[mine].tolist()]), int(last[index])


def idle_causes(trace: Trace, min_ns: int = 0, step: int | None = None) -> IdleCauses:
    """Every gap longer than ``min_ns`` in each GPU's busy time (only those of
    ``ProfilerStep#<step>`` when given), with its cause and evidence (module docstring),
    and each step's GPU time split into busy and idle by cause."""
    if isinstance(min_ns, bool) or not isinstance(min_ns, (int, np.integer)) or min_ns < 0:
        raise InputError(
            f"the shortest gap shown must be a whole number of ns >= 0, not {min_ns!r}"
        )
    if step is not None and (
        isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0
    ):
        raise InputError(f"a step is a ProfilerStep number (a whole number >= 0), not {step!r}")
    steps = profiler_steps(trace)
    index = steps.index_of(int(step)) if step is not None else -1
    links = launch_links(trace)
    every = classify(trace, find_gaps(trace), links)
    owner = gap_steps(trace, steps, every, links)
    keep = every.end - every.start > min_ns
    window = None
    if step is not None:
        keep &= owner == index
        window = _window(trace, steps, index, every, owner == index, links)
    gaps = every.take(np.flatnonzero(keep))
    stacks = HostStacks(trace)
    host = host_evidence(gaps, stacks)
    pairs, _ = device_pairs(trace)
    labels = {
        int(k): device_pair_label(int(pairs[k, 0]), int(pairs[k, 1])) for k in range(len(pairs))
    }
    split = step_split(trace, steps, every, links, len(CAUSES)) if len(steps) else None
    by_step = _step_frame(split, labels) if split is not None else None
    strip = _strip(trace, gaps, labels, window)
    return IdleCauses(trace, gaps, host, stacks, labels, int(min_ns), step, window, by_step, strip)


STRIP_PIXELS = 900  # bins of the static strip picture


@dataclass(frozen=True)
class Strip:
    """Each device's span (or the step's window) cut into ``pixels`` equal bins, and what
    held most of each bin: 0 busy, 1 + the cause code of the gaps that held most of it
    (gaps shorter than the result's ``min_ns`` count as busy). ``state`` has one row per
    device of ``devices``."""

    devices: list[str]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    state: npt.NDArray[np.int8]


def _strip(
    trace: Trace,
    gaps: GapColumns,
    labels: dict[int, str],
    window: tuple[int, int] | None,
    pixels: int = STRIP_PIXELS,
) -> Strip:
    """The :class:`Strip` of ``gaps``: per device, per bin, the idle time of each cause by
    cumulative sums (no loop over gaps or bins)."""
    work = trace.mask(*GPU_WORK_KINDS)
    pair = event_device_pairs(trace)
    work &= pair >= 0
    devices = np.unique(pair[work])
    start = np.full(len(devices), np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(len(devices), np.iinfo(np.int64).min, dtype=np.int64)
    at = np.searchsorted(devices, pair[work])
    np.minimum.at(start, at, trace.start_ns[work])
    np.maximum.at(end, at, trace.start_ns[work] + trace.dur_ns[work])
    if window is not None:
        start, end = np.maximum(start, window[0]), np.maximum(np.minimum(end, window[1]), start)
    state = np.zeros((len(devices), pixels), dtype=np.int8)
    for row, device in enumerate(devices.tolist()):
        edges = np.linspace(start[row], end[row], pixels + 1).astype(np.int64)
        on = np.flatnonzero(gaps.device == device)
        idle = idle_in_windows(gaps, on, edges[:-1], edges[1:], len(CAUSES))
        busy = (edges[1:] - edges[:-1]) - idle.sum(axis=0)
        state[row] = np.argmax(np.vstack([busy, idle]), axis=0)
    return Strip([labels[d] for d in devices.tolist()], start, end, state)


def _step_frame(split: StepSplit, labels: dict[int, str]) -> Frame:
    """The per-step table: span, busy and idle time per cause of each step on each GPU."""
    span = split.end - split.start
    idle = split.idle.sum(axis=0)
    cols: dict[str, list[Any]] = {
        "step": split.step.tolist(),
        "device": [labels[d] for d in split.device.tolist()],
        "span_us": (span / 1e3).tolist(),
        "busy_us": ((span - idle) / 1e3).tolist(),
        "idle_us": (idle / 1e3).tolist(),
    }
    for code, cause in enumerate(CAUSES):
        cols[f"{cause}_us"] = (split.idle[code] / 1e3).tolist()
    units = {k: US for k in cols if k.endswith("_us")}
    title = "each step's GPU time, from the gap before its first work to its last: busy, idle"
    return Frame(cols, units, title=title + " by cause")


def cause_totals(trace: Trace, min_ns: int = 0) -> dict[str, CauseTotal]:
    """Idle time and gaps per cause (every cause listed), without building any evidence:
    what the trace summary shows."""
    gaps = classify(trace, find_gaps(trace, min_ns), launch_links(trace), evidence=False)
    return _totals(gaps.cause, gaps.end - gaps.start)


def _totals(cause: npt.NDArray[np.int8], dur: npt.NDArray[np.int64]) -> dict[str, CauseTotal]:
    total = exact_sum(dur)
    out = {}
    for code, name in enumerate(CAUSES):
        on = cause == code
        ns = exact_sum(dur[on])
        out[name] = CauseTotal(ns / 1e3, int(on.sum()), ns / total if total else 0.0)
    return out
