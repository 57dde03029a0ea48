"""Distributed jobs: loading a directory of rank traces, per-rank summaries, collectives matched
across ranks, stragglers, clock alignment, and ``perflab trace summary|kernels DIR``."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench_scripts import load_script

from perflab.analysis.job import rank_entry, summarize_job
from perflab.analysis.trace_summary import summarize
from perflab.cli import main
from perflab.errors import InputError
from perflab.io import load_trace
from perflab.io.job import RankReadJob, load_job, run_helper
from perflab.model.job import Job
from perflab.render.job import summary_bundle, summary_text

STRAGGLER = 2
HALF_NS = 0.0005  # in us: reported values are rounded to the nanosecond


def bench_job() -> Any:
    """benchmarks/job.py as a module: its job generator, which also returns the truth."""
    return load_script("job")


def generate(directory: Path, ranks: int = 4, iterations: int = 40, **options: Any) -> Any:
    directory.mkdir(exist_ok=True)
    options.setdefault("straggler", STRAGGLER)
    return bench_job().generate_job(directory, ranks, iterations, seed=3, **options)


def expected_collectives(truth: Any) -> tuple[list[dict[int, int]], dict[int, dict[str, float]]]:
    """Instances every rank took part in, and per rank what the straggler table must say,
    worked out from the generator's plan with plain Python."""
    ranks = set(truth.ranks)
    instances = [s for s in truth.starts if set(s) == ranks]
    table: dict[int, dict[str, float]] = {
        r: {"last_count": 0, "late": 0.0, "wait": 0.0} for r in ranks
    }
    for starts in instances:
        latest = max(starts.values())
        last = min(r for r, s in starts.items() if s == latest)
        table[last]["last_count"] += 1
        table[last]["wait"] += sum(latest - s for s in starts.values()) / 1000
        for r, s in starts.items():
            table[r]["late"] += (s - min(starts.values())) / 1000 / len(instances)
    return instances, table


# -- loading, per-rank numbers -------------------------------------------------------------


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    directory = tmp_path_factory.mktemp("job")
    return directory, generate(directory)


def test_per_rank_numbers_are_the_generated_truth(job_dir: tuple[Path, Any]) -> None:
    directory, truth = job_dir
    doc = summarize_job(load_job(directory)).to_dict()
    assert list(doc["ranks"]) == ["0", "1", "2", "3"]
    for rank, want in truth.ranks.items():
        got = doc["ranks"][str(rank)]
        assert got["busy_us"] == pytest.approx(want.busy / 1000, rel=1e-4)
        assert got["span_us"] == pytest.approx(want.span / 1000, rel=1e-4)
        assert got["idle_us"] == pytest.approx((want.span - want.busy) / 1000, rel=1e-4)
        assert got["kernels"] == want.kernels
        assert got["comm"]["count"] == want.comm_count
        assert got["comm"]["total_us"] == pytest.approx(want.comm_total / 1000, rel=1e-4)
        assert got["comm"]["overlapped_us"] == pytest.approx(want.overlapped / 1000, rel=1e-4)


def test_rank_summary_is_the_single_file_summary(job_dir: tuple[Path, Any]) -> None:
    directory, _ = job_dir
    summary = summarize_job(load_job(directory, workers=1))
    for rank, entry in summary.to_dict()["ranks"].items():
        alone = summarize(load_trace(directory / f"rank-{rank}.json.gz"))
        assert entry == rank_entry(alone)
        assert summary.rank_summaries[int(rank)].to_dict() == alone.to_dict()


def test_helper_processes_give_the_traces_one_process_reads(job_dir: tuple[Path, Any]) -> None:
    directory, _ = job_dir
    serial, parallel = load_job(directory, workers=0), load_job(directory, workers=3)
    assert serial.rank_numbers == parallel.rank_numbers
    for a, b in zip(serial, parallel, strict=True):
        assert a.source == b.source and a.clock_offset_ns == b.clock_offset_ns
        assert a.trace.strings == b.trace.strings and a.trace.meta == b.trace.meta
        for table in ("events", "tracks", "kernels", "memcpy", "ops"):
            for name, column in getattr(a.trace, table).columns.items():
                np.testing.assert_array_equal(column, getattr(b.trace, table)[name])


