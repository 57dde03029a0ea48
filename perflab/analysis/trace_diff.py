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

The parts: :mod:`perflab.analysis.diff_match` matches each side's events into rows,
:mod:`perflab.analysis.diff_splits` splits the change and writes the headline, and
:mod:`perflab.analysis.diff_rows` holds the row and split types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from perflab.analysis.diff_match import Prepared, Vocabulary, grouped_sum, match_rows, paired_groups
from perflab.analysis.diff_names import Rename
from perflab.analysis.diff_rows import DiffRows, IdleSplit, Side, Split, change_view
from perflab.analysis.diff_splits import category_splits, headline, idle_splits, stream_splits
from perflab.analysis.diff_stats import METHOD
from perflab.errors import InputError
from perflab.model.display import Shown
from perflab.model.trace import Trace

if TYPE_CHECKING:
    import pandas as pd

    from perflab.analysis.json_views import DiffView

__all__ = ["DiffRows", "Split", "TraceDiff", "diff_traces", "grouped_sum"]

StepSpec = int | tuple[int, int] | None
MIN_STEPS = 2  # steps a side needs for per-step statistics
MAX_STEP_CELLS = 20_000_000  # names x steps kept for per-step statistics (160 MB of floats)


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

    def to_dict(self, top: int | None = None) -> dict[str, object]:
        """Everything as JSON-able data; ``top``: only the largest ``top`` rows of each list
        (``rows`` always says how many each list has in all, so a cut one says so)."""
        from perflab.model.schema import encode

        return encode(self.document(top))

    def document(self, top: int | None = None) -> DiffView:
        """The document :class:`perflab.analysis.json_views.DiffView` declares."""
        from perflab.analysis import json_views as v

        return v.DiffView(
            kind="trace_diff",
            control=self.control.view(),
            test=self.test.view(),
            scope=self.scope,
            per_step=self.per_step,
            method=self.method,
            headline=self.headline,
            notes=self.notes,
            gpu=change_view(*_summed(self.by_category)),
            idle=change_view(*self.idle_ns),
            idle_by_cause={s.name: s.entry() for s in self.idle_by_cause},
            counts=v.DiffCountsView(
                kernels=v.TallyView(**self.kernels.counts()),
                ops=v.TallyView(**self.ops.counts()),
            ),
            by_category=[s.view() for s in self.by_category],
            by_stream=[s.view() for s in self.by_stream],
            rows=v.DiffRowsView(kernels=len(self.kernels), ops=len(self.ops)),
            kernels=self.kernels.views(top),
            ops=self.ops.views(top),
        )

    def to_pandas(self, which: str = "kernels") -> pd.DataFrame:
        """The ``kernels`` or ``ops`` rows as a DataFrame."""
        if which not in ("kernels", "ops"):
            raise InputError(f"to_pandas: 'kernels' or 'ops', not {which!r}")
        rows: DiffRows = getattr(self, which)
        return rows.to_pandas()


def _summed(splits: Sequence[Split]) -> tuple[float, float]:
    """The control's and the test's time over ``splits``."""
    return float(sum(s.control_ns for s in splits)), float(sum(s.test_ns for s in splits))


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
    sides = (Prepared.of(control, c_step), Prepared.of(test, t_step))
    chosen = step is not None
    grouped = [paired_groups(sides, gpu, Vocabulary(short_names, parsed)) for gpu in (True, False)]
    steps = max(len(s.side.steps) for s in sides)
    fits = all(len(names) * steps <= MAX_STEP_CELLS for _, names in grouped)
    per_step = not chosen and fits and all(len(s.side.steps) >= MIN_STEPS for s in sides)
    (gpu_groups, gpu_names), (host_groups, host_names) = grouped
    kernels = match_rows(*gpu_groups, gpu_names, per_step, gpu=True)
    ops = match_rows(*host_groups, host_names, per_step, gpu=False)
    control_side, test_side = sides[0].side, sides[1].side
    scope = _scope(control_side, test_side, chosen)
    idle = idle_splits(sides, kernels.per_step)
    return TraceDiff(
        control=control_side,
        test=test_side,
        scope=scope,
        kernels=kernels,
        ops=ops,
        by_category=category_splits(kernels),
        by_stream=stream_splits(sides, gpu_groups, kernels.per_step),
        headline=headline(kernels, scope, idle),
        notes=_notes(control_side, test_side, chosen, per_step, fits),
        idle_by_cause=idle,
    )
