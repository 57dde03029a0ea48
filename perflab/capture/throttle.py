"""The clock check of a timing run: NVML read from a background thread while the samples
run, each read attributed to the samples it falls in or beside, and a sample dropped only
where NVML confirms that a power or thermal limit held its clock down.

The rule:

- every POLL_INTERVAL_S (1 ms) from before the first sample to after the last, a thread
  reads NVML's SM clock (``nvmlDeviceGetClockInfo``), its clock-event reasons
  (``nvmlDeviceGetCurrentClocksEventReasons``, formerly ``...ClocksThrottleReasons``) and
  its power and thermal violation counters (``nvmlDeviceGetViolationStatus``), each with
  the host time it was read at;
- each sample's window is known in host time (its marks, anchored at the sync that ended
  its round); its polls are those inside the window or, when fewer than two fall inside
  it (a sample shorter than the poll interval), the last one at or before its start to
  the first at or after its end. They give the sample's minimum and median SM clock, the
  reasons active, and whether a violation counter advanced from the first to the last;
- NVML confirms throttling in a sample when one of its polls has a power or thermal
  reason active (:data:`perflab.capture.nvml.THROTTLE_REASONS`) or a violation counter
  advanced over them;
- a confirmed sample whose minimum clock was below THROTTLE_CLOCK_FRACTION (75%) of the
  default SM clock is dropped; one at or above it is kept and counted as throttled.
  nvbench drops every sample below 75% of the default clock; here that cut is a
  reference, applied only where NVML says a limit held the clock down. A sample below
  the cut with no reason active and no counter advancing is kept, and the result says so:
  nothing held its clock down, the GPU chose it for the load.

The polling thread is started by :meth:`ThrottleWatch.start` and stopped by
:meth:`ThrottleWatch.finish` or :meth:`ThrottleWatch.close`, which the timer calls in a
``finally`` clause; :func:`active_pollers` counts the ones still running.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.capture.gpu_clock import nvml_handle
from perflab.capture.nvml import THROTTLE_REASONS

if TYPE_CHECKING:
    from perflab.capture.clocks import Clock

POLL_INTERVAL_S = 0.001
MAX_POLLS = 100_000  # beyond this every other poll is let go and the interval doubles
STOP_TIMEOUT_S = 10.0
THROTTLE_CLOCK_FRACTION = 0.75  # nvbench drops samples below 75% of the default SM clock
POLICIES = ("NVML_PERF_POLICY_POWER", "NVML_PERF_POLICY_THERMAL")
POLL_THREAD = "perflab-nvml-poll"
UNKNOWN = -1  # a reason mask or counter NVML did not give
THROTTLE_MASK = sum(THROTTLE_REASONS)

Reading = tuple[float, int, tuple[int, ...]]  # SM clock (MHz, NaN unknown), reasons, counters


def active_pollers() -> int:
    """How many NVML polling threads are running (none outside a timing run)."""
    return sum(t.name == POLL_THREAD and t.is_alive() for t in threading.enumerate())


def reason_names(mask: int) -> list[str]:
    """The power and thermal reasons set in an NVML clock-event reason mask."""
    if mask < 0:
        return []
    return [text for bit, text in THROTTLE_REASONS.items() if mask & bit]


# --- polling ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Polls:
    """What the polling thread read: host time (``perf_counter_ns``), SM clock (MHz, NaN
    where unknown), reason mask and one violation counter per policy (ns; UNKNOWN where
    NVML did not give them), one row per poll, in time order."""

    at_ns: npt.NDArray[np.float64]
    sm_mhz: npt.NDArray[np.float64]
    reasons: npt.NDArray[np.int64]
    violation_ns: npt.NDArray[np.int64]  # shape (polls, len(POLICIES))
    interval_s: float
    error: str | None = None


class NvmlPoller:
    """Calls ``read()`` every ``interval_s`` on a background thread, from :meth:`start`
    to :meth:`stop`, and once more on the caller's thread at each end, so that the polls
    bracket everything in between. A failing read ends the polling (``error`` says why)."""

    def __init__(self, read: Callable[[], Reading], interval_s: float = POLL_INTERVAL_S) -> None:
        self._read = read
        self.interval_s = interval_s
        self._at = array("d")
        self._mhz = array("d")
        self._reasons = array("q")
        self._counters = [array("q") for _ in POLICIES]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._poll_once()
        self._thread = threading.Thread(target=self._run, name=POLL_THREAD, daemon=True)
        self._thread.start()

    def stop(self) -> Polls:
        """Stop the thread (at once; idempotent) and return every poll."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join(STOP_TIMEOUT_S)
            if thread.is_alive():
                self.error = self.error or f"an NVML read did not return in {STOP_TIMEOUT_S:g} s"
            else:
                self._poll_once()
        return self.polls()

    def polls(self) -> Polls:
        # a thread that did not stop in time may be part-way through appending one poll
        count = min(len(c) for c in self._columns())
        counters = np.asarray([c[:count] for c in self._counters], dtype=np.int64).T
        return Polls(
            at_ns=np.asarray(self._at[:count], dtype=np.float64),
            sm_mhz=np.asarray(self._mhz[:count], dtype=np.float64),
            reasons=np.asarray(self._reasons[:count], dtype=np.int64),
            violation_ns=counters.reshape(count, len(POLICIES)),
            interval_s=self.interval_s,
            error=self.error,
        )

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s) and self.error is None:
            self._poll_once()

    def _poll_once(self) -> None:
        try:
            at = time.perf_counter_ns()
            mhz, reasons, counters = self._read()
        except Exception as exc:  # NVML raises its own types: stop polling, say why
            self.error = f"{type(exc).__name__}: {exc}"
            return
        if len(self._at) >= MAX_POLLS:
            self._thin()
        self._at.append(float(at))
        self._mhz.append(float(mhz))
        self._reasons.append(int(reasons))
        for column, value in zip(self._counters, counters, strict=True):
            column.append(int(value))

    def _columns(self) -> tuple[array[Any], ...]:
        return (self._at, self._mhz, self._reasons, *self._counters)

    def _thin(self) -> None:
        """Keep every other poll and poll half as often: a run of an hour stays bounded."""
        for column in self._columns():
            del column[1::2]
        self.interval_s *= 2


