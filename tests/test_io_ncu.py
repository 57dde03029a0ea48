"""Nsight Compute CSV importer and the .ncu-rep path."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest
from data_paths import TRACES

from perflab.errors import InputError
from perflab.io import load_ncu, load_trace

CSV = TRACES / "ncu" / "copy_blocked.csv"


def test_reads_every_metric_and_rule() -> None:
    report = load_ncu(CSV)
    with CSV.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(report.kernels) == len({r["ID"] for r in rows}) == 1
    assert len(report.metrics) == sum(1 for r in rows if r["Metric Name"])
    assert len(report.rules) == sum(1 for r in rows if r.get("Rule Name"))
    dram = report.metric("DRAM Frequency")
    assert dram.unit == "hz"
    assert dram.value == pytest.approx(4_963_609_951.19)
    df = report.to_pandas()
    assert list(df.columns) == ["kernel", "section", "name", "unit", "value", "text"]
    assert report.kernels[0]["Grid Size"] == "(1024, 1, 1)"
    assert any(r.speedup and r.type == "OPT" for r in report.rules)
    html = report._repr_mimebundle_()["text/html"]
    assert "copy_blocked" in html and "<script" not in html


def test_load_trace_points_to_load_ncu() -> None:
    with pytest.raises(InputError, match="load_ncu"):
        load_trace(CSV)


def test_csv_that_is_not_ncu_output(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError, match="not Nsight Compute CSV") as info:
        load_ncu(path)
    assert str(path) in str(info.value)


def test_broken_row_names_its_line(tmp_path: Path) -> None:
    lines = CSV.read_text().splitlines()
    lines[3] = '"0","1"'
    path = tmp_path / "broken.csv"
    path.write_text("\n".join(lines))
    with pytest.raises(InputError, match="line 4"):
        load_ncu(path)


def test_non_utf8_csv(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b'"ID","Kernel Name"\n"\xff"\n')
    with pytest.raises(InputError, match="UTF-8"):
        load_ncu(path)


@pytest.mark.skipif(
    importlib.util.find_spec("ncu_report") is not None, reason="ncu_report is installed here"
)
def test_ncu_rep_without_the_module_says_so(tmp_path: Path) -> None:
    path = tmp_path / "r.ncu-rep"
    path.write_bytes(b"\x00binary")
    with pytest.raises(InputError, match="ncu_report"):
        load_ncu(path)
