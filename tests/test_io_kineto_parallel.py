"""Parallel Kineto loading: helper processes decode chunks of the text that the loading
process hands them; the result must be the very same trace (string ids included) as one
process reads, whatever goes wrong."""

from __future__ import annotations

import gzip
import io
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


class InProcessHelper:
    """A PipedHelper that serves every chunk at once, in this process, when it is given; a
    chunk that does not decode ends it, as it ends a helper process."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.server = load._Server(job)
        self.ready, self.gone = True, False
        self.given = 0
        self.done: set[int] = set()

    def poll(self) -> None:
        pass

    def give(self, line: str) -> bool:
        if self.gone:
            return False
        self.given += 1
        try:
            self.done.add(self.server.serve(line.encode()))
        except (fast.Unusual, InputError):
            self.gone = True  # as a helper process ends
        return True

    def no_more_work(self) -> None:
        pass

    def ended(self) -> bool:
        return self.gone

    def kill(self) -> None:
        pass


def fake_helpers(
    monkeypatch: pytest.MonkeyPatch,
    kind: type[InProcessHelper] = InProcessHelper,
    chunk_max: int = 2500,
    piece: int | None = None,
) -> list[InProcessHelper]:
    """Helpers of ``kind`` in place of processes, chunks as small as ``chunk_max`` bytes
    (``piece``: slices of that size). The helpers made, with the jobs they were given."""
    made: list[InProcessHelper] = []

    def start(module: str, job: dict[str, Any], log: Path) -> InProcessHelper:
        assert module == "perflab.io.kineto.helper"
        made.append(kind(json.loads(json.dumps(job))))  # what the command line carries
        return made[-1]

    monkeypatch.setattr(_parallel.PipedHelper, "start", start)
    monkeypatch.setattr(load, "CHUNK_MIN", 1)  # sizes as small as the text allows
    monkeypatch.setattr(load, "CHUNK_MAX", chunk_max)
    if piece is not None:
        monkeypatch.setattr(fast, "PIECE_SIZE", piece)
    return made


@pytest.fixture
def helper_in_process(monkeypatch: pytest.MonkeyPatch) -> list[InProcessHelper]:
    """Helpers run in this process and are free at once: chunks as small as allowed here
    are given whenever the stream offers one."""
    return fake_helpers(monkeypatch)


def _kernels_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "t.json"
    events = [_event(ts=float(i), name=f"k{i % 7}") for i in range(n)]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _loaded_results(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names: list[str] = []
    original = _parallel.load_columns

    def spy(path: Path) -> Any:
        names.append(path.name)
        return original(path)

    monkeypatch.setattr(_parallel, "load_columns", spy)
    return names


@pytest.mark.parametrize("python", [False, True], ids=["default", "python_functions"])
@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_chunks_from_a_helper_give_the_same_trace(
    path: Path,
    python: bool,
    monkeypatch: pytest.MonkeyPatch,
    helper_in_process: list[InProcessHelper],
) -> None:
    monkeypatch.setattr(fast, "PIECE_SIZE", 4096)  # several slices per chunk
    monkeypatch.setattr(load, "CHUNK_MAX", 20000)
    loaded = _loaded_results(monkeypatch)
    parallel = load_trace(path, python=python, workers=1)
    assert len(helper_in_process) == 1
    assert len(loaded) >= 3  # chunks travelled through the helper's result files
    assert_identical(parallel, load_trace(path, python=python, workers=0))


class LaggingHelper(InProcessHelper):
    """Serves the chunks given in order, one every few polls, as a busy helper process
    would: slots are written again while chunks are still waiting in others."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(job)
        self.waiting: list[str] = []
        self.polls = 0

    def give(self, line: str) -> bool:
        self.waiting.append(line)
        self.given += 1
        return True

    def poll(self) -> None:
        self.polls += 1
        if self.waiting and self.polls % 3 == 0:
            self.done.add(self.server.serve(self.waiting.pop(0).encode()))

    def no_more_work(self) -> None:
        while self.waiting:
            self.done.add(self.server.serve(self.waiting.pop(0).encode()))


def test_a_lagging_helper_decodes_each_chunk_from_its_own_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helpers = fake_helpers(monkeypatch, LaggingHelper, chunk_max=3000, piece=2048)
    path = _kernels_file(tmp_path, 3000)
    trace = load_trace(path, workers=1)
    assert helpers[0].given > 20
    assert_identical(trace, load_trace(path, workers=0))


def test_a_helper_serves_chunks_until_its_work_ends(tmp_path: Path) -> None:
    """READY first; then each chunk's result is saved and its number written back; the end
    of the work is the end of the helper."""
    events = [_event(ts=float(i), name=f"k{i % 3}") for i in range(40)]
    text = json.dumps(events)[1:-1].encode()  # whole elements, as a stream cuts them
    (tmp_path / "helper-5-slot-1.json").write_bytes(text + b"stale bytes after it")
    job = {"dir": str(tmp_path), "source": "t.json", "python": False, "helper": 5}
    said = io.BytesIO()
    status = load.run_helper(job, io.BytesIO(b"7 1 %d\n" % len(text)), said)
    assert (status, said.getvalue()) == (0, b"ready\n7\n")
    arrays, meta = _parallel.load_columns(load.result_path(tmp_path, 7))
    assert meta["events_read"] == meta["kept"] == 40
    np.testing.assert_array_equal(arrays["start_ns"], np.arange(40) * 1000)


