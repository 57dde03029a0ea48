"""A job's critical paths on a Dask cluster: the local answer byte for byte (each rank read and
its graph built on a worker, the paths walked and the what-ifs replayed here), what travels
back, ranks that fail, and the command line."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from data_paths import TRACES
from step_sim import simulate
from test_job_dask import _DieReading, client, dying_cluster, generate

import perflab
from perflab import job_dask
from perflab.analysis.critical_path import CriticalPaths, job_critical_path
from perflab.cli import main
from perflab.errors import InputError, MissingExtraError, PerflabError
from perflab.io import load_trace
from perflab.io.job import load_job

distributed = pytest.importorskip("distributed")

__all__ = ["client", "dying_cluster"]  # the fixtures, shared with the summary's tests
CHANGES = ["host=0.5", "kernels=0.5,comm=0.5", "kernel:gemm=0.25"]


@pytest.fixture(scope="module")
def sim_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate(ranks=3, straggler=1).write(tmp_path_factory.mktemp("sim") / "job")


def as_json(result: CriticalPaths) -> str:
    return json.dumps(result.to_dict(), allow_nan=False)


def local_and_dask(directory: Path, client: Any, **options: Any) -> tuple[str, str]:
    local = job_critical_path(load_job(directory, workers=0), **options)
    remote = perflab.load_job(directory, client=client).critical(**options)
    assert str(remote) == str(local)  # the text view too
    return as_json(local), as_json(remote)


def two_rank_a100_job(directory: Path) -> Path:
    """The real rank-0 trace of a 2-rank A100 job, and a copy of it that says rank 1."""
    directory.mkdir()
    source = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"
    shutil.copy(source, directory / "rank-0.json.gz")
    doc = json.loads(gzip.decompress(source.read_bytes()))
    doc["distributedInfo"]["rank"] = 1
    (directory / "rank-1.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    return directory


@pytest.mark.parametrize("step", [None, 2])
def test_a_simulated_jobs_paths_and_what_ifs_are_the_local_ones(
    sim_job: Path, client: Any, step: int | None
) -> None:
    local, remote = local_and_dask(sim_job, client, step=step, what_if=CHANGES)
    assert remote == local
    doc = json.loads(remote)
    assert doc["graph"]["edges"]["collective across ranks"] > 0  # tied across the ranks
    assert [w["change"] for w in doc["what_if"]] == CHANGES
    assert {e["rank"] for s in doc["steps"] for e in s["path"]} >= {1}  # the straggler


def test_a_real_a100_jobs_paths_are_the_local_ones(tmp_path: Path, client: Any) -> None:
    job = two_rank_a100_job(tmp_path / "job")
    local, remote = local_and_dask(job, client, what_if=["comm=0.5"])
    assert remote == local
    assert json.loads(remote)["graph"]["edges"]["collective across ranks"] > 0


@pytest.mark.parametrize("collective_args", ["", "seq"])
def test_a_generated_eight_rank_job_gives_the_local_paths(
    tmp_path: Path, client: Any, collective_args: str
) -> None:
    generate(tmp_path, ranks=8, collective_args=collective_args)
    local, remote = local_and_dask(tmp_path, client, what_if=["kernels=0.5"])
    assert remote == local


def test_ranks_that_are_not_one_job_are_left_untied_as_locally(tmp_path: Path, client: Any) -> None:
    for rank, name in enumerate(("cpu_only_train.json.gz", "cpu_memory_train.json.gz")):
        shutil.copy(TRACES / "cpu" / name, tmp_path / f"rank-{rank}.json.gz")
    local, remote = local_and_dask(tmp_path, client)
    assert remote == local
    assert any("not tied across ranks" in w for w in json.loads(remote)["warnings"])


def test_a_rank_per_task_and_no_whole_trace_comes_back(sim_job: Path, client: Any) -> None:
    with distributed.get_task_stream(client) as stream:
        perflab.load_job(sim_job, client=client).critical()
    names = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in stream.data]
    assert sum(n.startswith("critical_task-") for n in names) == 3
    assert sum(n.startswith("graph_task-") for n in names) == 3
    path = sim_job / "rank-1.json"
    head = job_dask.critical_head(job_dask.critical_task(str(path)))
    assert not isinstance(head, job_dask.RankFailure)
    assert [type(part).__name__ for part in head] == ["RankFacts", "RankSide"]
    outcome = job_dask.critical_task(str(path))
    assert not isinstance(outcome, job_dask.RankFailure)
    part = job_dask.graph_task(outcome, 1, 0, None)
    whole = load_trace(path)
    # what comes back of the trace: its host events and GPU work, no side tables or meta
    assert 0 < len(part.trace) < len(whole)
    assert len(part.trace.strings) < len(whole.strings)
    assert len(part.trace.kernels) == len(part.trace.ops) == len(part.trace.memcpy) == 0
    assert part.trace.meta == {} and len(whole.kernels) > 0


def test_a_rank_file_that_fails_to_read_is_named_and_the_rest_analysed(
    tmp_path: Path, client: Any
) -> None:
    simulate(ranks=3, straggler=1).write(tmp_path / "job")
    (tmp_path / "job" / "rank-1.json").rename(tmp_path / "rank-1.json")
    rest = job_critical_path(load_job(tmp_path / "job", workers=0))
    bad = tmp_path / "job" / "rank-1.json"
    bad.write_text("{broken")
    result = perflab.load_job(tmp_path / "job", client=client).critical()
    named = [w for w in result.warnings if str(bad) in w]
    assert len(named) == 1 and "left out" in named[0]
    assert [w for w in result.warnings if w not in named] == rest.warnings
    assert [s.to_dict() for s in result.steps] == [s.to_dict() for s in rest.steps]
    for other in (0, 2):  # none left: an error that names every file
        (tmp_path / "job" / f"rank-{other}.json").write_text("[")
    with pytest.raises(InputError, match=r"no rank file could be read.*rank-0.*rank-1.*rank-2"):
        perflab.load_job(tmp_path / "job", client=client).critical()


def test_a_bad_what_if_is_refused_before_any_task(sim_job: Path, client: Any) -> None:
    with distributed.get_task_stream(client) as stream, pytest.raises(InputError, match="gpu"):
        perflab.load_job(sim_job, client=client).critical(what_if=["gpu=0.5"])
    assert stream.data == []


class _FailGraph(distributed.WorkerPlugin):  # type: ignore[misc]
    """On every worker: building rank ``rank``'s graph raises."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def setup(self, worker: Any) -> None:
        real, rank = job_dask.rank_graph, self.rank

        def failing(trace: Any, r: int, *args: Any) -> Any:
            if r == rank:
                raise RuntimeError("no memory left")
            return real(trace, r, *args)

        job_dask.rank_graph = failing  # this worker's process ends with the test's cluster


