"""The results of :func:`perflab.analysis.trace_diff.diff_traces` below the whole: each side
of the comparison, the rows of matched names, and the GPU and idle time split by category,
stream or cause."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.model.units import us_from_ns

if TYPE_CHECKING:
    import pandas as pd

    from perflab.analysis.json_views import (
        CauseChangeView,
        ChangeView,
        DiffRowView,
        SideView,
        SplitView,
    )

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
STATUSES = ("new", "gone", "changed", "unchanged")


@dataclass(frozen=True)
class Side:
    """One trace of the comparison: where it came from, the ``ProfilerStep`` numbers compared
    (every step of the trace when no step was chosen) and each step's host duration (ns)."""

    source: str
    steps: list[int]
    step_ns: list[int]

    def view(self) -> SideView:
        from perflab.analysis.json_views import SideView

        return SideView(
            source=self.source,
            steps=self.steps,
            step_us=[us_from_ns(ns) for ns in self.step_ns],
        )


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

    def records(self, top: int | None = None) -> list[dict[str, object]]:
        """The rows as JSON-able dicts (the first ``top`` when given)."""
        from perflab.model.schema import encode

        return [encode(row) for row in self.views(top)]

    def views(self, top: int | None = None) -> list[DiffRowView]:
        """The rows as ``--json`` lists them (the first ``top`` when given)."""
        shown = range(len(self) if top is None else min(top, len(self)))
        return [self._view(i) for i in shown]

    def _view(self, i: int) -> DiffRowView:
        import msgspec

        from perflab.analysis.json_views import DiffRowView

        row = DiffRowView(
            name=self.names[i],
            kind=self.kinds[i],
            category=self.categories[i],
            control_count=int(self.control_count[i]),
            test_count=int(self.test_count[i]),
            control_us=us_from_ns(float(self.control_ns[i])),
            test_us=us_from_ns(float(self.test_ns[i])),
            change_us=us_from_ns(float(self.test_ns[i] - self.control_ns[i])),
            status=self.status[i],
            verdict=self.verdict[i],
        )
        if not self.per_step:
            return row
        return msgspec.structs.replace(
            row,
            control_step_median_us=us_from_ns(float(np.median(self.control_steps[i]))),
            test_step_median_us=us_from_ns(float(np.median(self.test_steps[i]))),
            change_per_step_us=us_from_ns(float(self.change_ns[i])),
            p_value=round(float(self.p_value[i]), 6),
            control_per_step_us=[us_from_ns(v) for v in self.control_steps[i].tolist()],
            test_per_step_us=[us_from_ns(v) for v in self.test_steps[i].tolist()],
        )

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

    def view(self) -> SplitView:
        from msgspec.structs import asdict

        from perflab.analysis.json_views import SplitView

        return SplitView(name=self.name, **asdict(change_view(self.control_ns, self.test_ns)))


def change_view(control_ns: float, test_ns: float) -> ChangeView:
    """Both sides' time and the change, in microseconds."""
    from perflab.analysis.json_views import ChangeView

    return ChangeView(
        control_us=us_from_ns(control_ns),
        test_us=us_from_ns(test_ns),
        change_us=us_from_ns(test_ns - control_ns),
    )


@dataclass(frozen=True)
class IdleSplit(Split):
    """GPU idle time of one cause on each side (``name`` is the cause; ns, per-step means
    with per-step statistics, which also give each side's per-step median)."""

    control_median_ns: float | None = None
    test_median_ns: float | None = None

    def entry(self) -> CauseChangeView:
        """The ``idle_by_cause`` entry of ``--json`` (each side's per-step median where
        the sides have per-step statistics)."""
        import msgspec

        from perflab.analysis.json_views import CauseChangeView

        entry = CauseChangeView(
            control_us=us_from_ns(self.control_ns),
            test_us=us_from_ns(self.test_ns),
            delta_us=us_from_ns(self.change_ns),
        )
        control, test = self.control_median_ns, self.test_median_ns
        if control is None or test is None:
            return entry
        return msgspec.structs.replace(
            entry, control_step_median_us=us_from_ns(control), test_step_median_us=us_from_ns(test)
        )