def test_a_helper_refuses_a_chunk_that_is_not_whole_elements(tmp_path: Path) -> None:
    events = [_event(ts=float(i)) for i in range(40)]
    text = json.dumps(events)[1:-30].encode()  # ends inside an element
    (tmp_path / "helper-0-slot-0.json").write_bytes(text)
    job = {"dir": str(tmp_path), "source": "t.json", "python": False, "helper": 0}
    line = b"0 0 %d\n" % len(text)
    assert load.run_helper(job, io.BytesIO(line), io.BytesIO()) == _parallel.DATA_ERROR
    assert not load.result_path(tmp_path, 0).exists()


@pytest.mark.parametrize("chunk", [1, 700, 5000])
@pytest.mark.parametrize("indent", [None, 2])
def test_chunk_ends_anywhere_in_tricky_text(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    helper_in_process: list[InProcessHelper],
    chunk: int,
    indent: int | None,
) -> None:
    """Chunks end at "}, {" inside strings and nested objects: the trace is still the one a
    single process reads (through the chunks or, when they cannot be trusted, by reading
    again in one process)."""
    monkeypatch.setattr(load, "CHUNK_MAX", chunk)
    monkeypatch.setattr(fast, "PIECE_SIZE", 300)
    monkeypatch.setattr(fast, "READ_SIZE", 64)
    doc = _tricky_doc(60)
    notes = ["a }, { b", {"x": [{"y": 1}, {"z": "}, {"}]}]
    for i, event in enumerate(doc["traceEvents"]):
        event.setdefault("args", {})["note"] = notes[i % 2]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc, indent=indent).encode()))
    assert_identical(load_trace(path, workers=1), load_trace(path, workers=0))


def test_flows_link_missing_correlations_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper_in_process: list[InProcessHelper]
) -> None:
    """Launches and kernels without a correlation id: the flows that bind them are read in a
    second pass, after the chunks were merged."""
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
    assert loaded  # merged from the helper's chunks
    assert sorted(trace.correlation.tolist()) == sorted([*range(1500), *range(1500)])
    assert_identical(trace, load_trace(path, workers=0))


def test_mutated_files_load_the_same_through_helpers_or_fail_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helper_in_process: list[InProcessHelper]
) -> None:
    """Byte flips and cuts of a real trace: through helper chunks, each either gives the very
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


def test_bad_input_in_a_helpers_chunk_names_the_event(
    tmp_path: Path, helper_in_process: list[InProcessHelper], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fast, "PIECE_SIZE", 2048)
    events = [_event(ts=float(i)) for i in range(2000)]
    events[1777]["dur"] = -1
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(InputError, match=r"traceEvents\[1777\].*negative duration"):
        load_trace(path, workers=1)


class _Broken(InProcessHelper):
    """A helper that takes two chunks, saves nothing and dies."""

    def give(self, line: str) -> bool:
        if self.given == 2:
            self.gone = True
            return False
        self.given += 1
        return True

    def ended(self) -> bool:
        log = Path(self.server.job["dir"], f"helper-{self.server.job['helper']}.log")
        log.write_text("Traceback (most recent call last):\nMemoryError: boom\n")
        return True


def test_a_failed_helper_is_reported_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunks a helper took and never answered are decoded here, from its slots."""
    helpers = fake_helpers(monkeypatch, _Broken, chunk_max=20000, piece=4096)
    path = _kernels_file(tmp_path, 3000)
    with pytest.warns(RuntimeWarning, match=r"MemoryError: boom.*its 2 chunk"):
        trace = load_trace(path, workers=1)
    assert helpers[0].given == 2  # both its slots held unanswered chunks: none given after
    assert_identical(trace, load_trace(path, workers=0))


class _Garbling(InProcessHelper):
    def give(self, line: str) -> bool:
        k = int(line.split()[0])
        load.result_path(self.server.job["dir"], k).write_bytes(b"PK\x03\x04 not a zip")
        self.given += 1
        self.done.add(k)
        return True


def test_an_unreadable_chunk_result_reads_the_file_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helpers = fake_helpers(monkeypatch, _Garbling, chunk_max=20000, piece=4096)
    path = _kernels_file(tmp_path, 3000)
    assert_identical(load_trace(path, workers=1), load_trace(path, workers=0))
    assert helpers[0].given == 1  # the first result was refused: one process read it all


