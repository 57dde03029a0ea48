"""Before and after: two traces compared name by name (``perflab trace diff``,
``Trace.diff``).

What is matched: GPU work (kernels, memcpys, memsets) by name, and, separately, host events
(CPU ops, CUDA runtime calls, synchronisations, user annotations; not the
``ProfilerStep#<n>`` ranges themselves) by name. Names may be shortened first
(``short_names``: template arguments, parameters and return types dropped) and renamed
(``renames``, see :mod:`perflab.analysis.diff_names`), so that a kernel renamed between the
runs stays one row. Either trace may be any file perflab loads (Kineto JSON, an Nsight
Systems export, a saved trace), two ranks of one job, or a merged job.

What is compared:

- the whole traces (the default), or one step of each (``step=N``, or ``(N, M)`` for step N of
  the control and M of the test): the events of ``ProfilerStep#<n>``. GPU work belongs to the
  step whose host range holds the start of the runtime call that launched it (the same
  correlation id; as HTA assigns kernels to iterations), host events to the step whose range
  holds their start (:mod:`perflab.analysis.steps`);
- per name, on each side: how many events and their summed duration; the difference; and
  ``status``: ``new`` (in the test only), ``gone`` (in the control only), ``changed`` (count
  or time differ) or ``unchanged``;
- with several steps on each side (whole traces compared, both with 2 steps or more): each
  name's total time in every step, its per-step median, and a ``verdict`` from the
  step-to-step noise: ``faster``, ``slower``, ``same`` or ``unclear`` (method:
  :mod:`perflab.analysis.diff_stats`); ``new`` and ``gone`` stay. The changes, the category
  and stream splits and the headline are then per step: the mean over each side's steps of
  the time inside steps. With fewer steps on a side the result says so and gives no verdict
  beyond ``new``/``gone``/``changed``/``unchanged``.
- the GPU change split by kernel category (:mod:`perflab.analysis.categories`) and by stream;
- the GPUs' idle time split by cause (:mod:`perflab.analysis.idle_causes`: ``host-busy``,
  ``after-sync``, ``launch-overhead``, ``gpu-dependency``, ``unknown``) on each side: every gap
  of the whole trace, or the gaps of the chosen step (those whose next work the step
  launched, as ``Trace.idle(step=N)`` keeps them); with per-step statistics the mean over each
  side's steps of the gaps the steps own (and each side's per-step median);
- a headline naming what explains most of the change: groups of GPU work, or a cause's idle
  time when it is among the largest changes.

Times are sums of event durations (not unions): a kernel that overlaps another counts whole.
Everything is vectorised: events are grouped by name code with sorts and bincounts; Python
loops only touch distinct names, tracks and steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import categorize
from perflab.analysis.diff_names import Rename, canonical, family
from perflab.analysis.diff_stats import METHOD, verdicts
from perflab.analysis.idle_classify import CAUSES, classify, find_gaps
from perflab.analysis.steps import Steps, gap_steps, profiler_steps, work_steps
from perflab.errors import InputError
from perflab.model.display import Shown
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
from perflab.model.units import format_ns, us_from_ns

if TYPE_CHECKING:
    import pandas as pd

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
StepSpec = int | tuple[int, int] | None

HOST_KINDS = (EventKind.CPU_OP, EventKind.RUNTIME, EventKind.SYNC, EventKind.ANNOTATION)
MIN_STEPS = 2  # steps a side needs for per-step statistics
MAX_STEP_CELLS = 20_000_000  # names x steps kept for per-step statistics (160 MB of floats)
HEADLINE_PARTS = 3
STATUSES = ("new", "gone", "changed", "unchanged")
# how the headline says "more idle ..." of each cause
IDLE_WORDS = {
    "host-busy": "while the host was busy",
    "after-sync": "after syncs",
    "launch-overhead": "in launch overhead",
    "gpu-dependency": "waiting on the GPU side",
    "unknown": "of unknown cause",
}


@dataclass(frozen=True)
class Side:
    """One trace of the comparison: where it came from, the ``ProfilerStep`` numbers compared
    (every step of the trace when no step was chosen) and each step's host duration (ns)."""

    source: str
    steps: list[int]
    step_ns: list[int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "steps": self.steps,
            "step_us": [us_from_ns(ns) for ns in self.step_ns],
        }


