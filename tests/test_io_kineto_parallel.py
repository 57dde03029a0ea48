"""Parallel Kineto loading: helper processes decode ranges of the file; the result must be
the very same trace (string ids included) as one process reads, whatever goes wrong."""

from __future__ import annotations

import gzip
import json
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from data_paths import TRACES
from test_io_kineto import KINETO, _event, _tricky_doc

from perflab.errors import InputError, PerflabError
from perflab.io import _parallel, load_trace
from perflab.io.kineto import fast, load
from perflab.model.trace import Trace


def assert_identical(a: Trace, b: Trace) -> None:
    """Same tables, dtypes, string table and meta (the file name aside)."""
    assert a.strings == b.strings
    for table in ("events", "tracks", "kernels", "memcpy", "ops"):
        x, y = getattr(a, table), getattr(b, table)
        assert list(x.columns) == list(y.columns)
        for col in x.columns:
            np.testing.assert_array_equal(x[col], y[col], err_msg=f"{table}.{col}")
            assert x[col].dtype == y[col].dtype, f"{table}.{col}"
    strip = lambda meta: {k: v for k, v in meta.items() if k != "source"}  # noqa: E731
    assert strip(a.meta) == strip(b.meta)


class _Finished:
    """What start_helper returns, for a helper that already ran in this process."""

    def __init__(self, status: int) -> None:
        self.status = status

    def wait(self, timeout: float | None = None) -> int:
        return self.status

    def poll(self) -> int:
        return self.status

    def kill(self) -> None:
        raise AssertionError("a finished helper is not killed")


