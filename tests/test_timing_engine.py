"""The timing engine's logic that carries to the GPU, run for real on the host: the
host clock (the CPU backend) and a host worker-thread queue (asynchronous, like a GPU
stream). None of this touches CUDA; the CUDA clocks are in test_timing_gpu.py."""

from __future__ import annotations

import json
import math
import sys
import time
import tracemalloc
from typing import Any, ClassVar

import numpy as np
import pytest

from perflab.capture import timer
from perflab.capture.sampling import Samples, back_to_back_ns, idle_in_window
from perflab.capture.throttle import ThrottleWatch
from perflab.capture.timer import (
    HostClock,
    HostQueueClock,
    Plan,
    TimingOptions,
    _estimate,
    cold_calls,
    host_bound,
    lead_for,
    measure,
    next_round,
    relative_standard_error,
    stop_reason,
    take_samples,
    time_function,
    warmup_steps,
)
from perflab.errors import InputError
from perflab.model import stats
from perflab.model.timing import Comparison, TimingResult


@pytest.fixture
def queue_clock() -> Any:
    clock = HostQueueClock()
    yield clock
    clock.close()


# --- warm-up accounting -------------------------------------------------------------


def test_warmup_steps_count_calls_not_replays() -> None:
    assert warmup_steps(1000, 1) == 1000
    assert warmup_steps(1000, 100) == 10  # a replay of 100 calls counts 100
    assert warmup_steps(1001, 100) == 11
    assert warmup_steps(5, 100) == 1  # at least one step


def test_graph_mode_warms_up_for_the_planned_calls_only() -> None:
    """graph=True, number=50: the warm-up makes about warmup_calls calls, not 50x that."""
    calls = [0]

    def fn() -> None:
        calls[0] += 1

    clock = HostClock(flush=False)
    opts = TimingOptions(graph=True, number=50, repeat=4, warmup_ms=1)
    run = measure(clock, fn, opts)
    planned = run.plan.warmup_calls
    assert run.warmup_calls == warmup_steps(planned, 50) * 50
    assert run.warmup_calls < planned + 50
    # first call + estimate (5 single calls) + warm-up + 4 samples of 50 calls
    assert calls[0] == 1 + 5 + run.warmup_calls + 4 * 50
    assert len(run.samples.window_ns) == 4


# --- order of operations: nothing but the calls inside the window ---------------------


class _LoggingQueue(HostQueueClock):
    """The host queue, recording what the engine asks of it, in order."""

    flushes = True

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def flush(self) -> None:
        self.log.append("flush")

    def hold(self, ns: float) -> None:
        self.log.append("hold")
        super().hold(ns)

    def mark(self) -> list[int]:
        self.log.append("mark")
        return super().mark()


def test_flush_and_filler_precede_the_start_mark() -> None:
    clock = _LoggingQueue()
    try:
        take_samples(
            clock,
            lambda: clock.log.append("call"),
            2,
            3,
            lead_ns=1000.0,
            after_issue=lambda: clock.log.append("clock reading"),
        )
    finally:
        clock.close()
    one = ["flush", "mark", "hold", "mark", "call", "call", "mark", "clock reading"]
    # a head start first: the queue is empty after the last round's sync
    assert clock.log == ["hold", *one * 3]


def test_a_slow_flush_is_not_timed() -> None:
    """The flush sleeps 200 ms; samples of a no-op stay below that (the flush sits
    before the start mark), and so does the host time of issuing them."""
    clock = HostClock(flush=True)
    clock.flush = lambda: time.sleep(0.2)  # type: ignore[method-assign]
    s = take_samples(clock, lambda: None, 1, 3)
    assert max(s.window_ns) < 200e6
    assert max(s.host_ns) < 200e6


# --- stopping rule --------------------------------------------------------------------


def test_stop_reasons() -> None:
    opts = TimingOptions(budget_ms=100, min_samples=10, max_samples=1000, max_noise=0.005)
    free = Plan(1, 10, 500, False)
    quiet = np.full(20, 100.0)
    noisy = np.random.default_rng(0).uniform(50, 150, 20)
    assert stop_reason(quiet[:5], 0, opts, free) is None  # below min_samples
    assert stop_reason(quiet, 0, opts, free) == "noise"
    assert stop_reason(noisy, 0, opts, free) is None
    assert stop_reason(noisy, 101e6, opts, free) == "budget"
    assert stop_reason(np.full(1000, 1.0) + np.arange(1000), 0, opts, free) == "max_samples"
    assert stop_reason(quiet[:7], 0, opts, Plan(1, 10, 7, True)) == "repeat"
    assert stop_reason(quiet[:5], 101e6, opts, Plan(1, 10, 7, True)) == "budget-cut"
    assert stop_reason(quiet[:5], 99e6, opts, Plan(1, 10, 7, True)) is None
    # max_noise 0: only the budget stops a free run
    assert stop_reason(quiet, 0, TimingOptions(max_noise=0), free) is None


