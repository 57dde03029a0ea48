"""Export a :class:`Trace` as Chrome trace-event JSON, which ui.perfetto.dev and
chrome://tracing open. Kineto-style ``cat`` names are used, and the allocator's events are
written as Kineto's ``[memory]`` instant events, so perflab reads it back."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import numpy as np
import numpy.typing as npt

from perflab.io.kineto.keys import MEMORY_EVENT
from perflab.model.serialize import json_safe, write_text
from perflab.model.trace import MEMCPY_DIRECTIONS, EventKind, Trace, TrackKind, distinct
from perflab.model.trace_keys import device_pairs

_CAT = {
    EventKind.KERNEL: "kernel",
    EventKind.MEMCPY: "gpu_memcpy",
    EventKind.MEMSET: "gpu_memset",
    EventKind.CPU_OP: "cpu_op",
    EventKind.RUNTIME: "cuda_runtime",
    EventKind.ANNOTATION: "user_annotation",
    EventKind.SYNC: "cuda_sync",
    EventKind.OTHER: "other",
    EventKind.PYTHON: "python_function",
}
GPU_PID_BASE = 1 << 40  # keeps GPU "processes" apart from host pids in the viewer


def track_pids(trace: Trace) -> npt.NDArray[np.int64]:
    """Per track: its Chrome ``pid``. Host tracks keep their process id; every (rank, GPU)
    pair gets a pid of its own from :data:`GPU_PID_BASE` up (skipping any host pid there),
    so no GPU shares a process with a host process or with another rank's GPU."""
    tracks = trace.tracks
    is_gpu = tracks["kind"] == TrackKind.GPU
    host = set(tracks["device"][~is_gpu].tolist())
    free = (p for p in itertools.count(GPU_PID_BASE) if p not in host)
    _, pair_of_track = device_pairs(trace)
    pid_of_pair = {pair: next(free) for pair in distinct(pair_of_track[is_gpu]).tolist()}
    gpu_pid = [pid_of_pair.get(pair, -1) for pair in pair_of_track.tolist()]
    return np.where(is_gpu, np.array(gpu_pid, dtype=np.int64), tracks["device"])


def _process_names(trace: Trace, pid: npt.NDArray[np.int64]) -> list[dict[str, object]]:
    """A ``process_name`` record per GPU pid: ``GPU 0``, ``rank 1 GPU 0``."""
    tracks = trace.tracks
    named: dict[int, str] = {}
    for t in np.flatnonzero(tracks["kind"] == TrackKind.GPU).tolist():
        rank, device = int(tracks["rank"][t]), int(tracks["device"][t])
        named.setdefault(int(pid[t]), f"rank {rank} GPU {device}" if rank else f"GPU {device}")
    return [
        {"ph": "M", "name": "process_name", "pid": p, "args": {"name": name}}
        for p, name in named.items()
    ]


def chrome_events(trace: Trace) -> list[dict[str, object]]:
    """The trace-event list: metadata naming every GPU process and every track, then one
    "X" event per row."""
    tracks = trace.tracks
    is_gpu = tracks["kind"] == TrackKind.GPU
    pid = track_pids(trace)
    out = _process_names(trace, pid)
    for t in range(len(tracks)):
        label = trace.track_label(t)
        if tracks["rank"][t]:
            label = f"rank {int(tracks['rank'][t])} {label}"
        out.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": int(pid[t]),
                "tid": int(tracks["stream"][t]),
                "args": {"name": label},
            }
        )
    extra = _extra_args(trace)
    # times relative to the first event: absolute epochs in float microseconds would lose
    # nanoseconds (the offset is kept in otherData.start_ns)
    start_us = (trace.start_ns - _origin(trace)) / 1000.0
    dur_us = trace.dur_ns / 1000.0
    names = trace.strings
    for i, (s, d, k, tr, n, c, x) in enumerate(
        zip(
            start_us.tolist(),
            dur_us.tolist(),
            trace.kind.tolist(),
            trace.track.tolist(),
            trace.name.tolist(),
            trace.correlation.tolist(),
            trace.external_id.tolist(),
            strict=True,
        )
    ):
        args: dict[str, object] = {}
        if c >= 0:
            args["correlation"] = c
        if x >= 0:
            args["External id"] = x
        if bool(is_gpu[tr]):
            args["device"] = int(tracks["device"][tr])
            args["stream"] = int(tracks["stream"][tr])
        args.update(extra.get(i, {}))
        out.append(
            {
                "ph": "X",
                "cat": _CAT[EventKind(k)],
                "name": names[n],
                "pid": int(pid[tr]),
                "tid": int(tracks["stream"][tr]),
                "ts": s,
                "dur": d,
                "args": args,
            }
        )
    return out


