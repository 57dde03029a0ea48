"""The JSON of an exercise (``perflab exercises list --json``), declared once; imported only
when it is printed."""

from __future__ import annotations

import msgspec


class ExerciseView(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One exercise: its id, notebook, kind of answer, whether it asks for a prediction, and
    the names of the values it is given and the ones measured."""

    id: str
    notebook: str
    kind: str
    prediction: bool
    given: list[str]
    measured: list[str]