@dataclass
class DiffRows:
    """One row per matched name, sorted by the size of the change (largest first).

    ``control_ns``/``test_ns`` are summed durations in the compared scope; with per-step
    statistics ``control_steps``/``test_steps`` hold each name's total in every step (rows x
    steps, ns) and ``change_ns`` is the difference of the per-step means, else it is
    ``test_ns - control_ns``. ``p_value`` is NaN without per-step statistics."""

    names: list[str]
    kinds: list[str]
    categories: list[str]
    control_count: I64
    test_count: I64
    control_ns: F64
    test_ns: F64
    change_ns: F64
    control_steps: F64
    test_steps: F64
    p_value: F64
    status: list[str]
    verdict: list[str]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def per_step(self) -> bool:
        return bool(self.control_steps.shape[1] > 0 and self.test_steps.shape[1] > 0)

    def records(self, top: int | None = None) -> list[dict[str, Any]]:
        """The rows as JSON-able dicts (the first ``top`` when given)."""
        shown = range(len(self) if top is None else min(top, len(self)))
        return [self._record(i) for i in shown]

    def _record(self, i: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.names[i],
            "kind": self.kinds[i],
            "category": self.categories[i],
            "control_count": int(self.control_count[i]),
            "test_count": int(self.test_count[i]),
            "control_us": us_from_ns(float(self.control_ns[i])),
            "test_us": us_from_ns(float(self.test_ns[i])),
            "change_us": us_from_ns(float(self.test_ns[i] - self.control_ns[i])),
            "status": self.status[i],
            "verdict": self.verdict[i],
        }
        if self.per_step:
            out["control_step_median_us"] = us_from_ns(float(np.median(self.control_steps[i])))
            out["test_step_median_us"] = us_from_ns(float(np.median(self.test_steps[i])))
            out["change_per_step_us"] = us_from_ns(float(self.change_ns[i]))
            out["p_value"] = round(float(self.p_value[i]), 6)
            out["control_per_step_us"] = [us_from_ns(v) for v in self.control_steps[i].tolist()]
            out["test_per_step_us"] = [us_from_ns(v) for v in self.test_steps[i].tolist()]
        return out

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.records())

    def counts(self) -> dict[str, dict[str, int]]:
        """How many rows have each status and each verdict."""
        return {"status": _tally(self.status), "verdict": _tally(self.verdict)}


def _tally(values: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for value in values:
        found[value] = found.get(value, 0) + 1
    return found


@dataclass(frozen=True)
class Split:
    """GPU time of one category or stream on each side (ns; per step with per-step
    statistics)."""

    name: str
    control_ns: float
    test_ns: float

    @property
    def change_ns(self) -> float:
        return self.test_ns - self.control_ns

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **_change_dict(self.control_ns, self.test_ns)}


def _change_dict(control_ns: float, test_ns: float) -> dict[str, float]:
    return {
        "control_us": us_from_ns(control_ns),
        "test_us": us_from_ns(test_ns),
        "change_us": us_from_ns(test_ns - control_ns),
    }


@dataclass(frozen=True)
class IdleSplit(Split):
    """GPU idle time of one cause on each side (``name`` is the cause; ns, per-step means
    with per-step statistics, which also give each side's per-step median)."""

    control_median_ns: float | None = None
    test_median_ns: float | None = None

    def entry(self) -> dict[str, float]:
        """The ``idle_by_cause`` entry of ``--json``."""
        out = {
            "control_us": us_from_ns(self.control_ns),
            "test_us": us_from_ns(self.test_ns),
            "delta_us": us_from_ns(self.change_ns),
        }
        if self.control_median_ns is not None and self.test_median_ns is not None:
            out["control_step_median_us"] = us_from_ns(self.control_median_ns)
            out["test_step_median_us"] = us_from_ns(self.test_median_ns)
        return out


