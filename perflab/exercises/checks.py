"""The answer rules of the notebooks' exercises: a number, one option or a set of them, a
band of a measured value, a compiled kernel.

A rule reads an answer first (:meth:`Check.read`: a ``ValueError`` or ``TypeError`` says why
it cannot be read), then judges it against what the exercise was given and what was
measured (:meth:`Check.judge`). The two steps are apart because a prediction is read (and
recorded) before the cell that measures what decides it has run. A wrong answer is told its
direction and a hint, never the accepted answer: that is :meth:`Check.accepted`, which the
exercise shows only when the reader asks for it or after three tries.

Any expected value may be a function of the exercise's values (``lambda v: v["busy_share"]``).
Besides the standard library this module imports perflab.errors, and perflab.model.kernel
only when a compiled-kernel rule reads an answer.
"""

from __future__ import annotations

import math
import numbers
import re
import reprlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NotRequired,
    Protocol,
    TypeAlias,
    TypedDict,
    TypeVar,
    Unpack,
)

from perflab.errors import InputError

if TYPE_CHECKING:
    from perflab.model.kernel import KernelArtifacts

T = TypeVar("T")
Values: TypeAlias = Mapping[str, Any]
Given: TypeAlias = T | Callable[[Values], T]  # a value, or a function of the values
CheckKind: TypeAlias = Literal["number", "choice", "band", "kernel"]  # a rule's name in listings

__all__ = [
    "Check",
    "CheckKind",
    "Choice",
    "KernelCheck",
    "Number",
    "Ranges",
    "Values",
    "choice",
    "kernel_check",
    "largest",
    "number",
    "ranges",
    "smallest",
]


class Check(Protocol):
    """An answer rule."""

    @property
    def kind(self) -> CheckKind:
        """The rule's name in listings: "number", "choice", "band" or "kernel"."""
        ...

    def read(self, answer: object) -> Any:
        """The answer in the rule's terms; ValueError or TypeError when it cannot be read."""
        ...

    def shown(self, read: Any) -> str:
        """A read answer as text, to say what was recorded."""
        ...

    def judge(self, read: Any, values: Values) -> tuple[bool, str]:
        """(right, why): why never states the accepted answer when the answer is wrong."""
        ...

    def accepted(self, values: Values) -> str:
        """The accepted answer in words (shown only when asked for, or after three tries)."""
        ...


def resolve(given: Given[T], values: Values) -> T:
    """``given`` itself, or its value for ``values`` when it is a function of them."""
    if callable(given):
        found: T = given(values)
        return found
    return given


def largest(name: str) -> Callable[[Values], str]:
    """The key of the largest number in the mapping ``values[name]`` (the category or cause
    that took the most time): a right answer that a measurement decides."""
    return lambda values: max(values[name].items(), key=lambda item: item[1])[0]


def smallest(name: str) -> Callable[[Values], str]:
    """The key of the smallest number in the mapping ``values[name]``."""
    return lambda values: min(values[name].items(), key=lambda item: item[1])[0]


def _join(*sentences: str) -> str:
    return " ".join(s for s in sentences if s)


def _require_hints(rule: str, **hints: str) -> None:
    """Every rule tells a wrong answer which way to think: refuse one without its hints."""
    missing = [name for name, text in hints.items() if not text.strip()]
    if missing:
        raise InputError(f"{rule}: give the hint(s) for a wrong answer: {', '.join(missing)}")


# -- numbers ----------------------------------------------------------------------------------

# SI and binary prefixes, so that "4800 GB/s" answers a question asked in TB/s
_PREFIXES = {
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "n": 1e-9,
    "u": 1e-6,
    "µ": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
}
# a number at the start of an answer; each part is unambiguous, so reading it takes linear
# time (the unit after it is split off in code, not by backtracking)
# digits grouped by commas (1,500,000) as format_number writes them, or plain
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# an answer is a few words; a longer one is refused before it is read
MAX_ANSWER_CHARS = 200
_SHOWN_CHARS = 60
_REPR = reprlib.Repr()  # repr, cutting long strings and containers
_REPR.maxstring = _REPR.maxother = _SHOWN_CHARS


