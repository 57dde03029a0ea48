"""``perflab trace diff`` held to Holistic Trace Analysis's ``TraceDiff`` on HTA's own test
pair: the reference (tests/data/trace_diff/hta_step1010.json, made by HTA; its README says
how) and perflab's GPU rows of the same step agree name for name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from data_paths import DATA

from perflab.cli import main
from perflab.io import load_trace

PAIR = DATA / "trace_diff"
STEP = 1010


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, Any]]:
    doc = json.loads((PAIR / "hta_step1010.json").read_text())
    assert doc["step"] == STEP
    return {row[0]: dict(zip(doc["columns"], row, strict=True)) for row in doc["rows"]}


def test_gpu_rows_agree_with_hta(
    reference: dict[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    control, test = str(PAIR / "control.json.gz"), str(PAIR / "test.json.gz")
    assert (
        main(["trace", "diff", control, test, "--step", str(STEP), "--json", "--top", "1000"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    mine = {row["name"]: row for row in doc["kernels"]}
    assert len(reference) == 201
    assert sorted(mine) == sorted(reference)
    for name, ref in reference.items():
        row = mine[name]
        assert (row["control_count"], row["test_count"]) == (
            ref["control_count"],
            ref["test_count"],
        ), name
        assert row["control_us"] == pytest.approx(ref["control_us"], abs=0.5), name
        assert row["test_us"] == pytest.approx(ref["test_us"], abs=0.5), name
        status = {(True, False): "gone", (False, True): "new"}.get(
            (ref["test_count"] == 0, ref["control_count"] == 0)
        )
        if status:
            assert row["verdict"] == status, name


def test_whole_pair_per_step() -> None:
    """Six steps a side: verdicts from the noise, and the headline's change is the mean over
    the steps of the GPU time inside them."""
    control = load_trace(PAIR / "control.json.gz")
    test = load_trace(PAIR / "test.json.gz")
    result = control.diff(test)
    assert result.per_step and result.control.steps == list(range(1009, 1015))
    doc = result.to_dict()
    verdicts = {row["verdict"] for row in doc["kernels"]}
    assert {"slower", "faster", "new", "gone"} <= verdicts
    per_step = [control.diff(test, step=n).to_dict()["gpu"]["change_us"] for n in range(1009, 1015)]
    assert doc["gpu"]["change_us"] == pytest.approx(sum(per_step) / 6, abs=0.01)
    assert doc["headline"].startswith("+")


def test_benchmark_skips_hta_cleanly(tmp_path: Path) -> None:
    """Without HTA the benchmark times perflab alone and says why HTA was skipped."""
    out = tmp_path / "trace_diff.json"
    script = DATA.parents[1] / "benchmarks" / "trace_diff.py"
    args = ["--repeat", "1", "--output", str(out), "--hta-python", str(tmp_path / "none")]
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "HTA skipped:" in proc.stdout and "cannot run" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["hta_skipped"] and doc["hta_over_perflab"] is None
    assert doc["rows"]["perflab --step"]["result"] == {"gpu_rows": 201}
    assert "hta" not in doc["rows"]