@dataclass
class TraceDiff(Shown):
    """Two traces compared name by name (module docstring): ``kernels`` (GPU work) and
    ``ops`` (host events) rows, the GPU change by category and by stream, the GPU idle
    time by cause (every cause, in :data:`CAUSES` order), and a headline."""

    control: Side
    test: Side
    scope: str
    kernels: DiffRows
    ops: DiffRows
    by_category: list[Split]
    by_stream: list[Split]
    headline: str
    notes: list[str] = field(default_factory=list)
    idle_by_cause: list[IdleSplit] = field(default_factory=list)

    @property
    def per_step(self) -> bool:
        return self.kernels.per_step

    @property
    def method(self) -> str:
        return METHOD if self.per_step else "no verdict from noise: " + self._why_no_steps()

    def _why_no_steps(self) -> str:
        if self.scope.startswith("ProfilerStep"):
            return "one step on each side"
        return "fewer than 2 ProfilerSteps on a side"

    @property
    def gpu_control_ns(self) -> float:
        return _summed(self.by_category)[0]

    @property
    def gpu_test_ns(self) -> float:
        return _summed(self.by_category)[1]

    @property
    def idle_ns(self) -> tuple[float, float]:
        """The GPUs' idle time of the control and of the test (every cause)."""
        return _summed(self.idle_by_cause)

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """Everything as JSON-able data; ``top``: only the largest ``top`` rows of each list."""
        return {
            "kind": "trace_diff",
            "control": self.control.to_dict(),
            "test": self.test.to_dict(),
            "scope": self.scope,
            "per_step": self.per_step,
            "method": self.method,
            "headline": self.headline,
            "notes": self.notes,
            "gpu": _change_dict(*_summed(self.by_category)),
            "idle": _change_dict(*self.idle_ns),
            "idle_by_cause": {s.name: s.entry() for s in self.idle_by_cause},
            "counts": {"kernels": self.kernels.counts(), "ops": self.ops.counts()},
            "by_category": [s.to_dict() for s in self.by_category],
            "by_stream": [s.to_dict() for s in self.by_stream],
            "kernels": self.kernels.records(top),
            "ops": self.ops.records(top),
        }

    def to_pandas(self, which: str = "kernels") -> pd.DataFrame:
        """The ``kernels`` or ``ops`` rows as a DataFrame."""
        if which not in ("kernels", "ops"):
            raise InputError(f"to_pandas: 'kernels' or 'ops', not {which!r}")
        rows: DiffRows = getattr(self, which)
        return rows.to_pandas()


def _summed(splits: Sequence[Split]) -> tuple[float, float]:
    """The control's and the test's time over ``splits``."""
    return float(sum(s.control_ns for s in splits)), float(sum(s.test_ns for s in splits))


# -- one side: its steps, the step of each event, the events compared -------------------------


@dataclass
class _Prepared:
    trace: Trace
    side: Side
    step_of: I64  # per event: position in side.steps, -1 outside them
    in_scope: npt.NDArray[np.bool_]
    steps: Steps  # every ProfilerStep of the trace
    links: I64  # per event: the runtime call that launched it (launch_links)
    chosen: int = -1  # the index in ``steps`` of the step compared, -1 for the whole trace

    @classmethod
    def of(cls, trace: Trace, step: int | None) -> _Prepared:
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


def _compared(side: _Prepared, gpu: bool) -> I64:
    """The rows of one side that are compared: GPU work, or host events without the
    ProfilerStep ranges."""
    trace = side.trace
    if gpu:
        return np.flatnonzero(trace.mask(*GPU_WORK_KINDS) & side.in_scope)
    step_names = np.array([s.startswith("ProfilerStep#") for s in trace.strings], dtype=bool)
    is_step = step_names[trace.name] if len(trace.strings) else np.zeros(len(trace), bool)
    host = kind_mask(trace.kind, HOST_KINDS) & _on_cpu(trace) & ~is_step
    return np.flatnonzero(host & side.in_scope)