def test_a_real_helper_process_shares_the_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper is a real ``python -m`` process; this process waits, at its first
    offer, until the helper is ready, so that both really take part."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(load, "CHUNK_MIN", 1)
    monkeypatch.setattr(load, "CHUNK_MAX", 30000)
    monkeypatch.setattr(fast, "PIECE_SIZE", 4096)
    loaded = _loaded_results(monkeypatch)
    original: Callable[..., int] = load._Team.offer

    def offer_once_ready(team: load._Team, pos: int) -> int:
        deadline = time.monotonic() + 60
        for helper in team.helpers.values():
            while not helper.ready and not helper.gone:
                assert time.monotonic() < deadline, "the helper never became ready"
                helper.poll()
                time.sleep(0.01)
        return original(team, pos)

    monkeypatch.setattr(load._Team, "offer", offer_once_ready)
    events = [_event(ts=float(i), name=f"k{i % 7}") for i in range(4000)]
    doc = {
        "traceEvents": events,
        "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"},
        "baseTimeNanoseconds": 1700000000000000000,
    }
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    trace = load_trace(path, workers=1)
    assert loaded  # the helper's chunks were merged
    assert_identical(trace, load_trace(path, workers=0))
    assert trace.meta["rank"] == 3 and trace.meta["base_time_ns"] == 1700000000000000000
    assert not list(tmp_path.glob("perflab-load-*"))  # the private directory is gone


def test_a_piped_helper_is_ready_then_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """READY once started; the lines given reach it; once it ends, giving fails."""
    (tmp_path / "probe_dir").mkdir()
    (tmp_path / "probe_dir" / "perflab_probe_lines.py").write_text(
        "import json, sys\n"
        "print('ready', flush=True)\n"
        "out = open(json.loads(sys.argv[1])['out'], 'w')\n"
        "for line in sys.stdin:\n"
        "    out.write(line)\n"
        "    if line.strip() == 'stop':\n"
        "        sys.exit(3)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "probe_dir"))
    out = tmp_path / "out.txt"
    helper = _parallel.PipedHelper.start("perflab_probe_lines", {"out": str(out)}, tmp_path / "l")
    assert helper is not None
    try:
        deadline = time.monotonic() + 60
        while not helper.ready and time.monotonic() < deadline:
            helper.poll()
            time.sleep(0.01)
        assert helper.ready and not helper.gone
        assert helper.give("1 0 5") and helper.give("stop")
        assert helper.process.wait(timeout=60) == 3
        while helper.give("more") and time.monotonic() < deadline:
            time.sleep(0.01)  # the pipe's buffer may take a line or two first
        assert helper.gone and helper.ended()
        assert out.read_text() == "1 0 5\nstop\n"
    finally:
        helper.kill()


def test_a_helper_that_never_starts_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "probe_dir").mkdir()
    (tmp_path / "probe_dir" / "perflab_probe_dies.py").write_text("raise SystemExit(1)\n")
    monkeypatch.syspath_prepend(str(tmp_path / "probe_dir"))
    helper = _parallel.PipedHelper.start("perflab_probe_dies", {}, tmp_path / "log")
    assert helper is not None
    assert helper.process.wait(timeout=60) == 1
    helper.poll()
    assert helper.gone and not helper.ready and helper.ended()
    helper.kill()


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


def test_columns_files_round_trip_and_refuse_damage(tmp_path: Path) -> None:
    arrays = {
        "a": np.arange(5, dtype=np.int64),
        "b": np.array([True, False, True]),
        "c": np.array([1.5, np.nan], dtype=np.float64),
        "d": np.arange(3, dtype=np.int32),
        "e": np.zeros(0, dtype=np.int8),
    }
    path = tmp_path / "r.columns"
    _parallel.save_columns(path, arrays, {"kept": 5, "keys": [["X", "k"]]})
    back, meta = _parallel.load_columns(path)
    assert meta == {"kept": 5, "keys": [["X", "k"]]}
    assert list(back) == list(arrays)
    for name, values in arrays.items():
        np.testing.assert_array_equal(back[name], values)
        assert back[name].dtype == values.dtype
    good = path.read_bytes()
    header_at = good.index(b"{")
    damaged = {
        "magic": b"x" + good[1:],
        "cut": good[:-3],
        "longer": good + b"\0" * 8,
        "object dtype": good.replace(b'"<i4"', b'"|O8"'),
        "negative count": good.replace(b'"<i4", 3]', b'"<i4",-3]'),
        "header size": good[: header_at - 8] + (10**9).to_bytes(8, "little") + good[header_at:],
        "not json": good[:header_at] + b"[" + good[header_at + 1 :],
    }
    for what, data in damaged.items():
        assert data != good, what
        path.write_bytes(data)
        with pytest.raises(InputError) as info:
            _parallel.load_columns(path)
        assert str(path) in str(info.value), what


def test_a_chunk_past_the_last_event_reads_the_file_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long key after the events makes the text look long enough for a chunk that no
    element boundary ends: one stream reads the file instead."""
    helpers = fake_helpers(monkeypatch, chunk_max=20000, piece=1024)
    doc = {"traceEvents": [_event(ts=float(i)) for i in range(60)], "notes": "x" * 50000}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    streams: list[Any] = []
    one_stream = load._load_streaming
    monkeypatch.setattr(load, "_load_streaming", lambda *a: streams.append(a) or one_stream(*a))
    parallel = load_trace(path, workers=1)
    assert helpers and len(streams) == 1  # the chunks were given up for one stream
    assert_identical(parallel, load_trace(path, workers=0))
