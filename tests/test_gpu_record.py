"""scripts/gpu-record and gpu-check --record: the dry run on the CPU writes every recording
the notebooks replay, each loadable as what it is, with its provenance; and the committed
H200 recordings load and say where and when they were measured."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
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
    assert statuses["collectives"] == "skipped"  # NCCL needs 2 GPUs
    needs_gpu = ("ncu", "collectives")
    assert all(s == "ok" for name, s in statuses.items() if name not in needs_gpu), statuses
    timed = recorded("00-quickstart/matmul-512.json", out)
    assert isinstance(timed, TimingResult) and timed.backend == "cpu" and timed.n >= 10
    first = recorded("01-timing/first-calls.json", out)
    assert isinstance(first, BenchResult) and len(first.series) == 2
    assert all(len(s) == 5 and (s.y > 0).all() for s in first.series)
    trace = recorded("16-training/train-steps.json.gz", out)
    names = set(trace.names_of())
    assert {"forward", "backward", "optimizer", "data", "log"} <= names
    assert any(n.startswith("ProfilerStep#") for n in names)
    e2e = recorded("12-inference/end-to-end.json", out)
    assert isinstance(e2e, BenchResult) and len(e2e.series) == 3
    assert statuses["end-to-end latency"] == "ok"
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
        # named after one that reads it; a later notebook may read it again (20 reads 16's)
        assert any(n[:3] == name[:3] for n in readers), (name, readers)


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


def test_end_to_end_latency_is_a_fixed_run_of_warm_samples_per_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The section notebook 12 reads for what a client sees: on the CPU, eager and both
    torch.compile modes (no CUDA graph without a GPU), each exactly the fixed number of
    samples in one run, in order, saved with the device, date and versions."""
    from perflab.machine import gpu_record_e2e as e2e
    from perflab.machine.gpu_record import Recorder

    monkeypatch.setattr(e2e, "CPU_SAMPLES", 12)
    monkeypatch.setattr(e2e, "WARMUP_CALLS", 3)
    done = e2e.end_to_end(Recorder(tmp_path, "cpu"))
    assert done["samples"] == 12 and done["warmup_calls"] == 3
    result = recorded("12-inference/end-to-end.json", tmp_path)
    assert isinstance(result, BenchResult) and result.backend == "cpu"
    assert result.device.startswith("CPU") and result.created and result.versions["torch"]
    assert [s.name for s in result.series] == [
        "eager: end to end",
        "torch.compile reduce-overhead: end to end",
        "torch.compile default: end to end",
    ]
    for series in result.series:
        assert list(series.x) == list(range(12)) and series.x_unit == "sample"
        assert (series.y > 0).all() and series.y_unit == "ns"
    eager = done["eager"]
    assert isinstance(eager, dict)
    assert set(eager) == {"end to end p50 us", "end to end p99 us", "end to end p99.9 us"}


def test_end_to_end_samples_hold_the_sync_and_a_failing_variant_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perflab.machine import gpu_record_e2e as e2e
    from perflab.machine.gpu_record import Recorder, host_times

    times = host_times(3, lambda: None, lambda: time.sleep(0.002))
    assert len(times) == 3 and min(times) >= 2e6  # the wait for the result is the latency

    def broken() -> object:
        raise RuntimeError("no compiler here")

    def two_variants(*_: object) -> dict[str, object]:
        return {"eager": lambda: None, "torch.compile default": broken}

    monkeypatch.setattr(e2e, "variants", two_variants)
    monkeypatch.setattr(e2e, "CPU_SAMPLES", 4)
    monkeypatch.setattr(e2e, "WARMUP_CALLS", 1)
    done = e2e.end_to_end(Recorder(tmp_path, "cpu"))
    assert done["torch.compile default"] == {"failed": "RuntimeError: no compiler here"}
    result = recorded("12-inference/end-to-end.json", tmp_path)
    assert isinstance(result, BenchResult)
    assert [s.name for s in result.series] == ["eager: end to end"]


def test_nccl_collectives_are_recorded_only_with_two_gpus_or_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perflab.machine import collectives, gpu_record
    from perflab.model.machine import CollectiveResult

    one_gpu = gpu_record.collectives_sweep(gpu_record.Recorder(tmp_path, "cpu"))
    assert one_gpu == {"skipped": "NCCL collectives need 2 or more GPUs (0 here)"}
    asked: dict[str, object] = {}

    def sweep(**spec: object) -> CollectiveResult:
        asked.update(spec)
        return CollectiveResult(benchmark="collectives", device="GPU", backend="nccl")

    monkeypatch.setattr(gpu_record.env, "gpu_devices", lambda: [{"name": "GPU"}] * 4)
    monkeypatch.setattr(collectives, "run", sweep)
    done = gpu_record.collectives_sweep(gpu_record.Recorder(tmp_path, "cuda"))
    assert done == {"ranks": 4, "rows": 0}
    assert asked["backend"] == "nccl" and asked["world_size"] == 4
    assert asked["sizes"] == gpu_record.NCCL_SIZES * gpu_record.SWEEP_REPEATS
    result = recorded("17-collectives/nccl-sweep.json", tmp_path)
    assert isinstance(result, CollectiveResult) and result.backend == "nccl"