# --- polls to samples ---------------------------------------------------------------------


@dataclass(frozen=True)
class SampleClocks:
    """Per sample, from the polls attributed to it: the least and the median SM clock
    (MHz, NaN with no clock read), the power and thermal reasons active in any of them
    (a mask) and whether a violation counter advanced over them."""

    min_mhz: npt.NDArray[np.float64]
    median_mhz: npt.NDArray[np.float64]
    reasons: npt.NDArray[np.int64]
    violated: npt.NDArray[np.bool_]

    @property
    def throttled(self) -> npt.NDArray[np.bool_]:
        """NVML confirms throttling: a power or thermal reason, or a counter advancing."""
        return np.asarray((self.reasons != 0) | self.violated, dtype=np.bool_)


def attribute(polls: Polls, start_at_ns: npt.ArrayLike, end_at_ns: npt.ArrayLike) -> SampleClocks:
    """Each sample's polls summed up as :class:`SampleClocks`: the polls inside its
    window, or, when fewer than two fall inside it (a sample shorter than the poll
    interval), the last poll at or before its start to the first at or after its end. A
    sample with no known window (NaN) or no polls has NaN clocks and nothing confirmed."""
    starts = np.asarray(start_at_ns, dtype=np.float64)
    ends = np.asarray(end_at_ns, dtype=np.float64)
    n = starts.size
    out = SampleClocks(
        np.full(n, math.nan), np.full(n, math.nan), np.zeros(n, np.int64), np.zeros(n, np.bool_)
    )
    last = polls.at_ns.size - 1
    known = np.isfinite(starts) & np.isfinite(ends)
    if last < 0 or not known.any():
        return out
    starts, ends = np.where(known, starts, 0.0), np.where(known, ends, 0.0)
    first_in = np.searchsorted(polls.at_ns, starts, "left")
    last_in = np.searchsorted(polls.at_ns, ends, "right") - 1
    inside = last_in - first_in >= 1
    before = np.clip(np.searchsorted(polls.at_ns, starts, "right") - 1, 0, last)
    after = np.clip(np.searchsorted(polls.at_ns, ends, "left"), 0, last)
    lo = np.where(inside, first_in, before)
    hi = np.maximum(np.where(inside, last_in, after), lo)
    seen: dict[tuple[int, int], tuple[float, float, int, bool]] = {}
    for i in np.flatnonzero(known):
        key = (int(lo[i]), int(hi[i]))
        if key not in seen:  # short samples between the same two polls share them
            seen[key] = _summed(polls, *key)
        out.min_mhz[i], out.median_mhz[i], out.reasons[i], out.violated[i] = seen[key]
    return out


