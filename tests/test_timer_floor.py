"""An empty sample's window and the clock's tick, and the hot (batched) measurement, on
the host clock and the host queue (the analog of a GPU stream). The CUDA side runs in
test_timing_gpu.py through the same functions."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np
import pytest

from perflab.capture import timer
from perflab.capture.timer import (
    EMPTY_WINDOW_FACTOR,
    HOT_MIN_BATCH_NS,
    HostClock,
    HostQueueClock,
    TimingOptions,
    _back_to_back_per_call,
    _plan,
    clock_step,
    empty_step,
    empty_window,
    hot_batch,
    take_samples,
    time_function,
    timer_steps,
    timer_tick,
    timer_warnings,
)
from perflab.errors import InputError
from perflab.model import stats
from perflab.model.timing import TimingResult


@pytest.fixture
def queue_clock() -> Any:
    clock = HostQueueClock()
    yield clock
    clock.close()


@pytest.fixture
def fake_host_timer(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make the host clock's empty window and tick whatever a test sets (in ns)."""
    steps: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    monkeypatch.setattr(timer, "_TIMER_STEPS", steps)
    key = ("HostClock", HostClock(flush=False).device)

    def set_steps(empty_window_ns: float | None, tick_ns: float | None) -> None:
        steps[key] = (empty_window_ns, tick_ns)

    return set_steps


# --- measuring them -----------------------------------------------------------------------


def test_clock_step_is_the_tick_of_whole_ns_readings_else_the_least_gap_between_readings() -> None:
    # perf_counter_ns: a reading costs ~20 ns, but the readings step by 1 ns
    assert clock_step([21, 20, 22, 0, 40]) == 1.0
    assert clock_step([0, 100, 200, 0, 300]) == 100.0  # a 100 ns tick
    # CUDA events: float milliseconds, steps of about 0.5 us
    assert clock_step([0.0, 512.0000237, 0.0, 1024.0000475]) == pytest.approx(512.0000237)
    # an H200's back-to-back events: ~1.2 us apart (recording one), readings in 32 ns steps
    assert clock_step([1215.9999459, 1248.0000257, 1216.0000001, 1280.0000012]) == 32.0
    assert clock_step([1215.9999459, 1215.9999459]) == pytest.approx(1215.9999459)
    assert clock_step([0, 0, 0]) is None
    assert clock_step([math.nan, -5.0]) is None


def test_host_clock_empty_window_and_tick_are_measured_once() -> None:
    clock = HostClock(flush=False)
    empty, tick = timer_steps(clock)
    assert empty is not None and 0 < empty < 1e6  # an empty window: two readings
    assert tick is not None and 0 < tick <= empty
    info = __import__("time").get_clock_info("perf_counter")
    assert tick >= info.resolution * 1e9 * 0.999  # never finer than the clock says
    assert timer_steps(HostClock(flush=False)) == (empty, tick)  # cached per process


def test_queue_empty_window_is_an_empty_work_item_behind_the_filler(queue_clock: Any) -> None:
    empty = empty_step(queue_clock)
    assert empty is not None and empty[1] == 1  # one empty work item per sample
    window = empty_window(queue_clock)
    assert window is not None and window > 0
    tick = timer_tick(queue_clock)
    assert tick is not None and tick > 0


def test_a_queue_without_an_empty_kernel_has_no_empty_window() -> None:
    class NoFiller:
        asynchronous = True
        can_fill = False

    assert empty_step(NoFiller()) is None
    assert empty_window(NoFiller()) is None


def test_every_result_carries_them_saved_and_loaded(tmp_path: Any) -> None:
    r = time_function(lambda: sum(range(100)), backend="cpu", budget_ms=10, warmup_ms=0)
    assert (r.empty_window_ns, r.tick_ns) == timer_steps(HostClock(flush=False))
    doc = json.loads(r.save(tmp_path / "r.json").read_text())
    assert doc["empty_window_ns"] == r.empty_window_ns and doc["tick_ns"] == r.tick_ns
    assert "floor_ns" not in doc and "resolution_ns" not in doc
    back = TimingResult.load(tmp_path / "r.json")
    assert (back.empty_window_ns, back.tick_ns) == (r.empty_window_ns, r.tick_ns)
    text = back._repr_mimebundle_()["text/plain"]
    assert "empty window" in text and "tick" in text
    assert "floor" not in text and "resolution" not in text


