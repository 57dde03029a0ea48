"""Nsight Compute results as plain data: per profiled kernel, its launch (name, grid, block,
device, compute capability), every metric (section, name, unit, value) and the rule advice
(rule, type, description, estimated speedup). Importers live in :mod:`perflab.io.ncu`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import TYPE_CHECKING

from perflab.model.display import Shown

if TYPE_CHECKING:
    import pandas as pd


@dataclass(slots=True)  # a report of thousands of kernels holds a million of these
class NcuMetric:
    kernel: int
    section: str
    name: str
    unit: str
    value: float | None  # None when the value is text
    text: str


@dataclass(slots=True)
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

        return pd.DataFrame(_values(NcuMetric, self.metrics), columns=_names(NcuMetric))

    def rules_to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(_values(NcuRule, self.rules), columns=_names(NcuRule))

    def to_dict(self) -> dict[str, object]:
        """Its fields: the source, each kernel's identity, every metric and every rule."""
        from perflab.model.schema import encode

        return encode(self)


def _names(kind: type[NcuMetric | NcuRule]) -> list[str]:
    return [f.name for f in fields(kind)]


def _values(
    kind: type[NcuMetric | NcuRule], items: list[NcuMetric] | list[NcuRule]
) -> list[tuple[object, ...]]:
    """Each item's fields, in order (the classes have slots, no ``__dict__``)."""
    get = attrgetter(*_names(kind))
    return [get(item) for item in items]
