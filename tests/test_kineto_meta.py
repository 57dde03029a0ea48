"""Kineto thread/process names and exact nanosecond timestamps, through every decode path:
streamed slices, the whole-file decode and helper ranges."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from data_paths import TRACES
from test_io_kineto_parallel import assert_identical, helper_in_process  # noqa: F401

from perflab.errors import InputError, SchemaError
from perflab.io import load_trace
from perflab.io.kineto import exact_ns, fast, load, parts, times
from perflab.model.serialize import load_arrays, save_arrays
from perflab.model.trace import Trace

PAYLOAD = "</script><script>alert('x')</script><b>&amp;"


def _names(pid: int = 7, tid: int = 9, thread: Any = "pt_main_thread") -> list[str]:
    """Kineto's metadata events, as it writes them."""
    return [
        json.dumps({"name": "process_name", "ph": "M", "ts": 1, "pid": pid, "tid": 0,
                    "args": {"name": "python3.12"}}),
        json.dumps({"name": "process_labels", "ph": "M", "ts": 1, "pid": pid, "tid": 0,
                    "args": {"labels": "CPU"}}),
        json.dumps({"name": "thread_name", "ph": "M", "ts": 1, "pid": pid, "tid": tid,
                    "args": {"name": thread}}),
        json.dumps({"name": "thread_sort_index", "ph": "M", "ts": 1, "pid": pid, "tid": tid,
                    "args": {"sort_index": 3}}),
    ]  # fmt: skip


def _op(ts: str, dur: str, pid: int = 7, tid: int = 9, name: str = "aten::mm") -> str:
    """A CPU op with its times written as given (JSON number text)."""
    return (
        f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": {pid}, "tid": {tid}, '
        f'"ts": {ts}, "dur": {dur}, "args": {{"External id": 1}}}}'
    )


def _kernel(ts: str, dur: str, corr: int) -> str:
    return (
        '{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, '
        f'"ts": {ts}, "dur": {dur}, "args": {{"device": 0, "stream": 7, "correlation": {corr}}}}}'
    )


def _file(tmp_path: Path, events: list[str], name: str = "t.json.gz", top: str = "") -> Path:
    text = '{"schemaVersion": 1, ' + top + '"traceEvents": [\n' + ",\n".join(events) + "\n]}"
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    return path


