"""Trace.memory(): checked against the truth of generated training runs (kineto_gen's memory
story, whose every allocation carries its category) and against an independent reading of a
real CPU trace's JSON; its views and ``perflab trace memory``."""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from data_paths import TRACES
from kineto_gen import (
    CPU_DEVICE,
    CUDA,
    FACTORY_OPS,
    LEAK,
    MemoryStory,
    memory_document,
    memory_trace,
)

from perflab.analysis.memory import BEFORE, NO_MEMORY, RULES, MemoryReport
from perflab.cli import main
from perflab.errors import InputError
from perflab.io import load_trace
from perflab.io.kineto import loads_kineto
from perflab.model.memory import MAX_BYTES, MEMORY_COLUMNS
from perflab.model.trace import Table, Trace
from perflab.render.views import to_bundle, to_text

REAL = TRACES / "cpu" / "cpu_memory_train.json.gz"


def _report(story: MemoryStory) -> MemoryReport:
    return loads_kineto(json.dumps(memory_document(story)).encode()).memory()


def _device(report: MemoryReport, device: tuple[int, int]) -> Any:
    return next(d for d in report.devices if (d.device_type, d.device_id) == device)


def _rows(rows: Any) -> dict[str, tuple[int, int]]:
    return {r.name: (r.bytes, r.count) for r in rows}


# -- the generated training runs ---------------------------------------------------------


@pytest.mark.parametrize(("steps", "layers"), [(4, 3), (3, 1), (6, 2)])
def test_the_figures_of_a_generated_run_are_exact(steps: int, layers: int) -> None:
    story = memory_trace(steps=steps, layers=layers)
    report = _report(story)
    assert [(d.device_type, d.device_id) for d in report.devices] == [CPU_DEVICE, CUDA]
    for device in (CUDA, CPU_DEVICE):
        truth, found = story.truth(device), _device(report, device)
        assert found.peak_allocated == truth.peak
        assert found.peak_op == truth.peak_op
        assert found.peak_ns == int(found.time_ns[truth.peak_index])
        assert _rows(found.live_at_peak) == truth.live_by_op
        assert _rows(found.by_category) == truth.live_by_category
        assert sum(r.bytes for r in found.live_at_peak) == found.peak_allocated
        assert sum(r.bytes for r in found.by_category) == found.peak_allocated
        assert found.final_allocated == truth.final_allocated
        assert found.unfollowed == 0
    gpu, truth = _device(report, CUDA), story.truth(CUDA)
    assert gpu.reserved_at_peak == truth.reserved_at_peak
    assert gpu.final_reserved == truth.final_reserved
    assert gpu.fragmentation == truth.reserved_at_peak - truth.peak > 0
    cpu = _device(report, CPU_DEVICE)
    assert cpu.reserved_at_peak == cpu.fragmentation == cpu.final_reserved == -1  # not tracked
    leak = [(g.device, g.op, g.bytes_per_step, g.steps, g.total_bytes) for g in report.growth]
    assert leak == [("CUDA 0", "aten::clone", LEAK, steps, steps * LEAK)]


def test_the_peak_of_the_default_run_holds_every_category() -> None:
    """The generated run is built so that the peak (the softmax's temporary in the last
    step) holds memory of every category: each rule is exercised there."""
    gpu = _device(_report(memory_trace()), CUDA)
    assert gpu.peak_op == "aten::softmax"
    assert [r.name for r in gpu.by_category] == list(RULES)
    assert BEFORE in _rows(gpu.live_at_peak)
    assert not set(_rows(gpu.live_at_peak)) & set(FACTORY_OPS)  # the ops that asked, named


def test_growth_needs_three_steps() -> None:
    report = _report(memory_trace(steps=2))
    assert report.growth == ()
    assert any("3 ProfilerStep ranges" in note for note in report.notes)


def test_memory_allocated_in_one_step_only_is_not_growth() -> None:
    """Adam's state and the gradients are made once and kept: not growth, unlike the leak."""
    ops = {g.op for g in _report(memory_trace(steps=5)).growth}
    assert ops == {"aten::clone"}