def test_clocks_are_aligned_on_each_ranks_base_time(job_dir: tuple[Path, Any]) -> None:
    directory, _ = job_dir
    job = load_job(directory)
    assert job.clock == "each rank's baseTimeNanoseconds"
    gen = bench_job()
    for r in job:
        assert r.aligned_on == "baseTimeNanoseconds"
        assert r.clock_offset_ns == gen._base(r.rank)  # seconds apart on purpose
    merged = job.merged()
    assert sorted(set(merged.tracks["rank"].tolist())) == [0, 1, 2, 3]
    first_kernel = min(int(job.aligned_start_ns(r)[0]) for r in job.rank_numbers)
    assert int(merged.start_ns.min()) == first_kernel
    assert job.warnings == [] and job.world_size == 4


# -- collectives and stragglers --------------------------------------------------------------


def test_injected_straggler_is_named_first_with_the_wait_it_caused(
    job_dir: tuple[Path, Any],
) -> None:
    directory, truth = job_dir
    doc = summarize_job(load_job(directory)).to_dict()
    instances, table = expected_collectives(truth)
    skews = [(max(s.values()) - min(s.values())) / 1000 for s in instances]
    assert doc["collectives"]["count"] == len(instances) == 40
    assert doc["collectives"]["skew_us"]["median"] == pytest.approx(
        statistics.median(skews), abs=HALF_NS
    )
    assert doc["collectives"]["skew_us"]["p99"] == pytest.approx(
        float(np.percentile(skews, 99)), abs=HALF_NS
    )
    first = doc["stragglers"][0]
    assert first["rank"] == STRAGGLER
    assert first["last_count"] > len(instances) // 2  # late 80% of the time by construction
    for s in doc["stragglers"]:
        want = table[s["rank"]]
        assert s["last_count"] == want["last_count"]
        assert s["wait_caused_us"] == pytest.approx(want["wait"], rel=1e-9)
        assert s["mean_late_us"] == pytest.approx(want["late"], abs=HALF_NS)
    waits = [s["wait_caused_us"] for s in doc["stragglers"]]
    assert waits == sorted(waits, reverse=True)
    assert {s["rank"] for s in doc["stragglers"]} == {
        r for r, t in table.items() if t["last_count"]
    }


def test_no_straggler_means_no_rank_stands_out(tmp_path: Path) -> None:
    truth = generate(tmp_path, ranks=3, iterations=60, straggler=None)
    doc = summarize_job(load_job(tmp_path)).to_dict()
    _, table = expected_collectives(truth)
    assert [s["rank"] for s in doc["stragglers"]] == sorted(
        (r for r in table if table[r]["last_count"]), key=lambda r: -table[r]["wait"]
    )
    assert max(s["last_count"] for s in doc["stragglers"]) < 40  # nobody last 2/3 of the time


def test_rank_that_stopped_early_is_a_warning_not_a_wrong_answer(tmp_path: Path) -> None:
    truth = generate(tmp_path, ranks=4, iterations=30, stop_early={3: 18})
    summary = summarize_job(load_job(tmp_path))
    doc = summary.to_dict()
    instances, table = expected_collectives(truth)
    assert len(instances) == 18 and doc["collectives"]["count"] == 18
    (warning,) = [w for w in doc["warnings"] if "different numbers" in w]
    assert "rank 3: 18" in warning and "rank 0: 30" in warning
    for s in doc["stragglers"]:
        assert s["last_count"] == table[s["rank"]]["last_count"]
        assert s["wait_caused_us"] == pytest.approx(table[s["rank"]]["wait"])
    assert "warning: stream 20: the ranks have different numbers" in summary_text(summary)


def test_rank_that_started_tracing_late_is_lined_up_by_time(tmp_path: Path) -> None:
    truth = generate(tmp_path, ranks=3, iterations=30, start_late={1: 4})
    doc = summarize_job(load_job(tmp_path)).to_dict()
    instances, table = expected_collectives(truth)
    assert len(instances) == 26 and doc["collectives"]["count"] == 26
    assert doc["stragglers"][0]["rank"] == STRAGGLER
    for s in doc["stragglers"]:
        assert s["wait_caused_us"] == pytest.approx(table[s["rank"]]["wait"])


# -- ranks and clocks from the files ----------------------------------------------------------