@pytest.fixture
def helper_in_process(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The helper runs at once, in this process, when started: it claims every range but
    range 0, so that all of them travel through the result files. The jobs it was given."""
    jobs: list[dict[str, Any]] = []

    def start(module: str, job: dict[str, Any], log: Path) -> _Finished:
        assert module == "perflab.io.kineto.helper"
        # what the command line carries; the helper's parent is this process's parent here
        jobs.append({**json.loads(json.dumps(job)), "parent": os.getppid()})
        return _Finished(load.run_helper(jobs[-1]))

    monkeypatch.setattr(_parallel, "start_helper", start)
    return jobs


def _loaded_results(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names: list[str] = []
    original = _parallel.load_result

    def spy(path: Path) -> Any:
        names.append(path.name)
        return original(path)

    monkeypatch.setattr(_parallel, "load_result", spy)
    return names


@pytest.mark.parametrize("python", [False, True], ids=["default", "python_functions"])
@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_ranges_from_a_helper_give_the_same_trace(
    path: Path,
    python: bool,
    monkeypatch: pytest.MonkeyPatch,
    helper_in_process: list[dict[str, Any]],
) -> None:
    monkeypatch.setattr(fast, "PIECE_SIZE", 4096)  # several slices per range
    loaded = _loaded_results(monkeypatch)
    parallel = load_trace(path, python=python, workers=1)
    n_ranges = 2 * load.RANGES_PER_PROCESS
    assert len(helper_in_process) == 1 and len(helper_in_process[0]["bounds"]) == n_ranges - 1
    assert len(loaded) == n_ranges - 1  # every range but the first came from the helper
    assert_identical(parallel, load_trace(path, python=python, workers=0))


def test_a_helper_whose_parent_is_gone_stops(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [_event(ts=float(i)) for i in range(50)]}))
    job = {"path": str(path), "python": False, "bounds": [100, 200], "dir": str(tmp_path)}
    assert load.run_helper({**job, "parent": os.getppid() + 1}) == 0
    assert not list(tmp_path.glob("claim-*"))  # claimed nothing
    assert load.run_helper({**job, "parent": os.getppid()}) == 0
    assert len(list(tmp_path.glob("range-*.npz"))) == 3


@pytest.mark.parametrize("per_process", [1, 3, 40])
@pytest.mark.parametrize("indent", [None, 2])
def test_range_bounds_anywhere_in_tricky_text(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    helper_in_process: list[dict[str, Any]],
    per_process: int,
    indent: int | None,
) -> None:
    """Bounds land inside strings and nested objects that hold "}," and "}, {": the trace is
    still the one a single process reads (through the ranges or, when they cannot be
    trusted, by reading again in one process)."""
    monkeypatch.setattr(load, "RANGES_PER_PROCESS", per_process)
    monkeypatch.setattr(fast, "PIECE_SIZE", 300)
    monkeypatch.setattr(fast, "READ_SIZE", 64)
    doc = _tricky_doc(60)
    notes = ["a }, { b", {"x": [{"y": 1}, {"z": "}, {"}]}]
    for i, event in enumerate(doc["traceEvents"]):
        event.setdefault("args", {})["note"] = notes[i % 2]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc, indent=indent).encode()))
    assert_identical(load_trace(path, workers=1), load_trace(path, workers=0))


def test_flows_link_missing_correlations_across_ranges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper_in_process: list[dict[str, Any]]
) -> None:
    """Launches and kernels without a correlation id: the flows that bind them are read in a
    second pass, after the ranges were merged."""
    events: list[dict[str, Any]] = []
    for i in range(1500):
        launch = _event(cat="cuda_runtime", name="cudaLaunchKernel", pid=1, tid=2, ts=10.0 * i)
        kernel = _event(name=f"k{i % 5}", ts=10.0 * i + 3)
        for event in (launch, kernel):
            event["args"].pop("correlation")
        events += [
            launch,
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 1, "tid": 2, "ts": 10.0 * i},
            {
                "ph": "f",
                "cat": "ac2g",
                "name": "ac2g",
                "id": i,
                "pid": 0,
                "tid": 7,
                "ts": 10.0 * i + 3,
            },
            kernel,
        ]
    path = tmp_path / "flows.json"
    path.write_text(json.dumps({"traceEvents": events}))
    loaded = _loaded_results(monkeypatch)
    trace = load_trace(path, workers=1)
    assert loaded  # merged from the helper's ranges
    assert sorted(trace.correlation.tolist()) == sorted([*range(1500), *range(1500)])
    assert_identical(trace, load_trace(path, workers=0))


def test_mutated_files_load_the_same_through_helpers_or_fail_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper_in_process: list[dict[str, Any]]
) -> None:
    """Byte flips and cuts of a real trace: through helper ranges, each either gives the very
    trace one process gives, or the same perflab error."""
    monkeypatch.setattr(fast, "PIECE_SIZE", 2048)
    text = gzip.decompress((TRACES / "kineto" / "triton_example_a100.json.gz").read_bytes())
    rng = random.Random(99)
    path = tmp_path / "m.json"
    outcomes = {"same": 0, "error": 0}
    for i in range(80):
        data = bytearray(text)
        if i % 5 == 0:
            data = data[: rng.randrange(len(data) // 2, len(data))]
        # structural bytes break files; letters and digits often leave them valid
        alphabet = b'{}[],:"\xff' if i % 3 == 0 else b"0a7X"
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.choice(alphabet)
        path.write_bytes(bytes(data))
        one, parallel = _outcome(path, workers=0), _outcome(path, workers=1)
        if isinstance(one, str):
            assert parallel == one  # the same error
            outcomes["error"] += 1
        else:
            assert isinstance(parallel, Trace)
            assert_identical(parallel, one)
            outcomes["same"] += 1
    assert outcomes["same"] > 5 and outcomes["error"] > 5  # both kinds were exercised


def _outcome(path: Path, workers: int) -> Trace | str:
    """The trace, or the perflab error's text."""
    try:
        return load_trace(path, workers=workers)
    except PerflabError as exc:
        return str(exc)


def test_bad_input_in_a_helpers_range_names_the_event(
    tmp_path: Path, helper_in_process: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fast, "PIECE_SIZE", 2048)
    events = [_event(ts=float(i)) for i in range(2000)]
    events[1777]["dur"] = -1
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(InputError, match=r"traceEvents\[1777\].*negative duration"):
        load_trace(path, workers=1)


def test_a_failed_helper_is_reported_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_helper(module: str, job: dict[str, Any], log: Path) -> _Finished:
        claims = _parallel.Claims(job["dir"], len(job["bounds"]) + 1)
        assert claims.claim() == 1  # claimed, never delivered
        log.write_text("Traceback (most recent call last):\nMemoryError: boom\n")
        return _Finished(1)

    monkeypatch.setattr(_parallel, "start_helper", broken_helper)
    events = [_event(ts=float(i), name=f"k{i % 7}") for i in range(3000)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.warns(RuntimeWarning, match="MemoryError: boom"):
        trace = load_trace(path, workers=1)
    assert_identical(trace, load_trace(path, workers=0))


def test_an_unreadable_range_result_reads_the_file_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def garbling_helper(module: str, job: dict[str, Any], log: Path) -> _Finished:
        claims = _parallel.Claims(job["dir"], len(job["bounds"]) + 1)
        assert claims.claim() == 1
        claims.result_path(1).write_bytes(b"PK\x03\x04 not a zip")
        return _Finished(0)

    monkeypatch.setattr(_parallel, "start_helper", garbling_helper)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [_event(ts=float(i)) for i in range(3000)]}))
    assert_identical(load_trace(path, workers=1), load_trace(path, workers=0))


