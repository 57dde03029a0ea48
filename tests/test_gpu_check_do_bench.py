"""gpu-check's comparison of the timing engine with triton's do_bench, on fake timings: the
runs interleave, each carries its SM clock, and only a disagreement beyond what the clocks
and the pairs' own noise explain fails the check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from perflab.machine import gpu_check_do_bench as vs
from perflab.machine.gpu_check_do_bench import EngineRun, RunPair, agreement, interleaved

MATMUL_CYCLES = 346_000.0  # a compute-bound kernel: its time is cycles / SM clock


class _DriftingGpu:
    """A GPU whose SM clock falls by ``step_mhz`` with every run (as an H200's did, from
    1,968 to 1,856 MHz over seven runs), timing a kernel of ``cycles``; ``slower`` makes
    one engine read that much more than the other."""

    def __init__(self, start_mhz: float, step_mhz: float, cycles: float) -> None:
        self.mhz, self.step, self.cycles = start_mhz, step_mhz, cycles
        self.order: list[str] = []

    def engine(self, name: str, slower: float = 1.0) -> Callable[[], float]:
        def run() -> float:
            self.order.append(name)
            us = self.cycles / self.mhz * slower
            self.mhz -= self.step
            return us

        return run

    def read(self) -> float:
        return self.mhz


def test_runs_interleave_and_each_carries_its_clock() -> None:
    gpu = _DriftingGpu(1968.0, 16.0, MATMUL_CYCLES)
    pairs = interleaved(gpu.engine("perflab"), gpu.engine("do_bench"), gpu.read, pairs=4)
    assert gpu.order == ["perflab", "do_bench"] * 4
    # each run's clock is the mean of the readings just before and after it
    assert pairs[0].perflab.sm_mhz == 1960.0 and pairs[0].do_bench.sm_mhz == 1944.0
    assert pairs[-1].do_bench.sm_mhz == 1848.0


def test_clock_drift_alone_does_not_fail() -> None:
    """The H200's case: do_bench ran at 1,856 MHz after perflab ran at 1,968. The raw
    ratio is 0.943, outside 5% (one pair, judged by the raw ratio, failed); the SM cycles
    agree."""
    one = RunPair(
        EngineRun(MATMUL_CYCLES / 1968.0, 1968.0), EngineRun(MATMUL_CYCLES / 1856.0, 1856.0)
    )
    assert abs(one.ratio - 1) > vs.TOLERANCE
    assert one.clock_corrected_ratio == pytest.approx(1.0)
    assert agreement([one])["passed"]
    gpu = _DriftingGpu(1968.0, 16.0, MATMUL_CYCLES)
    found = agreement(interleaved(gpu.engine("perflab"), gpu.engine("do_bench"), gpu.read))
    assert found["passed"], found["detail"]
    assert found["disagreement"] == 0.0
    assert found["clock_corrected_ratio"] == pytest.approx(1.0, abs=1e-3)


def test_a_memory_bound_kernel_under_drift_does_not_fail() -> None:
    """A copy's time does not follow the SM clock: the raw ratio is 1 and the corrected
    one is off by the drift; either may be right, so neither fails."""
    pairs = [RunPair(EngineRun(130.0, 1968.0), EngineRun(130.0, 1856.0))] * 4
    found = agreement(pairs)
    assert found["ratio"] == 1.0 and found["clock_corrected_ratio"] > 1.05
    assert found["passed"]


def test_a_real_disagreement_fails_with_or_without_drift() -> None:
    steady = _DriftingGpu(1980.0, 0.0, MATMUL_CYCLES)
    found = agreement(
        interleaved(steady.engine("perflab", slower=1.10), steady.engine("do_bench"), steady.read)
    )
    assert not found["passed"]
    assert found["ratio"] == pytest.approx(1.10) and found["noise"] == pytest.approx(0.0)
    assert "10.0% apart, allowed 5% + noise 0.0%" in found["detail"]
    drifting = _DriftingGpu(1968.0, 16.0, MATMUL_CYCLES)
    found = agreement(
        interleaved(
            drifting.engine("perflab", slower=1.12), drifting.engine("do_bench"), drifting.read
        )
    )
    assert not found["passed"], found["detail"]


def test_unknown_clocks_judge_the_raw_ratio() -> None:
    def no_clock() -> None:
        return None

    close = interleaved(lambda: 103.0, lambda: 100.0, no_clock, pairs=3)
    assert all(p.perflab.sm_mhz is None for p in close)
    assert agreement(close)["passed"]
    apart = interleaved(lambda: 110.0, lambda: 100.0, no_clock, pairs=3)
    assert not agreement(apart)["passed"]


def test_the_noise_of_the_pairs_widens_the_allowance() -> None:
    """Pairs that scatter by +-8% between themselves cannot show a 7% gap."""
    ratios = [0.99, 1.07, 1.15, 1.07]
    pairs = [RunPair(EngineRun(100.0 * r, None), EngineRun(100.0, None)) for r in ratios]
    found = agreement(pairs)
    assert found["noise"] == pytest.approx(0.08)
    assert found["passed"]
    assert found["ratio_spread"] == [pytest.approx(0.99), pytest.approx(1.15)]


def test_each_kernel_is_compared_in_pairs_with_the_clock_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """compare_on_gpu's wiring, with the two engines and NVML faked: every kernel gets its
    pairs, and a reader without NVML says why the clocks are unknown."""
    calls: list[tuple[str, str]] = []

    def ours(fn: Callable[[], object], label: str, options: dict[str, Any]) -> float:
        calls.append(("perflab", label))
        assert options == {"budget_ms": 150}
        return 100.0

    def theirs(fn: Callable[[], object]) -> float:
        calls.append(("do_bench", str(fn())))
        return 100.0

    reader = vs.SmClockReader(None, None, "pynvml is not installed")
    monkeypatch.setattr(vs, "_perflab_us", ours)
    monkeypatch.setattr(vs, "_do_bench_us", theirs)
    monkeypatch.setattr(vs.SmClockReader, "for_current_device", classmethod(lambda cls: reader))
    kernels = {"a": (lambda: "a", {"budget_ms": 150}), "b": (lambda: "b", {"budget_ms": 150})}
    found = vs.compare_on_gpu(kernels, pairs=3)
    assert (
        calls
        == [("perflab", "a"), ("do_bench", "a")] * 3
        + [
            ("perflab", "b"),
            ("do_bench", "b"),
        ]
        * 3
    )
    assert all(row["passed"] and len(row["pairs"]) == 3 for row in found.values())
    assert found["a"]["detail"].endswith("; SM clocks unknown (pynvml is not installed)")
    assert found["a"]["pairs"][0]["perflab_sm_mhz"] is None


class _FakeNvml:
    NVML_CLOCK_SM = 1

    def __init__(self, mhz: float) -> None:
        self.mhz = mhz
        self.shut = False

    def nvmlDeviceGetClockInfo(self, handle: object, kind: int) -> float:
        assert handle == "gpu-0" and kind == self.NVML_CLOCK_SM
        if self.mhz < 0:
            raise RuntimeError("NVML: GPU is lost")
        return self.mhz

    def nvmlShutdown(self) -> None:
        self.shut = True


def test_the_reader_gives_nvmls_sm_clock_or_none() -> None:
    nvml = _FakeNvml(1980.0)
    reader = vs.SmClockReader(nvml, "gpu-0", None)
    assert reader.read() == 1980.0
    nvml.mhz = -1.0  # a failed reading is an unknown clock, not an error
    assert reader.read() is None
    reader.close()
    assert nvml.shut and reader.read() is None
    assert vs.SmClockReader(None, None, "no driver").read() is None
