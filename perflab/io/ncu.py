"""Nsight Compute importers: ``ncu --csv`` output and ``.ncu-rep`` (via ``ncu_report``),
into :class:`perflab.model.ncu.NcuReport`."""

from __future__ import annotations

import csv
import math
import os
import re
from collections import Counter

from perflab._gc import gc_paused
from perflab.errors import InputError
from perflab.io._common import read_bytes
from perflab.model.ncu import NcuMetric, NcuReport, NcuRule
from perflab.model.serialize import regular_size

MAX_CSV_BYTES = 1 << 30  # ncu --csv of thousands of kernels is tens of MB
# what ncu prints for a number: ASCII digits with optional thousands commas, a fraction and an
# exponent ("4,963,609,951.19", "61.84", "1e-05"); not "1_000", "inf" or other scripts' digits
_NUMBER = re.compile(r"[-+]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")
REQUIRED = ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value")
_LAUNCH = ("Kernel Name", "Block Size", "Grid Size", "Device", "CC", "Process Name", "Stream")


def load_ncu(path: str | os.PathLike[str]) -> NcuReport:
    source = str(path)
    if source.endswith(".ncu-rep"):
        regular_size(path)  # NVIDIA's reader would wait on a FIFO or read a device forever
        return _load_report(path)
    data = read_bytes(path, limit=MAX_CSV_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", source=source, position=f"byte {exc.start}") from None
    return parse_ncu_csv(text, source)


def _number(text: str) -> float | None:
    """ncu prints "4,963,609,951.19" or "61.84"; anything else is a text value (None)."""
    if not _NUMBER.fullmatch(text):
        return None
    value = float(text.replace(",", ""))
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def parse_ncu_csv(text: str, source: str = "<csv>") -> NcuReport:
    # ==PROF== logs left out; lines handed over one by one, not joined into a StringIO (four
    # bytes a character: 0.75 GB for the 190 MB of a report of 10,000 kernels)
    lines = (line + "\n" for line in text.splitlines() if not line.startswith("=="))
    reader = csv.reader(lines)
    try:
        header = next(reader, [])
    except csv.Error as exc:
        raise InputError(f"not CSV: {exc}", source=source, position="line 1") from None
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(
            "not Nsight Compute CSV output (run ncu --csv --page details); missing columns "
            + ", ".join(missing),
            source=source,
        )
    twice = [name for name, n in Counter(header).items() if n > 1]
    if twice:
        raise InputError(
            f"column {twice[0]!r} appears twice in the header", source=source, position="line 1"
        )
    rows = _Rows(header, NcuReport(source), source)
    try:
        with gc_paused():  # a metric object per row, none in a cycle
            for row in reader:
                rows.add(row, reader.line_num)
    except (csv.Error, ValueError) as exc:
        raise InputError(
            f"broken CSV: {exc}", source=source, position=f"line {reader.line_num}"
        ) from None
    return rows.report


class _Rows:
    """Adds the rows of one CSV to a report: a kernel per new "ID", a metric and/or a rule
    per row. Column positions are looked up once, not per row."""

    def __init__(self, header: list[str], report: NcuReport, source: str) -> None:
        self.width = len(header)
        self.col = {name: i for i, name in enumerate(header)}
        self.launch = [(k, self.col[k]) for k in ("ID", *_LAUNCH) if k in self.col]
        self.id_at, self.section_at = self.col["ID"], self.col["Section Name"]
        self.name_at, self.unit_at = self.col["Metric Name"], self.col["Metric Unit"]
        self.value_at = self.col["Metric Value"]
        rule = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type")
        self.rule_at = [self.col.get(k) for k in (*rule, "Estimated Speedup")]
        self.report, self.source = report, source
        self.kernel_of: dict[str, int] = {}
        self.seen: dict[str, str] = {}  # every kernel repeats the same sections, names, units
        self.given = _GivenMetrics()  # a metric given twice must agree

    def _shared(self, text: str) -> str:
        """One string object for each distinct text, not one per row."""
        return self.seen.setdefault(text, text)

    def add(self, row: list[str], line: int) -> None:
        if not row:
            return
        # ncu leaves trailing empty rule columns out; anything else is a broken row
        if not len(REQUIRED) <= len(row) <= self.width or len(row) <= self.value_at:
            raise InputError(
                f"row has {len(row)} fields, the header has {self.width}",
                source=self.source,
                position=f"line {line}",
            )
        if len(row) < self.width:
            row = row + [""] * (self.width - len(row))
        k = self._kernel(row)
        if row[self.name_at]:
            self._metric(k, row, line)
        name_at, type_at, text_at, gain_type_at, gain_at = self.rule_at
        if name_at is not None and row[name_at]:

            def get(at: int | None) -> str:
                return "" if at is None else row[at]

            self.report.rules.append(
                NcuRule(
                    k,
                    row[self.section_at],
                    row[name_at],
                    get(type_at),
                    get(text_at),
                    get(gain_type_at),
                    _number(get(gain_at)),
                )
            )

    def _metric(self, k: int, row: list[str], line: int) -> None:
        """The row's metric, added to kernel ``k``'s unless the kernel has it already: the
        same value again is left out, another value is an InputError (which one is right
        cannot be told, and the one read last would win unseen)."""
        section, name = self._shared(row[self.section_at]), self._shared(row[self.name_at])
        value = row[self.value_at]
        metric = NcuMetric(k, section, name, self._shared(row[self.unit_at]), _number(value), value)
        first = self.given.first(metric, self.report.metrics)
        if first is metric:
            self.report.metrics.append(metric)
        elif (first.unit, first.text) != (metric.unit, metric.text):
            kid = self.report.kernels[k].get("ID", str(k))
            raise InputError(
                f"kernel ID {kid} has metric {name!r} ({section}) twice, with different "
                f"values: {_shown(first)} and {_shown(metric)}",
                source=self.source,
                position=f"line {line}",
            )

    def _kernel(self, row: list[str]) -> int:
        """The index of the row's kernel, added to the report when its "ID" is new."""
        kid = row[self.id_at]
        k = self.kernel_of.get(kid)
        if k is None:
            k = self.kernel_of[kid] = len(self.report.kernels)
            self.report.kernels.append({name: row[at] for name, at in self.launch})
        return k


class _GivenMetrics:
    """The first metric of each (kernel, section, name) read so far. ncu writes a kernel's
    rows together, so only the current kernel's are kept (a dict per metric of a report of
    thousands of kernels is tens of MB); a file that comes back to an earlier kernel has
    every kernel's kept from then on."""

    def __init__(self) -> None:
        self.kernel = -1
        self.current: dict[tuple[str, str], NcuMetric] = {}
        self.finished: set[int] = set()
        self.every: dict[tuple[int, str, str], NcuMetric] | None = None

    def first(self, metric: NcuMetric, metrics: list[NcuMetric]) -> NcuMetric:
        """The kernel's metric of that section and name read first: ``metric`` itself when
        it is new (``metrics``: those read so far, which it is not among yet)."""
        if self.every is not None:
            return self.every.setdefault((metric.kernel, metric.section, metric.name), metric)
        if metric.kernel != self.kernel:
            if metric.kernel in self.finished:  # rows out of ncu's order: keep them all
                self.every = {}
                for m in metrics:
                    self.every.setdefault((m.kernel, m.section, m.name), m)
                return self.first(metric, metrics)
            self.finished.add(self.kernel)
            self.kernel, self.current = metric.kernel, {}
        return self.current.setdefault((metric.section, metric.name), metric)


def _shown(metric: NcuMetric) -> str:
    """A metric's value as the file gives it, with its unit."""
    return f"{metric.text} {metric.unit}".strip()


def _load_report(path: str | os.PathLike[str]) -> NcuReport:
    """``.ncu-rep`` through NVIDIA's ``ncu_report`` module (ships with Nsight Compute)."""
    source = str(path)
    try:
        import ncu_report  # type: ignore[import-not-found]
    except ImportError:
        raise InputError(
            "reading .ncu-rep needs NVIDIA's ncu_report module (in Nsight Compute's "
            "extras/python), which is not importable here; export the report instead with "
            "`ncu --csv --page details --import FILE > FILE.csv`",
            source=source,
        ) from None
    try:
        ctx = ncu_report.load_report(source)
    except Exception as exc:  # the module raises its own types
        raise InputError(f"ncu_report cannot read it: {exc}", source=source) from None
    report = NcuReport(source)
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            k = len(report.kernels)
            report.kernels.append({"ID": str(k), "Kernel Name": action.name()})
            for name in action.metric_names():
                m = action[name]
                shown = str(m.as_string()) if hasattr(m, "as_string") else ""
                try:
                    value = _number(shown)
                except ValueError as exc:
                    raise InputError(str(exc), source=source, position=name) from None
                report.metrics.append(NcuMetric(k, "", name, str(m.unit() or ""), value, shown))
    return report