def _summed(polls: Polls, lo: int, hi: int) -> tuple[float, float, int, bool]:
    mhz = polls.sm_mhz[lo : hi + 1]
    mhz = mhz[np.isfinite(mhz)]
    masks = polls.reasons[lo : hi + 1]
    mask = int(np.bitwise_or.reduce(masks[masks >= 0] & THROTTLE_MASK, initial=0))
    first, after = polls.violation_ns[lo], polls.violation_ns[hi]
    advanced = bool(((after > first) & (first >= 0)).any())
    if not mhz.size:
        return math.nan, math.nan, mask, advanced
    return float(mhz.min()), float(np.median(mhz)), mask, advanced


def below_clock(mhz: npt.ArrayLike, reference_mhz: float) -> npt.NDArray[np.bool_]:
    """Clocks below THROTTLE_CLOCK_FRACTION of the reference (default) SM clock; an
    unknown clock (NaN) or reference is never below."""
    clocks = np.asarray(mhz, dtype=np.float64)
    if not (math.isfinite(reference_mhz) and reference_mhz > 0):
        return np.zeros(clocks.shape, dtype=np.bool_)
    with np.errstate(invalid="ignore"):
        return np.asarray(clocks < THROTTLE_CLOCK_FRACTION * reference_mhz, dtype=np.bool_)


# --- the report ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ThrottleReport:
    """What the clock check of a run found (:meth:`ThrottleWatch.finish`): :meth:`recorded`
    is the result's ``throttle`` field and :meth:`sample_clocks` its per-sample clocks;
    ``drop`` (one flag per sample) and ``warnings`` are for the timer to apply."""

    checked: bool
    why: str | None = None  # why nothing was checked
    method: str = ""
    default_sm_mhz: float | None = None
    default_from: str | None = None
    polls: int = 0
    poll_interval_ms: float | None = None
    clocks: SampleClocks | None = None
    violation_ns: dict[str, int] = field(default_factory=dict)  # gained during the run
    reasons_after: list[str] = field(default_factory=list)  # active at its end
    drop: npt.NDArray[np.bool_] | None = None  # confirmed throttled and below the cut
    low: npt.NDArray[np.bool_] | None = None  # below the cut
    warnings: list[str] = field(default_factory=list)

    def sample_clocks(
        self, keep: npt.NDArray[np.bool_]
    ) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.float64] | None]:
        """The kept samples' least and median SM clock (None when not read)."""
        if self.clocks is None:
            return None, None
        return self.clocks.min_mhz[keep], self.clocks.median_mhz[keep]

    def recorded(self) -> dict[str, object]:
        """The ``throttle`` field a :class:`~perflab.model.timing.TimingResult` keeps."""
        if not self.checked or self.clocks is None:
            return {"checked": False, "why": self.why}
        clocks, throttled = self.clocks, self.clocks.throttled
        low = self.low if self.low is not None else np.zeros(throttled.size, np.bool_)
        window = _summary(clocks)
        return {
            "checked": True,
            "method": self.method,
            "default_sm_mhz": self.default_sm_mhz,
            "default_from": self.default_from,
            "poll_interval_ms": self.poll_interval_ms,
            "polls": self.polls,
            "window_sm_mhz": window,
            "min_sm_mhz": window["min"] if window else None,
            "violation_ns": self.violation_ns,
            "reasons_seen": reason_names(int(np.bitwise_or.reduce(clocks.reasons, initial=0))),
            "reasons_after": self.reasons_after,
            "throttled_samples": int(throttled.sum()),
            "dropped_samples": int(self.drop.sum()) if self.drop is not None else 0,
            "low_clock_kept_samples": int((low & ~throttled).sum()),
        }

    def __getitem__(self, key: str) -> object:
        """The report as one mapping: the recorded field with ``drop`` and ``warnings``."""
        if key == "warnings":
            return self.warnings
        if key == "drop" and self.drop is not None:
            return self.drop
        return self.recorded()[key]


def _summary(clocks: SampleClocks) -> dict[str, float] | None:
    """The least clock any sample saw, and the median and greatest of their medians."""
    least = clocks.min_mhz[np.isfinite(clocks.min_mhz)]
    middle = clocks.median_mhz[np.isfinite(clocks.median_mhz)]
    if not least.size:
        return None
    return {
        "min": round(float(least.min()), 1),
        "median": round(float(np.median(middle)), 1),
        "max": round(float(middle.max()), 1),
    }


