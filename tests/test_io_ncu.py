"""Nsight Compute CSV importer and the .ncu-rep path."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest
from data_paths import TRACES

from perflab.cli import main
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


# -- a metric given twice ----------------------------------------------------------------------


def _rows() -> tuple[list[str], list[list[str]]]:
    with CSV.open(newline="") as fh:
        header, *rows = csv.reader(line for line in fh if not line.startswith("=="))
    return header, rows


def _write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows([header, *rows])
    return path


def _duration_row(header: list[str], rows: list[list[str]], kid: str = "0") -> list[str]:
    name_at = header.index("Metric Name")
    found = next(r for r in rows if r[name_at] == "Duration")
    return [kid, *found[1:]]


def _changed(header: list[str], row: list[str], value: str, unit: str) -> list[str]:
    row = list(row)
    row[header.index("Metric Value")], row[header.index("Metric Unit")] = value, unit
    return row


def test_a_metric_given_twice_with_another_value_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, rows = _rows()
    fake = _changed(header, _duration_row(header, rows), "1", "nsecond")
    path = _write(tmp_path / "twice.csv", header, [*rows, fake])
    with pytest.raises(InputError) as info:
        load_ncu(path)
    message = str(info.value)
    assert str(path) in message and "kernel ID 0" in message and "'Duration'" in message
    assert "21,058,944 ns and 1 nsecond" in message
    # the roofline no longer draws 1 ns next to the bandwidth of 21 ms
    out = tmp_path / "roofline.html"
    assert main(["roofline", "--device", "H200", "--ncu", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and "'Duration'" in err and not out.exists()


def test_a_metric_given_twice_alike_is_read_once(tmp_path: Path) -> None:
    header, rows = _rows()
    again = _duration_row(header, rows)
    report = load_ncu(_write(tmp_path / "again.csv", header, [*rows, again]))
    assert len(report.metrics) == len(load_ncu(CSV).metrics)
    # the same name in two sections is two metrics (ncu's Memory Throughput: % and byte/s)
    units = {m.unit for m in report.metrics if m.name == "Memory Throughput"}
    assert units == {"%", "byte/s"}


def test_a_kernel_whose_rows_come_back_later_is_still_checked(tmp_path: Path) -> None:
    header, rows = _rows()
    second = [["1", *r[1:]] for r in rows]
    fake = _changed(header, _duration_row(header, rows), "1", "nsecond")
    mixed = [*rows[:10], *second, *rows[10:]]  # kernel 0, then 1, then 0 again
    report = load_ncu(_write(tmp_path / "mixed.csv", header, mixed))
    assert len(report.kernels) == 2 and len(report.metrics) == 2 * len(load_ncu(CSV).metrics)
    with pytest.raises(InputError, match="kernel ID 0 has metric 'Duration'"):
        load_ncu(_write(tmp_path / "mixed_twice.csv", header, [*mixed, *second[:3], fake]))
