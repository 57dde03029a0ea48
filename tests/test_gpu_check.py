"""scripts/gpu-check: the dry run (the same sections on the CPU backend) end to end, and
the reporting rules (JSON after every section, non-zero exit on any error or failed
test, one summary table last)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from data_paths import ROOT
from gpu_scripts import load_script

from perflab.capture.env import cuda_available
from perflab.machine import gpu_check, gpu_modules, gpu_paths

SCRIPT = ROOT / "scripts" / "gpu-check"


@pytest.mark.slow
def test_dry_run_passes_end_to_end(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = tmp_path.glob("gpu-check-dry-run-cpu-*.json")
    report = json.loads(path.read_text())
    assert report["dry_run"] is True and report["exit_code"] == 0
    statuses = {name: e["status"] for name, e in report["sections"].items()}
    assert statuses == {
        "modules": "ok",
        "environment": "ok",
        "timing engine": "ok",
        "gpu tests": "ok",
        "bandwidth": "ok",
        "latency": "ok",
        "launch": "ok",
        "matmul": "ok",
        "ceilings": "ok",
        "h2d": "skipped",
        "collectives": "skipped",
    }
    assert list(statuses)[-1] == "gpu tests"  # last: a run cut short keeps the measurements
    checks = report["sections"]["timing engine"]["result"]["checks"]
    assert checks and all(c["passed"] for c in checks.values())
    for run in report["sections"]["timing engine"]["result"]["runs"].values():
        assert run["empty_window_ns"] > 0 and run["tick_ns"] > 0
    # the GPU test files collect here (skipped without a GPU, none deselected by error)
    assert "skipped" in report["sections"]["gpu tests"]["result"]["summary"]
    # what ran: the commit and every GPU-path file's checksum, beside the results
    validation = report["validation"]
    assert set(validation["files"]) == set(gpu_paths.GPU_PATHS)
    assert validation["date"] == report["date"] and "commit" in validation
    # the summary table comes last, before the path line
    lines = done.stdout.strip().splitlines()
    assert lines[-1].startswith("written: ") and lines[-2].startswith("total")
    assert lines[0].startswith("section")


def test_only_a_run_that_passed_on_a_gpu_leaves_a_validation_record(tmp_path: Path) -> None:
    script = load_script("gpu-check")
    record = gpu_paths.validation_record("NVIDIA H200", "2026-12-07T10:00:00+00:00", ROOT)
    report: dict[str, Any] = {"dry_run": False, "exit_code": 1, "validation": record}
    assert script._keep_validation(report, tmp_path) == (
        "no validation record: the check did not pass"
    )
    report.update(dry_run=True, exit_code=0)
    assert "a dry run validates nothing" in script._keep_validation(report, tmp_path)
    assert not (tmp_path / "gpu-validation.json").exists()
    report["dry_run"] = False
    assert script._keep_validation(report, tmp_path).startswith("validation record: ")
    assert gpu_paths.read_record(tmp_path / "gpu-validation.json") == record


def test_a_missing_package_stops_the_check_at_once_with_exit_2(tmp_path: Path) -> None:
    """msgspec made unimportable (a module of that name that fails, first on the path),
    as on the lent machine: the dry run stops after its first section, exit 2, naming
    the package, how the gpu tests reach it, and the pip download line for it."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "msgspec.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'msgspec'\", name='msgspec')\n"
    )
    no_wheels = ["--wheels", str(tmp_path / "no-wheels")]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path), *no_wheels],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), str(ROOT)])},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr.splitlines()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert (
        "  python3 -m pip download --no-deps --only-binary=:all: "
        f"--python-version {python} --implementation cp "
        f"--platform manylinux_2_28_{platform.machine()} "
        f"--platform manylinux_2_17_{platform.machine()} -d .whl "
        f"msgspec=={importlib.metadata.version('msgspec')}"
    ) in err
    assert any(ln.startswith("  msgspec: perflab's core") for ln in err)
    assert any(ln.startswith("    reached through perflab/machine/gpu_check") for ln in err)
    assert not any("[gpu-check] environment" in ln for ln in err)  # stopped at once
    (path,) = tmp_path.glob("gpu-check-dry-run-cpu-*.json")
    report = json.loads(path.read_text())
    assert report["exit_code"] == 2 and list(report["sections"]) == ["modules"]
    modules = report["sections"]["modules"]
    assert modules["status"] == "missing" and modules["error"] == "missing: msgspec"
    assert list(modules["result"]["missing"]) == ["msgspec"]
    lines = done.stdout.strip().splitlines()
    assert lines[-1].startswith("written: ") and lines[-2].startswith("total")