def memory_records(trace: Trace) -> list[dict[str, object]]:
    """The allocator's events (``trace.memory_events``) as Kineto writes them: a
    ``[memory]`` instant event on the thread that called the allocator (its pid and tid,
    as its CPU track names them), times from the same origin as the other events."""
    m = trace.memory_events.columns
    ts_us = (m["ts_ns"] - _origin(trace)) / 1000.0
    fields = zip(
        ts_us.tolist(),
        *(m[c].tolist() for c in ("pid", "tid", "addr", "bytes", "total_allocated")),
        *(m[c].tolist() for c in ("total_reserved", "device_type", "device_id")),
        strict=True,
    )
    return [
        {
            "ph": "i",
            "s": "t",
            "cat": "cpu_instant_event",
            "name": MEMORY_EVENT,
            "pid": pid,
            "tid": tid,
            "ts": ts,
            "args": _memory_args(addr, amount, allocated, reserved, device_type, device_id),
        }
        for ts, pid, tid, addr, amount, allocated, reserved, device_type, device_id in fields
    ]


def _memory_args(
    addr: int, amount: int, allocated: int, reserved: int, device_type: int, device_id: int
) -> dict[str, int]:
    args = {"Addr": addr, "Bytes": amount, "Total Allocated": allocated}
    if reserved >= 0:  # -1: the recording did not say
        args["Total Reserved"] = reserved
    args["Device Type"] = device_type
    args["Device Id"] = device_id
    return args


def _origin(trace: Trace) -> int:
    return int(trace.start_ns.min()) if len(trace) else 0


def _extra_args(trace: Trace) -> dict[int, dict[str, object]]:
    extra: dict[int, dict[str, object]] = {}
    kt = trace.kernels
    for row in range(len(kt)):
        ev = int(kt["event"][row])
        a = extra.setdefault(ev, {})
        if kt["grid_x"][row] >= 0:
            a["grid"] = [int(kt[c][row]) for c in ("grid_x", "grid_y", "grid_z")]
            a["block"] = [int(kt[c][row]) for c in ("block_x", "block_y", "block_z")]
        if kt["registers"][row] >= 0:
            a["registers per thread"] = int(kt["registers"][row])
        if kt["shared_mem"][row] >= 0:
            a["shared memory"] = int(kt["shared_mem"][row])
    mt = trace.memcpy
    for row in range(len(mt)):
        a = extra.setdefault(int(mt["event"][row]), {})
        a["bytes"] = int(mt["bytes"][row])
        a["direction"] = MEMCPY_DIRECTIONS[int(mt["direction"][row])]
    return extra


def export_chrome(trace: Trace, path: str | os.PathLike[str]) -> Path:
    doc = {
        "traceEvents": chrome_events(trace) + memory_records(trace),
        "displayTimeUnit": "ns",
        "deviceProperties": json_safe(trace.meta.get("devices", [])),
        "otherData": {
            "exported_by": "perflab",
            "source": str(trace.meta.get("source", "")),
            "start_ns": _origin(trace),
        },
    }
    return write_text(path, json.dumps(doc, allow_nan=False))
