"""The timing engine against ``triton.testing.do_bench`` on the same kernels, in interleaved
pairs (perflab, do_bench, perflab, do_bench, ...) with the SM clock of every run.

One pair each, run one after the other, is not a comparison of the engines: on an H200
(2026-12-04) do_bench ran after six perflab runs, while the SM clock fell from 1,968 to
1,856 MHz, and a 6% gap in the clocks is a 6% gap in a compute-bound kernel's time.
Interleaving puts both engines under the same drift, and the clocks of each run (NVML)
say how much of what remains the drift can explain.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

PAIRS = 4
TOLERANCE = 0.05  # the engines may differ by 5% (their windows differ: see the README)


@dataclass(frozen=True)
class EngineRun:
    """One engine's median time of a kernel, and the SM clock (MHz) while it ran (None
    where NVML could not say)."""

    median_us: float
    sm_mhz: float | None


@dataclass(frozen=True)
class RunPair:
    """A perflab run and the do_bench run right after it."""

    perflab: EngineRun
    do_bench: EngineRun

    @property
    def ratio(self) -> float:
        """perflab's median over do_bench's."""
        return self.perflab.median_us / self.do_bench.median_us

    @property
    def clock_corrected_ratio(self) -> float:
        """The ratio of the two runs' SM cycles (time x clock): what it would be had both
        run at one clock, for a kernel whose time follows the SM clock. The raw ratio when
        a clock is unknown."""
        ours, theirs = self.perflab.sm_mhz, self.do_bench.sm_mhz
        if not ours or not theirs:
            return self.ratio
        return self.ratio * ours / theirs

    @property
    def disagreement(self) -> float:
        """How far from 1 the pair is, beyond what the clocks explain: a kernel's time
        follows the SM clock fully (compute-bound) or not at all (memory-bound) or in
        between, so any ratio between the raw and the clock-corrected one may be the
        drift's doing; the distance from 1 to that interval (0 when it holds 1)."""
        low, high = sorted((self.ratio, self.clock_corrected_ratio))
        return max(0.0, low - 1.0, 1.0 - high)


class PairDoc(TypedDict):
    perflab_us: float
    perflab_sm_mhz: float | None
    do_bench_us: float
    do_bench_sm_mhz: float | None
    ratio: float
    clock_corrected_ratio: float


class AgreementDoc(TypedDict):
    """The comparison of one kernel, as the report keeps it."""

    pairs: list[PairDoc]
    ratio: float
    ratio_spread: list[float]
    clock_corrected_ratio: float
    noise: float
    disagreement: float
    tolerance: float
    passed: bool
    detail: str


def agreement(pairs: Sequence[RunPair], tolerance: float = TOLERANCE) -> AgreementDoc:
    """Whether perflab and do_bench agree on a kernel, from interleaved pairs.

    The rule: each pair's disagreement is the distance from 1 to the interval between its
    raw ratio (perflab / do_bench) and its clock-corrected ratio (the SM cycles' ratio),
    so a gap the two runs' SM clocks can explain counts for nothing. The noise is half
    the range of the pairs' raw ratios (how much the comparison moves from one pair to
    the next). The engines disagree, and the check fails, only when the median pair's
    disagreement exceeds ``tolerance`` plus that noise.
    """
    if not pairs:
        raise ValueError("no pairs to compare")
    ratios = [p.ratio for p in pairs]
    noise = (max(ratios) - min(ratios)) / 2
    disagreement = statistics.median(p.disagreement for p in pairs)
    corrected = statistics.median(p.clock_corrected_ratio for p in pairs)
    passed = disagreement <= tolerance + noise
    ratio = statistics.median(ratios)
    detail = (
        f"perflab/do_bench {ratio:.3f} (pairs {min(ratios):.3f}-{max(ratios):.3f}, "
        f"clock-corrected {corrected:.3f}) over {len(pairs)} interleaved pairs: beyond the "
        f"clocks, {disagreement:.1%} apart, allowed {tolerance:.0%} + noise {noise:.1%}"
    )
    return {
        "pairs": [_pair_doc(p) for p in pairs],
        "ratio": ratio,
        "ratio_spread": [min(ratios), max(ratios)],
        "clock_corrected_ratio": corrected,
        "noise": noise,
        "disagreement": disagreement,
        "tolerance": tolerance,
        "passed": passed,
        "detail": detail,
    }


