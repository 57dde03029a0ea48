"""The tutorial notebooks' exercises, asked by id: the question, the answer rule, the hints and
the solution live here (one module per notebook), so a notebook shows an exercise without
its answer in sight::

    from perflab import exercises

    ex = exercises.get("littles-law", bandwidth_gbps=21.5, latency_ns=156, level="DRAM")
    ex                        # the question
    ex.answer("3 KiB")        # right, or wrong with its direction and a hint
    ex.solution()             # the solution and the accepted answer, when you want them

A wrong answer says which way it is off and gives a hint, never the accepted answer; that
shows when asked (``ex.solution()``, ``ex.answer(x, reveal=True)``) or after three wrong
tries (counted per object that :func:`get` returns).

A **prediction** is asked before the cell that measures what decides it: ``ex.answer(x)``
records it, and ``ex.check(name=measured, ...)``, in a cell after the measurement, judges it
against the measured values (an exercise's ``measured`` names say which)::

    ex = exercises.get("busy-share")           # above the cell that measures
    ex.answer("some")                          # recorded, not judged yet
    ...                                        # the measurement
    ex.check(busy_share=busy_us / span_us)     # right or wrong, now

``perflab exercises list`` lists them all. Importing this module imports the standard library,
:mod:`perflab.errors` and the display mixin (:mod:`perflab.model.display`) only; the notebooks'
modules load on first use.
"""

from __future__ import annotations

import difflib
import importlib
import math
import numbers
import pkgutil
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from perflab.errors import InputError, PerflabError
from perflab.exercises.checks import Check, CheckKind, Values, brief, check_length, resolve
from perflab.model.display import Shown

__all__ = ["Exercise", "Spec", "Verdict", "VerdictState", "catalogue", "get"]

TRIES_BEFORE_REVEAL = 3
# the largest count an exercise takes: every count up to it is exact as a float
MAX_COUNT = 2**53
MAX_TEXT_CHARS = 200  # a text value is a name (a memory level, an instruction family)
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_NOTEBOOK = re.compile(r"^\d\d-[a-z0-9]+(?:-[a-z0-9]+)*$")


def _finite(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"a number, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an int or fraction past the largest float
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"a finite number, not {brief(value)}")
    return number


def _in_range(low: float, high: float) -> Callable[[object], float]:
    def read(value: object) -> float:
        number = _finite(value)
        if not low <= number <= high:
            raise ValueError(f"a number from {low:g} to {high:g}, not {number:g}")
        return number

    return read


def _whole(least: int) -> Callable[[object], int]:
    """The reader of a whole number from ``least`` to :data:`MAX_COUNT`."""

    def read(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"a whole number >= {least}, not {brief(value)}")
        if not least <= int(value) <= MAX_COUNT:
            raise ValueError(f"a whole number from {least} to 2**53, not {brief(value)}")
        return int(value)

    return read


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"text, not {type(value).__name__}")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"text of at most {MAX_TEXT_CHARS} characters, not {len(value):,}")
    return value


def _numbers(value: object) -> dict[str, float]:
    if not isinstance(value, Mapping) or not value:
        raise TypeError(f"a non-empty mapping of names to numbers, not {brief(value)}")
    return {_name(key): _finite(number) for key, number in value.items()}


def _name(key: object) -> str:
    if isinstance(key, int) and not -MAX_COUNT <= key <= MAX_COUNT:
        raise ValueError(f"a mapping keyed by names, not by {brief(key)}")
    return str(key)


def _sweep(value: object) -> dict[int, float]:
    """A mapping of sizes (whole numbers >= 1, or their digits as text) to numbers."""
    if not isinstance(value, Mapping) or not value:
        raise TypeError(f"a non-empty mapping of sizes to numbers, not {brief(value)}")
    return {_size_key(key): _finite(number) for key, number in value.items()}


def _size_key(key: object) -> int:
    if isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 16:
        key = int(key)
    try:
        return _whole(1)(key)
    except ValueError:
        raise ValueError(f"a mapping keyed by whole numbers >= 1, not by {brief(key)}") from None


# the kinds of value an exercise is given or measured, each read and checked where it enters
KINDS: dict[str, Callable[[object], object]] = {
    "number": _finite,
    "positive": _in_range(math.ulp(0.0), math.inf),
    "fraction": _in_range(0.0, 1.0),
    "count": _whole(0),
    "positive count": _whole(1),  # a count a rule divides by
    "text": _text,
    "numbers": _numbers,
    "sweep": _sweep,
}


