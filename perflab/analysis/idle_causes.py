"""Causes that hold: why each gap in a GPU's busy time happened, from the side that held the
next work back, with the trace's own events as evidence.

A gap is a stretch of a device's span in which none of its kernels, copies or memsets ran
(busy time is their union per device, as in the trace summary). For each gap this follows
the work that ended it (the *next work*) to the host runtime call that launched it (same
rank and correlation id), and looks at what the launching thread did from the moment the
GPU went idle to that launch. The cause is one of six. ``g0``/``g1`` are the gap's start and
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
5. ``launch-blocked``: launch calls of the launching thread (runtime calls that launch GPU
   work, the next work's own among them; not the synchronising ones above) that each took
   at least ``LAUNCH_BLOCKED_NS`` (100 us) ran for at least half the time from ``g0`` to
   the next work's launch returning. A launch returns in microseconds: one that long was
   blocked in the launch path (a full launch queue, the driver's lock, lazy loading of the
   kernel's module), not running other host work, even inside a CPU op.
6. ``launch-overhead``: the launch call was under way when the GPU went idle (began at or
   before ``g0``, returned after), or the thread began it at most ``LAUNCH_PATH_NS`` (10 us)
   after its previous launch of GPU work returned: back-to-back launches with nothing but
   the launch path between them (tiny kernels: what CUDA graphs and fusion remove).
7. ``host-busy``: the launching thread has recorded host work (CPU ops, Python functions,
   user or NVTX ranges): it was running other work between ``g0`` (or the sync's return)
   and the launch.
8. ``unknown``: the launching thread recorded nothing but CUDA runtime calls (e.g. an
   Nsight Systems export without CPU sampling): the trace cannot say what it did.

Evidence, per cause: the sync, the copy it waited for (direction, bytes, host memory) and
what the host did after it returned (``after-sync``); the host events over the stretch
from ``g0`` to the launch: the outermost and innermost covering all of it, the longest that
ran in it with their times and the chain of longest children below the first, and how much
of it no recorded event covers, i.e. untraced host code (``host-busy``); the long launch
call, how much of the time such calls ran, and the host events around it
(``launch-blocked``); the launch call, the thread's previous launch and the work before the
gap (``launch-overhead``); when the
work was queued and what it waited for (``gpu-dependency``); why nothing can be said
(``unknown``).

These are heuristics over the events a profiler recorded: a trace without host events, or
with clocks that disagree by more than the slack above, can mislead them; the evidence is
there to check each verdict. Everything is vectorised: a few sorts of the trace's rows, no
Python object per event (evidence objects are built only for the gaps that are shown).
The evidence is built in :mod:`perflab.analysis.idle_evidence`, the static strip of each
GPU's bins in :mod:`perflab.analysis.idle_strip`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.analysis.host_stacks import HostStacks
from perflab.analysis.idle_classify import (
    CAUSES,
    LAUNCH_BLOCKED_NS,
    LAUNCH_PATH_NS,
    QUEUE_WAIT_NS,
    QUEUED_START_NS,
    SYNC_SLACK_NS,
    GapColumns,
    HostEvidence,
    classify,
    find_gaps,
    host_evidence,
)
from perflab.analysis.idle_evidence import Evidence, explain, thread_name
from perflab.analysis.idle_rules import HEURISTIC_NOTE, RULES
from perflab.analysis.idle_strip import Strip, build_strip
from perflab.analysis.steps import (
    Steps,
    StepSplit,
    gap_steps,
    profiler_steps,
    step_split,
    step_windows,
    work_steps,
)
from perflab.analysis.trace_intervals import exact_sum
from perflab.analysis.trace_stats import NO_GPU_WORK, US, Column, Frame
from perflab.errors import InputError
from perflab.model.display import Shown
from perflab.model.trace import GPU_WORK_KINDS, Trace
from perflab.model.trace_keys import (
    device_pair_label,
    device_pairs,
    event_device_pairs,
    launch_links,
)

if TYPE_CHECKING:
    import pandas as pd

    from perflab.analysis.json_views import GapView, IdleView

__all__ = [
    "CAUSES",
    "HEURISTIC_NOTE",
    "LAUNCH_BLOCKED_NS",
    "LAUNCH_PATH_NS",
    "QUEUED_START_NS",
    "QUEUE_WAIT_NS",
    "RULES",
    "SYNC_SLACK_NS",
    "CauseTotal",
    "Evidence",
    "IdleCauses",
    "IdleWithoutGpu",
    "cause_totals",
    "idle_causes",
    "step_window",
]


@dataclass(frozen=True)
class CauseTotal:
    """Idle time of one cause: microseconds, gaps, and share of the idle time shown."""

    idle_us: float
    gaps: int
    share: float


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
        return explain(self, gap)

    def gap_dict(self, gap: int) -> dict[str, object]:
        """Gap ``gap`` as ``to_dict()`` lists it."""
        from perflab.model.schema import encode

        return encode(self.gap_view(gap))

    def gap_view(self, gap: int) -> GapView:
        from perflab.analysis.json_views import EvidenceView, GapView
        from perflab.model.schema import view

        g = self.gaps
        return GapView(
            device=self.device_labels[int(g.device[gap])],
            start_ns=int(g.start[gap]),
            dur_ns=int(g.end[gap] - g.start[gap]),
            cause=self.cause_of(gap),
            before=self.trace.strings[int(self.trace.name[g.prev[gap]])],
            after=self.trace.strings[int(self.trace.name[g.next[gap]])],
            evidence=[view(e, EvidenceView) for e in self.evidence(gap)],
        )

    def to_dict(self) -> dict[str, object]:
        """``{"gaps": [...], "by_cause": {...}, "rules": {...}, ...}``: every gap with its
        device, start (ns, the trace's clock), duration, cause and evidence (the document
        :class:`perflab.analysis.json_views.IdleView` declares). Each gap is encoded on its
        own, so a trace's hundred thousand gaps are never held as declared documents, their
        JSON text and its dicts at once (the whole document's round trip tripled the peak)."""
        from perflab.model.schema import encode

        out = encode(self.document(gaps=False))
        out["gaps"] = [self.gap_dict(i) for i in range(len(self))]
        return out

    def document(self, *, gaps: bool = True) -> IdleView:
        """The declared document; ``gaps=False`` leaves the gap list empty."""
        from perflab.analysis.json_views import IdleView

        return IdleView(
            gaps=[self.gap_view(i) for i in range(len(self))] if gaps else [],
            by_cause=self.by_cause(),
            idle_ns=self.total_ns,
            min_ns=self.min_ns,
            step=self.step,
            steps=self.by_step.to_dict() if self.by_step is not None else None,
            rules=dict(RULES),
            note=HEURISTIC_NOTE,
        )

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
                "thread": [thread_name(self.trace, int(t)) for t in g.thread.tolist()],
            }
        )


