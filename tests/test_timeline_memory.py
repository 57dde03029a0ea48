"""The timeline's memory lane: its curves are the memory report's, point for point (or, past
the page's budget, those points that keep the envelope and the peak), each point with its op;
absent where the trace has no memory events."""

from __future__ import annotations

import json

import numpy as np
import pytest
from data_paths import TRACES
from kineto_gen import memory_document, memory_trace

from perflab.analysis.memory import memory_report
from perflab.io import load_trace
from perflab.io.kineto import loads_kineto
from perflab.model.trace import Trace
from perflab.render import timeline_memory
from perflab.render.timeline_memory import memory_curves, thinned

CPU_MEMORY = TRACES / "cpu" / "cpu_memory_train.json.gz"
NO_MEMORY = TRACES / "kineto" / "alexnet_a100.json.gz"


def generated() -> Trace:
    """The generated training run: a GPU's memory (allocated and reserved) and the CPU's."""
    return loads_kineto(json.dumps(memory_document(memory_trace())).encode())


@pytest.mark.parametrize("make", [lambda: load_trace(CPU_MEMORY), generated], ids=["cpu", "gen"])
def test_the_curves_are_the_reports(make: object) -> None:
    trace = make()  # type: ignore[operator]
    origin = int(trace.start_ns.min())
    report = memory_report(trace)
    curves = memory_curves(trace, origin)
    assert [c.label for c in curves] == [d.label for d in report.devices]
    for c, d in zip(curves, report.devices, strict=True):
        assert np.array_equal(c.index, np.arange(len(d.time_ns)))  # every point
        assert np.array_equal(np.rint(c.t_ms * 1e6).astype(np.int64) + origin, d.time_ns)
        assert np.array_equal(c.allocated, d.allocated)
        assert np.array_equal(c.reserved, d.reserved)
        assert (c.peak_bytes, c.peak_op) == (d.peak_allocated, d.peak_op)
        assert c.reserved_known == (d.reserved_at_peak >= 0)
        # the op of the point that reached the peak is the report's op of the peak
        at_peak = int(np.argmax(c.allocated))
        assert c.ops[at_peak] == d.peak_op
        assert len(c.ops) == len(c.t_ms)


def test_the_generated_gpu_curve_knows_its_reserved_bytes() -> None:
    curves = {c.label: c for c in memory_curves(generated(), 0)}
    gpu = next(c for label, c in curves.items() if label.startswith("CUDA"))
    assert gpu.reserved_known and (gpu.reserved >= gpu.allocated).all()
    assert not curves["CPU"].reserved_known if "CPU" in curves else True


def test_a_thinned_curve_keeps_the_envelope_and_the_peak() -> None:
    rng = np.random.default_rng(1)
    n = 50_000
    t = np.cumsum(rng.integers(1, 1000, n)).astype(np.int64)
    value = np.cumsum(rng.integers(-100, 101, n)).astype(np.int64) + 10**6
    keep = thinned(t, value, 2000)
    assert len(keep) <= 2000 and (np.diff(keep) > 0).all()
    assert {0, n - 1, int(np.argmax(value)), int(np.argmin(value))} <= set(keep.tolist())
    assert np.array_equal(thinned(t[:100], value[:100], 2000), np.arange(100))


def test_a_long_curve_is_thinned_for_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = load_trace(CPU_MEMORY)
    monkeypatch.setattr(timeline_memory, "MAX_POINTS", 40)
    [cpu] = memory_curves(trace, 0)
    [device] = memory_report(trace).devices
    assert len(cpu.index) <= 40
    assert np.array_equal(cpu.allocated, device.allocated[cpu.index])
    assert cpu.allocated.max() == device.peak_allocated


def figures(view: object) -> list[str]:
    """The titles of the page's figures, top to bottom."""
    layout = view.layout  # type: ignore[attr-defined]
    return [str(child.title.text) for child in layout.children]


def test_the_lane_is_drawn_only_for_memory_events() -> None:
    with_memory = load_trace(CPU_MEMORY).timeline()
    titles = figures(with_memory)
    assert len(titles) == 3 and titles[2].startswith("memory:")
    assert "memory lane (allocated, reserved): CPU peak" in with_memory.text
    assert len(figures(load_trace(CPU_MEMORY).timeline(memory=False))) == 2
    without = load_trace(NO_MEMORY)
    assert memory_curves(without, 0) == []
    assert len(figures(without.timeline())) == 2
    assert "memory lane" not in without.timeline().text