# --- what they change in a result ---------------------------------------------------------


def test_timer_warnings() -> None:
    samples = np.linspace(100.0, 110.0, 41)
    # a sample's median of 105 ns is within 5x a 30 ns empty window; 1 ns ticks do not matter
    empty_only = timer_warnings(samples, 1, 30.0, 1.0)
    assert len(empty_only) == 1
    assert empty_only[0].startswith("the median is within 5x an empty sample's window (30 ns")
    assert "-n to batch calls or --hot" in empty_only[0]
    assert timer_warnings(samples, 10, 30.0, 1.0) == []  # batched: 1,050 ns a sample
    # a 512 ns tick against an interval of a few ns: widened, and said so
    coarse = timer_warnings(samples, 1, None, 512.0)
    assert len(coarse) == 1 and "comparable to the median's 95% interval" in coarse[0]
    assert coarse[0].startswith("the timer's tick (512 ns per sample")
    assert "widened by 512 ns on each side" in coarse[0]
    assert timer_warnings(samples, 1, None, None) == []


def test_a_median_near_the_empty_window_is_flagged_and_the_interval_widened(
    fake_host_timer: Any,
) -> None:
    fake_host_timer(1e6, 500.0)  # a 1 ms empty window, a 500 ns tick
    r = time_function(lambda: None, backend="cpu", number=2, repeat=20, warmup_ms=0)
    said = f"within {EMPTY_WINDOW_FACTOR:g}x an empty sample's window (1 ms"
    assert any(said in w for w in r.warnings)
    assert any("widened by 250 ns on each side" in w for w in r.warnings)  # 500 ns / 2 calls
    raw_lo, raw_hi = stats.median_ci95(r.samples_ns)
    assert r.ci95_ns == (max(raw_lo - 250.0, 0.0), raw_hi + 250.0)
    method = "empty window 1 ms (samples near it are mostly the timer's own overhead), tick 500 ns"
    assert method in str(r._repr_mimebundle_())


def test_unknown_empty_window_says_nothing(fake_host_timer: Any) -> None:
    fake_host_timer(None, None)
    r = time_function(lambda: None, backend="cpu", number=1, repeat=10, warmup_ms=0)
    assert r.empty_window_ns is None and r.tick_ns is None
    assert not any("timer" in w for w in r.warnings)


# --- hot --------------------------------------------------------------------------------


def test_hot_batch_dwarfs_the_empty_window_and_the_tick() -> None:
    assert hot_batch(None, None) == HOT_MIN_BATCH_NS
    assert hot_batch(2_000.0, 500.0) == 500_000.0  # 1000 ticks of 0.5 us
    assert hot_batch(30_000.0, 1.0) == 3_000_000.0  # 100 empty windows
    # 2 us calls in batches of 0.5 ms; fewer when min_samples batches would outlast the budget
    hot = TimingOptions(hot=True)
    assert _plan(hot, 2_000.0, "cuda", hot_batch_ns=500_000.0).number == 250
    tight = TimingOptions(hot=True, budget_ms=1)
    assert _plan(tight, 2_000.0, "cuda", hot_batch_ns=500_000.0).number == 50
    assert _plan(TimingOptions(hot=True, number=7), 2_000.0, "cuda").number == 7  # -n wins


def test_hot_run_batches_without_a_flush_and_says_so(fake_host_timer: Any) -> None:
    fake_host_timer(200.0, 50.0)  # batches of >= 50 us
    calls = [0]

    def tiny() -> None:
        calls[0] += 1

    r = time_function(tiny, backend="cpu", hot=True, budget_ms=20, warmup_ms=0)
    assert r.options["hot"] is True and r.options["flush_l2"] is False
    assert r.number > 1
    assert r.options["cold"] == f"none (hot: {r.number:,} calls back to back per sample)"
    assert "hot: " in r._repr_mimebundle_()["text/plain"]


