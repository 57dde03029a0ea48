"""scripts/gpu-record and gpu-check --record: the dry run on the CPU writes every recording
the notebooks replay, each loadable as what it is, with its provenance; and the committed
H200 recordings load and say where and when they were measured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perflab.errors import InputError
from perflab.model.machine import BenchResult
from perflab.model.timing import TimingResult
from perflab.recordings import label, manifest_problems, recorded

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "notebooks" / "recordings" / "h200"


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / name), *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_dry_run_records_every_notebook_result_on_the_cpu(tmp_path: Path) -> None:
    done = _script("gpu-record", "--out", str(tmp_path), "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "dry-run"  # a dry run never lands where recordings go
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert manifest["dry_run"] is True and manifest["exit_code"] == 0
    assert manifest_problems(out) == []  # every file written is listed with its checksum
    statuses = {name: e["status"] for name, e in manifest["sections"].items()}
    assert statuses["ncu"] == "skipped" and next(iter(statuses)) == "first calls"
    assert all(s == "ok" for name, s in statuses.items() if name != "ncu"), statuses
    timed = recorded("00-quickstart/matmul-512.json", out)
    assert isinstance(timed, TimingResult) and timed.backend == "cpu" and timed.n >= 10
    first = recorded("01-timing/first-calls.json", out)
    assert isinstance(first, BenchResult) and len(first.series) == 2
    assert all(len(s) == 5 and (s.y > 0).all() for s in first.series)
    trace = recorded("16-training/train-steps.json.gz", out)
    names = set(trace.names_of())
    assert {"forward", "backward", "optimizer", "data", "log"} <= names
    assert any(n.startswith("ProfilerStep#") for n in names)
    point = recorded("03-roofline/matmul-fp32-256.json", out)
    assert point.flops == pytest.approx(2 * 256**3) and point.bytes > 0
    check = _script(
        "gpu-check", "--dry-run", "--skip-tests", "--out", str(tmp_path), "--record", str(out)
    )
    assert check.returncode == 0, check.stdout + check.stderr
    ceilings = recorded("machine/ceilings.json", out)
    assert ceilings.backend == "cpu" and ceilings.flops["fp32"] > 0
    assert isinstance(recorded("machine/bandwidth.json", out), BenchResult)


def test_the_h200_recordings_load_and_say_where_they_were_measured() -> None:
    text = label(H200)
    assert "NVIDIA H200" in text and "driver 580.159.04" in text
    assert "recorded, not measured now" in text
    mm = recorded("00-quickstart/magic-matmul-512.json", H200)
    assert mm.device == "NVIDIA H200" and mm.backend == "cuda"
    assert "(not measured now)" in mm._repr_mimebundle_()["text/plain"]
    launch = recorded("machine/launch.json", H200)
    assert launch.backend == "cuda" and "not measured now" in launch.provenance_line()
    manifest = json.loads((H200 / "MANIFEST.json").read_text())
    assert manifest["dry_run"] is False and manifest["exit_code"] == 0
    for entry in manifest["files"]:  # every file the run wrote is here, or said not kept
        assert (H200 / entry).is_file() or entry in manifest["not_kept"], entry
    assert manifest_problems(H200) == []


def test_every_recording_folder_is_named_after_a_notebook_that_replays_it() -> None:
    notebooks = {  # the code each notebook runs (its text may cite another's recordings)
        p.name: "\n".join(
            "".join(c["source"])
            for c in json.loads(p.read_text())["cells"]
            if c["cell_type"] == "code"
        )
        for p in H200.parents[1].glob("*.ipynb")
    }
    for folder in sorted(p for p in H200.iterdir() if p.is_dir()):
        name = folder.name
        readers = [n for n, t in notebooks.items() if f"{name}/" in t or f"h200/{name}" in t]
        if name == "machine":  # the microbenchmarks: read by several notebooks
            assert len(readers) > 1
            continue
        assert readers, f"no notebook reads {name}"
        assert all(n[:3] == name[:3] for n in readers), (name, readers)


def test_a_recording_edited_added_or_lost_after_it_was_recorded_is_named(tmp_path: Path) -> None:
    root = tmp_path / "rec"
    shutil.copytree(H200, root)
    assert manifest_problems(root) == []
    (root / "10-launch" / "add-2-0.json").write_text("{}")
    (root / "12-inference" / "extra.json").write_text("{}")
    (root / "03-roofline" / "add-16384.json").unlink()
    problems = manifest_problems(root)
    assert "10-launch/add-2-0.json: its checksum differs from the one recorded" in problems
    assert "12-inference/extra.json: present but not in MANIFEST.json" in problems
    assert "03-roofline/add-16384.json: in MANIFEST.json but absent" in problems
    assert len(problems) == 3


def test_a_missing_or_foreign_recording_is_a_perflab_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no recording at"):
        recorded("nothing.json", tmp_path)
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(InputError, match="not a perflab result"):
        recorded("x.json", tmp_path)
    assert label(tmp_path).startswith("no recording found")
