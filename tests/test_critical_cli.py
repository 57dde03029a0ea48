"""``perflab trace critical``: JSON of the declared shape, the text view, the HTML view, errors a
user can cause said as perflab errors, and what bounds the steps of the real traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from data_paths import TRACES
from step_sim import simulate

from perflab.analysis.critical_path import CriticalDoc, critical_path
from perflab.cli import main
from perflab.io import load_trace
from perflab.render.views import to_bundle

H200 = (
    Path(__file__).resolve().parents[1]
    / "notebooks/recordings/h200/16-training/train-steps.json.gz"
)
NCCL = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate().write(tmp_path_factory.mktemp("sim") / "job")


def test_json_has_the_declared_shape(job_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["trace", "critical", str(job_dir), "--json", "--what-if", "host=0.5"]
    assert main([*argv, "--what-if", "kernels=0.5,comm=0.5"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == set(CriticalDoc.__annotations__)
    assert [w["change"] for w in doc["what_if"]] == ["host=0.5", "kernels=0.5,comm=0.5"]
    step = doc["steps"][0]
    assert step["step"] == "ProfilerStep#0"
    assert sum(e["dur_ns"] for e in step["path"]) == step["duration_ns"]
    assert set(step["path"][0]) == {"rank", "name", "kind", "start_ns", "dur_ns"}
    assert sum(step["by_rank"].values()) == step["duration_ns"]
    # times on the traces' own clocks (one clock here): the path starts at the step's
    # earliest start over the ranks
    starts = [
        e["ts"]
        for path in job_dir.iterdir()
        for e in json.loads(path.read_text())["traceEvents"]
        if e["name"] == "ProfilerStep#0"
    ]
    assert step["path"][0]["start_ns"] == round(min(starts) * 1000)


def test_text_says_what_bounds_each_step_and_what_a_change_buys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["trace", "critical", str(H200), "--what-if", "host=0.5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Critical path of 4 steps: mean 35.6 ms per step")
    assert "ProfilerStep#4  34.8 ms: host 79% · launch 13% · copy 8%" in out
    assert "Memcpy HtoD (Pageable -> Device)" in out
    assert "host=0.5" in out and "-45.6%" in out and "contention" in out


def test_the_html_view_escapes_names(job_dir: Path) -> None:
    result = critical_path(load_trace(job_dir / "rank-0.json"), what_if=["comm=0.5"])
    result.steps[0].path.names[int(result.steps[0].path.name[0])] = "<script>x</script>"
    bundle = to_bundle(result)
    html = str(bundle["text/html"])
    assert "<script>x" not in html and "&lt;script&gt;x" in html
    assert "comm=0.5" in html and "text/plain" in bundle


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--what-if", "host=fast"], "the factor 'fast' is not a number from 0 to 1000"),
        (["--what-if", "host=-1"], "not a number from 0 to 1000"),
        (["--what-if", "host=nan"], "not a number from 0 to 1000"),
        (["--what-if", "gpu=0.5"], "the terms are host=F, kernels=F, comm=F and kernel:REGEX=F"),
        (["--what-if", "host=0.5,host=0.5"], "host is given twice"),
        (["--what-if", "kernel:=0.5"], "is not kernel:REGEX=F"),
        (["--what-if", "kernel:(a=0.5"], "kernel:(a=0.5"),
        (["--what-if", ""], "give terms such as host=0.5"),
        (["--step", "-1"], "--step must be a step number"),
        (["--step", "99"], "no ProfilerStep#99 range; its steps are 3, 4, 5, 6"),
    ],
)
def test_a_bad_argument_is_a_perflab_error(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "critical", str(H200), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and said in err and "Traceback" not in err


def test_a_pathological_regex_is_answered_at_once(job_dir: Path, tmp_path: Path) -> None:
    """RE2 matches in linear time: ``(a+)+b`` against a kernel named with 5,000 ``a`` would
    keep Python's backtracking ``re`` busy for ever."""
    doc = json.loads((job_dir / "rank-0.json").read_text())
    for e in doc["traceEvents"]:
        if e["name"] == "side_kernel":
            e["name"] = "a" * 5000
    path = tmp_path / "long-name.json"
    path.write_text(json.dumps(doc))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "perflab",
            "trace",
            "critical",
            str(path),
            "--what-if",
            "kernel:(a+)+b=0.5",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0 and "kernel:(a+)+b=0.5" in run.stdout


def test_what_bounds_a_step_of_the_h200_training_recording() -> None:
    """Host-bound: host and launch calls hold the step, with the pageable input copy; no
    kernel is on the path, so halving the host time nearly halves the step and halving the
    GPU's time buys only the copy's share."""
    result = critical_path(load_trace(H200), what_if=["host=0.5", "kernels=0.5"])
    for step in result.steps:
        kinds = step.by_kind
        assert (kinds["host"] + kinds["launch"]) / step.duration_ns > 0.9
        assert "kernel" not in kinds and 0.07 < kinds["copy"] / step.duration_ns < 0.1
    host, kernels = (w["mean_step_ns"] / result.mean_step_ns for w in result.what_if)
    assert host < 0.6 and 0.9 < kernels < 1.0


def test_what_bounds_a_step_of_the_a100_ddp_rank() -> None:
    """Rank 0 of the 2-rank DDP run: its host bounds every step (the GPU is busy a quarter of
    the time); the all-reduces are never on the path, so faster communication buys nothing."""
    result = critical_path(load_trace(NCCL), what_if=["comm=0.5", "host=0.5"])
    for step in result.steps:
        assert (step.by_kind["host"] + step.by_kind["launch"]) == step.duration_ns
    comm, host = (w["mean_step_ns"] / result.mean_step_ns for w in result.what_if)
    assert comm == 1.0 and host == pytest.approx(0.5, abs=0.01)