@dataclass(frozen=True)
class Spec:
    """One exercise as its notebook's module defines it.

    ``question`` and ``solution`` are text or functions of the ``given`` values (passed to
    :func:`get`). ``check`` is the answer rule (:mod:`perflab.exercises.checks`); its
    expected values may be functions of the given and ``measured`` values. An exercise with
    ``measured`` values is a prediction: asked before the measurement, judged by
    :meth:`Exercise.check` after it. ``worked`` is the solution's own answer (or a function
    of the values giving it), which the tests hold the check to; None for a compiled kernel.
    ``given`` and ``measured`` map each value's name to its kind (:data:`KINDS`)."""

    id: str
    notebook: str
    question: str | Callable[[Values], str]
    check: Check
    solution: str | Callable[[Values], str]
    worked: object = None
    given: Mapping[str, str] = field(default_factory=dict)
    measured: Mapping[str, str] = field(default_factory=dict)
    answer_as: str = ""  # how to write the answer, e.g. "a fraction such as 0.3"

    def __post_init__(self) -> None:
        if not _ID.match(self.id) or not _NOTEBOOK.match(self.notebook):
            raise InputError(f"exercise {self.id!r} of {self.notebook!r}: a bad id or notebook")
        names = [*self.given, *self.measured]
        if len(set(names)) != len(names):
            raise InputError(f"exercise {self.id!r}: a value is both given and measured")
        if unknown := sorted({*self.given.values(), *self.measured.values()} - KINDS.keys()):
            raise InputError(f"exercise {self.id!r}: unknown kinds of value {unknown}")

    @property
    def prediction(self) -> bool:
        return bool(self.measured)

    @property
    def kind(self) -> CheckKind:
        return self.check.kind

    def to_dict(self) -> dict[str, object]:
        """The exercise as ``perflab exercises list --json`` prints it: the document
        :class:`perflab.exercises.views.ExerciseView` declares (values by name only)."""
        from perflab.exercises.views import ExerciseView
        from perflab.model.schema import encode

        return encode(
            ExerciseView(
                id=self.id,
                notebook=self.notebook,
                kind=self.kind,
                prediction=self.prediction,
                given=list(self.given),
                measured=list(self.measured),
            )
        )


def _read_values(spec: Spec, kinds: Mapping[str, str], values: Mapping[str, object]) -> Values:
    """``values`` checked against ``kinds`` (all present, none unknown, each of its kind)."""
    if unknown := sorted(values.keys() - kinds.keys()):
        takes = ", ".join(kinds) or "none"
        raise InputError(f"exercise {spec.id!r} takes no value {unknown[0]!r} here ({takes})")
    if missing := [name for name in kinds if name not in values]:
        raise InputError(f"exercise {spec.id!r} needs the value(s) {', '.join(missing)}")
    read = {}
    for name, kind in kinds.items():
        try:
            read[name] = KINDS[kind](values[name])
        except (TypeError, ValueError) as exc:
            raise InputError(f"exercise {spec.id!r}: {name} must be {exc}") from None
    return read


# what an answer got; only "right" is true (``bool(verdict)``)
VerdictState = Literal["right", "wrong", "unreadable", "unanswered", "recorded"]


@dataclass(frozen=True)
class Verdict(Shown):
    """What an answer gets. ``state`` is "right", "wrong", "unreadable", "unanswered" or
    "recorded" (a prediction waiting for its measurement); ``reason`` says why;
    ``accepted`` is the accepted answer, only when it was asked for or after three wrong tries.
    ``bool(verdict)`` is true only when right."""

    key: str
    state: VerdictState
    reason: str
    accepted: str = ""

    def __bool__(self) -> bool:
        return self.state == "right"

    __repr__ = Shown.__str__


@dataclass(frozen=True)
class _Solution(Shown):
    key: str
    text: str
    accepted: str

    __repr__ = Shown.__str__