def _whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every load to the whole-file decode (as an unusual layout would)."""

    def unusual(*args: Any, **kwargs: Any) -> Any:
        raise fast.Unusual("test")

    monkeypatch.setattr(load, "_load_streaming", unusual)


def _small_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast, "PIECE_SIZE", 200)
    monkeypatch.setattr(fast, "READ_SIZE", 64)


PATHS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "streamed": lambda mp: None,
    "small-slices": _small_slices,
    "whole-file": _whole_file,
}


# -- thread and process names -------------------------------------------------------------


def test_real_trace_keeps_kinetos_thread_and_process_names() -> None:
    trace = load_trace(TRACES / "kineto" / "nccl_2ranks_a100.json.gz")
    threads, processes = trace.meta["thread_names"], trace.meta["process_names"]
    # the trace names thread 2919752 twice; the last name wins, as in trace viewers
    assert threads["2910249:2919752"] == "thread 2919752 (pt_autograd_0)"
    assert threads["2910249:2910249"] == "thread 2910249 (pt_main_thread)"
    assert threads["0:7"] == "stream 7"  # Kineto's trailing blank is dropped
    assert processes["2910249"] == "python3.10"
    from perflab.render.timeline import assign_lanes

    labels = assign_lanes(trace).labels
    assert "thread 2910249 (pt_main_thread)" in labels
    assert "python3.10 2910249 · thread -549452224 (no name in the trace)" in labels


@pytest.mark.parametrize("how", list(PATHS))
def test_names_come_through_every_decode_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    events = [_op(f"{10 + i}.5", "1.25") for i in range(40)]
    events[20:20] = _names(thread="pt_main_thread")
    events += _names(pid=8, tid=1, thread="x" * 1000)  # cut to 256 characters
    events += _names(pid=8, tid=2, thread=42)  # not text: ignored
    events.append(_op("80", "1", pid=8, tid=2))
    path = _file(tmp_path, events)
    PATHS[how](monkeypatch)
    trace = load_trace(path)
    threads = trace.meta["thread_names"]
    assert threads["7:9"] == "pt_main_thread"
    assert threads["8:1"] == "x" * 255 + "…"
    assert "8:2" not in threads
    assert trace.meta["process_names"] == {"7": "python3.12", "8": "python3.12"}


def test_names_come_through_helper_ranges(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    helper_in_process: list[dict[str, Any]],  # noqa: F811
) -> None:
    monkeypatch.setattr(fast, "PIECE_SIZE", 300)
    monkeypatch.setattr(fast, "READ_SIZE", 64)
    events = []
    for tid in range(30):  # names spread over every range
        events += _names(tid=tid, thread=f"worker {tid}")
        events.append(_op(f"{100 + tid}.125", "2.5", tid=tid))
    path = _file(tmp_path, events)
    parallel = load_trace(path, workers=1)
    assert helper_in_process  # the helper took part
    assert parallel.meta["thread_names"] == {f"7:{t}": f"worker {t}" for t in range(30)}
    assert_identical(parallel, load_trace(path, workers=0))


def test_names_of_text_pids_use_the_tracks_numbers(tmp_path: Path) -> None:
    events = [
        json.dumps({"name": "thread_name", "ph": "M", "pid": "Spans", "tid": "P",
                    "args": {"name": "spans"}}),
        _op("5", "1").replace('"pid": 7', '"pid": "Spans"').replace('"tid": 9', '"tid": "P"'),
    ]  # fmt: skip
    trace = load_trace(_file(tmp_path, events))
    device, stream = (int(trace.tracks[c][0]) for c in ("device", "stream"))
    assert trace.meta["thread_names"] == {f"{device}:{stream}": "spans"}


def test_saved_traces_keep_names_and_refuse_bad_ones(tmp_path: Path) -> None:
    trace = load_trace(TRACES / "kineto" / "nccl_2ranks_a100.json.gz")
    saved = trace.save(tmp_path / "t.npz")
    again = Trace.load(saved)
    assert again.meta["thread_names"] == trace.meta["thread_names"]
    assert again.meta["process_names"] == trace.meta["process_names"]
    names = [f"{t}.{c}" for t in ("events", "tracks", "kernels", "memcpy", "ops")
             for c in getattr(trace, t).columns]  # fmt: skip
    for key, bad in (
        ("thread_names", {"1:2": 7}),
        ("thread_names", {"1:2": "x" * 257}),
        ("process_names", ["python"]),
        ("process_names", {str(i): "p" for i in range(70_000)}),
    ):
        arrays, header = load_arrays(saved, names)
        assert header is not None
        header["meta"][key] = bad
        tampered = save_arrays(tmp_path / "bad.npz", arrays, header)
        with pytest.raises(SchemaError, match="name") as info:
            Trace.load(tampered)
        assert f"meta.{key}" in str(info.value)


def test_hostile_thread_names_are_escaped_in_the_timeline_page(tmp_path: Path) -> None:
    pytest.importorskip("bokeh")
    from perflab.render.timeline import save_timeline

    events = [*_names(thread=PAYLOAD), _op("1.5", "2"), _op("5", "2", name="aten::add")]
    trace = load_trace(_file(tmp_path, events))
    assert trace.meta["thread_names"]["7:9"] == PAYLOAD
    page = save_timeline(trace, tmp_path / "t.html").read_text()
    assert PAYLOAD not in page and "<script>alert" not in page
    assert "alert(" in page  # there, as escaped data


# -- exact timestamps ---------------------------------------------------------------------

# wall-clock microseconds to the ns: float64 steps by 0.25 us here, so most of these round
TIMES = ["1680565898123456.789", "1680565898123456.001", "1680565898123457.999",
         "1680565898123458.5", "1680565898123459", "1680565898123460.0625"]  # fmt: skip
EXPECTED_NS = [1680565898123456789, 1680565898123456001, 1680565898123457999,
               1680565898123458500, 1680565898123459000, 1680565898123460062]  # fmt: skip


def test_float64_would_be_off_for_these_times() -> None:
    off = [round(float(t) * 1000) != ns for t, ns in zip(TIMES, EXPECTED_NS, strict=True)]
    assert sum(off) >= 4


@pytest.mark.parametrize("how", list(PATHS))
def test_nanosecond_timestamps_are_exact_in_every_decode_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    events = [_kernel(t, "0.333", i) for i, t in enumerate(TIMES)]
    events += [_op(f"{TIMES[0][:-4]}.{i:03d}", "1.001") for i in range(100, 160)]  # more slices
    path = _file(tmp_path, events, top='"baseTimeNanoseconds": 0, ')
    PATHS[how](monkeypatch)
    trace = load_trace(path)
    kernels = trace.kernels["event"]
    assert sorted(trace.start_ns[kernels].tolist()) == sorted(EXPECTED_NS)
    assert set(trace.dur_ns[kernels].tolist()) == {333}
    ops = np.flatnonzero(trace.kind != 0)
    assert sorted(trace.start_ns[ops].tolist()) == [
        1680565898123456000 + i for i in range(100, 160)
    ]
    span = int(trace.end_ns.max()) - int(trace.start_ns.min())
    assert span == 1680565898123460062 + 333 - 1680565898123456001


def test_exact_timestamps_through_helper_ranges(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    helper_in_process: list[dict[str, Any]],  # noqa: F811
) -> None:
    monkeypatch.setattr(fast, "PIECE_SIZE", 300)
    monkeypatch.setattr(fast, "READ_SIZE", 64)
    events = [_op(f"1680565898{i:06d}.{(7 * i) % 1000:03d}", "0.001") for i in range(300)]
    path = _file(tmp_path, events)
    parallel = load_trace(path, workers=1)
    assert helper_in_process
    expected = [1680565898000000000 + i * 1000 + (7 * i) % 1000 for i in range(300)]
    assert sorted(parallel.start_ns.tolist()) == expected
    assert set(parallel.dur_ns.tolist()) == {1}
    assert_identical(parallel, load_trace(path, workers=0))


def test_flows_link_by_exact_time(tmp_path: Path) -> None:
    """A launch without its correlation id gets it from the ac2g flow end that sits on its
    exact start: at 0.25 us float steps two launches 1 ns apart would be one key."""
    launches = [
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 9, '
        f'"ts": 1680565898123456.{k}, "dur": 0.5, "args": {{}}}}'
        for k in ("001", "002")
    ]
    flows = [
        '{"ph": "s", "cat": "ac2g", "name": "ac2g", "pid": 7, "tid": 9, '
        f'"ts": 1680565898123456.{k}, "id": {corr}}}'
        for k, corr in (("001", 41), ("002", 42))
    ]
    trace = load_trace(_file(tmp_path, [*launches, *flows]))
    order = np.argsort(trace.start_ns)
    assert trace.correlation[order].tolist() == [41, 42]


@pytest.mark.parametrize("how", ["streamed", "whole-file"])
@pytest.mark.parametrize(
    ("ts", "message"),
    [
        ('"1680565898123456.789"', "missing or non-finite 'ts'"),
        ("1e300", "outside the time window"),
        ("99999999999999999999.5", "outside the time window"),
    ],
)
def test_bad_times_beyond_floats_are_clean_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, ts: str, message: str
) -> None:
    events = [_op("1680565898123456.789", "1"), _op(ts, "1"), _op("1680565898123457.5", "1")]
    path = _file(tmp_path, events)
    PATHS[how](monkeypatch)
    with pytest.raises(InputError) as info:
        load_trace(path)
    text = str(info.value)
    assert str(path) in text and message in text and "traceEvents[1]" in text


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        (b"1680565898123456.789", 1680565898123456789),
        (b"-12.3455", -12346),  # half to even, from the digits
        (b"12.3445", 12344),
        (b"12.34450001", 12345),
        (b"0", 0),
        (b"7", 7000),
        (b"1.5e3", 1_500_000),
        (b"4458676416431.397", 4458676416431397),
    ],
)
def test_exact_ns_reads_the_digits(text: bytes, ns: int) -> None:
    got, us = exact_ns([text])
    assert got.tolist() == [ns]
    assert us[0] == pytest.approx(ns / 1000)


@pytest.mark.parametrize(
    "texts",
    [
        # one layout (whole digits alike, 1-3 decimals): read as a digit matrix
        [b"1700000000001234.5", b"1700000000001234.25", b"1700000000001234.999"],
        [b"1700000000001234.5", b"9999999999999999.999"],  # the last beyond the window
        [b"3.5", b"4.125", b"0.001"],
        [b"1700000000001234.5"],  # one value: its row reaches past its comma
        [b"0.125", b"9.5"],
        # anything else: the general pass
        [b"1700000000001234.5", b"170000000000123.25", b"1700000000001234"],
        [b"12.3445", b"12.3", b"-12.3"],
        [b"12.3", b"1.2e1", b"12.x"],
    ],
)
def test_exact_ns_of_a_column_are_those_of_decimal(texts: list[bytes]) -> None:
    """Either pass gives every value the ns that Decimal arithmetic gives it."""
    expected = [times._one_exact_ns(t)[0] for t in texts]
    assert exact_ns(texts)[0].tolist() == expected
    assert exact_ns([msgspec.Raw(t) for t in texts])[0].tolist() == expected


def test_exact_ns_says_what_is_not_a_number() -> None:
    got, us = exact_ns([b'"12"', b"null", b"true", b"{}", b"1"])
    assert np.isnan(us[:4]).all() and got.tolist()[4] == 1000


def test_joining_column_parts_keeps_every_row_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices' parts are joined into blocks as a load goes (to keep the heap small): with
    blocks of two slices the trace is the very one read with the default blocks."""
    path = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"
    monkeypatch.setattr(fast, "PIECE_SIZE", 4096)
    default = load_trace(path)
    monkeypatch.setattr(parts, "SMALL_PARTS", 2)
    monkeypatch.setattr(parts, "RETURN_FREED_BYTES", 0)  # and hand freed pages back each time
    assert_identical(load_trace(path), default)


