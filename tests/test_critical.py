"""Critical paths and what-ifs checked against the truth: a simulated training program
(tests/step_sim.py) run event by event on three ranks, one of them a straggler, and run again
with each change, which is what the replay must predict."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from step_sim import GAP, LATENCY, NCCL_NAME, SLOW_KERNEL, Change, simulate

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.critical_graph import build_graph, rank_graph
from perflab.analysis.critical_job import job_graph
from perflab.analysis.critical_path import CriticalPaths, critical_path, job_critical_path
from perflab.analysis.critical_replay import replay, replay_in_order
from perflab.io import load_trace
from perflab.io.job import load_job
from perflab.model.job import Job

STRAGGLER = 1
CHANGES = {
    "host=0.5": Change(host=0.5),
    "kernels=0.5": Change(kernels=0.5),
    "kernel:bwd_gemm=0.5": Change(patterns=(("bwd_gemm", 0.5),)),
    "comm=0.5": Change(comm=0.5),
    "host=0.5,kernels=0.5": Change(host=0.5, kernels=0.5),
    "host=2": Change(host=2.0),
    "comm=3": Change(comm=3.0),
}


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate(straggler=STRAGGLER).write(tmp_path_factory.mktemp("sim") / "job")


@pytest.fixture(scope="module")
def job(job_dir: Path) -> Job:
    return load_job(job_dir, workers=0)


@pytest.fixture(scope="module")
def result(job: Job) -> CriticalPaths:
    return job_critical_path(job, what_if=list(CHANGES))


def test_each_steps_path_adds_up_to_its_duration(result: CriticalPaths) -> None:
    truth = simulate(straggler=STRAGGLER)
    assert [s.duration_ns for s in result.steps] == truth.steps
    for step in result.steps:
        assert int(step.path.dur.sum()) == step.duration_ns
        assert sum(step.by_kind.values()) == step.duration_ns
        assert step.by_rank is not None and sum(step.by_rank.values()) == step.duration_ns
    assert result.mean_step_ns == pytest.approx(truth.mean_step)


def test_the_stragglers_slow_kernel_is_on_the_path(result: CriticalPaths) -> None:
    for step in result.steps:
        entries = step.entries()
        slow = [e for e in entries if e["name"] == SLOW_KERNEL]
        assert [e["rank"] for e in slow] == [STRAGGLER]
        assert slow[0]["kind"] == "kernel"
        # the collective ends on the straggler's arrival: its transfer is on the path after
        transfer = [e for e in entries if e["kind"] == "collective transfer"]
        assert transfer and transfer[0]["name"] == NCCL_NAME
        assert step.by_rank is not None
        assert max(step.by_rank, key=lambda r: step.by_rank[r]) == STRAGGLER


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_what_if_is_within_5_percent_of_the_program_run_again(
    result: CriticalPaths, change: str
) -> None:
    truth = simulate(straggler=STRAGGLER, change=CHANGES[change]).mean_step
    predicted = next(w["mean_step_ns"] for w in result.what_if if w["change"] == change)
    assert predicted == pytest.approx(truth, rel=0.05)
    assert abs(predicted - result.mean_step_ns) > 0.01 * result.mean_step_ns  # it moved


def test_replay_with_the_recorded_durations_gives_back_every_recorded_time(job: Job) -> None:
    g, _ = job_graph(job)
    start, end = replay(g, g.dur)
    assert np.array_equal(start, g.start) and np.array_equal(end, g.end)
    faster = np.rint(g.dur * 0.5).astype(np.int64)
    assert [a.tolist() for a in replay(g, faster)] == [
        a.tolist() for a in replay_in_order(g, faster)
    ]


def test_edges_the_program_has(job: Job) -> None:
    """Launches (a cudaGraphLaunch's to every kernel of its graph), the readback's wait, the
    recorded stream waits, the all-reduce tied across the ranks, and the launch latency and
    stream gap the program has."""
    g, _ = job_graph(job)
    steps, ranks = 4, 3
    counts = np.bincount(g.edge_kind, minlength=5)
    assert counts[gpu.STREAM_WAIT] == 3 * steps * ranks
    assert counts[gpu.SYNC_WAIT] == steps * ranks  # the blocking readback
    assert counts[gpu.PEER] == 2 * steps * ranks  # arrival -> instance -> transfer
    assert counts[gpu.INFERRED_WAIT] == 0
    # the defaults measured: from work that waited for no other stream
    assert {(p.latency, p.gap) for p in g.parts} == {(LATENCY, GAP)}
    part = g.parts[0]
    names = part.trace.names_of(part.gpu.row)
    graph_kernels = [i for i, n in enumerate(names) if n.startswith("graph_kernel_")]
    launched = g.dst[g.edge_kind == gpu.LAUNCH] - int(g.base[0]) - len(part.host)
    assert set(graph_kernels) <= set(launched.tolist())
    work = np.searchsorted(part.gpu.last, graph_kernels)
    called = set(part.trace.names_of(part.launch_call[work]))
    assert called == {"cudaGraphLaunch"}


def _strip_wait_records(src: Path, dst: Path) -> Path:
    """The job's traces without their ``Stream Wait Event`` records (older profilers)."""
    dst.mkdir()
    for path in src.iterdir():
        doc = json.loads(path.read_text())
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e["name"] != "Stream Wait Event"]
        (dst / path.name).write_text(json.dumps(doc))
    return dst