class _Vocabulary:
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
class _Group:
    """One side's compared events of one group: name code, duration, step, kind, track."""

    code: I64
    dur: I64
    step: I64
    kind: npt.NDArray[np.int8]
    track: npt.NDArray[np.int32]
    n_steps: int

    @classmethod
    def of(cls, side: _Prepared, gpu: bool, vocab: _Vocabulary) -> _Group:
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


def _kind_names(groups: Sequence[_Group], size: int) -> list[str]:
    kinds = np.zeros(size, dtype=np.int64)
    for g in groups:
        kinds[g.code] = g.kind
    return [KIND_NAMES[k] for k in kinds.tolist()]


def _status(c_count: I64, t_count: I64, c_ns: F64, t_ns: F64) -> npt.NDArray[Any]:
    new, gone = (c_count == 0) & (t_count > 0), (t_count == 0) & (c_count > 0)
    same = (c_count == t_count) & (c_ns == t_ns)
    return np.select([new, gone, same], ["new", "gone", "unchanged"], "changed").astype(object)


def _rows(c: _Group, t: _Group, names: list[str], per_step: bool, gpu: bool) -> DiffRows:
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


# -- splits and the headline ---------------------------------------------------------------


def _row_values(rows: DiffRows) -> tuple[F64, F64]:
    """Each row's control and test time as the splits count it: the per-step mean with
    per-step statistics, else the total."""
    if rows.per_step:
        return rows.control_steps.mean(axis=1), rows.test_steps.mean(axis=1)
    return rows.control_ns, rows.test_ns


def _by_category(rows: DiffRows) -> list[Split]:
    c, t = _row_values(rows)
    labels = list(dict.fromkeys(rows.categories))
    code = np.array([labels.index(x) for x in rows.categories], dtype=np.int64)
    c_sum = np.bincount(code, weights=c, minlength=len(labels)) if len(code) else np.zeros(0)
    t_sum = np.bincount(code, weights=t, minlength=len(labels)) if len(code) else np.zeros(0)
    splits = [Split(n, float(a), float(b)) for n, a, b in zip(labels, c_sum, t_sum, strict=True)]
    return sorted(splits, key=lambda s: (-abs(s.change_ns), s.name))


def _stream_labels(trace: Trace) -> list[str]:
    """Per track: the stream name the diff matches streams by (``stream 7``, or ``GPU 0
    stream 7`` in a trace with several GPUs)."""
    tracks = trace.tracks
    gpu = tracks["kind"] == TrackKind.GPU
    pairs = {
        (int(r), int(d)) for r, d, g in zip(tracks["rank"], tracks["device"], gpu, strict=True) if g
    }
    several = len(pairs) > 1
    labels = []
    for rank, device, stream in zip(
        tracks["rank"], tracks["device"], tracks["stream"], strict=True
    ):
        where = ""
        if several:
            where = (f"rank {rank} " if int(rank) else "") + f"GPU {device} "
        labels.append(f"{where}stream {stream}")
    return labels


def _stream_values(side: _Prepared, group: _Group, per_step: bool) -> dict[str, float]:
    labels = _stream_labels(side.trace)
    keep = group.step >= 0 if per_step else np.ones(len(group.dur), dtype=bool)
    sums = grouped_sum(group.track[keep].astype(np.int64), group.dur[keep], len(labels))
    scale = 1.0 / group.n_steps if per_step else 1.0
    out: dict[str, float] = {}
    for label, total in zip(labels, sums.tolist(), strict=True):
        if total:
            out[label] = out.get(label, 0.0) + total * scale
    return out


