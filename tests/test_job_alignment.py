"""Rank files that are not one job on one clock: traces that do not overlap in time, clocks
that could only be guessed, distributedInfo that disagrees about the job (world sizes, file
names, process group sizes). The job summary says so first, with why, in text, HTML and
JSON, and makes no claim that rests on comparing the ranks' times; the job timeline draws
each rank on its own clock under the same message; a Dask cluster gives the same summary."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from bench_scripts import load_script
from data_paths import TRACES

from perflab.analysis.job import KEYS, summarize_job
from perflab.cli import main
from perflab.io.job import load_job
from perflab.model.units import format_ns
from perflab.render.job import NOT_ONE_JOB, summary_bundle

DAY_NS = 86_400 * 10**9


def _read(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


def _write(path: Path, doc: dict[str, Any]) -> None:
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)


def _edit_info(path: Path, **info: Any) -> None:
    doc = _read(path)
    doc["distributedInfo"].update(info)
    _write(path, doc)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real rank-0 trace of a 2-rank A100 job as rank 0, and the same run recorded
    8 days later as rank 1: two runs, not one job (its collectives pair up by order)."""
    directory = tmp_path_factory.mktemp("two_runs")
    doc = _read(TRACES / "kineto" / "nccl_2ranks_a100.json.gz")
    _write(directory / "rank-0.json.gz", doc)
    doc["distributedInfo"]["rank"] = 1
    doc["baseTimeNanoseconds"] += 8 * DAY_NS + 12_345
    _write(directory / "rank-1.json.gz", doc)
    return directory


def generate(directory: Path, ranks: int = 4) -> None:
    load_script("job").generate_job(directory, ranks, 12, seed=3, straggler=1)


def test_runs_apart_in_time_are_said_first_and_no_straggler_is_claimed(
    two_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = summarize_job(load_job(two_runs, workers=0))
    doc = summary.to_dict()
    assert list(doc) == list(KEYS)
    assert doc["alignment"] == {
        "one_job": False,
        "why": ["the traces do not overlap in time: rank 0's ends 8.0 days before rank 1's begins"],
    }
    assert doc["stragglers"] == []
    assert doc["collectives"]["skew_us"] == {"median": None, "p99": None}
    assert not any("clock is probably off" in w for w in doc["warnings"])
    lines = str(summary).splitlines()
    assert lines[1].startswith(f"{NOT_ONE_JOB} (the traces do not overlap in time")
    assert "no arrival skew, stragglers or waits" in lines[1]
    text = "\n".join(lines)
    assert "straggler:" not in text and "waited" not in text and "e+05 s" not in text
    html = summary_bundle(summary)["text/html"]
    assert f'<div class="warn">{NOT_ONE_JOB}' in html and "others waited" not in html
    assert main(["trace", "summary", str(two_runs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["alignment"]["one_job"] is False


def test_one_job_on_one_clock_is_said_to_be_one(tmp_path: Path) -> None:
    generate(tmp_path)
    summary = summarize_job(load_job(tmp_path))
    doc = summary.to_dict()
    assert doc["alignment"] == {"one_job": True, "why": []}
    assert doc["stragglers"][0]["rank"] == 1
    assert NOT_ONE_JOB not in str(summary)


def test_file_names_that_disagree_with_distributed_info_are_said(tmp_path: Path) -> None:
    generate(tmp_path, ranks=2)
    _edit_info(tmp_path / "rank-0.json.gz", rank=1)
    _edit_info(tmp_path / "rank-1.json.gz", rank=0)
    doc = summarize_job(load_job(tmp_path)).to_dict()
    assert doc["alignment"]["why"] == [
        "distributedInfo disagrees with the file names (rank-1.json.gz says rank 0; "
        "rank-0.json.gz says rank 1)"
    ]
    assert doc["stragglers"] == []


def test_world_sizes_and_process_groups_that_disagree_are_said(tmp_path: Path) -> None:
    generate(tmp_path)
    group = {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl"}
    for rank in range(4):
        size = 8 if rank == 3 else 4
        _edit_info(tmp_path / f"rank-{rank}.json.gz", pg_config=[{**group, "pg_size": size}])
    _edit_info(tmp_path / "rank-2.json.gz", world_size=6)
    doc = summarize_job(load_job(tmp_path)).to_dict()
    assert doc["alignment"]["why"] == [
        "distributedInfo gives different world sizes (4, 6)",
        "their process groups disagree (process group 0 has 4 ranks on rank 0, 8 on rank 3)",
    ]


def test_a_clock_that_could_only_be_guessed_is_said(tmp_path: Path) -> None:
    generate(tmp_path, ranks=2)
    path = tmp_path / "rank-1.json.gz"
    doc = _read(path)
    doc.pop("baseTimeNanoseconds")  # its timestamps are now years before rank 0's
    _write(path, doc)
    why = summarize_job(load_job(tmp_path)).to_dict()["alignment"]["why"]
    assert why == [
        "rank 1 has no baseTimeNanoseconds and times outside the others': its clock was only "
        "guessed (its first event put at theirs)"
    ]


def test_the_timeline_draws_each_rank_on_its_own_clock(two_runs: Path) -> None:
    pytest.importorskip("bokeh")
    from perflab.render.job import job_timeline

    job = load_job(two_runs, workers=0)
    view = job_timeline(job)
    first, second = view.text.splitlines()[:2]
    assert first.startswith(f"{NOT_ONE_JOB} (the traces do not overlap in time")
    assert "each rank is drawn on its own clock, from its own first event" in first
    own_span = max(int(r.trace.end_ns.max() - r.trace.start_ns.min()) for r in job)
    assert second.endswith(f"span {format_ns(own_span)}")  # was 8 days
    assert "collectives:" not in view.text  # no links between unrelated runs
    from bokeh.models import Title

    (title,) = [t.text for t in view.layout.select({"type": Title}) if "Job of" in t.text]
    assert NOT_ONE_JOB in title and "each rank's time since its own first event" in title


def test_a_dask_cluster_gives_the_same_answer(two_runs: Path) -> None:
    distributed = pytest.importorskip("distributed")
    import perflab

    local = summarize_job(load_job(two_runs, workers=0)).to_dict()
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = perflab.load_job(two_runs, client=client).summary().to_dict()
    remote.pop("engine")
    assert remote == local and local["alignment"]["one_job"] is False
