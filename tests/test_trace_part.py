"""Reading part of a trace (--step N, --window A:B): the streamed partial read of a Kineto file
keeps exactly the events that cutting the whole trace keeps, every side table follows, and
bad requests are refused naming what is there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from data_paths import TRACES

import perflab
from perflab.errors import InputError
from perflab.io.kineto import load as kineto_load
from perflab.io.kineto import load_kineto
from perflab.io.kineto.fast import Unusual
from perflab.model.trace import Trace
from perflab.model.trace_part import Request, parse_window, part_of, step_ranges

NCCL = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"  # ProfilerStep#4, 5, 6
MEMORY = TRACES / "cpu" / "cpu_memory_train.json.gz"  # the allocator's [memory] events
NSYS = TRACES / "nsys" / "power_iteration.sqlite"


# columns of indices into trace.strings: compared by their text (a partial read interns only
# the texts of the events it keeps)
_TEXT = {("events", "name"), ("tracks", "label"), ("ops", "input_dims"), ("ops", "input_types")}


def _same(a: Trace, b: Trace) -> None:
    for table in ("events", "kernels", "memcpy", "ops", "memory_events", "tracks"):
        ta, tb = getattr(a, table), getattr(b, table)
        assert ta.columns.keys() == tb.columns.keys(), table
        for column in ta.columns:
            if (table, column) in _TEXT:
                assert _texts(a, ta[column]) == _texts(b, tb[column]), f"{table}.{column}"
            else:
                np.testing.assert_array_equal(ta[column], tb[column], err_msg=f"{table}.{column}")
    assert a.meta["part"] == b.meta["part"]


def _texts(trace: Trace, ids: np.ndarray) -> list[str | None]:
    return [trace.strings[i] if i >= 0 else None for i in ids.tolist()]


@pytest.fixture(scope="module")
def nccl() -> Trace:
    return perflab.load_trace(NCCL)


@pytest.mark.parametrize(
    "request_",
    [Request(step=4), Request(step=5), Request(step=6), Request(window=(100_000_000, 300_000_000))],
    ids=["step4", "step5", "step6", "window"],
)
def test_a_streamed_part_keeps_what_cutting_the_whole_trace_keeps(
    nccl: Trace, request_: Request
) -> None:
    streamed = load_kineto(NCCL, part=request_, progress=False)
    cut = part_of(nccl, request_)
    _same(streamed, cut)
    assert 0 < len(streamed) < len(nccl)
    assert streamed.meta["events_read"] == nccl.meta["events_read"]


def test_a_step_holds_its_host_range_and_the_gpu_work_until_the_next_step(nccl: Trace) -> None:
    ranges = step_ranges(nccl)
    assert sorted(ranges) == [4, 5, 6]
    part = load_kineto(NCCL, part=Request(step=5), progress=False)
    start, end = ranges[5]
    on_gpu = part.tracks["kind"][part.track] == 0
    assert (part.end_ns >= start).all()
    assert (part.start_ns[~on_gpu] <= end).all()
    assert (part.start_ns[on_gpu] <= ranges[6][0]).all()
    # every host event of the whole trace that overlaps the step is there
    host = (nccl.tracks["kind"][nccl.track] == 1) & (nccl.end_ns >= start) & (nccl.start_ns <= end)
    assert int(host.sum()) == int((~on_gpu).sum())
    assert part.meta["part"] == {
        "label": "ProfilerStep#5",
        "start_ns": start,
        "end_ns": end,
        "gpu_end_ns": ranges[6][0],
    }


def test_the_summary_of_a_step_read_in_part_is_the_summary_of_that_part(nccl: Trace) -> None:
    streamed = load_kineto(NCCL, part=Request(step=5), progress=False).summary().to_dict()
    assert streamed == part_of(nccl, Request(step=5)).summary().to_dict()
    assert streamed != nccl.summary().to_dict()


def test_memory_events_outside_the_part_are_left_out() -> None:
    whole = perflab.load_trace(MEMORY)
    assert len(whole.memory_events) > 0
    first = int(whole.start_ns.min())
    span = int(whole.end_ns.max()) - first
    request = Request(window=(span // 3, 2 * span // 3))
    part = load_kineto(MEMORY, part=request, progress=False)
    _same(part, part_of(whole, request))
    ts = part.memory_events["ts_ns"]
    assert 0 < len(ts) < len(whole.memory_events)
    assert ((ts >= first + span // 3) & (ts <= first + 2 * span // 3)).all()


def test_a_file_decoded_whole_is_cut_the_same_way(
    nccl: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unusual(*args: object, **kwargs: object) -> Trace:
        raise Unusual("as a file of an unusual layout")

    monkeypatch.setattr(kineto_load, "_load_streaming", unusual)
    _same(load_kineto(NCCL, part=Request(step=6), progress=False), part_of(nccl, Request(step=6)))


def test_saved_and_nsys_traces_are_cut_after_reading(tmp_path: Path, nccl: Trace) -> None:
    saved = nccl.save(tmp_path / "nccl.npz")
    request = Request(step=4)
    _same(perflab.load_trace(saved, part=request), part_of(nccl, request))
    nsys = perflab.load_trace(NSYS)
    span = int(nsys.end_ns.max() - nsys.start_ns.min())
    cut = perflab.load_trace(NSYS, part=Request(window=(0, span // 2)))
    assert 0 < len(cut) < len(nsys)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s:32.5s", (30_000_000_000, 32_500_000_000)),
        ("120ms : 180ms", (120_000_000, 180_000_000)),
        ("0ns:1us", (0, 1_000)),
        (".5s:1s", (500_000_000, 1_000_000_000)),
    ],
)
def test_windows_are_read_with_their_units(text: str, expected: tuple[int, int]) -> None:
    assert parse_window(text) == expected


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("3:4", "with their units"),
        ("2s:1s", "end after it starts"),
        ("1s:1s", "end after it starts"),
        ("-1s:2s", "with their units"),
        ("1e3s:2e3s", "with their units"),
        ("1s:999999999999s", "146 years"),
        ("1s:2s:3s", "with their units"),
    ],
)
def test_bad_windows_are_refused_saying_what_is_wanted(text: str, said: str) -> None:
    with pytest.raises(InputError, match=said):
        parse_window(text)


def test_a_missing_step_or_an_empty_window_is_refused_naming_what_is_there() -> None:
    with pytest.raises(InputError, match="no ProfilerStep#9 range; its steps are 4, 5, 6"):
        load_kineto(NCCL, part=Request(step=9), progress=False)
    with pytest.raises(InputError, match=r"no event overlaps 1000 s to 2000 s .* the trace lasts"):
        load_kineto(NCCL, part=Request(window=(10**12, 2 * 10**12)), progress=False)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perflab", *args], capture_output=True, text=True, timeout=120
    )


def test_the_cli_reads_a_step_and_says_so(nccl: Trace) -> None:
    done = _cli("trace", "summary", str(NCCL), "--step", "5", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == part_of(nccl, Request(step=5)).summary().to_dict()
    text = _cli("trace", "summary", str(NCCL), "--window", "100ms:300ms")
    assert text.returncode == 0, text.stderr
    assert "read only 0.1 s to 0.3 s since the trace's start: 8,210 events" in text.stderr
    assert "the others: events outside 0.1 s to 0.3 s since the trace's start" in text.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("trace", "summary", str(NCCL), "--step", "5", "--window", "0s:1s"), "not both"),
        (("trace", "summary", str(NCCL), "--step", "-1"), "step number"),
        (("trace", "kernels", str(TRACES / "kineto"), "--window", "0s:1s"), "not of a job"),
        (("timeline", str(NCCL), "-o", "x.html", "--window", "1:2"), "with their units"),
    ],
)
def test_the_cli_refuses_bad_parts_with_a_perflab_error(args: tuple[str, ...], said: str) -> None:
    done = _cli(*args)
    assert done.returncode != 0
    assert said in done.stderr and "Traceback" not in done.stderr


def test_idle_keeps_its_own_step_and_reads_a_window() -> None:
    done = _cli("trace", "idle", str(NCCL), "--window", "100ms:300ms", "--step", "5", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["step"] == 5


@pytest.mark.parametrize(
    ("command", "offered"),
    [
        ("summary", "--step N (ProfilerStep#N) or --window A:B"),
        ("idle", "read only part of the trace with --window A:B"),
    ],
)
def test_a_trace_that_does_not_fit_is_refused_offering_a_partial_read(
    command: str, offered: str
) -> None:
    refused = _cli("trace", command, str(NCCL), "--memory-budget", "10M")
    assert refused.returncode != 0
    assert offered in refused.stderr
    # the part itself is read (the budget is checked against whole files only)
    read = _cli("trace", command, str(NCCL), "--memory-budget", "10M", "--window", "0s:0.1s")
    assert read.returncode == 0, read.stderr


def test_load_trace_takes_a_step_or_a_window(nccl: Trace) -> None:
    _same(perflab.load_trace(NCCL, step=5, progress=False), part_of(nccl, Request(step=5)))
    cut = perflab.load_trace(NCCL, window="100ms:300ms", progress=False)
    _same(cut, part_of(nccl, Request(window=(100_000_000, 300_000_000))))
    for bad, said in (
        ({"step": 5, "window": "0s:1s"}, "not both"),
        ({"step": True}, "step"),
        ({"window": 7}, "with their units"),
    ):
        with pytest.raises(InputError, match=said):
            perflab.load_trace(NCCL, **bad)  # type: ignore[arg-type]
