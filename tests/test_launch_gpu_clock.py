"""Launch cost on the GPU's own clock: the series that stand for the GPU are read from the
device's marks around the queued launches, never from the host's time to issue them. On a
fake device queue whose clock and the host's disagree by design, the GPU-clock series must
give the device's figure."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest

from perflab.capture import timer
from perflab.machine import launch
from perflab.machine._common import NoiseLog

LAUNCH_NS = 2_500.0  # what one launch costs the fake device, back to back
GRAPH_NODE_NS = 1_200.0  # what one node of a replayed graph costs it
HOST_NS = 30_000  # what the host spends issuing one launch (far more than the device)


class _QueuedDevice:
    """A device queue that is never idle: each piece of work moves its clock on by the
    work's length, so the marks around N launches are exactly N x LAUNCH_NS apart, while
    the host busy-waits HOST_NS to issue each launch."""

    name = "fake-queue"
    device = "fake GPU queue"
    asynchronous = True
    can_fill = True
    flushes = False

    def __init__(self) -> None:
        self.now = 0.0
        self.notes: list[str] = []
        self.setup: dict[str, object] = {}

    def launch(self) -> None:
        end = time.perf_counter_ns() + HOST_NS
        while time.perf_counter_ns() < end:
            pass
        self.now += LAUNCH_NS

    def mark(self) -> float:
        return self.now

    def elapsed_ns(self, start: object, end: object) -> float:
        assert isinstance(start, float) and isinstance(end, float)
        return end - start

    def reached(self, mark: object) -> bool:
        return False  # the queue is always ahead of the host

    def hold(self, ns: float) -> None:
        self.now += ns

    def spin(self, cycles: int) -> None:
        self.now += 1_000.0

    def flush(self) -> None:
        pass

    def sync(self) -> None:
        pass

    def capture_graph(self, fn: Callable[[], object], number: int) -> Callable[[], object]:
        def replay() -> None:
            self.now += number * GRAPH_NODE_NS

        return replay

    def close(self) -> None:
        pass


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> _QueuedDevice:
    """The fake queue stands for the CUDA clock; the host clock stays the host's."""
    queue = _QueuedDevice()
    host_clock = timer._make_clock

    def make(opts: timer.TimingOptions) -> object:
        return queue if opts.backend == "cuda" else host_clock(opts)

    monkeypatch.setattr(timer, "_make_clock", make)
    return queue


def test_gpu_series_are_the_device_window_over_n_not_the_host_time(
    device: _QueuedDevice,
) -> None:
    noise = NoiseLog()
    stream, graph = launch.gpu_clock_series(
        "empty", device.launch, (1, 10), (100, 1000), budget_ms=20, noise=noise, show=False
    )
    assert stream.name == "empty/stream, GPU clock" and stream.x_unit == "batch"
    assert graph.name == "empty/graph node, GPU clock" and graph.x_unit == "nodes"
    assert stream.x.tolist() == [1, 10] and graph.x.tolist() == [100, 1000]
    # the device's 2.5 us per launch, though the host took 30 us to issue each one
    np.testing.assert_allclose(stream.y, LAUNCH_NS / 1e3)
    np.testing.assert_allclose(graph.y, GRAPH_NODE_NS / 1e3)
    assert noise.points == 4  # each point went through the engine, its notes collected
    assert not noise.flagged["host-bound"]  # the queue was never idle: nothing flagged


def test_cpu_analog_names_its_series_as_host_clock_figures() -> None:
    result = launch.run(backend="cpu", batches=(10,), budget_ms=5, show_progress=False)
    assert [s.name for s in result.series] == ["python call", "torch op"]
    assert result.options["timer"] == "host clock"


def test_the_notes_say_which_series_is_which_clock() -> None:
    for name in (launch.GPU_STREAM, launch.GPU_GRAPH, launch.HOST_DISPATCH, launch.HOST_SYNC):
        assert f"'{name}'" in launch.METHOD_NOTE
    assert "GPU clock" in launch.GPU_STREAM and "host" in launch.HOST_DISPATCH
    assert "not measured here" in launch.REFERENCE_NOTE