def test_rank_comes_from_the_file_name_without_distributed_info(tmp_path: Path) -> None:
    truth = generate(tmp_path, ranks=3, iterations=10, distributed_info=False)
    job = load_job(sorted(tmp_path.iterdir(), reverse=True))  # order of the files: no matter
    assert job.rank_numbers == [0, 1, 2] and job.world_size is None
    assert summarize_job(job).to_dict()["collectives"]["count"] == len(truth.starts)
    (tmp_path / "rank-1.json.gz").rename(tmp_path / "worker.json.gz")
    with pytest.raises(InputError, match="no rank") as err:
        load_job(tmp_path)
    assert "worker.json.gz" in str(err.value)


def test_timestamps_without_base_times_are_taken_as_one_clock(tmp_path: Path) -> None:
    truth = generate(tmp_path, ranks=3, iterations=12, base_time=False)
    job = load_job(tmp_path)
    assert "no rank has baseTimeNanoseconds" in job.clock
    assert all(r.aligned_on == "timestamps" and r.clock_offset_ns == 0 for r in job)
    doc = summarize_job(job).to_dict()
    _, table = expected_collectives(truth)
    assert doc["stragglers"][0]["wait_caused_us"] == pytest.approx(table[STRAGGLER]["wait"])
    assert "no rank has baseTimeNanoseconds" in doc["clock"]["aligned_on"]