def test_relative_standard_error_and_rounds() -> None:
    assert relative_standard_error(np.full(30, 5.0)) == 0.0
    assert math.isinf(relative_standard_error([1.0]))
    wide = np.linspace(50, 150, 101)
    assert 0.02 < relative_standard_error(wide) < 0.2
    opts = TimingOptions(budget_ms=100, min_samples=10)
    plan = Plan(1, 10, 1000, False)
    assert next_round(0, 0, opts, plan) == 10
    assert next_round(10, 1e6, opts, plan) == 5  # half as many as there are
    assert next_round(10, 99e6, opts, plan) == 1  # the budget is nearly spent
    # a -r count grows by as many again (the budget may end it after any round)
    assert next_round(3, 0, opts, Plan(1, 10, 7, True)) == 3
    assert next_round(6, 0, opts, Plan(1, 10, 7, True)) == 1


def test_time_function_reports_why_it_stopped() -> None:
    fixed = time_function(lambda: None, backend="cpu", repeat=7, warmup_ms=0)
    assert fixed.stop_reason == "repeat" and fixed.n == 7
    whole = time_function(
        lambda: time.sleep(0.001), backend="cpu", budget_ms=15, warmup_ms=0, max_noise=0
    )
    assert whole.stop_reason in ("budget", "max_samples")
    assert whole.options["max_noise"] == 0


def test_the_budget_cuts_a_repeat_count() -> None:
    """`perflab time -r 10000000 --budget 10` ran on for minutes: -r was taken in one
    round, whatever the budget. Now the budget, the timeout, cuts it and says so."""
    t0 = time.monotonic()
    r = time_function(lambda: None, backend="cpu", repeat=10_000_000, budget_ms=10, warmup_ms=0)
    assert time.monotonic() - t0 < 60  # catches the hang only
    assert r.stop_reason == "budget-cut" and 1 <= r.n < 10_000_000
    assert r.options["repeat"] == 10_000_000
    assert any(
        w.startswith(f"-r 10,000,000 cut to {r.n:,} samples: the 10 ms budget") for w in r.warnings
    )
    assert (
        f"stopped: budget-cut ({r.n:,} of -r 10,000,000 samples"
        in r._repr_mimebundle_()["text/plain"]
    )


def test_a_repeat_count_within_the_budget_is_taken_whole() -> None:
    r = time_function(lambda: None, backend="cpu", repeat=50, budget_ms=1000, warmup_ms=0)
    assert r.stop_reason == "repeat" and r.n == 50


def test_first_round_of_a_repeat_count_fits_the_budget() -> None:
    opts = TimingOptions(budget_ms=100, min_samples=10)
    slow = Plan(1, 10, 1000, True, sample_ns=40e6)  # 40 ms samples: 2 fit in 100 ms
    assert next_round(0, 0, opts, slow) == 2
    assert next_round(0, 0, opts, Plan(1, 10, 1000, True, sample_ns=1e9)) == 1  # at least one
    assert next_round(2, 80e6, opts, slow) == 1


