"""The evidence of one idle gap: the events and sentences a verdict of
:mod:`perflab.analysis.idle_causes` rests on (its docstring lists them per cause), built from
the result's columns only for the gaps that are shown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perflab.analysis.copies import host_memory
from perflab.analysis.idle_classify import (
    AFTER_SYNC,
    GPU_DEPENDENCY,
    HOST_BUSY,
    INSIDE,
    LAUNCH_BLOCKED,
    LAUNCH_BLOCKED_NS,
    LAUNCH_OVERHEAD,
    QUEUE_WAIT_NS,
    QUEUED_START_NS,
    UNKNOWN,
    WITHIN,
    WORK,
)
from perflab.model.trace import MEMCPY_DIRECTIONS, EventKind, Trace
from perflab.model.units import format_bytes, format_ns, shorten

if TYPE_CHECKING:
    from perflab.analysis.idle_causes import IdleCauses
    from perflab.analysis.json_views import EvidenceView

NAME_CHARS = 100  # an event's name in an evidence sentence (long C++ kernel names are cut)
MINOR_SHARE = 0.01  # host events below this share of the stretch are not named, but the first


@dataclass(frozen=True)
class Evidence:
    """One fact a verdict rests on: a role (``sync``, ``copy``, ``launch``, ``work``,
    ``inside``, ``within``, ``untraced``, ``queued``, ``previous-launch``, ``waits``,
    ``blocked-launch``, ``note``), the event's name and times on the trace's clock (None
    for a note), and a sentence saying it."""

    role: str
    text: str
    name: str = ""
    start_ns: int | None = None
    dur_ns: int | None = None

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.view())

    def view(self) -> EvidenceView:
        """The fact as a gap's ``evidence`` lists it (role, name, times, then the text)."""
        from perflab.analysis.json_views import EvidenceView
        from perflab.model.schema import view

        return view(self, EvidenceView)


def thread_name(trace: Trace, track: int) -> str:
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
            LAUNCH_BLOCKED: self.launch_blocked,
            GPU_DEPENDENCY: self.gpu_dependency,
            UNKNOWN: self.unrecorded,
        }[self.cause]
        return build()

    # -- per cause ---------------------------------------------------------------------
    def launch_line(self, since: int | None = None, what: str = "") -> Evidence:
        row = int(self.r.gaps.launch[self.i])
        start, dur = int(self.t.start_ns[row]), int(self.t.dur_ns[row])
        thread = thread_name(self.t, int(self.r.gaps.thread[self.i]))
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

    def launch_blocked(self) -> list[Evidence]:
        """The long launch call first, read as the launch path blocking (a heuristic, said
        so), then what the thread was in, and the launch of the next work."""
        g, i = self.r.gaps, self.i
        call = int(g.blocked_call[i])
        launch_row = int(g.launch[i])
        returned = min(max(int(self.r.end_ns[launch_row]), self.g0), self.g1)
        stretch, blocked = returned - self.g0, int(g.blocked_ns[i])
        own = " (the next work's own launch)" if call == launch_row else ""
        text = (
            f"{self.name(call)}{own} took {self.took(call)}: launch calls of "
            f"{format_ns(LAUNCH_BLOCKED_NS)} or more ran {format_ns(blocked)} of the "
            f"{format_ns(stretch)} from the GPU going idle to the next launch returning "
            f"({blocked / stretch:.0%}). A launch returns in microseconds: one that long was "
            "blocked in the launch path (a full launch queue, the driver, lazy loading of "
            "the kernel's module), not running other host work (a heuristic)"
        )
        return [self.event("blocked-launch", call, text), *self.host_work(), self.launch_line()]

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
        thread = thread_name(self.t, int(g.thread[i]))
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


def explain(result: IdleCauses, gap: int) -> list[Evidence]:
    """What the verdict on gap ``gap`` of ``result`` rests on, most telling first."""
    return _Explainer(result, gap).evidence()