class Exercise(Shown):
    """One exercise, as :func:`get` returns it: its values, the tries made on it, and a
    prediction recorded before its measurement."""

    def __init__(self, spec: Spec, given: Values) -> None:
        self.spec = spec
        self.given = dict(given)
        self.measured: dict[str, object] = {}
        self.tries = 0  # answers judged
        self.misses = 0  # of them wrong: the third shows the accepted answer
        self.recorded: object = None  # a prediction, read; judged when the measurement comes
        self._judged: tuple[object, dict[str, object], Verdict] | None = None

    @property
    def key(self) -> str:
        return self.spec.id

    @property
    def prediction(self) -> bool:
        return self.spec.prediction

    @property
    def question(self) -> str:
        with self._checkable():
            return resolve(self.spec.question, self.given)

    @contextmanager
    def _checkable(self) -> Iterator[None]:
        """Arithmetic on the values that fails (a ratio past the largest float, a mapping
        with nothing to compare) is the values' fault: say so, naming the exercise."""
        try:
            yield
        except PerflabError:
            raise
        except (ArithmeticError, ValueError) as exc:
            raise InputError(
                f"exercise {self.key!r} cannot be checked with these values: {exc}"
            ) from None

    @property
    def _values(self) -> dict[str, object]:
        return {**self.given, **self.measured}

    @property
    def _waiting(self) -> bool:
        """A prediction whose measurement has not come yet."""
        return self.spec.prediction and not self.measured

    def answer(self, value: object, *, reveal: bool = False) -> Verdict:
        """Judge ``value`` (None: not answered yet). A prediction is only recorded until
        :meth:`check` brings the measurement. ``reveal`` adds the accepted answer."""
        if value is None or value is Ellipsis:
            what = "prediction and run this cell before the measurement" if self._waiting else ""
            return Verdict(self.key, "unanswered", f"replace None with your {what or 'answer'}")
        try:
            if isinstance(value, str):
                check_length(value)
            read = self.spec.check.read(value)
        except (TypeError, ValueError) as exc:
            return Verdict(self.key, "unreadable", str(exc))
        if self._waiting:
            self.recorded = read
            shown = self.spec.check.shown(read)
            return Verdict(
                self.key, "recorded", f"your prediction, {shown}, is checked after the measurement"
            )
        return self._judge(read, reveal)

    def check(self, **measured: object) -> Verdict:
        """Bring the measured values (the exercise's ``measured`` names) and judge the
        prediction recorded before them."""
        if not self.spec.prediction:
            raise InputError(f"exercise {self.key!r} is not a prediction: answer it with .answer()")
        self.measured = dict(_read_values(self.spec, self.spec.measured, measured))
        if self.recorded is None:
            return Verdict(
                self.key,
                "unanswered",
                "no prediction was recorded: give yours with .answer(...) in the cell above the "
                "measurement, then run the measurement and this cell again",
            )
        if self._judged is not None and self._judged[:2] == (self.recorded, self.measured):
            return self._judged[2]  # the same cell run again: not another try
        verdict = self._judge(self.recorded, reveal=False)
        self._judged = (self.recorded, dict(self.measured), verdict)
        return verdict

    def _judge(self, read: object, reveal: bool) -> Verdict:
        values = self._values
        with self._checkable():
            ok, reason = self.spec.check.judge(read, values)
            show = reveal or (not ok and self.misses + 1 >= TRIES_BEFORE_REVEAL)
            accepted = self.spec.check.accepted(values) if show else ""
        self.tries += 1
        self.misses += not ok
        return Verdict(self.key, "right" if ok else "wrong", reason, accepted)

    def solution(self) -> _Solution:
        """The solution and the accepted answer (a prediction's, once measured)."""
        with self._checkable():
            if self._waiting:
                accepted = "decided by the measurement below: run it, then .check(...)"
            else:
                accepted = self.spec.check.accepted(self._values)
            return _Solution(self.key, resolve(self.spec.solution, self._values), accepted)

    __repr__ = Shown.__str__


_CATALOGUE: dict[str, Spec] = {}


def notebook_modules() -> list[str]:
    """The modules of the notebooks' exercises, ``nbNN_*``, in the course's order."""
    names = (m.name for m in pkgutil.iter_modules(__path__) if re.match(r"nb\d\d_", m.name))
    return [f"{__name__}.{name}" for name in sorted(names)]


def catalogue() -> list[Spec]:
    """Every exercise, in the course's order (the notebooks' modules load on first use)."""
    if not _CATALOGUE:
        found: dict[str, Spec] = {}
        for name in notebook_modules():
            for spec in importlib.import_module(name).EXERCISES:
                if spec.id in found:
                    raise InputError(f"two exercises are called {spec.id!r}")
                found[spec.id] = spec
        _CATALOGUE.update(found)
    return list(_CATALOGUE.values())


def get(key: str, **given: object) -> Exercise:
    """The exercise ``key``, with the values its question and answer rule are given (a
    prediction's measured values come later, to :meth:`Exercise.check`)."""
    specs = {spec.id: spec for spec in catalogue()}
    spec = specs.get(key) if isinstance(key, str) else None
    if spec is None:
        near = difflib.get_close_matches(str(key), specs, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else " (perflab exercises list)"
        raise InputError(f"no exercise called {key!r}{hint}")
    return Exercise(spec, _read_values(spec, spec.given, given))