def test_waits_between_streams_are_inferred_where_the_trace_does_not_record_them(
    job_dir: Path, tmp_path: Path
) -> None:
    bare = load_job(_strip_wait_records(job_dir, tmp_path / "bare"), workers=0)
    g, _ = job_graph(bare)
    counts = np.bincount(g.edge_kind, minlength=5)
    assert counts[gpu.STREAM_WAIT] == 0
    assert counts[gpu.INFERRED_WAIT] == 3 * 4 * 3
    result = job_critical_path(bare, what_if=["kernels=0.5", "comm=0.5"])
    for w in result.what_if:
        change = CHANGES[w["change"]]
        truth = simulate(straggler=STRAGGLER, change=change).mean_step
        assert w["mean_step_ns"] == pytest.approx(truth, rel=0.05)


def test_one_rank_alone_keeps_its_collective_whole(job_dir: Path) -> None:
    trace = load_trace(job_dir / "rank-0.json")
    result = critical_path(trace, what_if=["comm=0.5"])
    for step in result.steps:
        assert int(step.path.dur.sum()) == step.duration_ns
        assert step.by_rank is None
        assert {e["rank"] for e in step.entries()} == {None}
        assert "collective transfer" not in step.by_kind  # its waiting cannot be told apart
    doc = result.to_dict()
    assert "by_rank" not in doc["steps"][0]
    json.dumps(doc, allow_nan=False)


def test_one_step_and_the_steps_named_when_it_is_missing(job: Job) -> None:
    from perflab.errors import InputError

    one = job_critical_path(job, step=2)
    assert [s.step for s in one.steps] == ["ProfilerStep#2"]
    with pytest.raises(InputError, match=r"no ProfilerStep#7 range; its steps are 0, 1, 2, 3"):
        job_critical_path(job, step=7)


def test_a_recording_without_steps_is_one_step(job_dir: Path, tmp_path: Path) -> None:
    doc = json.loads((job_dir / "rank-0.json").read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "ProfilerStep" not in e["name"]]
    path = tmp_path / "no-steps.json"
    path.write_text(json.dumps(doc))
    result = critical_path(load_trace(path))
    assert [s.step for s in result.steps] == ["whole recording"]
    assert int(result.steps[0].path.dur.sum()) == result.steps[0].duration_ns
    assert "whole recording is taken as one step" in result.warnings[0]


def test_a_single_trace_graph_replays_its_recording(job_dir: Path) -> None:
    g = build_graph([rank_graph(load_trace(job_dir / "rank-2.json"))])
    start, end = replay(g, g.dur)
    assert np.array_equal(start, g.start) and np.array_equal(end, g.end) and g.dropped == 0


def test_wall_clock_times_written_as_floats_keep_every_dependency(
    job_dir: Path, tmp_path: Path
) -> None:
    """Microseconds since 1970 as JSON floats are a quarter of a microsecond apart: a kernel
    that starts when another ends may read as starting before it. No edge is lost to that."""
    shifted = tmp_path / "wall-clock"
    shifted.mkdir()
    for path in job_dir.iterdir():
        doc = json.loads(path.read_text())
        for e in doc["traceEvents"]:
            e["ts"] = e["ts"] + 1_700_000_000_000_000.0
        (shifted / path.name).write_text(json.dumps(doc))
    g, _ = job_graph(load_job(shifted, workers=0))
    assert g.dropped == 0
    result = job_critical_path(load_job(shifted, workers=0), what_if=["kernels=0.5"])
    truth = simulate(straggler=STRAGGLER, change=CHANGES["kernels=0.5"]).mean_step
    assert result.what_if[0]["mean_step_ns"] == pytest.approx(truth, rel=0.05)
