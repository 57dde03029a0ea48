"""Nsight Compute results as plain data: per profiled kernel, its launch (name, grid, block,
device, compute capability), every metric (section, name, unit, value) and the rule advice
(rule, type, description, estimated speedup). Importers live in :mod:`perflab.io.ncu`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from perflab.model.display import Shown

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class NcuMetric:
    kernel: int
    section: str
    name: str
    unit: str
    value: float | None  # None when the value is text
    text: str


@dataclass
class NcuRule:
    kernel: int
    section: str
    rule: str
    type: str
    description: str
    speedup_type: str
    speedup: float | None


@dataclass
class NcuReport(Shown):
    source: str
    kernels: list[dict[str, str]] = field(default_factory=list)  # one per "ID", in order
    metrics: list[NcuMetric] = field(default_factory=list)
    rules: list[NcuRule] = field(default_factory=list)

    def metric(self, name: str, kernel: int = 0) -> NcuMetric:
        for m in self.metrics:
            if m.kernel == kernel and m.name == name:
                return m
        raise KeyError(f"no metric {name!r} for kernel {kernel}")

    def to_pandas(self) -> pd.DataFrame:
        """One row per metric: kernel, section, name, unit, value (float or NaN), text."""
        import pandas as pd

        return pd.DataFrame(
            [m.__dict__ for m in self.metrics],
            columns=["kernel", "section", "name", "unit", "value", "text"],
        )

    def rules_to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([r.__dict__ for r in self.rules], columns=list(NcuRule.__annotations__))

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kernels": self.kernels,
            "metrics": [m.__dict__ for m in self.metrics],
            "rules": [r.__dict__ for r in self.rules],
        }
