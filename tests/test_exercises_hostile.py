"""Every registered exercise answers every input with a verdict or perflab's own error: hostile
answers (huge, negative zero, not a number, wrong types) and hostile given and measured values
(10**400, zero counts, non-integer keys, empty mappings), seeded."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from fractions import Fraction
from typing import Any

import pytest
from test_exercises import EXAMPLES

from perflab import exercises
from perflab.errors import InputError, PerflabError
from perflab.exercises import Exercise, Spec
from perflab.exercises.checks import number, read_number

HUGE = 10**400
NUMBERS: list[object] = [
    HUGE,
    -HUGE,
    10**5000,  # past the digits Python turns an int into text
    Fraction(HUGE, 3),
    2**53 + 1,
    -0.0,
    0,
    0.0,
    -1,
    1,
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -1e308,
    5e-324,
    True,
]
TEXTS: list[object] = ["", " ", "x" * 100_000, "\x00", "\ud800", "QGMMA"]
MAPPINGS: list[object] = [
    {},
    {"a": HUGE},
    {1.5: 1.0},
    {"x": 1.0, "y": 2.0},
    {"": math.nan},
    {None: 1.0},
    {HUGE: 1.0, 2: 1.0},
    {"4096": 1e308, "-8192": -1e308},
    {10**5000: 1.0},
    {"1": -0.0, "2": 0.0},
    {str(n): float(n) for n in range(2000)},
]
WRONG_TYPES: list[object] = [None, [], [1.0], b"1", object(), 1j, "3", ...]
ANSWERS: list[object] = [
    *NUMBERS,
    *TEXTS,
    "1" * 2000 + " a b",
    "1" * 300 + "e" * 300,
    "x" * 1_000_000,
    "10**400",
    "1e400",
    "-1e400 TB/s",
    "-0",
    "nan",
    "inf %",
    "4096 to 65536",
    "a, b, c",
    "," * 10_000,
    ["a"] * 10_000,
    ["below 4096", 10**5000],
    {"x": 1},
    [],
    b"a",
    1j,
    object(),
]
VALUES_OF_KIND: dict[str, list[object]] = {
    "number": NUMBERS,
    "positive": NUMBERS,
    "fraction": NUMBERS,
    "count": NUMBERS,
    "positive count": NUMBERS,
    "text": TEXTS,
    "numbers": MAPPINGS,
    "sweep": MAPPINGS,
}
STATES = {"right", "wrong", "unreadable", "unanswered", "recorded"}


def _hostile_values(spec: Spec, kinds: dict[str, str], rng: random.Random) -> dict[str, object]:
    """The example's values, with some (at least one, where there are any) made hostile."""
    values = {name: EXAMPLES.get(spec.id, {}).get(name) for name in kinds}
    for name, kind in kinds.items():
        if rng.random() < 0.5 or name == rng.choice(list(kinds)):
            pool = VALUES_OF_KIND[kind] if rng.random() < 0.8 else WRONG_TYPES
            values[name] = rng.choice(pool)
    return values


def _try(spec: Spec, rng: random.Random) -> tuple[str, str]:
    """One round: the state of the verdict and its reason, or "refused" and perflab's own
    error; any other exception fails the test."""
    answer = rng.choice(ANSWERS)
    given = _hostile_values(spec, dict(spec.given), rng) if rng.random() < 0.7 else {}
    given = given or {k: v for k, v in EXAMPLES.get(spec.id, {}).items() if k in spec.given}
    try:
        ex = exercises.get(spec.id, **given)
        str(ex.question)
        verdict = ex.answer(answer, reveal=rng.random() < 0.5)
        if spec.prediction:
            verdict = ex.check(**_hostile_values(spec, dict(spec.measured), rng))
        str(ex.solution())
    except PerflabError as exc:
        return "refused", str(exc)
    return verdict.state, str(verdict)


def test_every_kind_of_value_has_its_hostile_values() -> None:
    assert VALUES_OF_KIND.keys() == exercises.KINDS.keys()


