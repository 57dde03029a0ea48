"""A prediction answered, then judged against what was measured, as a notebook does it: the
one helper the exercise modules' tests share."""

from __future__ import annotations

from perflab import exercises


def predicted(
    key: str, answer: object, given: dict[str, object] | None = None, **measured: object
) -> exercises.Verdict:
    """The verdict on ``answer`` to exercise ``key`` (shown with ``given``) once ``measured``
    is in; the answer must be recorded first."""
    ex = exercises.get(key, **(given or {}))
    assert ex.answer(answer).state == "recorded"
    return ex.check(**measured)