def brief(value: object) -> str:
    """``repr(value)`` cut to a few dozen characters, for messages (an answer, or a value a
    notebook passed, may be of any size, and an int of 4,300 digits has no repr)."""
    if isinstance(value, int) and value.bit_length() > 64:
        sign = "-" if value < 0 else ""
        return f"an integer of about {sign}10**{value.bit_length() * 0.30103:.0f}"
    text = _REPR.repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def check_length(answer: str) -> None:
    """ValueError for an answer longer than :data:`MAX_ANSWER_CHARS`."""
    if len(answer) > MAX_ANSWER_CHARS:
        raise ValueError(f"an answer is at most {MAX_ANSWER_CHARS} characters, not {len(answer):,}")


def _split_prefix(unit: str) -> tuple[float, str]:
    """(scale, base unit): "TB/s" -> (1e12, "B/s"), "us" -> (1e-6, "s"), "%" -> (1, "%")."""
    for prefix in sorted(_PREFIXES, key=len, reverse=True):
        if len(unit) > len(prefix) and unit.startswith(prefix):
            return _PREFIXES[prefix], unit[len(prefix) :]
    return 1.0, unit


def format_number(value: float, unit: str = "", digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits, in ``unit``, as a learner would write it:
    digits grouped from 10,000 to below a trillion, decimals down to a millionth, an exponent
    beyond those (1,500,000,000 B, 0.000123 s, 2.5e-09 s); the checker reads each back."""
    return f"{_plain_number(value, digits)} {unit}".rstrip()


# an answer is echoed with up to this many significant digits: as it was given, not rounded
ECHO_DIGITS = 12


def _plain_number(value: float, digits: int) -> str:
    rounded = float(f"{value:.{digits}g}")
    if rounded == 0 or not math.isfinite(rounded):
        return f"{rounded:g}"
    magnitude = math.floor(math.log10(abs(rounded)))
    if 4 <= magnitude < 12:
        return f"{rounded:,.0f}"
    if -6 <= magnitude < 4:
        decimals = max(0, digits - 1 - magnitude)
        text = f"{rounded:.{decimals}f}"
        return text.rstrip("0").rstrip(".") if decimals else text
    return f"{rounded:.{digits}g}"


def _convert(value: float, given: str, unit: str) -> float:
    """``value`` written in the unit ``given``, in ``unit``. A plain number's answer may be
    written as a percentage (25% is 0.25); any other unit must match the question's."""
    if not unit:
        if given == "%":
            return value / 100
        raise ValueError(f"the answer is a plain number without a unit, not one in {given!r}")
    scale, base = _split_prefix(given)
    want_scale, want_base = _split_prefix(unit)
    if base != want_base:
        raise ValueError(f"the question asks for {unit}, not {given!r}")
    return value * scale / want_scale


def read_number(answer: object, unit: str = "") -> float:
    """The answer as a number in ``unit``: a real number, or text such as "4.2 TB/s"."""
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real | str):
        raise TypeError(f"expected a number{' in ' + unit if unit else ''}, got {brief(answer)}")
    try:
        value = _number_in(answer, unit) if isinstance(answer, str) else float(answer)
    except OverflowError:  # an int or fraction past the largest float
        value = math.inf
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {brief(answer)}")
    return value


def _number_in(answer: str, unit: str) -> float:
    """A number written as text ("4.2 TB/s"), in ``unit``."""
    check_length(answer)
    text = answer.strip()
    match = _NUMBER.match(text)
    given = text[match.end() :].lstrip() if match else ""
    if not match or any(c.isspace() for c in given):
        example = f"3.5 {unit}".rstrip()
        raise ValueError(f"expected a number such as {example!r}, got {brief(answer)}")
    value = float(match.group().replace(",", ""))
    return _convert(value, given, unit) if given and given != unit else value