def test_hot_refuses_a_flush() -> None:
    with pytest.raises(InputError, match=r"--hot .* no cache flush between them: drop --flush-l2"):
        time_function(lambda: None, backend="cpu", hot=True, flush_l2=True)


def test_hot_from_the_shell(capsys: pytest.CaptureFixture[str]) -> None:
    from perflab.cli import main

    assert main(["time", "--hot", "--json", "--budget", "10", "--warmup", "0", "x = 1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["options"]["hot"] is True and doc["options"]["flush_l2"] is False
    assert doc["empty_window_ns"] > 0 and doc["tick_ns"] > 0
    assert doc["options"]["cold"].startswith("none (hot: ")


def test_hot_in_the_magic() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "perflab")
    res = shell.run_cell("%%gpuprofile --hot --budget 5 --warmup 1 -o\nx = 1")  # type: ignore[no-untyped-call]
    assert res.success, res.error_in_exec
    assert res.result.options["hot"] is True and res.result.number > 1


def test_the_empty_window_is_measured_without_a_cache_flush() -> None:
    clock = HostClock(flush=True)
    flushes = [0]
    clock.flush = lambda: flushes.__setitem__(0, flushes[0] + 1)  # type: ignore[method-assign]
    assert empty_window(clock) is not None
    assert flushes[0] == 0


# --- windows that timed nothing -----------------------------------------------------------


class _ZeroEvery(HostClock):
    """The host clock, but every ``period``-th window (two marks in a row) reads 0 ns, as
    events around no device work do. Marks are boxes, so that each has its own serial."""

    period = 1

    def __init__(self) -> None:
        super().__init__(flush=False)
        self.serial: dict[int, int] = {}
        self.marks = 0
        self.windows = 0

    def mark(self) -> list[int]:  # type: ignore[override]
        box = [time.perf_counter_ns()]
        self.marks += 1
        self.serial[id(box)] = self.marks  # an id freed and taken again gets a new serial
        return box

    def elapsed_ns(self, start: Any, end: Any) -> float:
        if self.serial.get(id(end)) == self.serial.get(id(start), -2) + 1:
            self.windows += 1
            if self.windows % self.period == 0:
                return 0.0
        return super().elapsed_ns(start, end)


def test_a_run_whose_every_window_read_0_ns_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timer, "_make_clock", lambda opts: _ZeroEvery())
    with pytest.raises(InputError, match=r"read 0 ns: nothing measurable ran between"):
        time_function(lambda: None, number=1, repeat=10, warmup_ms=0)


def test_windows_of_0_ns_are_left_out_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    class EveryOther(_ZeroEvery):
        period = 2

    monkeypatch.setattr(timer, "_make_clock", lambda opts: EveryOther())
    r = time_function(lambda: sum(range(50)), number=1, repeat=20, warmup_ms=0)
    assert (r.samples_ns > 0).all() and 0 < r.n < 20
    assert any(f"{20 - r.n} of 20 samples read 0 ns and are left out" in w for w in r.warnings)
    assert r.host_ns is not None and r.host_ns.size == r.n
    assert r.options["unmeasured_samples"] == 20 - r.n
    TimingResult.from_dict(r.to_dict())  # what the engine returns, a saved file may hold


def _spin_ns(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def test_a_hot_batch_is_planned_from_calls_back_to_back_not_one_launch_gap(
    queue_clock: HostQueueClock,
) -> None:
    # each call: 100 us of host work to issue (a launch), 10 us of queued work (the kernel);
    # one call alone reads its launch gap, calls behind a filler run back to back
    def call() -> None:
        time.sleep(100e-6)  # sleeps: the worker thread needs the GIL meanwhile
        queue_clock.submit(lambda: _spin_ns(10_000))

    single = float(np.median(take_samples(queue_clock, call, 1, 5).window_ns))
    assert single > 80_000
    per_call = _back_to_back_per_call(queue_clock, call, single, 400_000.0)
    assert per_call < 0.5 * single