@pytest.mark.filterwarnings("ignore:Port .* is already in use")
def test_a_graph_that_fails_on_its_worker_names_its_rank(sim_job: Path, dying_cluster: Any) -> None:
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the plugin travels by value
    try:
        dying_cluster.register_plugin(_FailGraph(2))
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    with pytest.raises(PerflabError, match=r"dependency graph of rank 2 \(.*rank-2\.json\)"):
        perflab.load_job(sim_job, client=dying_cluster).critical()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Port .* is already in use")
def test_a_rank_whose_worker_always_dies_is_named_and_the_rest_analysed(
    tmp_path: Path, dying_cluster: Any
) -> None:
    simulate(ranks=3, straggler=1).write(tmp_path)
    dying_cluster.register_plugin(_DieReading("rank-1.json", None))
    result = perflab.load_job(tmp_path, client=dying_cluster).critical()
    lost = [w for w in result.warnings if "worker reading it died" in w]
    assert any("rank-1.json" in w and "left out" in w for w in lost)
    assert result.steps and all(s.by_rank for s in result.steps)


def test_an_interrupt_cancels_the_tasks(
    sim_job: Path, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[Any] = []

    def keeping(*args: Any, **kwargs: Any) -> Any:
        out = real_map(*args, **kwargs)
        submitted.extend(out)
        return out

    def interrupted(future: Any) -> Any:
        future.result()
        raise KeyboardInterrupt

    real_map = client.map
    monkeypatch.setattr(client, "map", keeping)
    monkeypatch.setattr(job_dask, "_outcome", interrupted)
    with pytest.raises(KeyboardInterrupt):
        perflab.load_job(sim_job, client=client).critical()
    assert len(submitted) == 6  # a read and a head per rank
    assert {f.status for f in submitted} == {"cancelled"}


# -- the command line --------------------------------------------------------------------------


def test_cli_scheduler_prints_the_local_json_and_text(
    sim_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["trace", "critical", str(sim_job), "--what-if", "comm=0.5"]
    for extra in (["--json"], []):
        assert main([*argv, *extra]) == 0
        local = capsys.readouterr().out
        assert main([*argv, *extra, "--scheduler", "local:2"]) == 0
        assert capsys.readouterr().out == local  # byte for byte


def test_cli_scheduler_with_one_trace_file_is_a_clear_error(
    sim_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = str(sim_job / "rank-0.json")
    assert main(["trace", "critical", one, "--scheduler", "local:1"]) == 2
    err = capsys.readouterr().err
    assert "perflab: error:" in err and "give a directory or several rank files" in err
    assert "Traceback" not in err


def test_cli_bad_scheduler_value_is_refused(
    sim_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "critical", str(sim_job), "--scheduler", "host"]) == 2
    assert "is neither a scheduler address" in capsys.readouterr().err


def test_without_dask_the_extra_is_named(
    sim_job: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'perflab\[dask\]'"):
        job_dask.critical_on_cluster([sim_job / "rank-0.json"], object())
    assert main(["trace", "critical", str(sim_job), "--scheduler", "local:1"]) != 0
    assert "pip install 'perflab[dask]'" in capsys.readouterr().err


def test_the_help_says_where_the_work_is_done(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["trace", "critical", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--scheduler ADDRESS|local:N" in out and "on a Dask cluster" in out
