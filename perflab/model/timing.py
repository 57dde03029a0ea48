"""TimingResult: every sample of a timed function, and what can be said about them."""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.model import stats
from perflab.model.display import Shown
from perflab.model.optable import OpTable
from perflab.model.serialize import dump_json, load_json
from perflab.model.units import format_ns

if TYPE_CHECKING:
    from perflab.model.saved import TimingDoc

KIND = "TimingResult"
MAX_CALLS = 10_000_000  # calls per sample: the timing engine's own limit
# What a timer can report per call: one 1 ns tick shared by the most calls a sample holds,
# up to one day. A 0 ns sample means nothing was timed (no clock reads less than one tick);
# outside these bounds a median cannot be compared or drawn.
MIN_SAMPLE_NS = 1.0 / MAX_CALLS
MAX_SAMPLE_NS = 86_400e9
SAMPLE_BOUNDS = (
    f"a per-call time from {MIN_SAMPLE_NS:g} ns (one 1 ns tick over {MAX_CALLS:,} calls) "
    f"to {MAX_SAMPLE_NS:g} ns (one day)"
)


def _json_safe(value: object) -> object:
    """Plain JSON values: arrays become lists, non-finite floats null."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


# a timer warning in the words results were saved with before, and its words now: the
# empty window was called the timer's floor (a kernel can read below it) and the tick its
# resolution
_RENAMED_WARNINGS = (
    (
        re.compile(r"^the median is within (\S+)x the timer's floor \("),
        r"the median is within \1x an empty sample's window (",
    ),
    (re.compile(r"^the timer's resolution \("), "the timer's tick ("),
    # results saved before the host-bound flag needed the GPU's evidence: host time alone,
    # which also flags a host held back by a full launch queue while the GPU stayed busy
    (
        re.compile(
            r"^host-bound: in (\d+) of (\d+) samples the GPU may have waited for the host inside "
            r"the timed window \(the queue filler was shorter than the host's time to issue the "
            r"sample\).*$"
        ),
        r"host-bound by an older rule, host time alone: \1 of \2 samples took the host longer "
        r"to issue than their queue filler; a host held back by a full launch queue reads the same "
        r"while the GPU stays busy, so this is not evidence that the GPU waited",
    ),
    # ... and before the SM clock was read by NVML during the window: the filler's clock,
    # measured while one thread spins just before the window, with no throttle reason read
    (
        re.compile(
            r"^(dropped \d+ of \d+ samples) run below 75% of the default SM clock \((.*)\)$"
        ),
        r"\1 by an older rule: their queue filler's clock, read just before the window, fell "
        r"below 75% of the default SM clock (\2); NVML reported no throttle reason after the run",
    ),
)


def current_words(warning: str) -> str:
    """``warning`` in today's words, where a saved result has it in older ones."""
    for before, now in _RENAMED_WARNINGS:
        warning = before.sub(now, warning, count=1)
    return warning


def _column(values: npt.NDArray[np.float64] | None) -> list[float | None] | None:
    """A column as saved: NaN (nothing read) as null."""
    if values is None:
        return None
    return [float(v) if math.isfinite(v) else None for v in values.tolist()]


def _array(values: list[float | None] | None) -> npt.NDArray[np.float64] | None:
    """A saved column back as an array: null as NaN."""
    if values is None:
        return None
    return np.asarray([math.nan if v is None else v for v in values], dtype=np.float64)