def _by_stream(
    sides: tuple[_Prepared, _Prepared], groups: tuple[_Group, _Group], per_step: bool
) -> list[Split]:
    c = _stream_values(sides[0], groups[0], per_step)
    t = _stream_values(sides[1], groups[1], per_step)
    splits = [Split(k, c.get(k, 0.0), t.get(k, 0.0)) for k in dict.fromkeys([*c, *t])]
    return sorted(splits, key=lambda s: (-abs(s.change_ns), s.name))


def _idle_values(side: _Prepared, per_step: bool) -> tuple[F64, F64 | None]:
    """Per cause (:data:`CAUSES` order): the side's idle time in the compared scope (the mean
    over its steps with per-step statistics) and, then, its per-step median."""
    trace, causes = side.trace, len(CAUSES)
    gaps = classify(trace, find_gaps(trace), side.links, evidence=False)
    cause, dur = gaps.cause.astype(np.int64), gaps.end - gaps.start
    if not per_step and side.chosen < 0:
        return grouped_sum(cause, dur, causes), None
    owner = gap_steps(trace, side.steps, gaps, side.links)
    if side.chosen >= 0:
        mine = owner == side.chosen
        return grouped_sum(cause[mine], dur[mine], causes), None
    n, inside = len(side.steps), owner >= 0
    cells = grouped_sum(cause[inside] * n + owner[inside], dur[inside], causes * n)
    table = cells.reshape(causes, n)
    return table.sum(axis=1) / n, np.median(table, axis=1)


def _by_cause(sides: tuple[_Prepared, _Prepared], per_step: bool) -> list[IdleSplit]:
    (c, c_median), (t, t_median) = (_idle_values(s, per_step) for s in sides)
    return [
        IdleSplit(
            cause,
            float(c[k]),
            float(t[k]),
            None if c_median is None else float(c_median[k]),
            None if t_median is None else float(t_median[k]),
        )
        for k, cause in enumerate(CAUSES)
    ]


_NOUN = {"kernel": "kernel", "memcpy": "memcpy", "memset": "memset"}


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + format_ns(abs(ns))


def headline(rows: DiffRows, scope: str, idle: Sequence[Split] = ()) -> str:
    """``+3.1 ms per step of GPU time: +2.4 ms in 2 new triton_poi_fused_* kernels, 0.5 ms
    more idle after syncs, ...``: the GPU change and the largest of the changes that explain
    it: groups of rows (by verdict and name family) and the idle time of each cause."""
    total = float(rows.change_ns.sum())
    per = " per step" if rows.per_step else f" ({scope})"
    head = f"{_signed(total)}{per} of GPU time"
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, (name, verdict, kind) in enumerate(
        zip(rows.names, rows.verdict, rows.kinds, strict=True)
    ):
        groups.setdefault((verdict, family(name), kind), []).append(i)
    sized = sorted(
        ((float(rows.change_ns[m].sum()), key, m) for key, m in groups.items()),
        key=lambda x: -abs(x[0]),
    )
    # only the largest groups can make the headline, with or without the idle causes
    top = sized[:HEADLINE_PARTS]
    found = [(ns, _part(ns, key, members, rows)) for ns, key, members in top if ns]
    found += [(s.change_ns, _idle_part(s)) for s in idle if s.change_ns]
    found.sort(key=lambda x: -abs(x[0]))
    parts = [text for _, text in found[:HEADLINE_PARTS]]
    if not parts:
        return f"{head}: no change"
    return f"{head}: " + ", ".join(parts)


def _idle_part(split: Split) -> str:
    more = "more" if split.change_ns > 0 else "less"
    words = IDLE_WORDS.get(split.name, split.name)
    return f"{format_ns(abs(split.change_ns))} {more} idle {words}"


def _part(ns: float, key: tuple[str, str, str], members: list[int], rows: DiffRows) -> str:
    verdict, fam, kind = key
    noun = _NOUN.get(kind, "op")
    if len(members) == 1:
        return f"{_signed(ns)} in `{rows.names[members[0]]}` ({verdict})"
    return f"{_signed(ns)} in {len(members)} {verdict} `{fam}` {noun}s"