def test_nccl_kernels_keep_their_process_group_and_seq(tmp_path: Path) -> None:
    trace = load_trace(TRACES / "kineto" / "nccl_2ranks_a100.json.gz")
    args = trace.meta["collective_args"]
    assert len(args["correlation"]) == 21  # every NCCL kernel, none of the others
    assert set(args["group"]) == {"0"} and set(args["seq"]) == {-1}  # no Seq in this trace
    nccl = set(trace.correlation[trace.kernels["event"]].tolist())
    assert set(args["correlation"]) <= nccl
    kernel = _kernel("5.5", "1", 77).replace(
        '"stream": 7,', '"stream": 7, "Seq": "12", "Process Group Name": "tp",'
    )
    trace = load_trace(_file(tmp_path, [kernel]))
    assert trace.meta["collective_args"] == {"correlation": [77], "group": ["tp"], "seq": [12]}
    saved = Trace.load(trace.save(tmp_path / "t.npz"))
    assert saved.meta["collective_args"] == trace.meta["collective_args"]


@pytest.mark.parametrize(
    "bad",
    [
        {"correlation": [1], "group": [5], "seq": [1]},
        {"correlation": [1, 2], "group": ["0"], "seq": [1]},
        {"correlation": [-4], "group": ["0"], "seq": [1]},
        {"correlation": [1], "group": ["0"], "seq": [1.5]},
        [1, 2, 3],
    ],
)
def test_saved_collective_args_are_checked(tmp_path: Path, bad: Any) -> None:
    trace = load_trace(TRACES / "kineto" / "nccl_2ranks_a100.json.gz")
    saved = trace.save(tmp_path / "t.npz")
    names = [f"{t}.{c}" for t in ("events", "tracks", "kernels", "memcpy", "ops")
             for c in getattr(trace, t).columns]  # fmt: skip
    arrays, header = load_arrays(saved, names)
    assert header is not None
    header["meta"]["collective_args"] = bad
    with pytest.raises(SchemaError, match=r"meta\.collective_args"):
        Trace.load(save_arrays(tmp_path / "bad.npz", arrays, header))


def test_metadata_args_beyond_the_name_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only args.name of a streamed metadata event is read: other args (whatever their type)
    do not send the file to the whole-file decode. (The file's last piece is decoded with
    the whole-file types, which check every event's args, as before.)"""
    _small_slices(monkeypatch)
    whole: list[int] = []
    monkeypatch.setattr(load, "decode_file", lambda *a, **k: whole.append(1))
    meta = json.dumps({"name": "thread_name", "ph": "M", "pid": 7, "tid": 9,
                       "args": {"name": "main", "device": "not a device", "grid": {}}})  # fmt: skip
    ops = [_op(f"{i}.5", "2") for i in range(60)]
    trace = load_trace(_file(tmp_path, [meta, *ops]))
    assert trace.meta["thread_names"] == {"7:9": "main"} and not whole