def test_duplicate_rank_and_missing_files_are_clean_errors(tmp_path: Path) -> None:
    generate(tmp_path, ranks=2, iterations=3, straggler=None)
    copy = tmp_path / "again.json.gz"
    shutil.copy(tmp_path / "rank-1.json.gz", copy)
    with pytest.raises(InputError, match="rank 1 is also the rank of"):
        load_job(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        load_job([tmp_path / "rank-0.json.gz", tmp_path / "rank-9.json.gz"])
    with pytest.raises(InputError, match="given twice"):
        load_job([tmp_path / "rank-0.json.gz", tmp_path / "rank-0.json.gz"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no trace files"):
        load_job(empty)


@pytest.mark.parametrize("workers", [0, 2])
def test_directory_with_a_bad_file_names_it(tmp_path: Path, workers: int) -> None:
    generate(tmp_path, ranks=4, iterations=5)
    bad = tmp_path / "rank-2.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": "soon"'))
    with pytest.raises(InputError) as err:
        load_job(tmp_path, workers=workers)
    assert str(bad) in str(err.value)


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ({"rank": -1}, "not a rank number"),
        ({"rank": "one"}, "not a rank number"),
        ({"rank": 0, "world_size": 0}, "not a size"),
    ],
)
def test_bad_distributed_info_is_a_clean_error(
    tmp_path: Path, info: dict[str, Any], message: str
) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(json.dumps({"distributedInfo": info, "traceEvents": []}))
    with pytest.raises(InputError, match=message) as err:
        load_job([path])
    assert str(path) in str(err.value)


def _ranks_of(directory: Path, infos: dict[str, dict[str, Any]]) -> Path:
    """A new folder of rank files ``name -> distributedInfo``, each with no events."""
    directory.mkdir()
    for name, info in infos.items():
        doc = {"distributedInfo": info, "traceEvents": []}
        (directory / name).write_text(json.dumps(doc))
    return directory


def test_a_rank_outside_the_world_size_is_said_and_the_size_not_believed(tmp_path: Path) -> None:
    directory = _ranks_of(
        tmp_path / "job",
        {
            "rank-0.json": {"rank": 0, "world_size": 2},
            "rank-5.json": {"rank": 5, "world_size": 2},
        },
    )
    job = load_job(directory)
    assert job.rank_numbers == [0, 5] and job.world_size is None
    (warning,) = job.warnings
    assert warning.startswith("rank 5 is outside the world size 2 that distributedInfo gives")
    assert warning.endswith("so the world size is taken as unknown; of ranks 0-1, missing: 1")
    assert not any("of 2 ranks present" in w for w in job.warnings)
    assert repr(job).startswith("<Job of 2 ranks,")
    assert warning in summarize_job(job).to_dict()["warnings"]


def test_world_size_notes_count_only_the_ranks_inside_it(tmp_path: Path) -> None:
    infos = {f"rank-{r}.json": {"rank": r, "world_size": 4} for r in (0, 2)}
    job = load_job(_ranks_of(tmp_path / "gaps", infos))
    assert job.world_size == 4 and job.warnings == ["2 of 4 ranks present (missing: 1, 3)"]
    infos = {f"rank-{r}.json": {"rank": r, "world_size": 1 << 24} for r in (0, 1)}
    job = load_job(_ranks_of(tmp_path / "huge", infos))
    assert job.warnings == [f"2 of {1 << 24} ranks present (missing: 2-{(1 << 24) - 1})"]
    infos = {f"rank-{r}.json": {"rank": r, "world_size": 1} for r in (0, 1, 2)}
    (warning,) = load_job(_ranks_of(tmp_path / "small", infos)).warnings
    assert warning.startswith("ranks 1-2 are outside the world size 1 that distributedInfo")
    assert "(ranks 0)" in warning and "missing" not in warning


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_file_linked_as_a_second_rank_is_refused_naming_both(tmp_path: Path, link: str) -> None:
    generate(tmp_path, ranks=1, iterations=3, straggler=None, distributed_info=False)
    first, second = tmp_path / "rank-0.json.gz", tmp_path / "rank-1.json.gz"
    if link == "symbolic":
        second.symlink_to(first.name)
    else:
        os.link(first, second)
    for source in (tmp_path, [first, second], [second, first]):
        with pytest.raises(InputError, match="one file cannot be two ranks") as err:
            load_job(source)
        assert str(first) in str(err.value) and str(second) in str(err.value)


def test_out_of_range_base_time_is_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(json.dumps({"baseTimeNanoseconds": (1 << 62) + 5, "traceEvents": []}))
    with pytest.raises(InputError, match="baseTimeNanoseconds"):
        load_job([path])


def test_a_helper_whose_parent_is_gone_claims_nothing(tmp_path: Path) -> None:
    job = RankReadJob(files=["x.json"], dir=str(tmp_path), parent=-1)
    assert run_helper(job) == 0
    assert list(tmp_path.iterdir()) == []


# -- the real rank-0 traces of two jobs, as two ranks --------------------------------------------


@pytest.fixture
def two_real_ranks(tmp_path: Path, trace_data: Path) -> Path:
    """sampled_4streams as rank 0 and nccl_2ranks (rewritten to say rank 1) as rank 1: two
    files of different jobs, for loading, clocks and summaries (their collectives differ)."""
    kineto = trace_data / "kineto"
    shutil.copy(kineto / "sampled_4streams.json.gz", tmp_path / "rank-0.json.gz")
    with gzip.open(kineto / "nccl_2ranks_a100.json.gz", "rt") as fh:
        doc = json.load(fh)
    doc["distributedInfo"]["rank"] = 1
    with gzip.open(tmp_path / "rank-1.json.gz", "wt") as fh:
        json.dump(doc, fh)
    return tmp_path


def test_real_traces_load_and_summarise_as_ranks(two_real_ranks: Path) -> None:
    job = load_job(two_real_ranks, workers=1)
    summary = summarize_job(job)
    doc = summary.to_dict()
    for rank in (0, 1):
        alone = summarize(load_trace(two_real_ranks / f"rank-{rank}.json.gz"))
        assert doc["ranks"][str(rank)] == rank_entry(alone)
        assert len(job[rank]) == len(load_trace(two_real_ranks / f"rank-{rank}.json.gz"))
    assert doc["ranks"]["0"]["kernels"] == 1154 and doc["ranks"]["1"]["kernels"] == 2700
    assert doc["ranks"]["0"]["comm"]["count"] == 10 and doc["ranks"]["1"]["comm"]["count"] == 21
    # rank 1 has a base time, rank 0 (a year earlier, on its own clock) has none
    assert job.ranks[1].aligned_on == "baseTimeNanoseconds"
    assert job.ranks[1].clock_offset_ns == 1711964646000000000
    assert job.ranks[0].aligned_on == "first event"
    assert "clocks disagree" in doc["clock"]["aligned_on"]
    assert any("world size" in w for w in doc["warnings"])
    assert any("collective #1 differs" in w for w in doc["warnings"])  # SendRecv vs AllReduce
    assert doc["collectives"]["count"] == 0 and doc["stragglers"] == []
    assert doc["alignment"] == {
        "one_job": False,
        "why": [
            "rank 0 has no baseTimeNanoseconds and times outside the others': its clock was "
            "only guessed (its first event put at theirs)",
            "distributedInfo gives different world sizes (2, 128)",
        ],
    }
    start0 = int(job.aligned_start_ns(0).min())
    assert start0 == int(job.aligned_start_ns(1).min())  # first events put together


def test_real_trace_without_base_time_next_to_one_with_stays_on_its_clock(
    two_real_ranks: Path,
) -> None:
    """Both rank files' timestamps kept as recorded when they fall within each other."""
    path = two_real_ranks / "rank-1.json.gz"
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    # rank 0 without a base time on the wall clock, where rank 1's base puts it
    base = doc["baseTimeNanoseconds"]
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] = e["ts"] + base / 1000
    doc.pop("baseTimeNanoseconds")
    doc["distributedInfo"]["rank"] = 0
    with gzip.open(two_real_ranks / "rank-0.json.gz", "wt") as fh:
        json.dump(doc, fh)
    job = load_job(two_real_ranks)
    assert job.ranks[0].aligned_on == "timestamps" and job.ranks[0].clock_offset_ns == 0
    spread = int(job.aligned_start_ns(0).min()) - int(job.aligned_start_ns(1).min())
    assert abs(spread) < 1000  # the same events, within float rounding of 1.7e15 us
    assert not any("ends before" in w for w in job.warnings)


