"""Rank-qualified keys (model.trace_keys) and what uses them: device pairs, launch links,
the device split of trace statistics and the Chrome export's process ids."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from perflab.analysis.trace_stats import idle_gaps, launch_start, stream_utilisation
from perflab.io import export_chrome, load_trace
from perflab.io.chrome import GPU_PID_BASE, chrome_events
from perflab.model.trace import EVENT_COLUMNS, TRACK_COLUMNS, EventKind, Table, Trace, TrackKind
from perflab.model.trace_keys import device_pairs, event_device_pairs, launch_links
from perflab.render.timeline import launch_groups

K, R = EventKind.KERNEL, EventKind.RUNTIME


def _trace(tracks: dict[str, list[int]], events: list[tuple[int, int, int, int, int]]) -> Trace:
    """``events``: (start, dur, kind, track, correlation); tracks are GPU where device >= 0
    unless ``kind`` is given."""
    n = len(tracks["rank"])
    strings = ["lane", "work"]
    cols = {"stream": [7] * n, "label": [0] * n, **tracks}
    track_table = Table(TRACK_COLUMNS, cols)
    start, dur, kind, track, corr = (list(c) for c in zip(*events, strict=True))
    event_table = Table(
        EVENT_COLUMNS,
        {
            "start_ns": start,
            "dur_ns": dur,
            "kind": kind,
            "track": track,
            "name": [1] * len(events),
            "correlation": corr,
            "external_id": [-1] * len(events),
        },
    )
    return Trace(event_table, track_table, strings)


def _gpus_2_to_the_32_apart() -> Trace:
    # rank 0's GPU 2**32 and rank 1's GPU 0: `rank << 32 + device` gives both 2**32
    tracks = {"rank": [0, 1], "device": [2**32, 0], "kind": [TrackKind.GPU, TrackKind.GPU]}
    events = [(0, 10, K, 0, -1), (50, 10, K, 0, -1), (0, 30, K, 1, -1), (100, 10, K, 1, -1)]
    return _trace(tracks, events)


def test_device_pairs_keep_ids_2_to_the_32_apart() -> None:
    trace = _gpus_2_to_the_32_apart()
    pairs, pair_of_track = device_pairs(trace)
    assert pairs.tolist() == [[0, 2**32], [1, 0]] and pair_of_track.tolist() == [0, 1]
    assert event_device_pairs(trace).tolist() == [0, 0, 1, 1]


def test_stream_utilisation_and_idle_gaps_keep_such_devices_apart() -> None:
    trace = _gpus_2_to_the_32_apart()
    util = stream_utilisation(trace).columns
    # each stream's share is of its own device's span: 20/60 and 40/110
    assert util["share"] == [20 / 60, 40 / 110]
    gaps = idle_gaps(trace).columns
    assert gaps["device"] == [str(2**32), "1:0"]
    assert gaps["dur_ns"] == [40, 70]


def test_launch_links_join_within_a_rank_only() -> None:
    cpu, gpu = TrackKind.CPU, TrackKind.GPU
    tracks = {"rank": [0, 0, 1, 1], "device": [9, 0, 9, 0], "kind": [cpu, gpu, cpu, gpu]}
    events = [
        (0, 5, R, 0, 7),  # rank 0 launch, correlation 7
        (1, 6, R, 2, 7),  # rank 1 launch, same correlation id
        (10, 3, K, 1, 7),  # rank 0 kernel
        (20, 3, K, 3, 7),  # rank 1 kernel
        (30, 3, K, 1, 7 + 2**40),  # rank 0: meets rank 1's 7 under rank * 2**40 packing
        (40, 3, K, 3, 8),  # no launch
    ]
    trace = _trace(tracks, events)
    assert launch_links(trace).tolist() == [-1, -1, 0, 1, -1, -1]
    assert launch_start(trace).tolist() == [-1, -1, 0, 1, -1, -1]
    # the timeline's launch highlight: one link per (rank, correlation) with both sides
    assert launch_groups(trace).tolist() == [0, 1, 0, 1, -1, -1]


def test_chrome_pids_keep_gpus_apart_from_host_processes_and_ranks(tmp_path: Path) -> None:
    cpu, gpu = TrackKind.CPU, TrackKind.GPU
    tracks = {"rank": [0, 0, 1], "device": [1, 1, 1], "kind": [cpu, gpu, gpu]}
    events = [(0, 5, R, 0, 3), (10, 4, K, 1, 3), (12, 4, K, 2, -1)]
    trace = _trace(tracks, events)
    out = chrome_events(trace)
    # the host process keeps its pid; each rank's GPU 1 gets one of its own
    pid_of_track = [e["pid"] for e in out if e["name"] == "thread_name"]
    assert pid_of_track == [1, GPU_PID_BASE, GPU_PID_BASE + 1]
    work = [e for e in out if e["ph"] == "X"]
    assert [e["pid"] for e in work] == [1, GPU_PID_BASE, GPU_PID_BASE + 1]
    names = {e["pid"]: e["args"]["name"] for e in out if e["name"] == "process_name"}
    assert names == {GPU_PID_BASE: "GPU 1", GPU_PID_BASE + 1: "rank 1 GPU 1"}
    # a host process whose id is GPU_PID_BASE is skipped
    tracks["device"][0] = GPU_PID_BASE
    assert {e["pid"] for e in chrome_events(_trace(tracks, events)) if e["ph"] == "X"} == {
        GPU_PID_BASE,
        GPU_PID_BASE + 1,
        GPU_PID_BASE + 2,
    }
    # read back, the GPU work is on GPU 1 and the launch on host process 1
    again = load_trace(export_chrome(trace, tmp_path / "t.json"))
    assert sorted(again.event_device().tolist()) == [-1, 1, 1]
    cpu_tracks = again.tracks["kind"] == TrackKind.CPU
    assert again.tracks["device"][cpu_tracks].tolist() == [1]
    doc = json.loads((tmp_path / "t.json").read_text())
    assert len({e["pid"] for e in doc["traceEvents"]}) == 3
    assert np.array_equal(np.sort(again.dur_ns), [4, 4, 5])