# --- the watch ----------------------------------------------------------------------------


class ThrottleWatch:
    """The clock check of a run (the rule is in this module's docstring). NVML comes from
    pynvml or ``libnvidia-ml.so.1`` (:mod:`perflab.capture.nvml`); without it, or
    without a GPU, :meth:`finish` returns an unchecked report that says why."""

    def __init__(self, why: str | None, clock: Clock | None = None) -> None:
        self.why = why  # why nothing can be checked (no GPU); None on a GPU
        self.clock = clock
        self.nvml: Any = None
        self.handle: Any = None
        self.nvml_why: str | None = None
        self.reference_mhz = math.nan
        self.reference = ""
        self.poller: NvmlPoller | None = None
        self._first: tuple[int, ...] = ()

    @classmethod
    def start(cls, clock: Clock) -> ThrottleWatch:
        """Open NVML for the clock's device and start polling it (a GPU only)."""
        if clock.name != "cuda":
            return cls("no GPU: the throttle check reads an NVIDIA GPU's clocks")
        watch = cls(None, clock)
        watch._open_nvml(getattr(clock, "identity", {}))
        if watch.nvml is None:
            return watch
        watch.reference_mhz, watch.reference = watch._nvml_reference()
        if not math.isfinite(watch.reference_mhz):
            mhz = float(getattr(clock, "max_sm_mhz", math.nan))
            watch.reference_mhz, watch.reference = mhz, "the CUDA device's maximum SM clock"
        try:
            watch.poller = NvmlPoller(watch._read)
            watch.poller.start()
        except BaseException:
            watch.close()
            raise
        return watch

    def _open_nvml(self, identity: dict[str, str]) -> None:
        from perflab.capture.nvml import load_nvml

        nvml, why = load_nvml()
        if nvml is None:
            self.nvml_why = why
            return
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVML raises its own error types
            self.nvml_why = f"NVML did not start: {exc}"
            return
        handle = nvml_handle(nvml, identity)
        if handle is None:
            with contextlib.suppress(Exception):
                nvml.nvmlShutdown()
            self.nvml_why = "cannot match the CUDA device to an NVML device (by UUID or PCI bus id)"
            return
        self.nvml, self.handle = nvml, handle

    def _nvml_reference(self) -> tuple[float, str]:
        nvml, h = self.nvml, self.handle
        for getter, label in (
            ("nvmlDeviceGetDefaultApplicationsClock", "NVML's default applications SM clock"),
            ("nvmlDeviceGetMaxClockInfo", "NVML's maximum SM clock"),
        ):
            with contextlib.suppress(Exception):
                mhz = float(getattr(nvml, getter)(h, nvml.NVML_CLOCK_SM))
                if mhz > 0:
                    return mhz, label
        return math.nan, ""

    def _read(self) -> Reading:
        """One poll: the SM clock, the reason mask and the violation counters (each
        UNKNOWN, or NaN, where NVML does not give it)."""
        nvml, h = self.nvml, self.handle
        mhz = math.nan
        with contextlib.suppress(Exception):
            mhz = float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))
        return mhz, self._reasons(), tuple(self._violation(p) for p in POLICIES)

    def _reasons(self) -> int:
        for getter in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            with contextlib.suppress(Exception):
                return int(getattr(self.nvml, getter)(self.handle))
        return UNKNOWN

    def _violation(self, policy: str) -> int:
        with contextlib.suppress(Exception):
            status = self.nvml.nvmlDeviceGetViolationStatus(self.handle, getattr(self.nvml, policy))
            return int(status.violationTime)
        return UNKNOWN

    def finish(self, start_at_ns: npt.ArrayLike, end_at_ns: npt.ArrayLike) -> ThrottleReport:
        """Stop polling and judge each sample, from its window in host time
        (``perf_counter_ns``: :attr:`perflab.capture.sampling.Samples.start_at_ns` and
        ``end_at_ns``)."""
        if self.why is not None:
            return ThrottleReport(checked=False, why=self.why)
        if self.poller is None:
            why = f"NVML unavailable ({self.nvml_why})"
            return ThrottleReport(
                checked=False, why=why, warnings=[f"throttle check unavailable: {why}"]
            )
        polls = self.poller.stop()
        clocks = attribute(polls, start_at_ns, end_at_ns)
        low = below_clock(clocks.min_mhz, self.reference_mhz)
        drop = clocks.throttled & low
        violated = _gained(polls)
        known = math.isfinite(self.reference_mhz)
        return ThrottleReport(
            checked=True,
            method=(
                f"NVML polled every {polls.interval_s * 1e3:g} ms during the samples (SM clock, "
                "clock-event reasons, power and thermal violation counters), the polls "
                "attributed to samples by host time"
            ),
            default_sm_mhz=self.reference_mhz if known else None,
            default_from=(self.reference or None) if known else None,
            polls=int(polls.at_ns.size),
            poll_interval_ms=polls.interval_s * 1e3,
            clocks=clocks,
            violation_ns=violated,
            reasons_after=reason_names(int(polls.reasons[-1])) if polls.reasons.size else [],
            drop=drop,
            low=low,
            warnings=self._warnings(polls, clocks, low, drop, violated),
        )

    def _warnings(
        self,
        polls: Polls,
        clocks: SampleClocks,
        low: npt.NDArray[np.bool_],
        drop: npt.NDArray[np.bool_],
        violated: dict[str, int],
    ) -> list[str]:
        said = []
        if polls.error is not None:
            said.append(f"NVML polling stopped early ({polls.error}): later samples not checked")
        if not np.isfinite(clocks.min_mhz).any():
            said.append("SM clock per sample not read: NVML gave no clock during the samples")
        elif not math.isfinite(self.reference_mhz):
            said.append(
                "SM clock per sample read but not compared: no default SM clock known "
                "(neither NVML nor the CUDA device gave one)"
            )
        throttled, n = clocks.throttled, drop.size
        cut = f"{self.reference_mhz:.0f} MHz"
        if drop.any():
            said.append(
                f"dropped {int(drop.sum())} of {n} samples: NVML confirmed throttling during "
                f"them ({_evidence(clocks, drop)}) and their SM clock fell below 75% of the "
                f"default ({cut}; lowest {_lowest(clocks, drop)})"
            )
        kept = throttled & ~drop
        if kept.any():
            why_kept = (
                f"their SM clock stayed at or above 75% of the default ({cut}; lowest "
                f"{_lowest(clocks, kept)})"
                if math.isfinite(self.reference_mhz)
                else "no default SM clock to compare their clock with"
            )
            said.append(
                f"clocks throttled in {int(kept.sum())} of {n} samples "
                f"({_evidence(clocks, kept)}), kept: {why_kept}"
            )
        chosen = low & ~throttled
        if chosen.any():
            said.append(
                f"{int(chosen.sum())} of {n} samples ran below 75% of the default SM clock "
                f"({cut}; lowest {_lowest(clocks, chosen)}) with no throttle reason and no "
                "violation in NVML: kept (nothing held the clock down; the GPU chose it)"
            )
        if violated:
            spent = ", ".join(f"{k} {ns / 1e6:.1f} ms" for k, ns in violated.items())
            said.append(f"clocks throttled during the run: {spent}")
        return said

    def close(self) -> None:
        """Stop polling (if still running) and shut NVML down; safe to call twice."""
        if self.poller is not None and self.poller.running:
            self.poller.stop()
        if self.nvml is not None:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
            self.nvml = None


def _gained(polls: Polls) -> dict[str, int]:
    """What each violation counter gained from the first poll to the last (ns)."""
    if polls.at_ns.size < 2:
        return {}
    first, last = polls.violation_ns[0], polls.violation_ns[-1]
    names = (policy.rsplit("_", 1)[-1].lower() for policy in POLICIES)
    return {
        name: int(b - a) for name, a, b in zip(names, first, last, strict=True) if a >= 0 and b > a
    }


def _evidence(clocks: SampleClocks, which: npt.NDArray[np.bool_]) -> str:
    """What NVML said about these samples: the reasons seen and counters advancing."""
    parts = reason_names(int(np.bitwise_or.reduce(clocks.reasons[which], initial=0)))
    if clocks.violated[which].any():
        parts.append("a violation counter advanced")
    return ", ".join(parts)


def _lowest(clocks: SampleClocks, which: npt.NDArray[np.bool_]) -> str:
    values = clocks.min_mhz[which]
    values = values[np.isfinite(values)]
    return f"{values.min():.0f} MHz" if values.size else "clock not read"