@dataclass(frozen=True)
class Number:
    """A number within ``rel`` (a fraction of the expected value), ``abs`` (in ``unit``) or a
    ``factor`` (expected / factor to expected x factor: for orders of magnitude) of
    ``expected``. ``low`` / ``high`` are the hints for an answer too low / too high,
    ``right`` what a right one means; ``mistakes`` the hint for a known wrong answer (a value,
    matched within the same tolerance), so that a near miss gets the hint for the mistake it
    is rather than the one for its side."""

    expected: Given[float]
    unit: str = ""
    rel: float | None = None
    abs: float | None = None  # the tolerance's usual name (numpy.isclose's atol)
    factor: float | None = None
    low: str = ""
    high: str = ""
    right: str = ""
    mistakes: Mapping[float, str] = field(default_factory=dict)
    kind: CheckKind = field(default="number", init=False)

    def __post_init__(self) -> None:
        rel, tol, factor = self.rel, self.abs, self.factor
        if rel is None and tol is None and factor is None:
            raise InputError("number(): give a tolerance: rel= (a fraction), abs= or factor=")
        if (rel is not None and not rel >= 0) or (tol is not None and not tol >= 0):
            raise InputError(f"number(): tolerances must be >= 0 (rel={rel}, abs={tol})")
        if factor is not None and (not factor >= 1 or not math.isfinite(factor)):
            raise InputError(f"number(): factor= needs a finite factor >= 1 ({factor})")
        _require_hints("number()", low=self.low, high=self.high)

    def read(self, answer: object) -> float:
        return read_number(answer, self.unit)

    def shown(self, read: float) -> str:
        return format_number(read, self.unit, ECHO_DIGITS)

    def _expected(self, values: Values) -> float:
        expected = float(resolve(self.expected, values))
        if not math.isfinite(expected) or (self.factor is not None and expected <= 0):
            raise InputError(f"number(): the expected value {expected} cannot be checked")
        return expected

    def _bounds(self, expected: float) -> tuple[float, float]:
        if self.factor is not None:
            return expected / self.factor, expected * self.factor
        tolerance = max(
            self.rel * math.fabs(expected) if self.rel is not None else 0.0, self.abs or 0.0
        )
        return expected - tolerance, expected + tolerance

    def judge(self, read: float, values: Values) -> tuple[bool, str]:
        low, high = self._bounds(self._expected(values))
        # the relative slack keeps 4.4 inside 4.0 ± 10% despite binary rounding
        slack = 1e-9 * max(math.fabs(low), math.fabs(high), 1e-300)
        shown = self.shown(read)
        if not low - slack <= read <= high + slack and (hint := self._mistake(read)):
            side = "low" if read < low else "high"
            return False, _join(f"{shown} is too {side}.", hint)
        if read < low - slack:
            return False, _join(f"{shown} is too low.", self.low)
        if read > high + slack:
            return False, _join(f"{shown} is too high.", self.high)
        return True, _join(f"{shown} is within the accepted {self.accepted(values)}.", self.right)

    def _mistake(self, read: float) -> str:
        """The hint for the known mistake ``read`` is, if it is one."""
        for value, hint in self.mistakes.items():
            low, high = self._bounds(value)
            if low - 1e-9 * math.fabs(value) <= read <= high + 1e-9 * math.fabs(value):
                return hint
        return ""

    def accepted(self, values: Values) -> str:
        expected = self._expected(values)
        if self.factor is not None:
            low, high = self._bounds(expected)
            return f"{format_number(low, self.unit)} to {format_number(high, self.unit)}"
        tolerance = expected - self._bounds(expected)[0]
        if tolerance == 0:
            return format_number(expected, self.unit)
        return f"{format_number(expected, self.unit)} ± {format_number(tolerance, self.unit)}"


class _NumberOptions(TypedDict, total=False):
    """The keywords of :func:`number`: :class:`Number`'s fields."""

    unit: str
    rel: float | None
    abs: float | None
    factor: float | None
    low: str
    high: str
    right: str
    mistakes: Mapping[float, str]


def number(expected: Given[float], **options: Unpack[_NumberOptions]) -> Number:
    """:class:`Number` (the rules' usual spelling)."""
    return Number(expected, **options)


# -- options --------------------------------------------------------------------------------


def _key(option: object) -> str:
    text = brief(option) if isinstance(option, int) else str(option)  # an int may be huge
    return text.strip().lower()


