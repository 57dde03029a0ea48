"""Whole jobs summarised on a Dask cluster: the same summary as the local path (plus an
``engine`` block), per-rank faults, scheduler errors, and the missing extra."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench_scripts import load_script
from test_job_unreadable import ENTRIES, named_in, spoiled_job

import perflab
from perflab import job_dask
from perflab.analysis.job import summarize_job
from perflab.analysis.job_activity import job_activity
from perflab.cli import main
from perflab.errors import InputError, MissingExtraError
from perflab.io.job import job_files, load_job

distributed = pytest.importorskip("distributed")

STRAGGLER = 5


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def generate(directory: Path, ranks: int = 8, **options: Any) -> Any:
    directory.mkdir(exist_ok=True)
    options.setdefault("straggler", min(STRAGGLER, ranks - 1))
    return load_script("job").generate_job(directory, ranks, 30, seed=5, **options)


def local_and_dask(directory: Path, client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    local = summarize_job(load_job(directory, workers=0)).to_dict()
    remote = perflab.load_job(directory, client=client).summary().to_dict()
    return local, remote


@pytest.mark.parametrize("ranks", [8, 32])
@pytest.mark.parametrize("collective_args", ["", "seq"])
def test_generated_job_is_summarised_as_the_local_path_does(
    tmp_path: Path, client: Any, collective_args: str, ranks: int
) -> None:
    generate(tmp_path, ranks=ranks, collective_args=collective_args)
    local, remote = local_and_dask(tmp_path, client)
    assert remote.pop("engine") == {"name": "dask", "workers": 2, "tasks": ranks}
    assert remote == local and len(remote["ranks"]) == ranks
    assert remote["stragglers"][0]["rank"] == STRAGGLER
    assert remote["collectives"]["count"] == 30
    want = "sequence numbers" if collective_args else "order per stream"
    assert remote["collectives"]["matched_by"] == want


def test_the_collectives_are_matched_on_a_worker_and_only_summaries_come_back(
    tmp_path: Path, client: Any
) -> None:
    generate(tmp_path, ranks=4)
    with distributed.get_task_stream(client) as stream:
        summary = perflab.load_job(tmp_path, client=client).summary()
    ran = [task["key"] for task in stream.data]
    names = [key[0] if isinstance(key, tuple) else key for key in ran]
    assert sum(n.startswith("rank_task-") for n in names) == 4
    assert sum(n.startswith("matching_task-") for n in names) == 1
    # this process holds the ranks' summaries and the findings, never the rank x
    # collective table (it stays with the worker that matched)
    assert summary.collectives is None and sorted(summary.rank_summaries) == [0, 1, 2, 3]
    head = job_dask.rank_head(job_dask.rank_task(str(tmp_path / "rank-0.json.gz")))
    assert not isinstance(head, job_dask.RankFailure)
    assert [type(part).__name__ for part in head] == ["RankFacts", "TraceSummary"]


def test_real_a100_rank_traces_give_the_local_summary(
    tmp_path: Path, client: Any, trace_data: Path
) -> None:
    # the real rank-0 trace of a 2-rank A100 job, and a copy of it that says rank 1
    source = trace_data / "kineto" / "nccl_2ranks_a100.json.gz"
    shutil.copy(source, tmp_path / "rank-0.json.gz")
    with gzip.open(source, "rt") as fh:
        doc = json.load(fh)
    doc["distributedInfo"]["rank"] = 1
    with gzip.open(tmp_path / "rank-1.json.gz", "wt") as fh:
        json.dump(doc, fh)
    local, remote = local_and_dask(tmp_path, client)
    assert remote.pop("engine") == {"name": "dask", "workers": 2, "tasks": 2}
    assert remote == local
    assert remote["ranks"]["0"]["comm"]["count"] == 21
    assert remote["collectives"]["count"] == 21


def test_the_overview_is_binned_on_the_workers_as_it_is_locally(
    tmp_path: Path, client: Any
) -> None:
    generate(tmp_path, ranks=8)
    local = job_activity(load_job(tmp_path, workers=0), groups=3, bins=256)
    with distributed.get_task_stream(client) as stream:
        remote = perflab.load_job(tmp_path, client=client).activity(groups=3, bins=256)
    names = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in stream.data]
    assert sum(n.startswith("group_task-") for n in names) == 3  # one task per group
    assert remote.groups == local.groups == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert remote.grid == local.grid
    np.testing.assert_array_equal(remote.fractions, local.fractions)
    page = perflab.load_job(tmp_path, client=client).timeline(groups=3, bins=256)
    assert "ranks 3-5" in page.text


def test_a_rank_the_overview_cannot_read_is_named_and_left_out(tmp_path: Path, client: Any) -> None:
    generate(tmp_path, ranks=4)
    bad = tmp_path / "rank-1.json.gz"
    bad.write_bytes(b"not gzip at all")
    activity = perflab.load_job(tmp_path, client=client).activity(groups=4, bins=64)
    assert activity.groups == [[0], [2], [3]]
    assert any(str(bad) in w and "left out" in w for w in activity.warnings)


def test_a_rank_file_that_fails_to_read_is_named_and_the_rest_summarised(
    tmp_path: Path, client: Any
) -> None:
    generate(tmp_path, ranks=4)
    bad = tmp_path / "rank-2.json.gz"
    bad.write_bytes(b"not gzip at all")
    summary = perflab.load_job(tmp_path, client=client).summary()
    doc = summary.to_dict()
    assert list(doc["ranks"]) == ["0", "1", "3"]
    (failed,) = doc["engine"]["failed"]
    assert failed["file"] == str(bad) and failed["error"]
    assert str(bad) not in failed["error"]  # the file is named once, beside its error
    assert any(str(bad) in w and "left out" in w for w in doc["warnings"])
    assert any("3 of 4 ranks present (missing: 2)" in w for w in doc["warnings"])
    headline = str(summary).splitlines()[1]  # the partial answer says so before the tables
    assert (
        headline
        == "read on a Dask cluster: 2 workers, 4 tasks; 1 rank file not read (see the warnings)"
    )


def test_no_readable_rank_file_is_an_input_error_naming_each(tmp_path: Path, client: Any) -> None:
    for rank in (0, 1):
        (tmp_path / f"rank-{rank}.json").write_text("{broken")
    with pytest.raises(InputError, match=r"no rank file could be read.*rank-0\.json.*rank-1"):
        perflab.load_job(tmp_path, client=client).summary()


def test_files_the_workers_cannot_see_are_reported(tmp_path: Path, client: Any) -> None:
    generate(tmp_path, ranks=2)
    files = job_files(tmp_path)
    gone = tmp_path / "elsewhere"
    with pytest.raises(InputError, match="no rank file could be read"):
        job_dask.summarize_on_cluster([gone / f.name for f in files], client)


def test_mixed_world_sizes_are_noted_as_locally(tmp_path: Path, client: Any) -> None:
    generate(tmp_path, ranks=3)
    path = tmp_path / "rank-1.json.gz"
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    doc["distributedInfo"]["world_size"] = 5
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    local, remote = local_and_dask(tmp_path, client)
    remote.pop("engine")
    assert remote == local
    assert any("disagree on the world size (3, 5)" in w for w in remote["warnings"])


@pytest.mark.parametrize("work", ["summary", "activity"])
def test_an_interrupt_cancels_the_jobs_tasks(
    tmp_path: Path, client: Any, monkeypatch: pytest.MonkeyPatch, work: str
) -> None:
    generate(tmp_path, ranks=4)
    submitted: list[Any] = []  # held here, so that only a cancel (not their release) ends them

    def keeping(method: Any) -> Any:
        def submit(*args: Any, **kwargs: Any) -> Any:
            out = method(*args, **kwargs)
            submitted.extend(out if isinstance(out, list) else [out])
            return out

        return submit

    def interrupted(future: Any) -> Any:
        future.result()  # the first rank has been read: the job's tasks are all submitted
        raise KeyboardInterrupt  # Ctrl-C while this process waits for the rest

    monkeypatch.setattr(client, "map", keeping(client.map))
    monkeypatch.setattr(client, "submit", keeping(client.submit))
    monkeypatch.setattr(job_dask, "_outcome", interrupted)
    with pytest.raises(KeyboardInterrupt):
        getattr(perflab.load_job(tmp_path, client=client), work)()
    assert len(submitted) == 8  # a read and a head per rank
    assert {f.status for f in submitted} == {"cancelled"}


def test_cli_scheduler_local_prints_the_local_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generate(tmp_path, ranks=4)
    assert main(["trace", "summary", str(tmp_path), "--json"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert main(["trace", "summary", str(tmp_path), "--scheduler", "local:2", "--json"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert remote.pop("engine") == {"name": "dask", "workers": 2, "tasks": 4}
    assert remote == local
    assert main(["trace", "summary", str(tmp_path), "--scheduler", "local:2"]) == 0
    text = capsys.readouterr().out
    assert main(["trace", "summary", str(tmp_path)]) == 0
    lines = text.splitlines()  # the same text, with where the ranks were read
    assert lines.pop(1) == "read on a Dask cluster: 2 workers, 4 tasks"
    assert lines == capsys.readouterr().out.splitlines()


def test_cli_timeline_on_a_scheduler_writes_the_overview(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generate(tmp_path / "job", ranks=4)
    out = tmp_path / "overview.html"
    command = ["timeline", str(tmp_path / "job"), "-o", str(out), "--scheduler", "local:1"]
    assert main([*command, "--groups", "2", "--bins", "128"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "4 ranks)" in printed
    assert "ranks 0-1" in out.read_text() and "ranks 2-3" in out.read_text()
    assert main([*command, "--groups", "0"]) == 2
    assert "--groups must be from 1 to 4096, not 0" in capsys.readouterr().err
    assert main(["timeline", str(tmp_path / "job"), "-o", str(out), "--bins", "64"]) == 2
    assert "give them with --scheduler" in capsys.readouterr().err


def test_unreachable_scheduler_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    generate(tmp_path, ranks=2)
    monkeypatch.setattr(job_dask, "CONNECT_TIMEOUT_S", 2)
    address = f"tcp://127.0.0.1:{_free_port()}"
    began = time.monotonic()
    assert main(["trace", "summary", str(tmp_path), "--scheduler", address]) != 0
    assert time.monotonic() - began < 60  # a short connect timeout, not a hang
    err = capsys.readouterr().err
    assert f"cannot reach the Dask scheduler at {address}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("local:0", "local:N takes from 1 to 256 workers, not 0"),
        ("local:9999", "local:N takes from 1 to 256 workers, not 9999"),
        ("local:2x", "is neither a scheduler address"),
        ("http://host:1", "is neither a scheduler address"),
        ("host", "is neither a scheduler address"),
    ],
)
def test_bad_scheduler_values_are_refused(value: str, message: str) -> None:
    # refused as written, before any connection is tried
    with pytest.raises(InputError, match=re.escape(message)), job_dask.cluster_client(value):
        pass


def test_without_dask_the_extra_to_install_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    generate(tmp_path, ranks=2)
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now fails
    with pytest.raises(MissingExtraError, match=r"pip install 'perflab\[dask\]'"):
        perflab.load_job(tmp_path, client=object())
    assert main(["trace", "summary", str(tmp_path), "--scheduler", "local:2"]) != 0
    assert "pip install 'perflab[dask]'" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.slow
def test_a_real_scheduler_and_worker_pair(tmp_path: Path) -> None:
    generate(tmp_path / "job", ranks=4)
    dask = Path(sys.executable).with_name("dask")
    address = f"tcp://127.0.0.1:{_free_port()}"
    port = address.rsplit(":", 1)[1]
    env = {**os.environ, "DASK_DISTRIBUTED__DASHBOARD__EXPORT_TOOL": "False"}
    commands = [
        [str(dask), "scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard"],
        [str(dask), "worker", address, "--nworkers", "2", "--nthreads", "1", "--no-dashboard"],
    ]
    started = []
    try:
        for command in commands:
            started.append(
                subprocess.Popen(
                    command,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    env=env,
                )
            )
        with distributed.Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
            local, remote = local_and_dask(tmp_path / "job", c)
        assert remote.pop("engine") == {"name": "dask", "workers": 2, "tasks": 4}
        assert remote == local
    finally:
        for process in reversed(started):
            os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


# -- workers that die mid-job --------------------------------------------------------------


class _DieReading(distributed.WorkerPlugin):  # type: ignore[misc]
    """On every worker (also one the nanny starts again): reading the rank file ``name``
    kills the worker process at once, always, or only until ``marker`` exists."""

    def __init__(self, name: str, marker: str | None) -> None:
        self.name, self.marker = name, marker

    def setup(self, worker: Any) -> None:
        real = job_dask.load_trace
        name, marker = self.name, self.marker

        def dying(path: str, **options: Any) -> Any:
            if Path(path).name == name and (marker is None or not Path(marker).exists()):
                if marker is not None:
                    Path(marker).touch()
                os._exit(1)  # no cleanup, no answer: as a worker killed by the OS
            return real(path, **options)

        job_dask.load_trace = dying


@pytest.fixture
def dying_cluster() -> Iterator[Any]:
    """Its own cluster (2 worker processes under nannies): a killed worker is restarted."""
    import cloudpickle
    import dask

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the plugin travels by value
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 1}),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.mark.slow
def test_a_worker_killed_once_mid_job_still_gives_the_whole_summary(
    tmp_path: Path, dying_cluster: Any
) -> None:
    generate(tmp_path, ranks=4)
    marker = tmp_path / "died-once"
    dying_cluster.register_plugin(_DieReading("rank-2.json.gz", str(marker)))
    local = summarize_job(load_job(tmp_path, workers=0)).to_dict()
    remote = perflab.load_job(tmp_path, client=dying_cluster).summary().to_dict()
    assert marker.exists()  # a worker did die reading rank 2
    engine = remote.pop("engine")
    assert "failed" not in engine and engine["tasks"] == 4
    assert remote == local  # the task ran again elsewhere: nothing lost


@pytest.mark.slow
def test_a_rank_whose_worker_always_dies_is_named_and_the_rest_summarised(
    tmp_path: Path, dying_cluster: Any
) -> None:
    generate(tmp_path, ranks=4)
    dying_cluster.register_plugin(_DieReading("rank-1.json.gz", None))
    doc = perflab.load_job(tmp_path, client=dying_cluster).summary().to_dict()
    # rank 1 is lost; a task that shared its dying worker can be lost with it (Dask counts
    # it suspicious too): the answer is partial and names every rank it left out
    failed = {Path(f["file"]).name: f["error"] for f in doc["engine"]["failed"]}
    assert "rank-1.json.gz" in failed
    assert all("worker reading it died" in error for error in failed.values())
    summarised = {f"rank-{r}.json.gz" for r in doc["ranks"]}
    assert summarised and not summarised & set(failed)
    assert summarised | set(failed) == {f"rank-{r}.json.gz" for r in range(4)}
    for name in failed:
        assert any(name in w and "left out" in w for w in doc["warnings"])


# -- entries of the directory that are not readable files ---------------------------------------


def test_unreadable_rank_entries_are_named_as_failed_and_in_the_warnings(
    tmp_path: Path, client: Any
) -> None:
    spoiled = spoiled_job(tmp_path)
    summary = perflab.load_job(spoiled, client=client).summary()
    assert "4 rank files not read (see the warnings)" in str(summary)
    doc = json.loads(json.dumps(summary.to_dict()))
    engine = doc.pop("engine")
    failed = {Path(f["file"]).name: f["error"] for f in engine["failed"]}
    assert sorted(failed) == sorted(ENTRIES) and engine["tasks"] == 3
    assert all(words in failed[name] for name, words in ENTRIES.items())
    named_in(doc["warnings"], spoiled, ENTRIES)
    assert doc == summarize_job(load_job(spoiled, workers=0)).to_dict()  # as locally
    activity = perflab.load_job(spoiled, client=client).activity(groups=3, bins=64)
    named_in(activity.warnings, spoiled, ENTRIES)


def test_the_cli_on_a_scheduler_names_unreadable_rank_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spoiled = spoiled_job(tmp_path)
    assert main(["trace", "summary", str(spoiled), "--scheduler", "local:1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(Path(f["file"]).name for f in doc["engine"]["failed"]) == sorted(ENTRIES)
    named_in(doc["warnings"], spoiled, ENTRIES)