# -- front-ends -----------------------------------------------------------------------------------


def test_cli_summary_json_has_the_documented_keys(
    job_dir: tuple[Path, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    directory, _ = job_dir
    assert main(["trace", "summary", str(directory), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["ranks", "collectives", "stragglers", "clock", "alignment", "warnings"]
    assert doc["alignment"] == {"one_job": True, "why": []}
    for entry in doc["ranks"].values():
        assert list(entry) == ["busy_us", "idle_us", "span_us", "kernels", "comm", "memcpy"]
        assert list(entry["comm"]) == ["count", "total_us", "overlapped_us"]
    assert list(doc["collectives"]) == ["count", "skew_us", "matched_by"]
    assert list(doc["collectives"]["skew_us"]) == ["median", "p99"]
    for s in doc["stragglers"]:
        assert list(s) == ["rank", "last_count", "mean_late_us", "wait_caused_us"]
    files = sorted(str(p) for p in directory.iterdir())
    assert main(["trace", "summary", *files, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == doc


def test_cli_text_kernels_and_errors(
    job_dir: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory, _ = job_dir
    assert main(["trace", "summary", str(directory)]) == 0
    out = capsys.readouterr().out
    assert f"straggler: rank {STRAGGLER} arrived last" in out
    assert "clocks aligned on each rank's baseTimeNanoseconds" in out
    assert main(["trace", "kernels", str(directory), "-n", "5", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 5 and rows[0]["rank"] == STRAGGLER  # its compute kernels ran longest
    assert [r["total_ns"] for r in rows] == sorted((r["total_ns"] for r in rows), reverse=True)
    assert main(["trace", "kernels", str(directory), "-n", "3"]) == 0
    assert "cutlass" in capsys.readouterr().out
    (tmp_path / "rank-0.json").write_text("{not json")
    assert main(["trace", "summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "rank-0.json") in err and "Traceback" not in err


def test_html_view_escapes_what_came_from_files(job_dir: tuple[Path, Any]) -> None:
    directory, _ = job_dir
    summary = summarize_job(load_job(directory))
    summary.doc["warnings"].append('<img src=x onerror="alert(1)">')
    html = summary_bundle(summary)["text/html"]
    assert "<img" not in html and "&lt;img src=x" in html
    assert f">{STRAGGLER}</td><td>" in html  # the stragglers table, worst first


def test_job_model_describes_itself(job_dir: tuple[Path, Any]) -> None:
    directory, _ = job_dir
    job = load_job(directory)
    assert isinstance(job, Job) and len(job) == 4 and len(job[0]) > 0
    assert repr(job).startswith("<Job of 4 of 4 ranks")
    import perflab
    from perflab import job_dask

    # the package's load_job is io's without a client, and a Dask job with one
    assert perflab.load_job is job_dask.load_job
    again = perflab.load_job(directory)
    assert isinstance(again, Job) and repr(again) == repr(job)


def test_job_summary_and_timeline_are_methods_of_the_job(job_dir: tuple[Path, Any]) -> None:
    """``job.summary()`` and ``job.timeline()`` are the analysis and the render functions,
    as ``trace.summary()`` and ``trace.timeline()`` are for one trace."""
    pytest.importorskip("bokeh")
    from perflab.render.job import job_timeline

    directory, _ = job_dir
    job = load_job(directory)
    assert job.summary().to_dict() == summarize_job(job).to_dict()
    view = job.timeline(row_budget=5_000)
    assert view.text == job_timeline(job, row_budget=5_000).text
    events = sum(len(r.trace) for r in job)
    assert view.text.startswith(f"Trace of a job of 4 ranks: {events} events")
    assert f"red: rank {STRAGGLER}, the straggler" in view.text


def test_timeline_of_a_job_groups_lanes_by_rank(
    job_dir: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("bokeh")
    directory, _ = job_dir
    out = tmp_path / "job.html"
    assert main(["timeline", str(directory), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    page = out.read_text()
    for rank in range(4):
        assert f"rank {rank} GPU {rank} stream 20" in page
    assert "the job's straggler arrived last" in page  # the collective links' page script
    assert f"straggler: rank {STRAGGLER}" in page


def test_job_timeline_links_each_collective_through_its_ranks_kernels(
    job_dir: tuple[Path, Any],
) -> None:
    """The page's collective data: per instance, each rank's NCCL kernel start and lane; the
    last arrival and skew are the generator's."""
    pytest.importorskip("bokeh")
    from perflab.render.job import CollectiveLinks, job_timeline
    from perflab.render.timeline import assign_lanes

    directory, truth = job_dir
    job = load_job(directory)
    view = job_timeline(job)
    assert "collectives: 40 matched across ranks (order per stream)" in view.text
    assert f"red: rank {STRAGGLER}, the straggler" in view.text
    merged = job.merged()
    lanes = assign_lanes(merged)
    origin = int(merged.start_ns.min())
    from perflab.analysis.collective_match import match_collectives

    links = CollectiveLinks(merged, job, match_collectives(job), STRAGGLER)
    inst, cells, meta = links.page_data(lanes, origin)
    assert meta["straggler"] == STRAGGLER and meta["ranks"] == [0, 1, 2, 3]
    lane = cells["lane"].reshape(-1, 4)
    for col in range(4):  # every instance sits on the rank's NCCL stream lane
        assert {lanes.labels[k] for k in lane[:, col]} == {f"rank {col} GPU {col} stream 20"}
    instances, _ = expected_collectives(truth)
    start_ns = inst["first"][:, None] + cells["off"].reshape(-1, 4).astype(np.float64)
    shift = bench_job().BASE_NS - origin  # the generator's times on the page's clock, in ms
    want = np.array([[s[r] + shift for r in range(4)] for s in instances]) / 1e6
    np.testing.assert_allclose(start_ns, want, atol=1e-6)  # float32 offsets: well under 1 ns
    last = [max(range(4), key=lambda r, s=s: (s[r], -r)) for s in instances]
    assert inst["last"].tolist() == last
    skew = [(max(s.values()) - min(s.values())) / 1e6 for s in instances]
    np.testing.assert_allclose(inst["skew"], skew, rtol=1e-6)


def test_a_rank_whose_clock_is_off_is_named(job_dir: tuple[Path, Any]) -> None:
    directory, _ = job_dir
    job = load_job(directory)
    doc = summarize_job(job).to_dict()
    assert not any("clock is probably off" in w for w in doc["warnings"])
    job.ranks[1] = dataclasses.replace(
        job.ranks[1], clock_offset_ns=job.ranks[1].clock_offset_ns + 3_000_000
    )
    (warning,) = [w for w in summarize_job(job).to_dict()["warnings"] if "clock" in w]
    assert warning.startswith("rank 1's collectives end 3000.0 us later")


def test_a_rank_without_collectives_is_said(tmp_path: Path) -> None:
    generate(tmp_path, ranks=3, iterations=6, straggler=None)
    job = load_job(tmp_path)
    trace = job[2]
    keep = np.array([not n.startswith("nccl") for n in trace.names_of()])
    job.ranks[2] = dataclasses.replace(job.ranks[2], trace=trace.select(keep))
    doc = summarize_job(job).to_dict()
    assert "no NCCL kernels on rank(s) 2; matched among the others" in doc["warnings"]
    assert doc["collectives"]["count"] == 6


def _outcome(directory: Path, workers: int) -> Any:
    try:
        job = load_job(directory, workers=workers)
    except InputError as exc:
        return str(exc)
    return summarize_job(job).to_dict()


def test_damaged_rank_files_give_the_same_answer_or_error_through_helpers(tmp_path: Path) -> None:
    """Byte flips and cuts in one rank file: a helper-process load ends exactly as a
    one-process load does (the same summary or the same error naming the file)."""
    generate(tmp_path, ranks=3, iterations=8)
    path = tmp_path / "rank-1.json.gz"
    text = gzip.decompress(path.read_bytes())
    rng = np.random.default_rng(7)
    digits = np.flatnonzero(np.isin(np.frombuffer(text, np.uint8), list(b"0123456789")))
    outcomes = set()
    for mode in [0, 1, 2, 2, 0, 1, 2]:
        data = bytearray(text)
        if mode == 0:  # cut
            data = data[: int(rng.integers(1, len(data)))]
        elif mode == 1:  # any bytes
            for at in rng.integers(0, len(data), 3).tolist():
                data[at] = int(rng.integers(0, 256))
        else:  # other digits: often still a valid trace, with other times or ids
            for at in rng.choice(digits, 3).tolist():
                data[at] = int(rng.integers(ord("0"), ord("9") + 1))
        path.write_bytes(gzip.compress(bytes(data)))
        serial = _outcome(tmp_path, 0)
        assert _outcome(tmp_path, 2) == serial
        if isinstance(serial, str):
            assert str(path) in serial
        outcomes.add(isinstance(serial, str))
    assert outcomes == {True, False}  # both errors and loads were tried


def test_ranks_that_started_late_and_stopped_early_match_where_all_overlap(tmp_path: Path) -> None:
    truth = generate(tmp_path, ranks=4, iterations=30, start_late={1: 5}, stop_early={3: 24})
    doc = summarize_job(load_job(tmp_path)).to_dict()
    instances, table = expected_collectives(truth)
    assert len(instances) == 19 and doc["collectives"]["count"] == 19
    assert doc["stragglers"][0]["rank"] == STRAGGLER
    for s in doc["stragglers"]:
        assert s["last_count"] == table[s["rank"]]["last_count"]
        assert s["wait_caused_us"] == pytest.approx(table[s["rank"]]["wait"])


# -- matching by sequence metadata -----------------------------------------------------------


def _instances(doc: dict[str, Any]) -> int:
    return int(doc["collectives"]["count"])


def test_sequence_numbers_match_across_a_lost_kernel(tmp_path: Path) -> None:
    """Rank 1 lacks the all-reduce of iteration 10 (its kernels carry PyTorch's "Process
    Group Name" and "Seq"): matched by Seq, every other collective pairs with its own, so
    the straggler table is the generator's truth; by order, the ranks' kernels would pair
    off one collective apart from there on."""
    truth = generate(tmp_path, collective_args="seq", missing={1: {10}})
    summary = summarize_job(load_job(tmp_path))
    doc = summary.to_dict()
    assert doc["collectives"]["matched_by"] == "sequence numbers"
    instances, table = expected_collectives(truth)
    assert _instances(doc) == len(instances) == 39
    assert any("1 sequence numbers are missing" in w for w in doc["warnings"])
    got = {s["rank"]: s for s in doc["stragglers"]}
    for rank, want in table.items():
        if want["last_count"]:
            assert got[rank]["last_count"] == want["last_count"]
            assert got[rank]["wait_caused_us"] == pytest.approx(want["wait"], rel=1e-9)
    assert doc["stragglers"][0]["rank"] == STRAGGLER
    shift = bench_job().BASE_NS - summary.collectives.origin_ns  # the job clock's origin
    expected = [[s[r] + shift for r in sorted(s)] for s in instances]
    np.testing.assert_array_equal(summary.collectives.start, np.array(expected, np.float64))


def test_without_sequence_numbers_the_same_loss_is_a_mismatch_warning(tmp_path: Path) -> None:
    generate(tmp_path, missing={1: {10}})
    doc = summarize_job(load_job(tmp_path)).to_dict()
    assert doc["collectives"]["matched_by"] == "order per stream"
    assert any("different numbers of NCCL kernels" in w for w in doc["warnings"])


def test_process_group_names_alone_match_by_order_per_group(tmp_path: Path) -> None:
    truth = generate(tmp_path, collective_args="group")
    doc = summarize_job(load_job(tmp_path)).to_dict()
    assert doc["collectives"]["matched_by"] == "order per process group"
    instances, table = expected_collectives(truth)
    assert _instances(doc) == len(instances)
    assert doc["stragglers"][0]["rank"] == STRAGGLER
    assert doc["stragglers"][0]["last_count"] == table[STRAGGLER]["last_count"]


def test_sequence_numbers_without_process_groups_fall_back_to_streams_and_say_why(
    tmp_path: Path,
) -> None:
    """Kernels that carry a Seq but no "Process Group Name" (a Seq counts within its group,
    so it pairs nothing alone): matched by order per stream, the summary saying so and why,
    with the generator's straggler table (they were 0 of 40, as by sequence numbers)."""
    truth = generate(tmp_path, collective_args="seq")
    for path in tmp_path.glob("rank-*.json.gz"):
        with gzip.open(path, "rt") as fh:
            text = fh.read().replace('"Process Group Name":"0",', "")
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    summary = summarize_job(load_job(tmp_path))
    doc = summary.to_dict()
    c = doc["collectives"]
    assert c["matched_by"] == "order per stream" and "a Seq but no process group" in c["fallback"]
    instances, table = expected_collectives(truth)
    assert _instances(doc) == len(instances) == 40
    assert doc["stragglers"][0]["rank"] == STRAGGLER
    assert doc["stragglers"][0]["last_count"] == table[STRAGGLER]["last_count"]
    line = str(summary).splitlines()[1]
    assert line.startswith("40 collectives matched across ranks by order per stream (the NCCL")


def test_a_rank_whose_kernels_lack_the_process_group_is_said(tmp_path: Path) -> None:
    generate(tmp_path, ranks=2, iterations=6, straggler=1, collective_args="group")
    path = tmp_path / "rank-1.json.gz"
    with gzip.open(path, "rt") as fh:
        text = fh.read().replace('"Process Group Name":"0",', "")
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    c = summarize_job(load_job(tmp_path)).to_dict()["collectives"]
    assert c["matched_by"] == "order per stream" and c["count"] == 6
    assert c["fallback"] == "6 of the 12 NCCL kernels carry no process group"


def test_sequence_numbers_survive_helpers_and_saved_traces(tmp_path: Path) -> None:
    generate(tmp_path, collective_args="seq")
    one = summarize_job(load_job(tmp_path, workers=0)).to_dict()
    saved = tmp_path / "saved"
    saved.mkdir()
    for r in load_job(tmp_path, workers=1):
        r.trace.save(saved / f"rank-{r.rank}.npz")
    again = summarize_job(load_job(saved)).to_dict()
    assert again["collectives"] == one["collectives"]
    assert again["stragglers"] == one["stragglers"]
    assert one["collectives"]["matched_by"] == "sequence numbers"


def test_job_timeline_without_collectives_or_with_a_silent_rank(tmp_path: Path) -> None:
    pytest.importorskip("bokeh")
    from perflab.render.job import job_timeline

    generate(tmp_path, ranks=3, iterations=6, straggler=None)
    job = load_job(tmp_path)
    trace = job[2]
    keep = np.array([not n.startswith("nccl") for n in trace.names_of()])
    job.ranks[2] = dataclasses.replace(job.ranks[2], trace=trace.select(keep))
    assert "collectives: 6 matched across ranks" in job_timeline(job).text
    for r in job:
        kept = np.array([not n.startswith("nccl") for n in r.trace.names_of()])
        job.ranks[r.rank] = dataclasses.replace(r, trace=r.trace.select(kept))
    assert "collectives: none matched across ranks" in job_timeline(job).text


def test_job_benchmark_checks_the_timeline_goals_it_measured() -> None:
    goals = bench_job()._goals(
        {
            "perflab timeline": {
                "seconds": 4.0,
                "result": {"output_bytes": 7_000_000},
                "first_paint_ms": 1600.0,
            }
        }
    )
    assert goals["timeline_seconds"]["met"] is True
    assert goals["timeline_bytes"]["met"] is False
    assert goals["timeline_first_paint_ms"] == {"value": 1600, "goal": 1500.0, "met": False}
    no_paint = bench_job()._goals(
        {
            "perflab timeline": {
                "seconds": 4.0,
                "result": {"output_bytes": 1},
                "first_paint_ms": None,
            }
        }
    )
    assert "timeline_first_paint_ms" not in no_paint  # no Chromium: not measured, not "met"
