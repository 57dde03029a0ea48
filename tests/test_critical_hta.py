"""perflab's critical path against Holistic Trace Analysis's own, on HTA's test data
(tests/data/traces/hta_critical_path/, whose README lists where the two disagree and why):
which kernels, copies and host events are critical, where both can say."""

from __future__ import annotations

import gzip
import json

import numpy as np
from data_paths import TRACES

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.critical_graph import build_graph, rank_graph
from perflab.analysis.critical_path import CriticalPaths, critical_path
from perflab.analysis.critical_walk import KINDS
from perflab.io import load_trace

HTA = TRACES / "hta_critical_path"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATS = ("cpu_op", "cuda_runtime")
Key = tuple[str, int]  # (name, start in ns)


def _events(path: str) -> list[dict]:  # type: ignore[type-arg]
    doc = json.loads(gzip.decompress((HTA / path).read_bytes()))
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def _key(e: dict) -> Key:  # type: ignore[type-arg]
    return (e["name"], round(e["ts"] * 1000))


def _on_path(result: CriticalPaths, events: list[dict], kinds: tuple[str, ...]) -> set[Key]:  # type: ignore[type-arg]
    """The events that a stretch of the path of ``kinds`` overlaps (a host event is on the
    path when the path runs through any of its time, its children's included)."""
    path = result.steps[0].path
    keep = np.isin(path.kind, [i for i, k in enumerate(KINDS) if k in kinds])
    start, end = path.start[keep], path.start[keep] + path.dur[keep]
    order = np.argsort(start)
    start, end = start[order], end[order]
    out = set()
    for e in events:
        a, b = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
        i = np.searchsorted(end, a, side="right")
        if i < len(start) and start[i] < b:
            out.add(_key(e))
    return out


def test_simple_add_agrees_with_htas_path_where_both_can_say() -> None:
    trace = load_trace(HTA / "simple_add.json.gz")
    result = critical_path(trace)
    assert [s.step for s in result.steps] == ["whole recording"]  # as HTA's end-to-end test
    events = _events("simple_add_hta_critical.json.gz")
    critical = [e for e in events if e.get("args", {}).get("critical")]
    hta_gpu = {_key(e) for e in critical if e["cat"] in GPU_CATS}
    hta_host = {_key(e) for e in critical if e["cat"] in HOST_CATS}
    ours_gpu = _on_path(result, [e for e in events if e["cat"] in GPU_CATS], ("kernel", "copy"))
    ours_host = _on_path(result, [e for e in events if e["cat"] in HOST_CATS], ("host", "launch"))
    copies = {_key(e) for e in events if e["cat"] == "gpu_memcpy"}
    assert len(copies) == 16 and copies <= hta_gpu and copies <= ours_gpu
    assert ours_gpu <= hta_gpu
    assert hta_host <= ours_host and len(hta_host) == 602
    # what only HTA marks: GPU work the next device sync did not wait for
    only_hta = hta_gpu - ours_gpu
    assert len(only_hta) == 6
    done = max(round((e["ts"] + e["dur"]) * 1000) for e in events if _key(e) in only_hta)
    sync = min(
        round(e["ts"] * 1000)
        for e in events
        if e["name"] == "cudaDeviceSynchronize" and round(e["ts"] * 1000) > done
    )
    assert sync - done > 200_000  # the GPU was idle 235 us before the sync began


def test_a_sync_that_waited_puts_the_work_it_waited_for_on_the_path() -> None:
    """HTA's event-sync test: the syncs of the step get sync edges; here the
    cudaEventSynchronize waited for the spin kernel, which is therefore critical."""
    result = critical_path(load_trace(HTA / "event_sync.json.gz"))
    assert result.graph["edges"]["sync"] >= 3
    step = result.steps[0]
    assert step.step == "ProfilerStep#100"
    names = {e["name"] for e in step.entries() if e["kind"] == "kernel"}
    assert names == {"at::cuda::(anonymous namespace)::spin_kernel(long)"}
    assert int(step.path.dur.sum()) == step.duration_ns


def test_a_recorded_stream_wait_ties_the_streams() -> None:
    """HTA's multi-stream test matches each cudaStreamWaitEvent to its cudaEventRecord."""
    trace = load_trace(HTA / "event_sync_multi_stream.json.gz")
    g = build_graph([rank_graph(trace)])
    waits = np.flatnonzero(g.edge_kind == gpu.STREAM_WAIT)
    assert len(waits) == 1
    part = g.parts[0]
    n_host = len(part.host)
    src, dst = int(g.src[waits[0]]) - n_host, int(g.dst[waits[0]]) - n_host
    assert part.gpu.lane[src] != part.gpu.lane[dst]  # another stream
    assert g.end[g.src[waits[0]]] <= g.start[g.dst[waits[0]]]


def test_alexnet_syncs_and_stream_waits() -> None:
    """HTA's inter-stream test on its AlexNet trace: sync dependencies exist."""
    result = critical_path(load_trace(TRACES / "kineto" / "alexnet_a100.json.gz"))
    assert result.graph["edges"]["sync"] > 0
    assert result.graph["edges"]["stream wait"] == 20  # its 20 Stream Wait Event records
    step = result.steps[0]
    assert int(step.path.dur.sum()) == step.duration_ns