def _pair_doc(pair: RunPair) -> PairDoc:
    return {
        "perflab_us": pair.perflab.median_us,
        "perflab_sm_mhz": pair.perflab.sm_mhz,
        "do_bench_us": pair.do_bench.median_us,
        "do_bench_sm_mhz": pair.do_bench.sm_mhz,
        "ratio": pair.ratio,
        "clock_corrected_ratio": pair.clock_corrected_ratio,
    }


def interleaved(
    ours: Callable[[], float],
    theirs: Callable[[], float],
    read_mhz: Callable[[], float | None],
    pairs: int = PAIRS,
) -> list[RunPair]:
    """``pairs`` pairs of runs, alternating: ``ours()``, ``theirs()``, ``ours()``, ...
    (each returns a median in us), each with the SM clock read around it."""
    return [RunPair(_at_clock(ours, read_mhz), _at_clock(theirs, read_mhz)) for _ in range(pairs)]


def _at_clock(measure: Callable[[], float], read_mhz: Callable[[], float | None]) -> EngineRun:
    """One run and its SM clock: the mean of the readings just before and just after it
    (the clock of a run that throttled part-way lies between them)."""
    before = read_mhz()
    median_us = measure()
    after = read_mhz()
    known = [mhz for mhz in (before, after) if mhz]
    return EngineRun(median_us, sum(known) / len(known) if known else None)


class SmClockReader:
    """The current SM clock of one device from NVML (:mod:`perflab.capture.nvml`:
    pynvml, else the driver's library through ctypes). ``read()`` is None where NVML or
    the device cannot be read; ``why`` says why."""

    def __init__(self, nvml: Any, handle: Any, why: str | None) -> None:
        self.nvml, self.handle, self.why = nvml, handle, why

    @classmethod
    def for_current_device(cls) -> SmClockReader:
        """The reader of torch's current CUDA device, matched in NVML by UUID or PCI bus
        id (NVML's indices ignore ``CUDA_VISIBLE_DEVICES``)."""
        import torch

        from perflab.capture.gpu_clock import nvml_handle, torch_identity
        from perflab.capture.nvml import load_nvml

        nvml, why = load_nvml()
        if nvml is None:
            return cls(None, None, why)
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVML raises its own error types
            return cls(None, None, f"NVML did not start: {exc}")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        handle = nvml_handle(nvml, torch_identity(props))
        unmatched = "cannot match the CUDA device to an NVML device" if handle is None else None
        return cls(nvml, handle, unmatched)

    def read(self) -> float | None:
        if self.handle is None:
            return None
        with contextlib.suppress(Exception):  # a failed reading is an unknown clock
            mhz = float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
            return mhz if mhz > 0 else None
        return None

    def close(self) -> None:
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = self.handle = None


def _perflab_us(fn: Callable[[], object], label: str, options: dict[str, Any]) -> float:
    from perflab.capture.timer import time_function

    return time_function(fn, name=label, backend="cuda", **options).median_ns / 1e3


def _do_bench_us(fn: Callable[[], object]) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, return_mode="median")) * 1e3


def compare_on_gpu(
    kernels: dict[str, tuple[Callable[[], object], dict[str, Any]]], pairs: int = PAIRS
) -> dict[str, AgreementDoc]:
    """Each kernel (label -> (fn, perflab's options)) timed by perflab's engine and by
    do_bench (its defaults: 25 ms warm-up, 100 ms of repetitions, a 256 MB zeroing
    between them) in interleaved pairs, and judged by :func:`agreement`."""
    reader = SmClockReader.for_current_device()
    try:
        found = {}
        for label, (fn, options) in kernels.items():
            ours = functools.partial(_perflab_us, fn, label, options)
            theirs = functools.partial(_do_bench_us, fn)
            found[label] = agreement(interleaved(ours, theirs, reader.read, pairs))
            if reader.why is not None:
                found[label]["detail"] += f"; SM clocks unknown ({reader.why})"
    finally:
        reader.close()
    return found
