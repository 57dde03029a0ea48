"""Text and HTML of the notebooks' exercises (:mod:`perflab.exercises`): the question, the
verdict on an answer and the folded solution. Every string is escaped."""

from __future__ import annotations

from typing import Protocol

from perflab.render.html import esc

MARKS = {"right": "✔ Right", "wrong": "✘ Not quite", "unreadable": "? Unreadable answer"}
COLOURS = {"right": "#1a7f37", "wrong": "#b3261e", "unreadable": "#9a6700"}
UNANSWERED, GREY = "… Not answered yet", "#57606a"


class _Verdict(Protocol):
    key: str
    state: str
    reason: str


class _Solution(Protocol):
    key: str
    text: str

    @property
    def worked(self) -> _Verdict | None: ...


class _Exercise(Protocol):
    key: str
    question: str


def verdict_text(verdict: _Verdict) -> str:
    return f"{MARKS.get(verdict.state, UNANSWERED)}: {verdict.reason}"


def verdict_html(verdict: _Verdict) -> str:
    colour = COLOURS.get(verdict.state, GREY)
    mark = esc(MARKS.get(verdict.state, UNANSWERED))
    return (
        f'<div class="perflab-exercise-verdict" data-key="{esc(verdict.key)}" '
        f'style="border-left:4px solid {colour};padding:4px 10px;margin:4px 0">'
        f'<b style="color:{colour}">{mark}</b> {esc(verdict.reason)}</div>'
    )


def solution_text(solution: _Solution) -> str:
    worked = solution.worked  # a verdict is falsy unless right: compare with None
    checked = "" if worked is None else f"\n(the check on this solution: {verdict_text(worked)})"
    return f"Solution ({solution.key}):\n{solution.text}{checked}"


def solution_html(solution: _Solution) -> str:
    paragraphs = "".join(
        f'<p style="margin:4px 0">{esc(p)}</p>' for p in solution.text.split("\n\n") if p.strip()
    )
    checked = ""
    if solution.worked is not None:
        checked = '<p style="margin:4px 0">The check on this solution:</p>' + verdict_html(
            solution.worked
        )
    return (
        f'<details class="perflab-exercise-solution" data-key="{esc(solution.key)}" '
        'style="margin:4px 0"><summary style="cursor:pointer">'
        f"Solution (click to open)</summary>{paragraphs}{checked}</details>"
    )


def exercise_text(exercise: _Exercise) -> str:
    return f"Exercise {exercise.key}: {exercise.question}"


def exercise_html(exercise: _Exercise) -> str:
    return (
        f'<div class="perflab-exercise" data-key="{esc(exercise.key)}" '
        'style="border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;margin:4px 0">'
        f"<b>Exercise ({esc(exercise.key)})</b>: {esc(exercise.question)}</div>"
    )