def test_timing_section_json_carries_the_empty_window_and_tick() -> None:
    """What the dry run writes for the timing engine: each run's empty window (what the
    timer reads for a sample of nothing) and tick beside its median, checked present."""
    step = next(s for s in gpu_check.sections(skip_tests=True) if s.name == "timing engine")
    entry = json.loads(json.dumps(gpu_check.run_section(step, "cpu")))
    assert entry["status"] == "ok", entry
    runs = entry["result"]["runs"]
    assert runs and all(r["empty_window_ns"] > 0 and r["tick_ns"] > 0 for r in runs.values())
    check = "empty window and tick on every result"
    assert entry["result"]["checks"][check]["passed"]
    runs["matmul_warm"]["empty_window_ns"] = None  # a result that did not record it
    assert not gpu_check._engine_checks(runs, "cpu")[check]["passed"]


def test_a_gpu_file_left_out_by_conftest_is_found_in_pytest_output() -> None:
    out = (
        "sss\nnot collected (-m gpu): test_x.py: its gpu tests need cupy, not installed here\n"
        "3 skipped in 0.1s\n"
    )
    assert gpu_check.not_collected(out) == [
        "test_x.py: its gpu tests need cupy, not installed here"
    ]
    assert gpu_check.not_collected("3 skipped in 0.1s") == []


def test_error_and_failure_make_the_exit_code_non_zero() -> None:
    def boom(backend: str) -> Any:
        raise RuntimeError("driver went away")

    def failing(backend: str) -> Any:
        raise gpu_check.CheckFailed("2 gpu tests failed", {"summary": "2 failed, 5 passed"})

    report: dict[str, Any] = {"sections": {}}
    for name, fn in (("fine", lambda b: {"x": 1}), ("broken", boom), ("tests", failing)):
        report["sections"][name] = gpu_check.run_section(gpu_check.Section(name, 1, 1, fn), "cpu")
    assert [e["status"] for e in report["sections"].values()] == ["ok", "error", "failed"]
    assert gpu_check.exit_code(report) == 1
    table = gpu_check.summary_table(report)
    assert "RuntimeError: driver went away" in table and "2 gpu tests failed" in table
    report["sections"] = {"fine": report["sections"]["fine"]}
    assert gpu_check.exit_code(report) == 0


def test_json_is_written_after_every_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed during its second section leaves the first one in the file."""

    def killed(backend: str) -> Any:
        raise KeyboardInterrupt  # stands for the machine's timeout ending the run

    steps = [
        gpu_check.Section("first", 1, 1, lambda b: {"ok": True}),
        gpu_check.Section("second", 1, 1, killed),
    ]
    monkeypatch.setattr(gpu_check, "sections", lambda **options: steps)
    with pytest.raises(KeyboardInterrupt):
        load_script("gpu-check").main(["--dry-run", "--out", str(tmp_path)])
    (path,) = tmp_path.glob("gpu-check-*.json")
    report = json.loads(path.read_text())
    assert report["sections"]["first"]["status"] == "ok"
    assert "second" not in report["sections"]


@pytest.mark.skipif(cuda_available(), reason="checks the no-GPU exit")
def test_without_a_gpu_the_check_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load_script("gpu-check").main(["--out", str(tmp_path)]) == 2
    assert "no GPU" in capsys.readouterr().err


def test_every_section_states_an_estimate_within_six_minutes() -> None:
    steps = gpu_check.sections()
    assert all(s.gpu_estimate_s > 0 for s in steps if s.name != "collectives")
    assert sum(s.gpu_estimate_s for s in steps) <= 360
    assert sum(s.cpu_estimate_s for s in steps) <= 120


def test_gpu_check_runs_every_file_with_gpu_tests() -> None:
    """A gpu-marked test anywhere in tests/ runs on the GPU machine: its file is in
    GPU_TEST_FILES (the %%ptx launch test included: IPython travels in .whl/)."""
    marked = {
        f"tests/{p.name}"
        for p in (ROOT / "tests").glob("test_*.py")
        if gpu_modules.has_gpu_tests(p)
    }
    assert "tests/test_ptx_magic.py" in marked
    assert set(gpu_check.GPU_TEST_FILES) == marked
    assert len(set(gpu_check.GPU_TEST_FILES)) == len(gpu_check.GPU_TEST_FILES)
