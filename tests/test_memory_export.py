"""The allocator's events survive what is done to a trace: exported as Chrome JSON and read back
(Kineto's ``[memory]`` instant events), merged with other traces, and a job's ranks merged on
the job's clock."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from data_paths import TRACES

from perflab.io import load_trace
from perflab.io.chrome import export_chrome
from perflab.io.job import load_job
from perflab.model.trace import Trace

MEMORY_TRACE = TRACES / "cpu" / "cpu_memory_train.json.gz"
PLAIN_TRACE = TRACES / "cpu" / "cpu_only_train.json.gz"


@pytest.fixture(scope="module")
def trace() -> Trace:
    return load_trace(MEMORY_TRACE)


def report(t: Trace, shift_ns: int = 0) -> dict[str, Any]:
    """``t``'s memory report less the file it names, its peaks' times moved by ``shift_ns``."""
    doc = json.loads(json.dumps(t.memory().to_dict()))
    doc.pop("source")
    for device in doc["devices"]:
        device["peak_ns"] += shift_ns
    return doc


def test_an_exported_trace_read_back_has_the_same_memory_report(
    trace: Trace, tmp_path: Path
) -> None:
    out = export_chrome(trace, tmp_path / "exported.json")
    back = load_trace(out)
    origin = json.loads(out.read_text())["otherData"]["start_ns"]  # the export's clock
    assert len(back.memory_events) == len(trace.memory_events) == 326
    for name, values in trace.memory_events.columns.items():
        shift = origin if name == "ts_ns" else 0
        np.testing.assert_array_equal(back.memory_events[name] + shift, values, err_msg=name)
    assert report(back, origin) == report(trace)


def test_the_export_writes_kinetos_memory_events(trace: Trace, tmp_path: Path) -> None:
    doc = json.loads(export_chrome(trace, tmp_path / "exported.json").read_text())
    memory = [e for e in doc["traceEvents"] if e["name"] == "[memory]"]
    assert len(memory) == 326
    first = memory[0]
    assert (first["ph"], first["s"], first["cat"]) == ("i", "t", "cpu_instant_event")
    assert set(first["args"]) == {
        "Addr",
        "Bytes",
        "Total Allocated",
        "Total Reserved",
        "Device Type",
        "Device Id",
    }
    # each on the host thread (pid, tid) that the trace's own events of that thread use
    threads = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "X"}
    assert {(e["pid"], e["tid"]) for e in memory} <= threads


def test_a_trace_without_memory_events_exports_none(tmp_path: Path) -> None:
    plain = load_trace(PLAIN_TRACE)
    assert len(plain.memory_events) == 0
    out = export_chrome(plain, tmp_path / "plain.json")
    assert '"[memory]"' not in out.read_text()
    assert len(load_trace(out).memory_events) == 0


def test_a_reserved_total_the_recording_did_not_say_stays_unknown(
    trace: Trace, tmp_path: Path
) -> None:
    columns = dict(trace.memory_events.columns)
    columns["total_reserved"] = np.full(len(trace.memory_events), -1, np.int64)
    unsaid = Trace(
        trace.events,
        trace.tracks,
        trace.strings,
        memory_events=type(trace.memory_events)(trace.memory_events.schema, columns),
    )
    back = load_trace(export_chrome(unsaid, tmp_path / "unsaid.json"))
    assert len(back.memory_events) == 326
    assert (back.memory_events["total_reserved"] == -1).all()


def test_merge_keeps_every_inputs_memory_events_by_time(trace: Trace) -> None:
    alone = Trace.merge([trace], ranks=[0])
    for name, values in trace.memory_events.columns.items():
        np.testing.assert_array_equal(alone.memory_events[name], values, err_msg=name)
    assert report(alone) == report(trace)
    twice = Trace.merge([trace, trace], ranks=[0, 1])
    ts = twice.memory_events["ts_ns"]
    assert len(ts) == 2 * len(trace.memory_events) and (np.diff(ts) >= 0).all()
    np.testing.assert_array_equal(ts, np.sort(np.tile(trace.memory_events["ts_ns"], 2)))


def test_a_merged_trace_exported_and_read_back_keeps_them(trace: Trace, tmp_path: Path) -> None:
    merged = Trace.merge([trace, load_trace(PLAIN_TRACE)], ranks=[0, 1])
    back = load_trace(export_chrome(merged, tmp_path / "merged.json"))
    assert len(back.memory_events) == len(trace.memory_events)
    assert report(back)["devices"][0]["live_at_peak"] == report(trace)["devices"][0]["live_at_peak"]


def test_a_jobs_merged_trace_has_each_ranks_memory_on_the_jobs_clock(tmp_path: Path) -> None:
    with gzip.open(MEMORY_TRACE, "rt") as fh:
        doc = json.load(fh)
    (tmp_path / "rank-0.json").write_text(json.dumps(doc))
    doc["baseTimeNanoseconds"] += 7_000_000_123  # rank 1 recorded 7 s later
    (tmp_path / "rank-1.json").write_text(json.dumps(doc))
    job = load_job(tmp_path, workers=0)
    offsets = [r.clock_offset_ns for r in job]
    assert offsets[1] - offsets[0] == 7_000_000_123
    want = np.sort(
        np.concatenate([r.trace.memory_events["ts_ns"] + np.int64(r.clock_offset_ns) for r in job])
    )
    np.testing.assert_array_equal(job.merged().memory_events["ts_ns"], want)
