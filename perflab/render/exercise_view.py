"""Text and HTML of the notebooks' exercises (:mod:`perflab.exercises`): the question with
how to answer it, the verdict on an answer and the folded solution. Every string is escaped."""

from __future__ import annotations

from typing import Protocol

from perflab.render.html import esc

MARKS = {
    "right": "✔ Right",
    "wrong": "✘ Not quite",
    "unreadable": "? Unreadable answer",
    "recorded": "✎ Prediction recorded",
}
COLOURS = {"right": "#1a7f37", "wrong": "#b3261e", "unreadable": "#9a6700", "recorded": "#0969da"}
UNANSWERED, GREY = "… Not answered yet", "#57606a"
HOW_TO_ANSWER = (
    ".answer(value) says right, or which way it is off with a hint; after three wrong tries "
    "it shows the accepted answer. .solution() shows the solution at any time."
)
HOW_TO_PREDICT = (
    "A prediction: answer before running the measurement below. .answer(value) records it, "
    ".check(...) after the measurement judges it; .solution() shows the solution."
)


class _Verdict(Protocol):
    key: str
    state: str
    reason: str
    accepted: str


class _Solution(Protocol):
    key: str
    text: str
    accepted: str


class _Exercise(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def question(self) -> str: ...

    @property
    def prediction(self) -> bool: ...


def _how(exercise: _Exercise) -> str:
    return HOW_TO_PREDICT if exercise.prediction else HOW_TO_ANSWER


def _title(exercise: _Exercise) -> str:
    return f"{'Prediction' if exercise.prediction else 'Exercise'} ({exercise.key})"


def verdict_text(verdict: _Verdict) -> str:
    accepted = f"\nThe accepted answer: {verdict.accepted}" if verdict.accepted else ""
    return f"{MARKS.get(verdict.state, UNANSWERED)}: {verdict.reason}{accepted}"


def verdict_html(verdict: _Verdict) -> str:
    colour = COLOURS.get(verdict.state, GREY)
    mark = esc(MARKS.get(verdict.state, UNANSWERED))
    accepted = ""
    if verdict.accepted:
        accepted = f"<br>The accepted answer: {esc(verdict.accepted)}"
    return (
        f'<div class="perflab-exercise-verdict" data-key="{esc(verdict.key)}" '
        f'style="border-left:4px solid {colour};padding:4px 10px;margin:4px 0">'
        f'<b style="color:{colour}">{mark}</b> {esc(verdict.reason)}{accepted}</div>'
    )


def solution_text(solution: _Solution) -> str:
    return f"Solution ({solution.key}):\n{solution.text}\nThe accepted answer: {solution.accepted}"


def solution_html(solution: _Solution) -> str:
    paragraphs = "".join(
        f'<p style="margin:4px 0">{esc(p)}</p>' for p in solution.text.split("\n\n") if p.strip()
    )
    return (
        f'<details class="perflab-exercise-solution" data-key="{esc(solution.key)}" '
        'style="margin:4px 0"><summary style="cursor:pointer">'
        f"Solution (click to open)</summary>{paragraphs}"
        f'<p style="margin:4px 0">The accepted answer: {esc(solution.accepted)}</p></details>'
    )


def exercise_text(exercise: _Exercise) -> str:
    return f"{_title(exercise)}: {exercise.question}\n{_how(exercise)}"


def exercise_html(exercise: _Exercise) -> str:
    return (
        f'<div class="perflab-exercise" data-key="{esc(exercise.key)}" '
        'style="border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;margin:4px 0">'
        f"<b>{esc(_title(exercise))}</b>: {esc(exercise.question)}"
        f'<div style="color:{GREY};font-size:90%;margin-top:4px">{esc(_how(exercise))}</div></div>'
    )
