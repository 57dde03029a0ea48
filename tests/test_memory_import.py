"""The Kineto importer reads the allocator's [memory] instant events into
Trace.memory_events: the same columns by every path (streamed, whole file, helper
processes), values checked where they enter, saved and loaded with the trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from data_paths import TRACES
from kineto_gen import memory_document, memory_trace
from test_io_kineto_parallel import _loaded_results, fake_helpers

from perflab.errors import InputError, SchemaError
from perflab.io import load_trace
from perflab.io.kineto import load, loads_kineto
from perflab.model.memory import MEMORY_COLUMNS
from perflab.model.trace import Trace

REAL = TRACES / "cpu" / "cpu_memory_train.json.gz"


def _events(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return events


def _memory(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"]


def _same_columns(a: Trace, b: Trace) -> None:
    for name in MEMORY_COLUMNS:
        assert np.array_equal(a.memory_events[name], b.memory_events[name]), name


def test_the_real_cpu_trace_keeps_every_memory_event_with_its_values() -> None:
    trace = load_trace(REAL)
    memory = trace.memory_events
    given = sorted(_memory(_events(REAL)), key=lambda e: e["ts"])  # Python's sort is stable
    assert len(memory) == len(given) == 326
    args = [e["args"] for e in given]
    assert memory["bytes"].tolist() == [a["Bytes"] for a in args]
    assert memory["addr"].tolist() == [a["Addr"] for a in args]
    assert memory["total_allocated"].tolist() == [a["Total Allocated"] for a in args]
    assert memory["total_reserved"].tolist() == [a["Total Reserved"] for a in args]
    assert set(memory["device_type"].tolist()) == {0}
    assert set(memory["device_id"].tolist()) == {-1}
    assert memory["ts_ns"].tolist() == [round(e["ts"] * 1000) for e in given]
    assert memory["tid"].tolist() == [e["tid"] for e in given]
    # the instant events are not events of the timeline
    assert len(trace) == sum(1 for e in _events(REAL) if e.get("ph") == "X" and e["cat"] != "Trace")


def test_streamed_and_whole_file_reads_agree(tmp_path: Path) -> None:
    data = gzip.decompress(REAL.read_bytes())
    _same_columns(load_trace(REAL), loads_kineto(data))


def test_threads_named_by_text_number_the_same_on_every_path(tmp_path: Path) -> None:
    """pids and tids given as text are numbered in the order their events come, whether the
    file is streamed or read whole."""
    doc = memory_document(memory_trace(steps=2))
    for event in doc["traceEvents"]:
        if event["tid"] != 101:
            event["tid"] = f"thread {event['tid']}"
    data = json.dumps(doc).encode()
    path = tmp_path / "t.json"
    path.write_bytes(data)
    streamed, whole = load_trace(path), loads_kineto(data)
    _same_columns(streamed, whole)
    tracks = set(zip(whole.tracks["device"].tolist(), whole.tracks["stream"].tolist(), strict=True))
    memory = whole.memory_events
    threads = set(zip(memory["pid"].tolist(), memory["tid"].tolist(), strict=True))
    assert threads <= tracks  # every allocating thread is a track of the trace


@pytest.mark.parametrize("text_threads", [False, True], ids=["numbered", "named"])
def test_chunks_read_by_helpers_give_the_same_memory_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text_threads: bool
) -> None:
    """A file cut into chunks that helpers decode gives the columns one process reads: the
    memory events' keys are translated as they are absorbed."""
    helpers = fake_helpers(monkeypatch, chunk_max=20000, piece=4096)
    monkeypatch.setattr(load, "CHUNK_MIN", 4000)  # the file's last event stays here
    loaded = _loaded_results(monkeypatch)
    merged: list[Trace | None] = []
    parallel = load._load_parallel
    monkeypatch.setattr(
        load, "_load_parallel", lambda *a: merged.append(parallel(*a)) or merged[-1]
    )
    doc = memory_document(memory_trace(steps=20))
    # threads of their own first: a memory event's key numbered by its chunk alone would
    # name one of these
    doc["traceEvents"][:0] = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 100, "tid": 1000 + i}
        | {"ts": 10 + i, "dur": 1}
        for i in range(40)
    ]
    if text_threads:
        for event in doc["traceEvents"]:
            event["tid"] = f"thread {event['tid']}"
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    shared = load_trace(path, workers=1)
    assert helpers and len(loaded) >= 3  # chunks travelled through the helper
    assert merged and merged[0] is not None  # and were merged (not read again by one stream)
    alone = load_trace(path, workers=0)
    assert len(alone.memory_events) == len(_memory(doc["traceEvents"]))
    _same_columns(alone, shared)


def test_a_trace_without_memory_events_has_an_empty_table() -> None:
    trace = load_trace(TRACES / "kineto" / "alexnet_a100.json.gz")
    assert len(trace.memory_events) == 0
    assert set(trace.memory_events.columns) == set(MEMORY_COLUMNS)


def test_other_instant_events_are_not_memory_events() -> None:
    doc = memory_document(memory_trace(steps=1))
    n = len(_memory(doc["traceEvents"]))
    doc["traceEvents"] += [
        {
            "ph": "i",
            "s": "g",
            "name": "Iteration Start: PyTorch Profiler",
            "pid": "Traces",
            "tid": "x",
            "ts": 5,
        },
        {"ph": "i", "cat": "cpu_instant_event", "name": "marker", "pid": 1, "tid": 1, "ts": 6},
    ]
    assert len(loads_kineto(json.dumps(doc).encode()).memory_events) == n