@dataclass
class IdleWithoutGpu(IdleCauses):
    """The idle time of a trace with no GPU work (no kernels, copies or memsets): no gaps,
    since there is no GPU timeline to find them in, and a message that says so (its views
    say that instead of "0 ns in 0 gaps"; ``to_dict()`` has it as ``no_gpu_work``)."""

    @property
    def message(self) -> str:
        return f"{NO_GPU_WORK}, so there is no GPU timeline to find idle time in"

    def document(self, *, gaps: bool = True) -> IdleView:
        import msgspec

        return msgspec.structs.replace(super().document(gaps=gaps), no_gpu_work=self.message)


def has_gpu_work(trace: Trace) -> bool:
    """Whether any kernel, copy or memset lies on a GPU track (the summary's devices)."""
    return bool((trace.mask(*GPU_WORK_KINDS) & (event_device_pairs(trace) >= 0)).any())


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
    strip = build_strip(trace, gaps, labels, window)
    found = IdleCauses if has_gpu_work(trace) else IdleWithoutGpu
    return found(trace, gaps, host, stacks, labels, int(min_ns), step, window, by_step, strip)


def _step_frame(split: StepSplit, labels: dict[int, str]) -> Frame:
    """The per-step table: span, busy and idle time per cause of each step on each GPU."""
    span = split.end - split.start
    idle = split.idle.sum(axis=0)
    cols: dict[str, Column] = {
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
