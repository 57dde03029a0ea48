"""perflab.exercises: right, wrong, unreadable and unanswered answers, escaping, solutions."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from perflab.errors import InputError
from perflab.exercises import Exercise, choice, kernel_check, number, predicate
from perflab.model.kernel import CompileResult, KernelArtifacts, Resources


def plateau() -> Exercise:
    return Exercise(
        "plateau",
        "Predict the plateau (TB/s).",
        number(4.0, unit="TB/s", rel=0.1, low="too low: why", high="too high: why"),
        "About 4 TB/s.",
    )


@pytest.mark.parametrize("answer", [4.0, 3.6, 4.4, "4.1 TB/s", "4100 GB/s", " 4e12 B/s ", "4"])
def test_number_in_tolerance_is_right_in_any_prefix(answer: object) -> None:
    verdict = plateau().answer(answer)
    assert verdict.state == "right", verdict
    assert bool(verdict)
    assert "4 TB/s ± 0.4 TB/s" in verdict.reason


@pytest.mark.parametrize(
    ("answer", "side", "hint"), [(3.5, "below", "too low"), ("5000 GB/s", "above", "too high")]
)
def test_number_out_of_tolerance_says_which_side_and_why(
    answer: object, side: str, hint: str
) -> None:
    verdict = plateau().answer(answer)
    assert verdict.state == "wrong" and not verdict
    assert side in verdict.reason and hint in verdict.reason


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("fast", "expected a number"),
        ("4 W", "asks for TB/s"),
        (True, "expected a number"),
        ([4.0], "expected a number"),
        (math.inf, "finite"),
        ("nan", "expected a number"),
    ],
)
def test_unreadable_number_says_what_was_expected(answer: object, says: str) -> None:
    verdict = plateau().answer(answer)
    assert verdict.state == "unreadable" and not verdict
    assert says in verdict.reason


def test_absolute_tolerance_and_none_is_unanswered() -> None:
    ex = Exercise("n", "q", number(10, abs=2), "s")
    assert ex.answer(12).state == "right"
    assert ex.answer(12.5).state == "wrong"
    assert ex.answer(None).state == "unanswered"
    assert "replace None" in ex.answer(None).reason


@pytest.mark.parametrize("kwargs", [{}, {"rel": -0.1}, {"abs": math.nan}])
def test_number_without_a_valid_tolerance_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(InputError, match="number"):
        number(1.0, **kwargs)


def test_choice_single_and_per_option_reasons() -> None:
    ex = Exercise("c", "q", choice("HGMMA", ["FFMA", "HMMA", "HGMMA"], why={"FFMA": "no TC"}), "s")
    assert ex.answer(" hgmma ").state == "right"
    assert "HGMMA is right" in ex.answer("HGMMA").reason
    wrong = ex.answer("ffma")
    assert wrong.state == "wrong" and wrong.reason == "no TC"
    assert ex.answer("HMMA").reason == "HMMA is not right."
    assert ex.answer("IMAD").state == "unreadable"
    assert ex.answer(3).state == "unreadable"


def test_choice_many_needs_exactly_the_right_set() -> None:
    ex = Exercise("m", "q", choice(["a", "c"], ["a", "b", "c"]), "s")
    assert ex.answer("c, a").state == "right"
    assert ex.answer(["A", "C"]).state == "right"
    assert "missing" in ex.answer(["a"]).reason
    assert ex.answer(["a", "b", "c"]).state == "wrong"


def test_choice_refuses_a_correct_option_that_is_not_offered() -> None:
    with pytest.raises(InputError, match="among the options"):
        choice("d", ["a", "b"])
    with pytest.raises(InputError, match="not options"):
        choice("a", ["a", "b"], why={"z": "?"})


def test_predicate_and_a_check_that_raises() -> None:
    ex = Exercise("p", "q", predicate(lambda x: x > 3, right="big", wrong="small"), "s")
    assert (ex.answer(4).state, ex.answer(4).reason) == ("right", "big")
    assert (ex.answer(1).state, ex.answer(1).reason) == ("wrong", "small")
    assert ex.answer("x").state == "unreadable"  # str > int: TypeError, said not raised


def _kernel(spill_stores: int) -> KernelArtifacts:
    return KernelArtifacts(
        name="k",
        mangled="_Z1kv",
        arch="sm_90a",
        module_ptx="",
        ptx_span=(1, 1),
        ptx_lines_source=[],
        resources=Resources(registers=255, spill_stores=spill_stores),
    )


def test_kernel_check_takes_a_compile_result_or_a_kernel() -> None:
    ex = Exercise(
        "spill",
        "q",
        kernel_check(lambda k: not k.resources.spills, right="no spills", wrong="spills"),
        "s",
    )
    result = CompileResult("cuda", "sm_90a", "", "k.cu", [_kernel(0)], "")
    assert ex.answer(result).state == "right"
    assert ex.answer(_kernel(8)).state == "wrong"
    unreadable = ex.answer("a string")
    assert unreadable.state == "unreadable" and "compiled kernel" in unreadable.reason


def test_every_view_escapes_html_and_has_text() -> None:
    evil = "<script>alert(1)</script>"
    ex = Exercise(evil, evil, choice("a", ["a", evil], why={evil: evil}), evil)
    for shown in (ex, ex.answer(evil), ex.solution(), ex.answer("nope")):
        bundle = shown._repr_mimebundle_()
        assert "<script>" not in bundle["text/html"]
        assert "&lt;script&gt;" in bundle["text/html"]
        assert bundle["text/plain"]


def test_solution_is_folded_and_keeps_paragraphs() -> None:
    html = Exercise("k", "q", number(1, abs=0), "first\n\nsecond").solution()._repr_mimebundle_()
    assert html["text/html"].startswith('<details class="perflab-exercise-solution"')
    assert " open" not in html["text/html"].split(">")[0]
    assert html["text/html"].count("<p ") == 2
    assert "first" in html["text/plain"] and "second" in html["text/plain"]


def test_import_stays_light() -> None:
    heavy = ("numpy", "IPython", "torch", "bokeh")
    code = f"import sys, perflab.exercises; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_solution_shows_the_checks_verdict_on_its_own_answer() -> None:
    ex = plateau()
    right = ex.solution(worked="3.9 TB/s")
    assert right.worked is not None and right.worked.state == "right"
    assert "✔ Right" in right._repr_mimebundle_()["text/html"]
    wrong = ex.solution(worked=9.0)._repr_mimebundle_()
    assert "Not quite" in wrong["text/html"] and "Not quite" in wrong["text/plain"]
    assert "check on this solution" not in ex.solution()._repr_mimebundle_()["text/plain"]


def test_number_within_a_factor_for_orders_of_magnitude() -> None:
    ex = Exercise("f", "q", number(2e-3, factor=3), "s")
    assert ex.answer(1e-3).state == "right"
    assert ex.answer("6e-3").state == "right"
    assert ex.answer(1e-4).state == "wrong"
    assert "0.0006667 to 0.006" in ex.answer(1e-2).reason
    with pytest.raises(InputError, match="factor"):
        number(-1.0, factor=2)
    with pytest.raises(InputError, match="factor"):
        number(1.0, factor=0.5)