@dataclass(frozen=True)
class Choice:
    """One of ``options`` (case and surrounding spaces ignored), or with ``many`` the set of
    all right options (a list, or "a, b"). ``correct`` may be a function of the values (the
    option a measurement decides). ``why`` gives, per option, the hint for picking it wrongly
    (and, for a right option, what it means); ``missed`` the hint for leaving a right option
    out of a set."""

    correct: Given[str | Collection[str]]
    options: Sequence[str]
    why: Mapping[str, str] = field(default_factory=dict)
    missed: str = ""
    many: bool = False
    right: str = ""
    kind: CheckKind = field(default="choice", init=False)

    def __post_init__(self) -> None:
        keys = [_key(o) for o in self.options]
        if len(set(keys)) != len(keys) or len(keys) < 2:
            raise InputError(f"choice(): options must be two or more, all different: {keys}")
        if unknown := [k for k in self.why if _key(k) not in keys]:
            raise InputError(f"choice(): why= names {unknown}, which are not options")
        static = set() if callable(self.correct) else self._wanted({})
        hinted = {_key(k) for k, text in self.why.items() if text.strip()}
        if unhinted := [o for o in self.options if _key(o) not in static | hinted]:
            raise InputError(f"choice(): give a why= hint for picking {unhinted}")
        if self.many:
            _require_hints("choice()", missed=self.missed)

    @property
    def _canon(self) -> dict[str, str]:
        return {_key(o): o for o in self.options}

    def _wanted(self, values: Values) -> set[str]:
        correct = resolve(self.correct, values)
        wanted = {_key(correct)} if isinstance(correct, str) else {_key(c) for c in correct}
        if not wanted or not wanted <= self._canon.keys() or (len(wanted) > 1 and not self.many):
            raise InputError(
                f"choice(): the right answer {sorted(wanted)} must be "
                f"{'options' if self.many else 'one option'} of {list(self.options)}"
            )
        return wanted

    def read(self, answer: object) -> frozenset[str]:
        if isinstance(answer, str):
            picked = answer.split(",") if self.many else [answer]
        elif self.many and isinstance(answer, Collection):
            picked = list(answer)
        else:
            noun = "options" if self.many else "one option"
            raise TypeError(f"expected {noun} of {list(self.options)}, got {brief(answer)}")
        keys = frozenset(_key(p) for p in picked)
        if unknown := sorted(keys - self._canon.keys()):
            raise ValueError(
                f"{brief(', '.join(unknown))} is not among the options {list(self.options)}"
            )
        if not keys:
            raise ValueError(f"pick {'options' if self.many else 'an option'}")
        return keys

    def shown(self, read: frozenset[str]) -> str:
        return ", ".join(self._canon[k] for k in sorted(read))

    def _reason(self, key: str) -> str:
        return next((text for k, text in self.why.items() if _key(k) == key), "")

    def judge(self, read: frozenset[str], values: Values) -> tuple[bool, str]:
        wanted = self._wanted(values)
        if read == wanted:
            default = f"{self.shown(read)} {'is' if len(read) == 1 else 'are'} right."
            if callable(self.correct):  # why= holds hints for whichever options come out wrong
                return True, _join(default, self.right)
            return True, _join(*(self._reason(k) for k in sorted(read)), self.right) or default
        wrong = sorted(read - wanted)
        parts = [self._reason(k) or f"{self._canon[k]} is not right." for k in wrong]
        if self.many and wanted - read:
            parts.append(f"A right option is missing. {self.missed}")
        return False, " ".join(parts)

    def accepted(self, values: Values) -> str:
        return self.shown(frozenset(self._wanted(values)))


class _ChoiceOptions(TypedDict, total=False):
    """The keywords of :func:`choice`: :class:`Choice`'s fields."""

    why: Mapping[str, str]
    missed: str
    many: bool
    right: str


def choice(
    correct: Given[str | Collection[str]], options: Sequence[str], **kw: Unpack[_ChoiceOptions]
) -> Choice:
    """:class:`Choice`; a collection of right options makes it a set question."""
    kw.setdefault("many", not callable(correct) and not isinstance(correct, str))
    return Choice(correct, options, **kw)


