"""The clock check of a timing run, on the host: NVML polled from a background thread while
the samples run, the polls attributed to samples by host time, and a sample dropped only
where NVML confirms throttling (a power or thermal reason, or a violation counter
advancing) and its clock fell below 75% of the default. NVML is a scripted stand-in whose
clock, reasons and counters change over time as the test says; the same paths on a GPU are
in test_timing_gpu.py."""

from __future__ import annotations

import itertools
import math
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest

from perflab.capture import nvml, timer
from perflab.capture.throttle import (
    POLL_THREAD,
    NvmlPoller,
    Polls,
    ThrottleWatch,
    active_pollers,
    attribute,
    below_clock,
)
from perflab.capture.timer import HostClock, HostQueueClock, time_function

DEFAULT_MHZ = 1980
HW_THERMAL = 0x40
SW_POWER_CAP = 0x4
GPU_IDLE = 0x1  # a reason that holds nothing down


class ScriptedNvml:
    """pynvml's surface, scripted over time: the SM clock, the clock-event reasons and
    the violation counters that run are whatever the test last set with :meth:`set`; a
    running counter gains the real time that passes, as NVML's count time spent
    throttled."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PERF_POLICY_POWER = 0
    NVML_PERF_POLICY_THERMAL = 1

    def __init__(self, default_mhz: int | None = DEFAULT_MHZ) -> None:
        self.default_mhz = default_mhz
        self.mhz = DEFAULT_MHZ
        self.reasons = 0
        self.shut = False
        self._lock = threading.Lock()
        self._total = {self.NVML_PERF_POLICY_POWER: 0, self.NVML_PERF_POLICY_THERMAL: 0}
        self._since: dict[int, int] = {}

    def set(
        self, mhz: int = DEFAULT_MHZ, reasons: int = 0, violating: tuple[int, ...] = ()
    ) -> None:
        with self._lock:
            now = time.perf_counter_ns()
            for policy, since in self._since.items():
                self._total[policy] += now - since
            self._since = dict.fromkeys(violating, now)
            self.mhz, self.reasons = mhz, reasons

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        return f"handle of {uuid}"

    def nvmlDeviceGetDefaultApplicationsClock(self, handle: str, kind: int) -> int:
        if self.default_mhz is None:
            raise RuntimeError("not supported")
        return self.default_mhz

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
        return self.mhz

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        return self.reasons

    def nvmlDeviceGetViolationStatus(self, handle: str, policy: int) -> Any:
        with self._lock:
            running = time.perf_counter_ns() - self._since[policy] if policy in self._since else 0
            status = type("Status", (), {})()
            status.violationTime = self._total[policy] + running
        return status


class _CudaStandIn:
    """What the watch asks of a CUDA clock: its name and how to find it in NVML."""

    name = "cuda"
    max_sm_mhz = 1755.0
    identity = {"uuid": "GPU-1"}  # noqa: RUF012


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedNvml:
    fake = ScriptedNvml()
    monkeypatch.setattr(nvml, "load_nvml", lambda: (fake, None))
    return fake


# --- attributing polls to samples ---------------------------------------------------------


def _polls(mhz: list[float], reasons: list[int], power: list[int]) -> Polls:
    """Polls 1 ms apart (at 0, 1, 2, ... ms), the thermal counter never known."""
    n = len(mhz)
    counters = np.column_stack([power, [-1] * n]).astype(np.int64)
    return Polls(
        at_ns=np.arange(n, dtype=np.float64) * 1e6,
        sm_mhz=np.asarray(mhz, dtype=np.float64),
        reasons=np.asarray(reasons, dtype=np.int64),
        violation_ns=counters,
        interval_s=1e-3,
    )


def test_each_sample_gets_the_polls_that_bracket_it() -> None:
    polls = _polls(
        mhz=[1980, 1970, 900, 1000, 1960, 1980, math.nan],
        reasons=[0, 0, HW_THERMAL, GPU_IDLE, 0, -1, 0],
        power=[5, 5, 5, 5, 5, 9, 9],
    )
    windows = [
        (0.2e6, 0.4e6),  # none inside: polls 0 and 1, either side of it
        (1.5e6, 3.5e6),  # polls 2 and 3 inside: the thermal reason at 2, 900 MHz
        (3.0e6, 3.0e6),  # on poll 3: it alone (GPU idle is not throttling)
        (4.5e6, 5.5e6),  # one inside: polls 4 to 6, the power counter went 5 -> 9
        (math.nan, math.nan),  # no window known: nothing said
        (0.5e6, 4.5e6),  # polls 1 to 4 inside, none of the counter's rise (at 5)
    ]
    clocks = attribute(polls, *zip(*windows, strict=True))
    assert clocks.min_mhz[:4].tolist() == [1970, 900, 1000, 1960]
    assert clocks.median_mhz[:4].tolist() == [1975, 950, 1000, 1970]  # NaN clocks left out
    assert clocks.reasons.tolist() == [0, HW_THERMAL, 0, 0, 0, HW_THERMAL]
    assert clocks.violated.tolist() == [False, False, False, True, False, False]
    assert clocks.throttled.tolist() == [False, True, False, True, False, True]
    assert math.isnan(clocks.min_mhz[4])
    assert clocks.min_mhz[5] == 900 and clocks.median_mhz[5] == 1480


def test_the_cut_is_75_percent_of_the_default_clock() -> None:
    clocks = [1980.0, 1500.0, 1485.0, 1484.9, math.nan, 700.0]
    assert below_clock(clocks, 1980.0).tolist() == [False, False, False, True, False, True]
    assert not below_clock(clocks, math.nan).any()  # no reference: nothing below it
    assert not below_clock(clocks, 0.0).any()


# --- the watch, polling live --------------------------------------------------------------


def _run_windows(fake: ScriptedNvml, states: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """One 12 ms sample per state (set inside it, undone before its end), 5 ms apart."""
    windows = []
    for state in states:
        t0 = time.perf_counter_ns()
        fake.set(**state)
        time.sleep(0.010)
        fake.set()
        time.sleep(0.002)
        windows.append((t0, time.perf_counter_ns()))
        time.sleep(0.005)
    return windows


def test_throttled_windows_are_dropped_and_a_low_clock_alone_is_kept(
    scripted: ScriptedNvml,
) -> None:
    watch = ThrottleWatch.start(_CudaStandIn())
    try:
        assert active_pollers() == 1
        windows = _run_windows(
            scripted,
            [
                {},
                {"mhz": 900, "reasons": HW_THERMAL, "violating": (1,)},  # thermal throttling
                {"mhz": 1000},  # a low clock, no reason, no counter: the GPU's own choice
                {"mhz": 1900, "reasons": SW_POWER_CAP, "violating": (0,)},  # capped, high clock
                {"mhz": 1000, "reasons": GPU_IDLE},  # idle is not a limit
            ],
        )
        out = watch.finish(*zip(*windows, strict=True))
    finally:
        watch.close()
    assert scripted.shut
    assert out["checked"] is True and out["polls"] > 20
    assert out["drop"].tolist() == [False, True, False, False, False]
    assert out["throttled_samples"] == 2 and out["dropped_samples"] == 1
    assert out["low_clock_kept_samples"] == 2
    assert out["default_sm_mhz"] == 1980.0  # NVML's default clock wins over CUDA's maximum
    assert out["reasons_seen"] == ["software power cap", "hardware thermal slowdown"]
    assert set(out["violation_ns"]) == {"power", "thermal"}
    assert out["violation_ns"]["thermal"] >= 9_000_000  # ~10 ms spent throttled
    clocks = out.clocks
    assert clocks is not None
    assert clocks.min_mhz.tolist() == [1980, 900, 1000, 1900, 1000]
    said = out["warnings"]
    assert said[0].startswith(
        "dropped 1 of 5 samples: NVML confirmed throttling during them (hardware thermal "
        "slowdown, a violation counter advanced) and their SM clock fell below 75% of the "
        "default (1980 MHz; lowest 900 MHz)"
    )
    assert said[1].startswith(
        "clocks throttled in 1 of 5 samples (software power cap, a violation counter "
        "advanced), kept: their SM clock stayed at or above 75% of the default (1980 MHz; "
        "lowest 1900 MHz)"
    )
    assert said[2] == (
        "2 of 5 samples ran below 75% of the default SM clock (1980 MHz; lowest 1000 MHz) "
        "with no throttle reason and no violation in NVML: kept (nothing held the clock "
        "down; the GPU chose it)"
    )
    assert said[3].startswith("clocks throttled during the run: power ")


def test_without_a_default_clock_nothing_is_dropped_and_it_says_so(
    scripted: ScriptedNvml,
) -> None:
    scripted.default_mhz = None
    clock = _CudaStandIn()
    clock.max_sm_mhz = math.nan  # CUDA gave no clock rate either
    watch = ThrottleWatch.start(clock)
    try:
        windows = _run_windows(scripted, [{"mhz": 600, "reasons": HW_THERMAL}])
        out = watch.finish(*zip(*windows, strict=True))
    finally:
        watch.close()
    assert not out["drop"].any() and out["default_sm_mhz"] is None
    assert out["throttled_samples"] == 1
    assert out["warnings"][0].startswith("SM clock per sample read but not compared")
    assert out["warnings"][1].startswith("clocks throttled in 1 of 1 samples")
    assert "no default SM clock to compare" in out["warnings"][1]


def test_without_nvml_nothing_is_checked_and_it_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(nvml, "LIBRARY", "libperflab-no-such-nvml.so.1")
    watch = ThrottleWatch.start(_CudaStandIn())
    out = watch.finish([0.0], [1.0])
    watch.close()
    assert out["checked"] is False
    assert out["why"].startswith("NVML unavailable (pynvml is not installed and ")
    assert out["warnings"] == [f"throttle check unavailable: {out['why']}"]
    on_cpu = ThrottleWatch.start(HostClock(flush=False)).finish([0.0], [1.0])
    assert on_cpu["checked"] is False and "no GPU" in on_cpu["why"]


def test_a_failing_read_ends_the_polling_and_is_said() -> None:
    reads = itertools.count()

    def read() -> tuple[float, int, tuple[int, ...]]:
        if next(reads) >= 3:
            raise OSError("the driver went away")
        return 1980.0, 0, (0, 0)

    poller = NvmlPoller(read)
    poller.start()
    deadline = time.monotonic() + 5
    while poller.error is None and time.monotonic() < deadline:
        time.sleep(0.001)
    polls = poller.stop()
    assert polls.error == "OSError: the driver went away"
    assert polls.at_ns.size == 3
    assert not any(t.name == POLL_THREAD for t in threading.enumerate())


def test_a_long_run_keeps_a_bounded_number_of_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    from perflab.capture import throttle

    monkeypatch.setattr(throttle, "MAX_POLLS", 8)
    poller = NvmlPoller(lambda: (1980.0, 0, (0, 0)), interval_s=1e-4)
    poller.start()
    time.sleep(0.05)
    polls = poller.stop()
    assert polls.at_ns.size <= 9  # thinned to every other poll, then the last one
    assert polls.interval_s > 1e-4  # and polled less often since
    assert (np.diff(polls.at_ns) > 0).all()


# --- through the timer --------------------------------------------------------------------


class _QueueAsCuda(HostQueueClock):
    """The host queue as a 'cuda' clock, for the watch to poll NVML while it runs."""

    name = "cuda"
    max_sm_mhz = 1755.0

    def __init__(self) -> None:
        super().__init__()
        self.identity = {"uuid": "GPU-1"}


def _throttling_every_other_call(clock: HostQueueClock, fake: ScriptedNvml) -> Any:
    """A call whose queued work runs 12 ms; every other one under thermal throttling at
    900 MHz for its first 8 ms."""
    calls = itertools.count()

    def work(throttled: bool) -> None:
        if throttled:
            fake.set(mhz=900, reasons=HW_THERMAL, violating=(1,))
        time.sleep(0.008)
        fake.set()
        time.sleep(0.004)

    def call() -> None:
        throttled = next(calls) % 2 == 1
        clock.submit(lambda: work(throttled))

    return call


def test_throttled_samples_are_dropped_through_the_timer(
    monkeypatch: pytest.MonkeyPatch, scripted: ScriptedNvml
) -> None:
    """The real sampling loop on a real queue: each sample's window, read from its marks,
    is placed in host time and gets the polls around it. Calls before the samples (the
    first, 5 of the estimate, 1 of warm-up, 3 of the filler's probe) are 10, so the samples
    alternate, starting unthrottled: 4 of 8 are dropped."""
    clock = _QueueAsCuda()
    monkeypatch.setattr(timer, "_make_clock", lambda opts: clock)
    r = time_function(
        _throttling_every_other_call(clock, scripted), repeat=8, warmup_ms=0, number=1
    )
    assert r.options["samples"] == 8
    assert r.throttle["dropped_samples"] == 4 and r.n == 4
    assert any(w.startswith("dropped 4 of 8 samples: NVML confirmed") for w in r.warnings)
    assert r.sm_clock_min_mhz is not None and (r.sm_clock_min_mhz == DEFAULT_MHZ).all()
    assert r.sm_clock_median_mhz is not None and r.sm_clock_median_mhz.size == r.n
    back = type(r).from_dict(r.to_dict())
    assert back.sm_clock_min_mhz is not None and back.sm_clock_min_mhz.tolist() == [DEFAULT_MHZ] * 4


class _Boom(Exception):
    pass


def test_polling_stops_when_the_timed_code_raises(
    monkeypatch: pytest.MonkeyPatch, scripted: ScriptedNvml
) -> None:
    clock = _QueueAsCuda()
    monkeypatch.setattr(timer, "_make_clock", lambda opts: clock)
    calls = itertools.count()

    def fails_while_sampling() -> None:
        if next(calls) == 12:
            raise _Boom("the cell failed")
        clock.submit(lambda: time.sleep(0.001))

    with pytest.raises(_Boom):
        time_function(fails_while_sampling, repeat=20, warmup_ms=0, number=1)
    assert active_pollers() == 0
    assert scripted.shut