def test_calls_per_sample_beyond_the_budget_are_refused_before_sampling(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`-n 10000000 --budget 10 'pass'`: one sample alone is seconds; refused after the
    estimate (a few calls), naming the -n that fits."""
    calls = [0]

    def slow() -> None:
        calls[0] += 1
        time.sleep(0.002)

    with pytest.raises(InputError, match=r"^-n 1,000: one sample of 1,000 calls would take about "):
        time_function(slow, backend="cpu", number=1000, budget_ms=10, warmup_ms=0)
    assert calls[0] == 1 + 5  # the first call and the estimate, no sample

    from perflab.cli import main

    t0 = time.monotonic()
    args = ["time", "-r", "10000000", "-n", "10000000", "--budget", "10", "pass"]
    assert main(args) == 2
    assert time.monotonic() - t0 < 60  # catches the hang only
    err = capsys.readouterr().err
    assert "more than the whole 10 ms budget (--budget, the timeout): use -n" in err


def test_one_call_beyond_the_budget_is_estimated_once() -> None:
    """A call longer than the whole budget is not called five times to estimate it."""
    calls = [0]

    def slow() -> None:
        calls[0] += 1
        time.sleep(0.02)

    assert len(_estimate(HostClock(flush=False), slow, 10e6).window_ns) == 1
    assert calls[0] == 1
    assert len(_estimate(HostClock(flush=False), lambda: None, 10e6).window_ns) == 5


def test_time_json_says_budget_cut(capsys: pytest.CaptureFixture[str]) -> None:
    from perflab.cli import main

    assert (
        main(["time", "--json", "-r", "10000000", "--budget", "10", "--warmup", "0", "pass"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["stop_reason"] == "budget-cut" and 0 < len(doc["samples_ns"]) < 10_000_000


# --- host-bound samples -----------------------------------------------------------------


def test_the_host_time_bound() -> None:
    # host issued the sample in 3 ms, no filler, 1 ms of work: room for a wait
    assert host_bound([1e6], [3e6], [0.0]).tolist() == [True]
    # a 20 ms filler covers the host: no room
    assert host_bound([1e6], [3e6], [20e6]).tolist() == [False]
    # a long kernel hides a short host cost (the bound is < 5% of the window)
    assert host_bound([10e6], [10e3], [0.0]).tolist() == [False]
    assert lead_for(1e6) == 2e6 + 20e3


def test_the_host_bound_rule_asks_the_device() -> None:
    """Flagged: the device reached the window before the host had issued it (not
    covered), the host's time leaves room for a wait, and the window is over 5% longer
    than the calls back to back."""
    s = Samples(
        window_ns=[100e3, 100e3, 61e3, 100e3, 100e3],
        host_ns=[500e3, 500e3, 500e3, 1e3, 500e3],
        lead_ns=[0.0] * 5,
        covered=[True, False, False, False, False],
    )
    check = idle_in_window(s, 60e3)
    # covered; a wait; within 5% of back to back; no room in host time; a wait
    assert check.flagged.tolist() == [False, True, False, False, True]
    assert not check.undecided.any() and check.back_to_back_ns == 60e3
    unknown = idle_in_window(s, None)  # nothing to compare with: undecided, not flagged
    assert not unknown.flagged.any()
    assert unknown.undecided.tolist() == [False, True, True, False, True]
    assert back_to_back_ns(s) is None  # one covered sample is too few
    covered = Samples(window_ns=[10.0, 12.0, 11.0, 99.0], covered=[True, True, True, False])
    assert back_to_back_ns(covered) == 11.0


def _late_call(clock: HostQueueClock) -> Any:
    """The host sleeps 5 ms before enqueueing 0.5 ms of work."""

    def late_call() -> None:
        time.sleep(0.005)
        clock.submit(lambda: time.sleep(0.0005))

    return late_call


def test_a_late_host_is_host_bound_and_a_filler_hides_it(queue_clock: Any) -> None:
    """Without a filler the queue runs dry inside each window and the device waits ~4.5 ms
    for the host: every sample is flagged, against the same calls timed back to back
    behind a filler (~0.5 ms). With the filler the device never gets ahead of the host."""
    bare = measure(
        queue_clock,
        _late_call(queue_clock),
        TimingOptions(budget_ms=60, warmup_ms=1, fill_queue=False),
    )
    n = len(bare.samples.window_ns)
    assert bare.lead_ns == 0 and bare.idle is not None
    # every sample, but for one or two the loaded machine kept the worker thread from
    assert sum(bare.samples.covered) <= n // 4
    assert bare.idle.back_to_back_ns is not None and bare.idle.back_to_back_ns < 3e6
    assert bare.idle.flagged.sum() >= 3 * n // 4
    filled = measure(queue_clock, _late_call(queue_clock), TimingOptions(budget_ms=60, warmup_ms=1))
    assert filled.lead_ns >= 2 * 5e6  # twice the host's time to issue a sample
    assert filled.idle is not None
    assert filled.idle.flagged.sum() <= len(filled.samples.window_ns) // 4  # a loaded machine
    assert min(filled.samples.lead_ns) >= filled.lead_ns  # the filler really held the queue


def _full_queue_call(clock: HostQueueClock, ms: float = 5.0) -> Any:
    """A call that enqueues ``ms`` of work and returns at once (when the queue has room)."""
    return lambda: clock.submit(lambda: time.sleep(ms / 1e3))


def test_a_host_held_back_by_a_full_launch_queue_is_not_host_bound() -> None:
    """A launch queue of 6 items and samples of 5 (mark, filler, mark, call, mark): the
    host waits for room, so it issues a sample in ~11 ms behind a 3 ms filler, and the
    host-time bound alone would flag the samples; but the device had each sample queued
    ahead of it when its issue ended, so it never waited."""
    clock = HostQueueClock(depth=6)
    try:
        s = take_samples(clock, _full_queue_call(clock, 8.0), 1, 8, lead_ns=3e6)
    finally:
        clock.close()
    assert float(np.median(s.host_ns)) > 8e6  # held back at the device's pace
    assert host_bound(s.window_ns, s.host_ns, s.lead_ns).sum() >= 6
    assert all(s.covered)
    check = idle_in_window(s, back_to_back_ns(s))
    assert not check.flagged.any() and not check.undecided.any()


def test_a_full_launch_queue_gives_no_host_bound_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = HostQueueClock(depth=6)
    monkeypatch.setattr(timer, "_make_clock", lambda opts: clock)
    r = time_function(_full_queue_call(clock), repeat=12, warmup_ms=1, number=1)
    assert r.host_ns is not None and float(np.median(r.host_ns)) > r.options["queue_filler_ns"]
    assert r.options["host_bound_samples"] == 0
    assert r.options["host_bound_undecided"] == 0
    assert r.options["back_to_back_ns"] is not None
    assert not any(w.startswith("host-bound") for w in r.warnings)


def test_a_late_host_is_said_through_the_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = HostQueueClock()
    monkeypatch.setattr(timer, "_make_clock", lambda opts: clock)
    r = time_function(_late_call(clock), repeat=8, warmup_ms=1, number=1, fill_queue=False)
    flagged = r.options["host_bound_samples"]
    assert flagged >= 6  # all, but for a sample the loaded machine kept the worker from
    (said,) = [w for w in r.warnings if w.startswith("host-bound")]
    assert said.startswith(f"host-bound: in {flagged} of 8 samples the GPU waited for the host")


def test_cpu_result_keeps_host_time_per_sample() -> None:
    r = time_function(lambda: sum(range(200)), backend="cpu", budget_ms=10, warmup_ms=0)
    assert r.host_ns is not None and r.host_ns.size == r.n
    assert (r.host_ns > 0).all()
    assert r.options["host_bound_samples"] == 0  # the host is the device: nothing to wait for


# --- cold calls, throttle -------------------------------------------------------------


def test_cold_calls_say_exactly_what_was_flushed() -> None:
    assert cold_calls(False, 1, False) == "none"
    assert cold_calls(True, 1, False) == "every call"
    assert cold_calls(True, 100, True).startswith("first call of each graph replay (1 of 100")
    r = time_function(lambda: None, backend="cpu", flush_l2=True, number=5, repeat=3, warmup_ms=0)
    assert r.options["cold"].startswith("first call of each sample (1 of 5")
    assert any("cold calls" in w for w in r.warnings)


def test_throttle_check_unavailable_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    on_cpu = ThrottleWatch.start(HostClock(flush=False)).finish([0.0] * 3, [1.0] * 3)
    assert on_cpu["checked"] is False and "no GPU" in on_cpu["why"]
    assert on_cpu["warnings"] == []

    class Named:
        name = "cuda"

    monkeypatch.setitem(sys.modules, "pynvml", None)  # the import now fails
    watch = ThrottleWatch.start(Named())
    missing = watch.finish([0.0] * 3, [1.0] * 3)  # no NVML: nothing to read
    watch.close()
    assert missing["checked"] is False and "pynvml" in missing["why"]
    assert missing["warnings"] == [f"throttle check unavailable: {missing['why']}"]


def test_time_json_reports_stop_reason_host_ns_and_throttle(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from perflab.cli import main

    assert main(["time", "--json", "--budget", "10", "--warmup", "0", "sum(range(50))"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stop_reason"] in ("noise", "budget", "max_samples")
    assert len(doc["host_ns"]) == len(doc["samples_ns"])
    assert doc["throttle"]["checked"] is False and doc["throttle"]["why"]


@pytest.mark.parametrize(
    "args",
    [
        ["--budget", "1e308"],
        ["--warmup", "1e308"],
        ["--budget", "inf"],
        ["-n", str(2**70)],
        ["-r", "0"],
        ["--max-noise", "nan"],
        ["--flops", "inf"],
    ],
)
def test_time_refuses_out_of_range_options(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from perflab.cli import main

    assert main(["time", *args, "x = 1"]) == 2
    assert "must be" in capsys.readouterr().err


# --- comparisons ----------------------------------------------------------------------


def test_bootstrap_memory_is_bounded_for_millions_of_samples() -> None:
    rng = np.random.default_rng(1)
    big = rng.normal(100.0, 5.0, 3_000_000)
    small = rng.normal(50.0, 5.0, 1000)
    tracemalloc.start()
    try:
        r = stats.median_ratio(big, small)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 300 << 20  # was 2000 x 3M float64 = 44.7 GiB
    assert 1.9 < r.ratio < 2.1 and r.low < r.ratio < r.high
    assert "subsample" in r.method
    big_result = TimingResult(big, "cpu", "x", name="big")
    assert "[interval from random subsamples]" in str(
        big_result.compare(TimingResult(small, "cpu", "x"))
    )
    assert "subsample" not in stats.median_ratio(small, small).method


def test_tiny_ratios_print_readably() -> None:
    c = Comparison("torch-add", "triton-add", 2.747e-4, 2.6e-4, 2.9e-4, True)
    text = str(c)
    assert "0.000" not in text
    assert "2.75e-04" in text and "3,640x faster" in text
    assert "364x slower" in str(Comparison("a", "b", 364.0, 360.0, 370.0, True))
    assert "0.550" in str(Comparison("a", "b", 0.55, 0.5, 0.6, True))


def test_compare_names_the_stored_baseline() -> None:
    a = TimingResult(np.full(20, 100.0), "cpu", "x", name="In[3]")
    b = TimingResult(np.full(20, 200.0), "cpu", "x", name="In[2]")
    c = a.compare(b, baseline_label="base (In[2])")
    assert str(c).startswith("In[3] vs base (In[2]): time ratio 0.500")
    assert c.to_dict()["method"].startswith("bootstrap")


def test_persisting_l2_check_says_when_it_cannot_run() -> None:
    from perflab.capture import gpu_clock

    if gpu_clock._loaded_cudart() is not None:
        pytest.skip("a CUDA runtime is loaded here: the gpu tests cover the reset")
    notes: list[str] = []
    assert gpu_clock.reset_persisting_l2(notes) == {"persisting_l2": "not checked"}
    assert notes == ["persisting-L2 carve-out not checked (no CUDA runtime library found)"]


def test_nvml_device_is_found_by_uuid_then_pci_bus_id() -> None:
    """NVML's index 0 ignores CUDA_VISIBLE_DEVICES: the lookup uses the device's UUID
    (as NVML spells it) or PCI bus id, and tries bytes for older pynvml."""
    from perflab.capture import gpu_clock

    ident = gpu_clock._cupy_identity(
        {"uuid": bytes(range(16)), "pciBusID": 0x19, "pciDeviceID": 0, "pciDomainID": 0}
    )
    assert ident == {
        "uuid": "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f",
        "pci_bus_id": "00000000:19:00.0",
    }

    class TorchUuid:  # torch's _CUuuid: .bytes is a list of ints, str() the dashed hex
        bytes: ClassVar[list[int]] = list(range(16))

        def __str__(self) -> str:
            return "00010203-0405-0607-0809-0a0b0c0d0e0f"

    class TorchProps:
        uuid = TorchUuid()
        pci_bus_id, pci_device_id, pci_domain_id = 0x19, 0, 0

    assert gpu_clock.torch_identity(TorchProps()) == ident
    calls: list[tuple[str, object]] = []

    class Lookups:
        def nvmlDeviceGetHandleByUUID(self, value: object) -> str:
            calls.append(("uuid", value))
            if isinstance(value, str):
                raise TypeError("this pynvml wants bytes")
            return "handle-by-uuid"

        def nvmlDeviceGetHandleByPciBusId(self, value: object) -> str:
            calls.append(("pci", value))
            return "handle-by-pci"

    assert gpu_clock.nvml_handle(Lookups(), ident) == "handle-by-uuid"
    assert calls == [("uuid", ident["uuid"]), ("uuid", ident["uuid"].encode())]
    assert gpu_clock.nvml_handle(Lookups(), {"pci_bus_id": "x"}) == "handle-by-pci"
    assert gpu_clock.nvml_handle(Lookups(), {}) is None