# -- malformed memory events: a perflab error naming the file and the event ------------------


def _with_bad_memory_event(change: Any) -> tuple[dict[str, Any], int]:
    """The generated trace with its 5th memory event changed; the event's position."""
    doc = memory_document(memory_trace(steps=1))
    events = doc["traceEvents"]
    at = [i for i, e in enumerate(events) if e.get("name") == "[memory]"][4]
    change(events[at])
    return doc, at


BAD = {
    "no Bytes": lambda e: e["args"].pop("Bytes"),
    "no Addr": lambda e: e["args"].pop("Addr"),
    "no Total Allocated": lambda e: e["args"].pop("Total Allocated"),
    "no Device Type": lambda e: e["args"].pop("Device Type"),
    "Bytes as text": lambda e: e["args"].update(Bytes="12"),
    "Bytes a fraction": lambda e: e["args"].update(Bytes=1.5),
    "Bytes past 2**53": lambda e: e["args"].update(Bytes=2**60),
    "Bytes past 2**64": lambda e: e["args"].update(Bytes=2**70),
    "a negative total": lambda e: e["args"].update({"Total Allocated": -5}),
    "a reserved total of NaN": lambda e: e["args"].update({"Total Reserved": float("nan")}),
    "a device type past int8": lambda e: e["args"].update({"Device Type": 300}),
    "a device id below -1": lambda e: e["args"].update({"Device Id": -7}),
    "no ts": lambda e: e.pop("ts"),
    "ts past the window": lambda e: e.update(ts=9.1e15),
    "ts as text": lambda e: e.update(ts="soon"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_memory_event_is_refused_naming_the_file_and_event(
    case: str, tmp_path: Path
) -> None:
    doc, at = _with_bad_memory_event(BAD[case])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))  # NaN is written as a token, which is malformed JSON
    with pytest.raises(InputError) as streamed:
        load_trace(path)
    assert str(path) in str(streamed.value)
    if "NaN" not in case:
        assert f"traceEvents[{at}]" in str(streamed.value), str(streamed.value)
    with pytest.raises(InputError):
        loads_kineto(path.read_bytes())


def test_a_missing_reserved_total_or_device_id_is_allowed() -> None:
    doc, _ = _with_bad_memory_event(
        lambda e: [e["args"].pop(k) for k in ("Total Reserved", "Device Id")]
    )
    memory = loads_kineto(json.dumps(doc).encode()).memory_events
    assert (memory["total_reserved"] == -1).sum() == 1
    assert (memory["device_id"] == -1).sum() > 0


# -- saved with the trace ------------------------------------------------------------------


def test_memory_events_are_saved_and_loaded_with_the_trace(tmp_path: Path) -> None:
    trace = load_trace(REAL)
    again = Trace.load(trace.save(tmp_path / "t.npz"))
    _same_columns(trace, again)
    assert again.memory().to_dict() == trace.memory().to_dict()


def test_a_trace_saved_without_memory_events_loads(tmp_path: Path) -> None:
    trace = load_trace(TRACES / "kineto" / "triton_example_a100.json.gz")
    path = trace.save(tmp_path / "t.npz")
    import zipfile

    assert not any(n.startswith("memory.") for n in zipfile.ZipFile(path).namelist())
    assert len(Trace.load(path).memory_events) == 0


def _rewrite_member(path: Path, member: str, values: np.ndarray) -> None:
    import io
    import zipfile

    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    buf = io.BytesIO()
    np.save(buf, values, allow_pickle=False)
    members[member] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.mark.parametrize(
    ("column", "values", "message"),
    [
        ("bytes", lambda v: np.where(np.arange(len(v)) == 3, 2**60, v), "bytes beyond 2"),
        ("total_allocated", lambda v: v - 10**9, "total allocated"),
        ("ts_ns", lambda v: v.astype(np.float64), "type"),
        ("device_id", lambda v: v[:-1], "values of type"),
    ],
)
def test_a_tampered_saved_memory_column_is_refused(
    tmp_path: Path, column: str, values: Any, message: str
) -> None:
    path = load_trace(REAL).save(tmp_path / "t.npz")
    original = Trace.load(path).memory_events[column]
    _rewrite_member(path, f"memory.{column}.npy", values(original))
    with pytest.raises(SchemaError, match=message) as refused:
        Trace.load(path)
    assert str(path) in str(refused.value)


def test_selecting_events_keeps_the_memory_events() -> None:
    trace = loads_kineto(json.dumps(memory_document(memory_trace(steps=1))).encode())
    assert len(trace.select(np.arange(3)).memory_events) == len(trace.memory_events)


def test_wall_clock_times_are_read_to_the_nanosecond(tmp_path: Path) -> None:
    """Times beyond 2**43 us with a fraction (wall-clock microseconds) come as text: a
    memory event's time is exact on every path, as a complete event's is."""
    doc = memory_document(memory_trace(steps=1))
    base = 1_680_565_898_000_000  # us
    for event in doc["traceEvents"]:
        event["ts"] = f"{base + event['ts']}.789"  # placeholder, written as a number below
    text = json.dumps(doc)
    for event in doc["traceEvents"]:
        text = text.replace(f'"{event["ts"]}"', event["ts"], 1)
    path = tmp_path / "wall.json"
    path.write_text(text)
    streamed, whole = load_trace(path), loads_kineto(text.encode())
    _same_columns(streamed, whole)
    first = min(int(e["ts"].split(".")[0]) for e in doc["traceEvents"] if e["name"] == "[memory]")
    assert int(streamed.memory_events["ts_ns"][0]) == first * 1000 + 789