def test_a_real_helper_process_shares_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper is a real ``python -m`` process; this process waits in its first range
    until the helper has delivered one, so that both really take part."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    loaded = _loaded_results(monkeypatch)
    original: Callable[..., Any] = load._range_result

    def first_range_waits(*args: Any) -> Any:
        deadline = time.monotonic() + 30
        while not list(tmp_path.glob("perflab-load-*/range-*.npz")):
            assert time.monotonic() < deadline, "the helper never delivered a range"
            time.sleep(0.02)
        return original(*args)

    monkeypatch.setattr(load, "_range_result", first_range_waits)
    events = [_event(ts=float(i), name=f"k{i % 7}") for i in range(4000)]
    doc = {
        "traceEvents": events,
        "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"},
        "baseTimeNanoseconds": 1700000000000000000,
    }
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    trace = load_trace(path, workers=1)
    assert loaded  # the helper's ranges were merged
    monkeypatch.setattr(load, "_range_result", original)
    assert_identical(trace, load_trace(path, workers=0))
    assert trace.meta["rank"] == 3 and trace.meta["base_time_ns"] == 1700000000000000000
    assert not list(tmp_path.glob("perflab-load-*"))  # the private directory is gone


def test_a_helper_sees_this_interpreters_search_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Modules reachable only through a sys.path entry added at run time (as notebooks do)
    are importable by a helper."""
    (tmp_path / "probe_dir").mkdir()
    (tmp_path / "probe_dir" / "perflab_probe_helper.py").write_text(
        "import json, sys\njob = json.loads(sys.argv[1])\nopen(job['out'], 'w').write('started')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "probe_dir"))
    out = tmp_path / "out.txt"
    helper = _parallel.start_helper("perflab_probe_helper", {"out": str(out)}, tmp_path / "log")
    assert helper is not None
    assert _parallel.finish_helpers([helper], timeout=60) == [0]
    assert out.read_text() == "started"


def test_ranges_tile_only_when_they_abut() -> None:
    assert load._ranges_tile([(10, 20), [21, 30], None, None])
    assert load._ranges_tile([(10, 20), (21, 20), (21, 40)])  # an empty range between
    assert not load._ranges_tile([(10, 20), (22, 30)])  # a gap
    assert not load._ranges_tile([(10, 20), (20, 30)])  # an overlap
    assert not load._ranges_tile([(10, 20), None, (21, 30)])  # text after the end
    assert not load._ranges_tile([None])


def test_claims_hand_out_each_range_once_in_increasing_order(tmp_path: Path) -> None:
    a, b = _parallel.Claims(tmp_path, 6), _parallel.Claims(tmp_path, 6)
    got = {"a": [a.claim(), a.claim()], "b": [b.claim()]}
    got["a"].append(a.claim())
    got["b"] += [b.claim(), b.claim(), b.claim()]
    assert got == {"a": [0, 1, 3], "b": [2, 4, 5, None]}
    assert a.claim() is None


@pytest.mark.parametrize("workers", [-1, 1.5, "2", True])
def test_odd_worker_counts_are_clean_errors(tmp_path: Path, workers: Any) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [_event()]}))
    with pytest.raises(InputError, match="workers must be a whole number") as info:
        load_trace(path, workers=workers)
    assert str(path) in str(info.value)


def test_helpers_only_for_large_files_and_spare_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b" " * 1000)
    assert load._helper_count(path, None) == 0  # small: not worth a process
    monkeypatch.setattr(load, "PARALLEL_MIN_TEXT", 300)
    monkeypatch.setattr(_parallel, "available_cores", lambda: 16)
    assert load._helper_count(path, None) == 3  # one per 300 bytes
    monkeypatch.setattr(_parallel, "available_cores", lambda: 2)
    assert load._helper_count(path, None) == 1  # one per spare core
    monkeypatch.setattr(_parallel, "available_cores", lambda: 1)
    assert load._helper_count(path, None) == 0
    assert load._helper_count(path, 5) == 5  # asked for
    assert load._helper_count(tmp_path / "missing.json", None) == 0


def test_text_size_of_plain_and_gzip(tmp_path: Path) -> None:
    text = os.urandom(5000).hex().encode()
    plain, packed = tmp_path / "a.json", tmp_path / "a.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    assert fast.text_size(plain) == fast.text_size(packed) == len(text)