def test_json_has_the_documented_keys() -> None:
    doc = _report(memory_trace()).to_dict()
    json.dumps(doc, allow_nan=False)
    device = doc["devices"][1]
    assert {
        "device",
        "peak_allocated_bytes",
        "peak_ns",
        "peak_op",
        "live_at_peak",
        "final_allocated_bytes",
        "final_reserved_bytes",
    } <= set(device)
    assert set(device["live_at_peak"][0]) == {"op", "bytes", "count"}
    assert set(doc["growth"][0]) >= {"op", "bytes_per_step"}
    assert doc["devices"][0]["final_reserved_bytes"] is None  # the CPU's is not recorded


# -- a real trace, read independently from its JSON ----------------------------------------


def _json_truth(path: Path) -> dict[str, Any]:
    """The figures worked out from the JSON by brute force: the peak of Total Allocated,
    what was live there by address, the innermost op (past the bare allocating ops) around
    each allocation, never-freed bytes per ProfilerStep."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    ops = [
        e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
    ]
    steps = [e for e in ops if e["name"].startswith("ProfilerStep#")]

    def op_of(e: dict[str, Any]) -> str:
        around = [
            o for o in ops if o["tid"] == e["tid"] and o["ts"] <= e["ts"] < o["ts"] + o["dur"]
        ]
        around.sort(key=lambda o: (o["ts"], -o["dur"]))  # outermost first
        named = [o for o in around if o["name"] not in FACTORY_OPS]
        return (named or around)[-1]["name"] if around else "(outside any op)"

    totals = [e["args"]["Total Allocated"] for e in memory]
    peak = totals.index(max(totals))
    live: dict[int, tuple[int, dict[str, Any]]] = {}
    for i, e in enumerate(memory):
        amount, addr = e["args"]["Bytes"], e["args"]["Addr"]
        if amount > 0:
            live[addr] = (i, e)
        else:
            live.pop(addr, None)
        if i == peak:
            at_peak = dict(live)
    by_op: dict[str, list[int]] = {}
    for _, e in at_peak.values():
        row = by_op.setdefault(op_of(e), [0, 0])
        row[0] += e["args"]["Bytes"]
        row[1] += 1
    never_freed: dict[str, list[int]] = {}
    for _, e in live.values():
        inside = [s for s in steps if s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        if inside:
            per_step = never_freed.setdefault(op_of(e), [0] * len(steps))
            per_step[sorted(steps, key=lambda s: s["ts"]).index(inside[0])] += e["args"]["Bytes"]
    return {
        "peak": totals[peak],
        "peak_ns": round(memory[peak]["ts"] * 1000),
        "peak_op": op_of(memory[peak]),
        "by_op": {k: tuple(v) for k, v in by_op.items()},
        "final": totals[-1],
        "never_freed": never_freed,
    }


def test_a_real_cpu_trace_agrees_with_a_reading_of_its_json() -> None:
    truth = _json_truth(REAL)
    report = load_trace(REAL).memory()
    (cpu,) = report.devices
    assert cpu.label == "CPU"
    assert cpu.peak_allocated == truth["peak"]
    assert cpu.peak_ns == truth["peak_ns"]
    assert cpu.peak_op == truth["peak_op"]
    assert _rows(cpu.live_at_peak) == truth["by_op"]
    assert sum(truth["by_op"][k][0] for k in truth["by_op"]) == truth["peak"]  # no baseline
    assert cpu.final_allocated == truth["final"]
    assert report.steps == 3
    # the loop keeps each step's logits (32 x 10 float32): every step leaves 1,280 bytes
    grows = {op: s for op, s in truth["never_freed"].items() if all(b > 0 for b in s[:-1])}
    assert [(g.op, g.bytes_per_step) for g in report.growth] == [
        (op, sorted(s[:-1])[(len(s) - 2) // 2]) for op, s in grows.items()
    ]
    assert [(g.op, g.bytes_per_step) for g in report.growth] == [("aten::addmm", 1280)]


# -- no memory events, and amounts that could wrap --------------------------------------


def test_a_trace_without_memory_events_says_so_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    path = TRACES / "kineto" / "alexnet_a100.json.gz"
    report = load_trace(path).memory()
    assert report.devices == () and report.growth == ()
    assert to_text(report).splitlines()[-1] == NO_MEMORY
    assert main(["trace", "memory", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["devices"] == [] and doc["notes"] == [NO_MEMORY]


def _trace_with_memory(amounts: list[int], totals: list[int]) -> Trace:
    n = len(amounts)
    columns = {
        "ts_ns": np.arange(n, dtype=np.int64) * 10,
        "pid": np.ones(n, np.int64),
        "tid": np.ones(n, np.int64),
        "addr": np.arange(n, dtype=np.int64) + 4096,
        "bytes": np.array(amounts, np.int64),
        "total_allocated": np.array(totals, np.int64),
        "total_reserved": np.zeros(n, np.int64),
        "device_type": np.ones(n, np.int8),
        "device_id": np.zeros(n, np.int32),
    }
    assert set(columns) == set(MEMORY_COLUMNS)
    empty = load_trace(TRACES / "kineto" / "triton_example_a100.json.gz")
    return Trace(
        empty.events, empty.tracks, empty.strings, memory_events=Table(MEMORY_COLUMNS, columns)
    )


def test_amounts_that_would_wrap_an_int64_are_refused() -> None:
    n = 2048  # 2048 x 2**53 = 2**64: a running sum in int64 would wrap
    trace = _trace_with_memory([MAX_BYTES] * n, [MAX_BYTES] * n)
    with pytest.raises(InputError, match="more than 2\\*\\*62"):
        trace.memory()
    fine = _trace_with_memory([MAX_BYTES] * 256, [MAX_BYTES] * 256).memory()
    assert fine.devices[0].peak_allocated == MAX_BYTES


def test_totals_that_do_not_follow_the_bytes_are_said() -> None:
    report = _trace_with_memory([100, 100, -100], [100, 300, 200]).memory()
    assert report.devices[0].unfollowed == 1
    assert any("does not follow" in note for note in report.notes)
    # 300 at the peak where the two live allocations hold 200: the other 100 shows as
    # memory from before the trace, so the rows add up
    assert not any("add up to" in note for note in report.notes)
    assert _rows(report.devices[0].live_at_peak)["(allocated before the trace)"] == (100, 0)


def test_live_rows_that_exceed_the_peak_are_said() -> None:
    """A total below what the live allocations hold (their bytes disagree with it)."""
    report = _trace_with_memory([100, 100], [100, 150]).memory()
    assert any("add up to 200 bytes, not its 150" in note for note in report.notes)


# -- views and the command ----------------------------------------------------------------


def test_views_escape_names_and_draw_the_curves() -> None:
    story = memory_trace()
    doc = memory_document(story)
    for event in doc["traceEvents"]:
        if event.get("name") == "aten::softmax":
            event["name"] = "<script>alert(1)</script>\x1b[31m"
    report = loads_kineto(json.dumps(doc).encode()).memory()
    bundle = to_bundle(report)
    html, svg, text = bundle["text/html"], bundle["image/svg+xml"], bundle["text/plain"]
    assert isinstance(html, str) and isinstance(svg, str) and isinstance(text, str)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<script>" not in svg and "\x1b" not in text
    root = ElementTree.fromstring(svg)  # well-formed
    paths = [p for p in root.iter("{http://www.w3.org/2000/svg}path")]
    assert len(paths) == 3  # the GPU's reserved and allocated curves, the CPU's allocated
    assert "peak" in text and "aten::clone" in text and "growth" in text
    assert "data:image/svg+xml;base64," in html


def test_a_long_curve_is_drawn_in_a_bounded_picture() -> None:
    """A step per pixel column, whatever the number of events."""
    n = 200_000
    amounts = [512 if i % 2 == 0 else -512 for i in range(n)]
    totals = list(np.cumsum(amounts))
    svg = to_bundle(_trace_with_memory(amounts, totals).memory())["image/svg+xml"]
    assert isinstance(svg, str) and len(svg) < 100_000


def test_the_command_prints_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "memory", str(REAL)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("where the memory went") and "CPU: peak" in out
    assert main(["trace", "memory", str(REAL), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["devices"][0]["peak_op"] == _json_truth(REAL)["peak_op"]
    assert doc["growth"] == [
        {
            "device": "CPU",
            "op": "aten::addmm",
            "bytes_per_step": 1280,
            "steps": 3,
            "total_bytes": 3840,
        }
    ]


def test_the_command_on_a_bad_file_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        '{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Bytes": "x"}}]}'
    )
    assert main(["trace", "memory", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and str(path) in err and "Traceback" not in err
    assert main(["trace", "memory", str(REAL), "--top", "-1"]) == 2