@dataclass(frozen=True)
class Ranges:
    """A prediction of a measured value as one of a few named bands: ``labels[i]`` covers
    ``bounds[i - 1]`` to ``bounds[i]`` (the first starts at minus infinity, the last ends at
    infinity). The right label is the band of ``value``; a wrong one hears whether it is
    too low or too high, with the hint ``low`` or ``high``."""

    value: Given[float]
    bounds: Sequence[float]
    labels: Sequence[str]
    low: str = ""
    high: str = ""
    right: str = ""
    unit: str = ""
    kind: CheckKind = field(default="band", init=False)

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.bounds) + 1 or list(self.bounds) != sorted(
            set(self.bounds)
        ):
            raise InputError("ranges(): one label more than bounds, bounds increasing")
        if len({_key(label) for label in self.labels}) != len(self.labels):
            raise InputError(f"ranges(): labels must differ: {list(self.labels)}")
        _require_hints("ranges()", low=self.low, high=self.high)

    def read(self, answer: object) -> int:
        if not isinstance(answer, str):
            raise TypeError(f"expected one of {list(self.labels)}, got {brief(answer)}")
        keys = [_key(label) for label in self.labels]
        if _key(answer) not in keys:
            raise ValueError(
                f"{brief(answer.strip())} is not among the options {list(self.labels)}"
            )
        return keys.index(_key(answer))

    def shown(self, read: int) -> str:
        return self.labels[read]

    def _band(self, values: Values) -> int:
        value = float(resolve(self.value, values))
        if not math.isfinite(value):
            raise InputError(f"ranges(): the measured value {value} cannot be checked")
        return sum(value >= bound for bound in self.bounds)

    def judge(self, read: int, values: Values) -> tuple[bool, str]:
        band, shown = self._band(values), repr(self.labels[read])
        if read < band:
            return False, _join(f"{shown} is too low.", self.low)
        if read > band:
            return False, _join(f"{shown} is too high.", self.high)
        return True, _join(f"{shown} is right.", self.right)

    def accepted(self, values: Values) -> str:
        band = self._band(values)
        low = self.bounds[band - 1] if band > 0 else None
        high = self.bounds[band] if band < len(self.bounds) else None
        span = f"from {format_number(low, self.unit)}" if high is None and low is not None else ""
        if high is not None:
            start = "below" if low is None else f"from {format_number(low, self.unit)} up to"
            span = f"{start} {format_number(high, self.unit)}"
        return f"{self.labels[band]} (the measurement is {span})"


class _RangesOptions(TypedDict, total=False):
    """The keywords of :func:`ranges`: :class:`Ranges`'s fields."""

    low: str
    high: str
    right: str
    unit: str


def ranges(
    value: Given[float],
    bounds: Sequence[float],
    labels: Sequence[str],
    **kw: Unpack[_RangesOptions],
) -> Ranges:
    """:class:`Ranges`."""
    return Ranges(value, bounds, labels, **kw)


# -- compiled kernels -----------------------------------------------------------------------


@dataclass(frozen=True)
class KernelCheck:
    """A compiled kernel that passes ``test(kernel, flags)``: the answer is a
    ``CompileResult`` (its kernel ``name``, or its only one; ``flags`` are the result's
    compile options, e.g. ``num_stages=4``) or a ``KernelArtifacts`` (no flags). ``goal``
    says in words what passes; ``wrong`` is the hint for a kernel that does not."""

    test: Callable[[KernelArtifacts, Sequence[str]], bool]
    goal: str
    right: str
    wrong: str
    name: str | None = None
    kind: CheckKind = field(default="kernel", init=False)

    def __post_init__(self) -> None:
        _require_hints("kernel_check()", wrong=self.wrong)

    def read(self, answer: object) -> tuple[KernelArtifacts, list[str]]:
        from perflab.model.kernel import CompileResult, KernelArtifacts

        if isinstance(answer, CompileResult):
            return answer.kernel(self.name), list(answer.flags)
        if isinstance(answer, KernelArtifacts):
            return answer, []
        raise TypeError(
            f"expected a compiled kernel (perflab.compile_cuda(...), perflab.compile_triton(...) "
            f"or %%ptx -v NAME), got {type(answer).__name__}"
        )

    def shown(self, read: tuple[KernelArtifacts, list[str]]) -> str:
        return f"kernel {read[0].name}"

    def judge(self, read: tuple[KernelArtifacts, list[str]], values: Values) -> tuple[bool, str]:
        ok = bool(self.test(*read))
        return ok, self.right if ok else self.wrong

    def accepted(self, values: Values) -> str:
        return self.goal


class _KernelOptions(TypedDict):
    """The keywords of :func:`kernel_check`: :class:`KernelCheck`'s fields."""

    goal: str
    right: str
    wrong: str
    name: NotRequired[str | None]


def kernel_check(
    test: Callable[[KernelArtifacts, Sequence[str]], bool], **kw: Unpack[_KernelOptions]
) -> KernelCheck:
    """:class:`KernelCheck`."""
    return KernelCheck(test, **kw)
