"""A trace without GPU work (torch.profiler with CPU activities only): the summary says so
and shows what the host did (CPU ops by self and total time, threads, user ranges) in text,
HTML and JSON; ``perflab trace idle`` says there is no GPU timeline to find idle time in.
The GPU traces' summaries keep their shape."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from data_paths import TRACES

from perflab.analysis.idle_causes import IdleCauses, IdleWithoutGpu, idle_causes
from perflab.analysis.trace_stats import NO_GPU_WORK, STEP_RANGES, TOP_OPS
from perflab.cli import main
from perflab.io import load_trace
from perflab.render.views import to_bundle

# the keys of every trace summary's JSON document, in order ('host' follows for a CPU-only trace)
KEYS = ("events", "kernels", "devices", "comm", "memcpy", "categories", "idle")

CPU_TRACE = TRACES / "cpu" / "cpu_only_train.json.gz"
GPU_TRACE = TRACES / "kineto" / "alexnet_a100.json.gz"
NS = 0.002  # us: the file's times have three decimals of a microsecond


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        events: list[dict[str, Any]] = json.load(fh)["traceEvents"]
    return events


def _expected_ops(events: list[dict[str, Any]]) -> dict[str, tuple[int, float, float]]:
    """Per op name: calls, self time and total time (us), from the file by plain Python:
    an op's direct children are the ops on its thread it encloses that no enclosed op
    encloses."""
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]

    def encloses(a: dict[str, Any], b: dict[str, Any]) -> bool:
        return (
            a is not b
            and a["tid"] == b["tid"]
            and a["ts"] <= b["ts"]
            and b["ts"] + b["dur"] <= a["ts"] + a["dur"]
            and (a["dur"], -a["ts"]) > (b["dur"], -b["ts"])
        )

    table: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for op in ops:
        inside = [k for k in ops if encloses(op, k)]
        direct = [k for k in inside if not any(encloses(m, k) for m in inside)]
        row = table[op["name"]]
        row[0] += 1
        row[1] += op["dur"] - sum(k["dur"] for k in direct)
        row[2] += op["dur"]
    return {name: (int(c), s, t) for name, (c, s, t) in table.items()}


def test_summary_lists_the_host_ops_by_self_and_total_time() -> None:
    summary = load_trace(CPU_TRACE).summary()
    doc = summary.to_dict()
    assert list(doc) == [*KEYS, "host"]
    host = doc["host"]
    assert host["note"] == NO_GPU_WORK
    want = _expected_ops(_events(CPU_TRACE))
    assert host["ops"]["count"] == sum(c for c, _, _ in want.values()) == 467
    assert host["ops"]["distinct"] == len(want)
    top = host["ops"]["top"]
    assert len(top) == TOP_OPS
    by_self = sorted(want, key=lambda name: -want[name][1])
    assert [op["name"] for op in top] == by_self[:TOP_OPS]
    for op in top:
        calls, self_us, total_us = want[op["name"]]
        assert op["calls"] == calls
        assert op["self_us"] == pytest.approx(self_us, abs=NS * calls)
        assert op["total_us"] == pytest.approx(total_us, abs=NS * calls)
    # a parent's total holds its children; its self time does not
    conv = next(op for op in top if op["name"] == "aten::conv2d")
    assert conv["total_us"] > 2 * conv["self_us"]


def test_summary_lists_threads_and_ranges() -> None:
    host = load_trace(CPU_TRACE).summary().to_dict()["host"]
    threads = host["threads"]
    assert [t["ops"] for t in threads] == [459, 8]  # the training loop, then the loader
    assert all(t["thread"].startswith("thread ") for t in threads)
    for t in threads:
        assert 0 < t["in_ops_us"] <= t["span_us"]
    ranges = {r["name"]: r for r in host["ranges"]["top"]}
    assert ranges[STEP_RANGES]["count"] == 3  # ProfilerStep#1..3 as one name
    for name in ("train_step", "forward", "backward", "optimizer"):
        assert ranges[name]["count"] == 3
    assert ranges["load_batch"]["count"] == 1  # the loader thread's record_function
    steps = [e for e in _events(CPU_TRACE) if e["name"].startswith("ProfilerStep#")]
    assert ranges[STEP_RANGES]["total_us"] == pytest.approx(sum(e["dur"] for e in steps), abs=NS)


def test_text_and_html_say_there_is_no_gpu_work_and_show_the_host() -> None:
    summary = load_trace(CPU_TRACE).summary()
    text = str(summary)
    lines = text.splitlines()
    assert lines[1].startswith(NO_GPU_WORK)
    assert "categories:" not in text  # no blank line of kernel categories
    assert "threads: 2" in text and "aten::convolution_backward" in text
    assert "ProfilerStep#*" in text and "train_step" in text
    html = to_bundle(summary)["text/html"]
    assert NO_GPU_WORK in html and "aten::mkldnn_convolution" in html
    assert "<th>busy %</th>" not in html.replace('class="l"', "")  # no empty device table


def test_cli_summary_and_idle_on_a_cpu_only_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "summary", str(CPU_TRACE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["host"]["note"] == NO_GPU_WORK
    assert main(["trace", "idle", str(CPU_TRACE)]) == 0
    out = capsys.readouterr().out
    assert "no GPU timeline to find idle time in" in out and "0 gaps" not in out
    assert main(["trace", "idle", str(CPU_TRACE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gaps"] == [] and "no GPU timeline" in doc["no_gpu_work"]
    assert main(["trace", "kernels", str(CPU_TRACE), "-n", "3"]) == 0
    assert "aten::convolution_backward" in capsys.readouterr().out


def test_gpu_traces_keep_their_summary_and_idle_answer() -> None:
    trace = load_trace(GPU_TRACE)
    summary = trace.summary()
    assert summary.host is None and list(summary.to_dict()) == list(KEYS)
    found = idle_causes(trace)
    assert type(found) is IdleCauses and len(found) > 0
    assert isinstance(idle_causes(load_trace(CPU_TRACE)), IdleWithoutGpu)


def test_a_cpu_profile_recorded_here_is_summarised_from_its_own_events(tmp_path: Path) -> None:
    """Recorded now with torch.profiler (CPU only): the summary's ops are the exported file's,
    worked out by plain Python. (torch's own key_averages differs on purpose: it drops an op
    nested in one of its own name, as aten::sum's overloads are.)"""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(32, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            with record_function("step"):
                model(x).sum().backward()
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    with path.open() as fh:
        want = _expected_ops(json.load(fh)["traceEvents"])
    host = load_trace(path).summary().to_dict()["host"]
    step = host["ranges"]["top"][0]
    assert (step["name"], step["count"]) == ("step", 2)
    assert host["ops"]["distinct"] == len(want)
    for op in host["ops"]["top"]:
        calls, self_us, total_us = want[op["name"]]
        assert (op["calls"], op["self_us"], op["total_us"]) == (
            calls,
            pytest.approx(self_us, abs=NS * calls),
            pytest.approx(total_us, abs=NS * calls),
        )


HTA_CPU_TRACE = TRACES / "cpu" / "hta_cpu_only_rank34.pt.trace.json.gz"


def test_htas_own_cpu_only_trace_is_summarised_from_its_events() -> None:
    """Holistic Trace Analysis's cpu_only test trace (a gloo job's rank 34): 4 aten::empty
    calls on the main thread and ten gloo:all_reduce ranges, as the file holds them."""
    events = _events(HTA_CPU_TRACE)
    host = load_trace(HTA_CPU_TRACE).summary().to_dict()["host"]
    assert host["note"] == NO_GPU_WORK
    (empty,) = host["ops"]["top"]
    want = _expected_ops(events)
    assert empty["name"] == "aten::empty" and empty["calls"] == want["aten::empty"][0] == 4
    assert empty["self_us"] == pytest.approx(want["aten::empty"][1], abs=NS * 4)
    ranges = {r["name"]: r for r in host["ranges"]["top"]}
    reduces = [e for e in events if e.get("name") == "gloo:all_reduce"]
    assert ranges["gloo:all_reduce"]["count"] == len(reduces) == 10
    assert ranges["gloo:all_reduce"]["total_us"] == pytest.approx(
        sum(e["dur"] for e in reduces), abs=NS * 10
    )
    assert len(host["threads"]) == 3