@pytest.mark.parametrize("spec", exercises.catalogue(), ids=lambda s: s.id)
def test_hostile_answers_and_values_get_a_verdict_or_a_perflab_error(spec: Spec) -> None:
    rng = random.Random(f"hostile {spec.id}")
    for _ in range(60):
        state, says = _try(spec, rng)
        assert state in STATES | {"refused"}
        assert 0 < len(says) < 2000, says[:300]  # a message, not the answer echoed whole


@pytest.mark.parametrize("spec", exercises.catalogue(), ids=lambda s: s.id)
def test_each_hostile_answer_alone(spec: Spec) -> None:
    """Every answer of the list against the example's own values (so none is refused early)."""
    values = EXAMPLES.get(spec.id, {})
    for answer in ANSWERS:
        ex = exercises.get(spec.id, **{k: v for k, v in values.items() if k in spec.given})
        verdict = ex.answer(answer, reveal=True)
        if spec.prediction and verdict.state == "recorded":
            verdict = ex.check(**{k: v for k, v in values.items() if k in spec.measured})
        assert verdict.state in STATES and len(verdict.reason) < 2000, (answer, verdict)


def test_an_overlong_answer_is_unreadable_and_says_why() -> None:
    verdict = exercises.get("reported-time").answer("1" * 2000 + " a b")
    assert verdict.state == "unreadable" and "characters" in verdict.reason
    with pytest.raises(ValueError, match="characters"):
        read_number("1" * 2000 + " a b", "s")


def test_a_long_answer_that_backtracked_for_a_minute_returns() -> None:
    """The number reader took 64 s on this answer (cubic time); the bound is only against
    a hang."""
    code = (
        "from perflab.exercises.checks import read_number\n"
        "for text in ['1' * 150 + ' a b', '1' * 2000 + ' a b']:\n"
        "    try:\n"
        "        read_number(text, 's')\n"
        "    except ValueError as exc:\n"
        "        print(str(exc)[:40])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True
    )
    assert len(done.stdout.splitlines()) == 2


@pytest.mark.parametrize(
    ("key", "values", "says"),
    [
        ("padding-share", {"real_tokens": 5, "padded_tokens": 0}, "padded_tokens must be"),
        ("int8-weight-bytes", {"weights": 0, "channels": 4}, "weights must be"),
        ("bytes-in-flight", {"bandwidth_gbps": 1.0, "latency_ns": 1.0, "sms": 0}, "sms must be"),
        ("littles-law", {"level": "L2", "bandwidth_gbps": HUGE, "latency_ns": 1}, "finite"),
        ("naive-bound", {"naive_intensity": {"x": 1.0}, "ridge": 2.0}, "whole number"),
    ],
)
def test_values_that_cannot_be_checked_are_refused_by_name(
    key: str, values: dict[str, Any], says: str
) -> None:
    spec = next(s for s in exercises.catalogue() if s.id == key)
    given = {k: v for k, v in values.items() if k in spec.given}
    measured = {k: v for k, v in values.items() if k in spec.measured}
    with pytest.raises(PerflabError, match=says):
        _judged(key, given, measured)


def _judged(key: str, given: dict[str, Any], measured: dict[str, Any]) -> None:
    ex = exercises.get(key, **given)
    if measured:
        ex.answer("1" if ex.spec.kind == "number" else "never")
        ex.check(**measured)
    else:
        ex.answer(1.0, reveal=True)


def test_arithmetic_the_values_break_is_named_not_raised() -> None:
    spec = Spec(
        "square",
        "00-test",
        "Q?",
        number(lambda v: v["x"] ** 2, rel=0.1, low="low", high="high"),
        lambda v: f"x squared is {v['x'] ** 2:g}",
        given={"x": "positive"},
    )
    ex = Exercise(spec, {"x": 1e200})
    with pytest.raises(InputError, match="'square' cannot be checked with these values"):
        ex.answer(1.0)
    with pytest.raises(InputError, match="cannot be checked"):
        ex.solution()
    assert ex.tries == 0
    assert Exercise(spec, {"x": 3.0}).answer(9.0).state == "right"