# -- the comparison ----------------------------------------------------------------------------


def _step_pair(step: StepSpec) -> tuple[int | None, int | None]:
    if step is None:
        return None, None
    pair = step if isinstance(step, tuple) else (step, step)
    for n in pair:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InputError(f"a step is a ProfilerStep number (0 or more), not {n!r}")
    return int(pair[0]), int(pair[1])


def _scope(control: Side, test: Side, chosen: bool) -> str:
    if not chosen:
        return "whole traces"
    a, b = control.steps[0], test.steps[0]
    return f"ProfilerStep#{a}" if a == b else f"ProfilerStep#{a} vs #{b}"


def _notes(control: Side, test: Side, chosen: bool, per_step: bool, cells: bool) -> list[str]:
    if chosen:
        return [
            "one step on each side: no verdict from step-to-step noise, only "
            "new/gone/changed/unchanged"
        ]
    notes = []
    for label, side in (("control", control), ("test", test)):
        if len(side.steps) < MIN_STEPS:
            n = len(side.steps)
            notes.append(
                f"the {label} has {n} ProfilerStep range{'' if n == 1 else 's'}: whole traces "
                "compared, no verdict from step-to-step noise, only new/gone/changed/unchanged"
            )
    if per_step and max(len(control.steps), len(test.steps)) < 4:
        notes.append(
            "with fewer than 4 steps a side no change can be told from noise: "
            "changes that matter are 'unclear'"
        )
    if not cells:
        notes.append("too many names x steps for per-step statistics: totals compared")
    return notes


def _groups(
    sides: tuple[_Prepared, _Prepared], gpu: bool, vocab: _Vocabulary
) -> tuple[tuple[_Group, _Group], list[str]]:
    """Both sides' events of one group, coded by one vocabulary, and its names."""
    groups = (_Group.of(sides[0], gpu, vocab), _Group.of(sides[1], gpu, vocab))
    return groups, vocab.names


def diff_traces(
    control: Trace,
    test: Trace,
    *,
    step: StepSpec = None,
    short_names: bool = False,
    renames: Sequence[Rename | str] = (),
) -> TraceDiff:
    """Compare ``test`` against ``control`` (module docstring). ``step``: one step of each
    (``N``, or ``(N, M)``: step N of the control, M of the test); ``short_names``: match by
    short names; ``renames``: :class:`Rename` objects or their ``OLD=NEW`` /
    ``re:PATTERN=REPL`` texts, applied to both traces' names."""
    c_step, t_step = _step_pair(step)
    parsed = [r if isinstance(r, Rename) else Rename.parse(r) for r in renames]
    sides = (_Prepared.of(control, c_step), _Prepared.of(test, t_step))
    chosen = step is not None
    grouped = [_groups(sides, gpu, _Vocabulary(short_names, parsed)) for gpu in (True, False)]
    steps = max(len(s.side.steps) for s in sides)
    fits = all(len(names) * steps <= MAX_STEP_CELLS for _, names in grouped)
    per_step = not chosen and fits and all(len(s.side.steps) >= MIN_STEPS for s in sides)
    (gpu_groups, gpu_names), (host_groups, host_names) = grouped
    kernels = _rows(*gpu_groups, gpu_names, per_step, gpu=True)
    ops = _rows(*host_groups, host_names, per_step, gpu=False)
    control_side, test_side = sides[0].side, sides[1].side
    scope = _scope(control_side, test_side, chosen)
    idle = _by_cause(sides, kernels.per_step)
    return TraceDiff(
        control=control_side,
        test=test_side,
        scope=scope,
        kernels=kernels,
        ops=ops,
        by_category=_by_category(kernels),
        by_stream=_by_stream(sides, gpu_groups, kernels.per_step),
        headline=headline(kernels, scope, idle),
        notes=_notes(control_side, test_side, chosen, per_step, fits),
        idle_by_cause=idle,
    )
