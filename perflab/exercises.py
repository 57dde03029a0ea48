"""Checked exercises for the tutorial notebooks: a question, a check that says right or wrong
and why, and a solution that stays folded until the reader opens it.

Usage, in a notebook::

    from perflab.exercises import Exercise, number, choice, kernel_check

    plateau = Exercise(
        "hbm-plateau",
        "Predict the read bandwidth plateau of an H200 (TB/s).",
        number(4.8, unit="TB/s", rel=0.2, low="That is below even ...", high="Above the spec ..."),
        "The datasheet says 4.8 TB/s; streaming kernels reach about 3.5-3.9 ...",
    )
    plateau                      # shows the question
    plateau.answer("4.2 TB/s")   # right, wrong or unreadable, and why
    plateau.answer(None)         # "not answered yet" (what a fresh notebook shows)
    plateau.solution()           # the solution, inside a closed <details>
    plateau.solution(worked=3.9) # ... with the check's verdict on the solution's answer

    tensor_cores = Exercise("hmma", "Which kernel uses tensor cores?",
                            choice("b", ["a", "b", "c"], why={"a": "FFMA only: ..."}), "...")
    no_spill = Exercise("spill", "Make the spill go away.",
                        kernel_check(lambda k: not k.resources.spills,
                                     right="no spill stores or loads",
                                     wrong="ptxas still reports spills"), "...")
    no_spill.answer(perflab.compile_cuda(src))   # a CompileResult or KernelArtifacts

A check is any callable ``check(answer) -> (correct, reason)``. It may raise ``ValueError``
or ``TypeError`` for an answer it cannot read; :meth:`Exercise.answer` turns that into an
"unreadable" verdict that says why, never a traceback. Every string is HTML-escaped, and every
view has a ``text/plain`` twin. This module imports only the standard library (and the
light ``perflab.render.html`` helpers).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perflab.errors import InputError
from perflab.model.display import Shown

Check = Callable[[Any], tuple[bool, str]]

__all__ = ["Check", "Exercise", "Verdict", "choice", "kernel_check", "number", "predicate"]

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
_NUMBER_WITH_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S*)\s*$")


def _split_prefix(unit: str) -> tuple[float, str]:
    """(scale, base unit): "TB/s" -> (1e12, "B/s"), "us" -> (1e-6, "s"), "%" -> (1, "%")."""
    for prefix in sorted(_PREFIXES, key=len, reverse=True):
        if len(unit) > len(prefix) and unit.startswith(prefix):
            return _PREFIXES[prefix], unit[len(prefix) :]
    return 1.0, unit


def _format(value: float, unit: str) -> str:
    return f"{value:.4g} {unit}".rstrip()


def _join(*sentences: str) -> str:
    return " ".join(s for s in sentences if s)


def _read_number(answer: object, unit: str) -> float:
    """The answer as a number in ``unit``: a real number, or text such as "4.2 TB/s"."""
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real | str):
        raise TypeError(f"expected a number{' in ' + unit if unit else ''}, got {answer!r}")
    if not isinstance(answer, str):
        value = float(answer)
    else:
        match = _NUMBER_WITH_UNIT.match(answer)
        if not match:
            example = f"3.5 {unit}".rstrip()
            raise ValueError(f"expected a number such as {example!r}, got {answer!r}")
        value = float(match.group(1))
        given = match.group(2)
        if given and given != unit:
            scale, base = _split_prefix(given)
            want_scale, want_base = _split_prefix(unit)
            if base != want_base:
                raise ValueError(f"the question asks for {unit}, not {given!r}")
            value *= scale / want_scale
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {answer!r}")
    return value


def number(
    expected: float,
    *,
    unit: str = "",
    rel: float | None = None,
    abs: float | None = None,  # the tolerance's usual name (numpy.isclose's atol)
    factor: float | None = None,
    low: str = "",
    high: str = "",
    right: str = "",
) -> Check:
    """A number within ``rel`` (a fraction of ``expected``), ``abs`` (in ``unit``) or a
    ``factor`` (``expected / factor`` to ``expected * factor``: for orders of magnitude) of
    ``expected``. ``low``/``high`` explain what an answer too low/high has missed;
    ``right`` what a right one means."""
    if rel is None and abs is None and factor is None:
        raise InputError("number(): give a tolerance: rel= (a fraction), abs= or factor=")
    if (rel is not None and not rel >= 0) or (abs is not None and not abs >= 0):
        raise InputError(f"number(): tolerances must be >= 0 (rel={rel}, abs={abs})")
    if factor is not None and (not factor >= 1 or not math.isfinite(factor) or expected <= 0):
        raise InputError(f"number(): factor= needs a factor >= 1 and expected > 0 ({factor})")
    tolerance = max(rel * math.fabs(expected) if rel is not None else 0.0, abs or 0.0)
    accepted = f"{_format(expected, unit)} ± {_format(tolerance, unit)}"
    if factor is not None:
        accepted = f"{_format(expected / factor, unit)} to {_format(expected * factor, unit)}"

    def within(value: float) -> bool:
        if factor is not None:
            return expected / factor <= value * (1 + 1e-9) and value <= expected * factor * (
                1 + 1e-9
            )
        return math.fabs(value - expected) <= tolerance * (1 + 1e-9)

    def check(answer: object) -> tuple[bool, str]:
        value = _read_number(answer, unit)
        # the relative slack keeps 4.4 inside 4.0 ± 10% despite binary rounding
        if within(value):
            return True, _join(f"{_format(value, unit)} is in {accepted}.", right)
        side, hint = ("below", low) if value < expected else ("above", high)
        return False, _join(f"{_format(value, unit)} is {side} the accepted {accepted}.", hint)

    return check


def choice(
    correct: str | Collection[str],
    options: Sequence[str],
    *,
    why: Mapping[str, str] | None = None,
    right: str = "",
) -> Check:
    """One of ``options`` (case and surrounding spaces ignored); when ``correct`` is a
    collection, the answer is the set of all right options (a list or "a, b"). ``why``
    says, per option, what is wrong (or right) about it."""
    canon = {o.strip().lower(): o for o in options}
    wanted = {correct} if isinstance(correct, str) else set(correct)
    if not wanted or any(c.strip().lower() not in canon for c in wanted):
        raise InputError(f"choice(): {sorted(wanted)} must be among the options {list(options)}")
    if why and (unknown := [k for k in why if k.strip().lower() not in canon]):
        raise InputError(f"choice(): why= names {unknown}, which are not options")
    many = not isinstance(correct, str)
    wanted_keys = {c.strip().lower() for c in wanted}
    reasons = {k.strip().lower(): v for k, v in (why or {}).items()}

    def check(answer: object) -> tuple[bool, str]:
        if isinstance(answer, str):
            picked = answer.split(",") if many else [answer]
        elif many and isinstance(answer, Collection):
            picked = list(answer)
        else:
            raise TypeError(f"expected {'options' if many else 'one option'} of {list(options)}")
        keys = {str(p).strip().lower() for p in picked}
        if unknown := sorted(keys - canon.keys()):
            raise ValueError(f"{', '.join(unknown)} is not among the options {list(options)}")
        if keys == wanted_keys:
            named = ", ".join(canon[k] for k in sorted(keys))
            default = f"{named} {'is' if len(keys) == 1 else 'are'} right."
            return True, _join(*(reasons.get(k, "") for k in sorted(keys)), right) or default
        wrong = sorted(keys - wanted_keys)
        missed = sorted(wanted_keys - keys)
        parts = [reasons.get(k, f"{canon[k]} is not right.") for k in wrong]
        if many and missed:
            parts.append(f"{len(missed)} right option(s) missing.")
        return False, " ".join(parts)

    return check


def predicate(test: Callable[[Any], bool], *, right: str, wrong: str) -> Check:
    """Right when ``test(answer)`` is true; ``right``/``wrong`` say what that means."""

    def check(answer: object) -> tuple[bool, str]:
        ok = bool(test(answer))
        return ok, right if ok else wrong

    return check


def kernel_check(
    test: Callable[[Any], bool], *, right: str, wrong: str, name: str | None = None
) -> Check:
    """A predicate on a compiled kernel: the answer is a ``CompileResult`` (its kernel
    ``name``, or its only one) or a ``KernelArtifacts``; ``test`` receives the kernel."""

    def kernel_of(answer: object) -> Any:
        if hasattr(answer, "kernels") and hasattr(answer, "kernel"):
            return answer.kernel(name)
        if hasattr(answer, "resources") and hasattr(answer, "sass_lines"):
            return answer
        raise TypeError(
            f"expected a compiled kernel (perflab.compile_cuda(...) or %%ptx -o), got "
            f"{type(answer).__name__}"
        )

    return predicate(lambda answer: test(kernel_of(answer)), right=right, wrong=wrong)


@dataclass(frozen=True)
class Verdict(Shown):
    """What :meth:`Exercise.answer` says: ``state`` is "right", "wrong", "unreadable" or
    "unanswered"; ``reason`` says why. ``bool(verdict)`` is true only when right."""

    key: str
    state: str
    reason: str

    def __bool__(self) -> bool:
        return self.state == "right"

    __repr__ = Shown.__str__


@dataclass(frozen=True)
class _Solution(Shown):
    key: str
    text: str
    worked: Verdict | None = None  # the check's verdict on the solution's own answer

    __repr__ = Shown.__str__


@dataclass(frozen=True)
class Exercise(Shown):
    """A question with a check and a solution (see the module docstring)."""

    key: str
    question: str
    check: Check
    solution_text: str

    def answer(self, value: object) -> Verdict:
        """Check ``value``; None means not answered yet."""
        if value is None or value is Ellipsis:
            return Verdict(self.key, "unanswered", "replace None with your answer and run the cell")
        try:
            ok, reason = self.check(value)
        except (TypeError, ValueError, InputError) as exc:
            return Verdict(self.key, "unreadable", str(exc))
        return Verdict(self.key, "right" if ok else "wrong", reason)

    def solution(self, worked: object = None) -> _Solution:
        """The solution, folded (an HTML <details>) until the reader opens it. With
        ``worked`` (the solution's own answer: a number, an option, a compiled kernel), it
        also shows the check's verdict on it, so a solution the check rejects is seen."""
        verdict = None if worked is None else self.answer(worked)
        return _Solution(self.key, self.solution_text, verdict)

    __repr__ = Shown.__str__
