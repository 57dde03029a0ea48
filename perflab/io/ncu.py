"""Nsight Compute importers: ``ncu --csv`` output and ``.ncu-rep`` (via ``ncu_report``),
into :class:`perflab.model.ncu.NcuReport`."""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections import Counter

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
    lines = [line for line in text.splitlines() if not line.startswith("==")]  # ==PROF== logs
    reader = csv.reader(io.StringIO("\n".join(lines)))
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
    col = {name: i for i, name in enumerate(header)}
    report = NcuReport(source)
    kernel_of: dict[str, int] = {}
    try:
        for row in reader:
            _add_row(report, row, col, kernel_of, source, reader.line_num)
    except (csv.Error, ValueError) as exc:
        raise InputError(
            f"broken CSV: {exc}", source=source, position=f"line {reader.line_num}"
        ) from None
    return report


def _add_row(
    report: NcuReport,
    row: list[str],
    col: dict[str, int],
    kernel_of: dict[str, int],
    source: str,
    line: int,
) -> None:
    if not row:
        return
    # ncu leaves trailing empty rule columns out; anything else is a broken row
    if not len(REQUIRED) <= len(row) <= len(col) or len(row) <= col["Metric Value"]:
        raise InputError(
            f"row has {len(row)} fields, the header has {len(col)}",
            source=source,
            position=f"line {line}",
        )
    row = row + [""] * (len(col) - len(row))

    def get(name: str) -> str:
        return row[col[name]] if name in col else ""

    kid = get("ID")
    if kid not in kernel_of:
        kernel_of[kid] = len(report.kernels)
        report.kernels.append({k: get(k) for k in ("ID", *_LAUNCH) if k in col})
    k = kernel_of[kid]
    if get("Metric Name"):
        value = get("Metric Value")
        report.metrics.append(
            NcuMetric(
                k,
                get("Section Name"),
                get("Metric Name"),
                get("Metric Unit"),
                _number(value),
                value,
            )
        )
    if get("Rule Name"):
        report.rules.append(
            NcuRule(
                k,
                get("Section Name"),
                get("Rule Name"),
                get("Rule Type"),
                get("Rule Description"),
                get("Estimated Speedup Type"),
                _number(get("Estimated Speedup")),
            )
        )


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
