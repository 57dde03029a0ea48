"""What notebooks/20-the-critical-path-of-a-step.ipynb teaches holds for the analysis it shows:
the tiny step's path and what-ifs are the hand arithmetic, every replay at a factor of zero stays
within Amdahl's bound read off the path, and the recorded traces give the numbers its text
states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_paths import ROOT, TRACES

from perflab.analysis.critical_path import CriticalPaths, critical_path
from perflab.io import load_trace
from perflab.model.trace import Trace

H200 = ROOT / "notebooks/recordings/h200/16-training/train-steps.json.gz"
A100 = TRACES / "kineto/nccl_2ranks_a100.json.gz"
# the notebook's tiny step, in us: (category, name, start, duration, stream or None, args)
TINY = [
    ("user_annotation", "ProfilerStep#1", 0, 200, None, {}),
    ("cpu_op", "aten::mm", 0, 15, None, {}),
    ("cuda_runtime", "cudaLaunchKernel", 10, 5, None, {"correlation": 1}),
    ("kernel", "gemm", 20, 100, 7, {"correlation": 1}),
    ("cuda_runtime", "cudaEventRecord", 15, 2, None, {"correlation": 2}),
    ("cuda_runtime", "cudaStreamWaitEvent", 17, 2, None, {"correlation": 3}),
    ("cuda_sync", "Stream Wait Event", 18, 1, 20, {"correlation": 3}),
    ("cpu_op", "aten::softmax", 19, 6, None, {}),
    ("cuda_runtime", "cudaLaunchKernel", 20, 5, None, {"correlation": 4}),
    ("kernel", "softmax", 120, 30, 20, {"correlation": 4}),
    ("cpu_op", "aten::item", 25, 135, None, {}),
    ("cuda_runtime", "cudaMemcpyAsync", 30, 130, None, {"correlation": 5}),
    ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 150, 4, 20, {"correlation": 5}),
    ("cpu_op", "log_metrics", 160, 40, None, {}),
]
# each change at zero, and the path's kinds it removes ("launch call": a launch stretch that
# is the call itself, host work; "call -> work" stretches are recorded lags no change scales)
GROUPS = {
    "host=0": ("host", "launch call"),
    "kernels=0": ("kernel", "copy"),
    "comm=0": ("collective", "collective transfer"),
}


def _tiny(tmp_path: Path) -> Trace:
    events = []
    for cat, name, ts, dur, stream, args in TINY:
        where = {"pid": 100, "tid": 1} if stream is None else {"pid": 0, "tid": stream}
        extra = {} if stream is None else {"device": 0, "stream": stream}
        events.append(
            {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **where}
            | {"args": {**args, **extra}}
        )
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return load_trace(path)


def _shares(paths: CriticalPaths) -> dict[str, float]:
    """The share of every step's path by kind, a launch stretch split into its call (host
    work) and its latency (``call -> work``)."""
    total: dict[str, float] = {}
    for step in paths.steps:
        for e in step.entries():
            kind = e["kind"]
            if kind == "launch":
                kind = "launch latency" if " -> " in e["name"] else "launch call"
            total[kind] = total.get(kind, 0.0) + e["dur_ns"]
    whole = sum(s.duration_ns for s in paths.steps)
    return {k: ns / whole for k, ns in total.items()}


def test_the_tiny_steps_path_and_what_ifs_are_the_hand_arithmetic(tmp_path: Path) -> None:
    paths = critical_path(_tiny(tmp_path), what_if=["kernels=0.5", "host=0.5"])
    found = [(e["kind"], e["name"], e["dur_ns"] // 1000) for e in paths.steps[0].entries()]
    assert found == [
        ("host", "aten::mm", 10),
        ("launch", "cudaLaunchKernel -> gemm", 10),
        ("kernel", "gemm", 100),
        ("kernel", "softmax", 30),
        ("copy", "Memcpy DtoH (Device -> Pageable)", 4),
        ("launch", "cudaMemcpyAsync", 6),
        ("host", "log_metrics", 40),
    ]
    assert paths.steps[0].duration_ns == 200_000
    # GPU work halved: 10 + 10 + 50 + 15 + 2 + 6 + 40; host halved, the launch's lag kept:
    # 5 + 10 + 100 + 30 + 4 + 3 + 20
    assert [w["mean_step_ns"] for w in paths.what_if] == [133_000, 172_000]


@pytest.mark.parametrize("source", ["tiny", "h200", "a100"])
def test_no_replay_beats_amdahls_bound_read_off_the_path(source: str, tmp_path: Path) -> None:
    trace = {"tiny": lambda: _tiny(tmp_path), "h200": lambda: load_trace(H200)}.get(
        source, lambda: load_trace(A100)
    )()
    paths = critical_path(trace, what_if=list(GROUPS))
    shares = _shares(paths)
    for w in paths.what_if:
        f = sum(shares.get(kind, 0.0) for kind in GROUPS[w["change"]])
        floor = paths.mean_step_ns * (1 - f)  # the old path with that work free
        assert w["mean_step_ns"] >= floor * (1 - 1e-9), (w, f)


def test_the_recorded_traces_give_the_numbers_notebook_20_states() -> None:
    h200 = critical_path(
        load_trace(H200), what_if=["host=0.5", "kernels=0.5", "kernel:Pageable=0", "kernels=0"]
    )
    shares = _shares(h200)
    assert {k: round(v, 3) for k, v in shares.items()} == {
        "host": 0.792,
        "launch call": 0.121,
        "copy": 0.081,
        "launch latency": 0.006,
    }
    mean = h200.mean_step_ns
    assert round(mean / 1e6, 1) == 35.6
    change = {w["change"]: round(w["mean_step_ns"] / mean - 1, 3) for w in h200.what_if}
    assert change == {
        "host=0.5": -0.456,
        "kernels=0.5": -0.04,
        "kernel:Pageable=0": -0.081,
        "kernels=0": -0.081,
    }
    a100 = critical_path(load_trace(A100), what_if=["comm=0.5", "host=0.5", "host=0.5,comm=0.5"])
    assert set(_shares(a100)) == {"host", "launch call"}
    change = {
        w["change"]: round(w["mean_step_ns"] / a100.mean_step_ns - 1, 3) for w in a100.what_if
    }
    assert change == {"comm=0.5": 0.0, "host=0.5": -0.5, "host=0.5,comm=0.5": -0.5}