def measurable(values: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Which values are times a timer can report (SAMPLE_BOUNDS; NaN is not)."""
    array = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.asarray((array >= MIN_SAMPLE_NS) & (array <= MAX_SAMPLE_NS), dtype=np.bool_)


def first_unmeasurable(values: npt.ArrayLike) -> int | None:
    """Index of the first value no timer can have reported (outside SAMPLE_BOUNDS, or
    not finite), or None when every value is a measurable time."""
    bad = ~measurable(np.reshape(values, -1))
    return int(np.argmax(bad)) if bad.any() else None


def unmeasurable_text(value: float) -> str:
    """Why ``value`` is not a time a timer reports."""
    why = " (nothing was timed: a clock reads no less than one tick)" if value == 0 else ""
    return f"must be {SAMPLE_BOUNDS}, not {float(value)!r}{why}"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def ratio_text(value: float) -> str:
    """A ratio that stays readable at any size: 0.550, 2.75e-04, 3.64e+03; never 0.000."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g}"
    if 0.01 <= abs(value) < 1000:
        return f"{value:.3f}"
    return f"{value:.2e}"  # 2.75e-04, 3.64e+03


def times_text(value: float) -> str:
    """``1.82x``, ``364x``, ``3,640x``: how many times, with thousands separated."""
    if not math.isfinite(value):
        return f"{value:g}x"
    return f"{value:,.0f}x" if value >= 100 else f"{value:.3g}x"


# what ran the timed code, as TimingResult.interpreter records it
TRITON_INTERPRETER = "triton"  # a Triton kernel ran in Triton's interpreter (TRITON_INTERPRET=1)
NO_INTERPRETER = "none"  # watched: no Triton kernel ran in Triton's interpreter
INTERPRETER_WORDS = {
    TRITON_INTERPRETER: "in Triton's interpreter",
    NO_INTERPRETER: "without Triton's interpreter",
}


@dataclass
class Comparison(Shown):
    """How ``result`` compares with ``baseline``: ratio of median times, with its 95% CI.

    ``comparable`` is False when the two ran on different backends or devices, or one in an
    interpreter and the other not: ``why`` says so, and there is no ratio (NaN), since it
    would time the difference between them rather than the code. ``notes`` say what else
    differs and weighs on the ratio (the precisions)."""

    name: str
    baseline_name: str
    ratio: float
    low: float
    high: float
    significant: bool
    method: str = ""
    comparable: bool = True
    why: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if not self.comparable:
            return "not comparable"
        if not self.significant:
            return "no significant difference"
        if self.ratio < 1:
            return f"{times_text(1 / self.ratio)} faster"
        return f"{times_text(self.ratio)} slower"

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.model.json_outputs.ComparisonView` declares."""
        from perflab.model.json_outputs import ComparisonView
        from perflab.model.schema import encode

        return encode(
            ComparisonView(
                name=self.name,
                baseline=self.baseline_name,
                comparable=self.comparable,
                why=self.why,
                ratio=_finite(self.ratio),
                ci95=(_finite(self.low), _finite(self.high)),
                significant=self.significant,
                method=self.method,
                notes=list(self.notes),
            )
        )


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _where(r: TimingResult, other: TimingResult) -> str:
    """Where ``r`` ran, in words, naming the CPU only where both ran on CPUs that differ."""
    if r.backend != "cpu":
        return r.device
    same = other.backend != "cpu" or other.device == r.device
    return "the CPU" if same else f"the CPU ({r.device})"


def _ran(r: TimingResult, other: TimingResult) -> str:
    how = INTERPRETER_WORDS.get(r.interpreter or "", "")
    return f"on {_where(r, other)}" + (f" {how}" if how else "")


def not_comparable(a: TimingResult, b: TimingResult, label: str) -> str:
    """Why the times of ``a`` and ``b`` (called ``label``) make no speed-up, or "" when
    they do: each ran on another backend or device, or one in an interpreter and the other
    not (unknown for results saved before it was recorded: then it is not held against
    them)."""
    interpreted = None not in (a.interpreter, b.interpreter) and a.interpreter != b.interpreter
    if interpreted:
        cause = "a ratio would time the interpreter, not the kernels"
    elif (a.backend, a.device) != (b.backend, b.device):
        cause = "a ratio would compare the machines and their clocks, not the code"
    else:
        return ""
    return f"{a.name} ran {_ran(a, b)}, {label} {_ran(b, a)}: {cause}"


def comparison_notes(a: TimingResult, b: TimingResult, label: str) -> list[str]:
    """What differs between two comparable results and weighs on their ratio."""
    notes = []
    if a.interpreter == b.interpreter == TRITON_INTERPRETER:
        notes.append(
            "both ran in Triton's interpreter: the ratio times the interpreter, not the "
            "kernels as compiled code would run"
        )
    for one, other, name in ((a, b, a.name), (b, a, label)):
        if one.interpreter is None and other.interpreter == TRITON_INTERPRETER:
            notes.append(
                f"{name} does not record whether it ran in Triton's interpreter (saved "
                "before perflab kept it), the other did: if it did not, the ratio times "
                "the interpreter"
            )
    if None not in (a.dtype, b.dtype) and a.dtype != b.dtype:
        notes.append(
            f"the precisions differ ({a.name}: {a.dtype}, {label}: {b.dtype}): the ratio "
            "measures the change of precision as well as of the code"
        )
    return notes


@dataclass
class TimingResult(Shown):
    """Per-call times of one timed function (``samples_ns``), kept in full.

    ``number`` is how many calls each raw sample averaged over (1 when every call was
    timed on its own, as with an L2 flush before each). ``host_ns`` is the host's time to
    issue each sample (all its calls), ``stop_reason`` why sampling stopped (``noise``,
    ``budget``, ``repeat``, ``budget-cut`` when the budget ended a ``-r`` count early,
    ``max_samples``), ``throttle`` what the clock check found (``{"checked": False,
    "why": ...}`` when it could not run). ``empty_window_ns`` is what the timer reads for
    a sample of nothing (on a GPU: one empty kernel between the events): a warning
    threshold, not a floor, since samples near it are dominated by the event pair's
    overhead and a short kernel can read below it. ``tick_ns`` is the clock's tick, the
    step every reading comes in (32 ns for CUDA events on an H200; their accuracy, about
    0.5 us by NVIDIA's documentation, is another matter). Both are per sample, None when
    unknown (results saved before they were recorded); files that call them ``floor_ns``
    and ``resolution_ns`` load too. ``sm_clock_min_mhz`` and ``sm_clock_median_mhz`` are
    the least and the median SM clock NVML read during each sample (NaN where none was
    read; None when the clocks were not polled).

    What the code ran on, beside ``backend`` and ``device``: ``interpreter`` is
    ``"triton"`` when a Triton kernel ran in Triton's interpreter (``TRITON_INTERPRET=1``,
    on the CPU), ``"none"`` when the run was watched and none did, None when unknown (a
    result saved before it was recorded, or a run that loaded Triton's interpreter itself);
    ``dtype`` is the precision the timed arithmetic ran in (``"fp32"``, ``"tf32"``,
    ``"bf16"``...) where known, and ``dtype_why`` how it is known (``"--dtype"``, "the
    cell's matmuls ran in float32"). :meth:`compare` refuses a comparison across backends,
    devices or interpreters, and says when the precisions differ.
    """

    samples_ns: npt.NDArray[np.float64]
    backend: str
    device: str
    name: str = "cell"
    number: int = 1
    warnings: list[str] = field(default_factory=list)
    created: str = field(default_factory=now_iso)
    versions: dict[str, str] = field(default_factory=dict)
    options: dict[str, object] = field(default_factory=dict)
    kernels: OpTable | None = None
    flops: float | None = None
    bytes: float | None = None
    replayed_from: str | None = None
    host_ns: npt.NDArray[np.float64] | None = None
    stop_reason: str = ""
    throttle: dict[str, object] = field(default_factory=dict)
    empty_window_ns: float | None = None
    tick_ns: float | None = None
    sm_clock_min_mhz: npt.NDArray[np.float64] | None = None
    sm_clock_median_mhz: npt.NDArray[np.float64] | None = None
    interpreter: str | None = None
    dtype: str | None = None
    dtype_why: str = ""

    def __post_init__(self) -> None:
        self.samples_ns = np.asarray(self.samples_ns, dtype=np.float64)
        if self.host_ns is not None:
            self.host_ns = np.asarray(self.host_ns, dtype=np.float64)
        for name in ("sm_clock_min_mhz", "sm_clock_median_mhz"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, np.asarray(value, dtype=np.float64))

    # the names these had before (read-only): code written against them keeps working
    @property
    def floor_ns(self) -> float | None:
        """:attr:`empty_window_ns` under its former name."""
        return self.empty_window_ns

    @property
    def resolution_ns(self) -> float | None:
        """:attr:`tick_ns` under its former name."""
        return self.tick_ns

    # --- statistics -------------------------------------------------------------------
    @property
    def n(self) -> int:
        return int(self.samples_ns.size)

    @property
    def median_ns(self) -> float:
        return stats.median(self.samples_ns)

    @property
    def iqr_ns(self) -> float:
        return stats.iqr(self.samples_ns)

    @property
    def quantum_ns(self) -> float:
        """The clock's tick per call (0 when unknown): each sample of ``number`` calls can
        be off by one tick, which the samples' spread does not show."""
        return (self.tick_ns or 0.0) / self.number

    @property
    def ci95_ns(self) -> tuple[float, float]:
        """The median's 95% interval from the samples' order statistics, widened by the
        clock's tick per call (``quantum_ns``) on each side."""
        lo, hi = stats.median_ci95(self.samples_ns)
        q = self.quantum_ns
        return (max(lo - q, 0.0), hi + q)

    @property
    def min_ns(self) -> float:
        return float(self.samples_ns.min())

    @property
    def max_ns(self) -> float:
        return float(self.samples_ns.max())

    @property
    def mean_ns(self) -> float:
        return float(self.samples_ns.mean())

    def compare(self, baseline: TimingResult, baseline_label: str | None = None) -> Comparison:
        """Ratio of this result's median time to ``baseline``'s (< 1 means faster);
        ``baseline_label`` names the baseline (default: its name). A result holding a
        sample no timer can report (0 ns, not finite, beyond a day) is an InputError
        naming it: its ratio would be inf or nan. Results that ran on other backends or
        devices, or one in an interpreter, give a comparison that is not ``comparable``
        and says why, with no ratio; different precisions are compared with a note."""
        label = baseline.name if baseline_label is None else baseline_label
        for who, result in ((self.name, self), (label, baseline)):
            result.check_comparable(f"cannot compare {self.name} with {label}: {who}")
        why = not_comparable(self, baseline, label)
        if why:
            nan = math.nan
            return Comparison(self.name, label, nan, nan, nan, False, comparable=False, why=why)
        r = stats.median_ratio(self.samples_ns, baseline.samples_ns)
        notes = comparison_notes(self, baseline, label)
        return Comparison(
            self.name, label, r.ratio, r.low, r.high, r.significant, r.method, notes=notes
        )

    def check_comparable(self, what: str) -> None:
        """InputError (starting with ``what``) unless every sample is a measurable time."""
        if self.n == 0:
            raise InputError(f"{what} has no samples")
        bad = first_unmeasurable(self.samples_ns)
        if bad is not None:
            raise InputError(f"{what}: samples_ns[{bad}] {unmeasurable_text(self.samples_ns[bad])}")

    # --- persistence ------------------------------------------------------------------
    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> TimingDoc:
        """The saved form, with the summary a reader of the file sees first."""
        from perflab.model.saved import TimingDoc, unless_unknown

        lo, hi = self.ci95_ns
        summary = {
            "n": self.n,
            "median_ns": self.median_ns,
            "iqr_ns": self.iqr_ns,
            "ci95_ns": [lo, hi],
            "min_ns": self.min_ns,
            "max_ns": self.max_ns,
        }
        kernels = self.kernels.document() if self.kernels is not None else None
        return TimingDoc(
            name=self.name,
            backend=self.backend,
            device=self.device,
            number=self.number,
            created=self.created,
            versions=dict(self.versions),
            options=dict(self.options),
            warnings=list(self.warnings),
            samples_ns=self.samples_ns.tolist(),
            host_ns=None if self.host_ns is None else self.host_ns.tolist(),
            stop_reason=self.stop_reason,
            throttle={str(k): _json_safe(v) for k, v in self.throttle.items()},
            empty_window_ns=self.empty_window_ns,
            tick_ns=self.tick_ns,
            sm_clock_min_mhz=_column(self.sm_clock_min_mhz),
            sm_clock_median_mhz=_column(self.sm_clock_median_mhz),
            summary=summary,
            kernels=kernels,
            flops=self.flops,
            bytes=self.bytes,
            interpreter=unless_unknown(self.interpreter),
            dtype=unless_unknown(self.dtype),
            dtype_why=unless_unknown(self.dtype_why),
        )

    @classmethod
    def from_dict(cls, doc: object, source: str = "<dict>") -> TimingResult:
        """Build from a saved document, checking every field (types, finiteness, ranges);
        a bad field is a SchemaError naming ``source`` and the field."""
        from perflab.model.saved import TimingFile, known
        from perflab.model.schema import decode

        saved = decode(doc, TimingFile, source)
        return cls(
            samples_ns=np.asarray(saved.samples_ns, dtype=np.float64),
            backend=saved.backend,
            device=saved.device,
            name=saved.name,
            number=saved.number,
            warnings=[current_words(w) for w in saved.warnings],
            created=saved.created,
            versions=saved.versions,
            options=saved.options,
            kernels=None if saved.kernels is None else OpTable.from_document(saved.kernels),
            flops=saved.flops,
            bytes=saved.bytes,
            host_ns=None if saved.host_ns is None else np.asarray(saved.host_ns, np.float64),
            stop_reason=saved.stop_reason,
            throttle=saved.throttle,
            empty_window_ns=saved.empty_window(),
            tick_ns=saved.tick(),
            sm_clock_min_mhz=_array(saved.sm_clock_min_mhz),
            sm_clock_median_mhz=_array(saved.sm_clock_median_mhz),
            interpreter=known(saved.interpreter),
            dtype=known(saved.dtype),
            dtype_why=known(saved.dtype_why) or "",
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        return dump_json(KIND, self.to_dict(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TimingResult:
        doc = load_json(KIND, path)
        result = cls.from_dict(doc, source=str(path))
        result.replayed_from = str(path)
        return result

    # --- display ----------------------------------------------------------------------
    def summary_line(self) -> str:
        lo, hi = self.ci95_ns
        return (
            f"{self.name}: median {format_ns(self.median_ns)} "
            f"(95% CI {format_ns(lo)} - {format_ns(hi)}), IQR {format_ns(self.iqr_ns)}, "
            f"n={self.n} on {self.device} [{self.backend}]{self._ran_in()}"
        )

    def _ran_in(self) -> str:
        """What the summary says beside the device: an interpreter, the precision."""
        words = " in Triton's interpreter" if self.interpreter == TRITON_INTERPRETER else ""
        return words + (f" ({self.dtype})" if self.dtype else "")

    def __str__(self) -> str:
        return self.summary_line()
