"""The one way saved results are read and written: each file's shape is declared once, as
msgspec types whose fields carry their bounds (``Annotated[float, msgspec.Meta(ge=0)]``),
and :func:`decode`/:func:`encode` convert between those types and plain JSON values.

A value outside its declared type is a SchemaError naming the file and the field
(``r.json (field samples_ns[3]): must be a finite number >= 0.0, not -1.0``). What a type
cannot say (a column as long as another, a sample a timer can report) a type states in a
``validate()`` method, raising :class:`Invalid` with the place relative to itself; decode
calls every decoded object's ``validate()``, innermost first, and names the whole path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sized
from typing import Annotated, Any, TypeVar

import msgspec
import numpy as np

from perflab.errors import SchemaError
from perflab.model.fields import MAX_FLOAT, MAX_INT, MAX_ITEMS, MAX_TEXT

T = TypeVar("T")
S = TypeVar("S", bound=msgspec.Struct)

# The bounds every saved field shares. A float bounded above and below refuses NaN and
# infinity too (no comparison with NaN holds), so each number type here is finite.
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
Amount = Annotated[float, msgspec.Meta(ge=0, le=MAX_FLOAT)]
Signed = Annotated[float, msgspec.Meta(ge=-MAX_FLOAT, le=MAX_FLOAT)]
Amounts = Annotated[list[Amount], msgspec.Meta(max_length=MAX_ITEMS)]
Texts = list[Text]
TextMap = dict[str, Text]
Options = dict[str, Any]  # any JSON value (Any, not object: JSON Schema has no "object" type)


class Invalid(ValueError):
    """A cross-field check failed: ``place`` is relative to the object that checked
    (``"y"``, ``"samples_ns[3]"``; ``""`` for the object itself)."""

    def __init__(self, place: str, reason: str) -> None:
        super().__init__(f"{place}: {reason}" if place else reason)
        self.place = place
        self.reason = reason


def require_length(place: str, values: Sized, size: int) -> None:
    """Invalid unless ``values`` holds ``size`` items (a column beside another)."""
    if len(values) != size:
        raise Invalid(place, f"has {len(values)} values where {size} are expected")


class FieldError(ValueError):
    """A value a declared type refuses: ``place`` is its path (``series[0].y[3]``)."""

    def __init__(self, place: str, reason: str) -> None:
        super().__init__(f"field {place}: {reason}" if place else reason)
        self.place = place
        self.reason = reason


def check(doc: object, kind: type[T], where: str = "") -> T:
    """``doc`` converted to ``kind`` and validated; a FieldError names the place. A type
    may name the fields whose absence it reports first (``missing_first``: the samples of
    a timing rather than its backend), whatever their order in the file."""
    for name in getattr(kind, "missing_first", ()):
        if isinstance(doc, dict) and name not in doc:
            raise FieldError(_join(where, name), "is missing")
    try:
        value = msgspec.convert(doc, type=kind)
    except msgspec.ValidationError as exc:
        place, reason = _translate(str(exc), doc, kind)
        raise FieldError(_join(where, place), reason) from None
    try:
        _validate_tree(value)
    except FieldError as exc:
        raise FieldError(_join(where, exc.place), exc.reason) from None
    return value


def decode(doc: object, kind: type[T], source: str, where: str = "", what: str = "") -> T:
    """:func:`check`, with each failure a SchemaError naming ``source`` and the field (and
    saying ``malformed <what>`` first when ``what`` is given)."""
    try:
        return check(doc, kind, where)
    except FieldError as exc:
        position = f"field {exc.place}" if exc.place else None
        reason = f"malformed {what}: {exc.reason}" if what else exc.reason
        raise SchemaError(reason, source=source, position=position) from None


def encode(value: object) -> dict[str, object]:
    """The JSON object of a declared type (numpy arrays and scalars as lists and numbers),
    as a JSON parser reads it: a tuple field is a list, as in the file."""
    out = msgspec.json.decode(msgspec.json.encode(value, enc_hook=_plain))
    if not isinstance(out, dict):
        raise TypeError(f"{type(value).__name__} does not encode to a JSON object")
    return out


def view(value: object, kind: type[S]) -> S:
    """The document ``kind`` declares, made of ``value``: each field is the attribute of
    ``value`` with the field's Python name (the key it is written under may differ)."""
    return kind(**{name: getattr(value, name) for name in kind.__struct_fields__})


def _plain(value: object) -> object:
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise NotImplementedError(f"cannot save a {type(value).__name__}")


# -- cross-field checks ------------------------------------------------------------------


def _validate_tree(value: object, place: str = "") -> None:
    """Call ``validate()`` on every decoded Struct below and at ``value``, innermost first."""
    for name, child in _children(value):
        _validate_tree(child, _join(place, name))
    validate = getattr(value, "validate", None)
    if isinstance(value, msgspec.Struct) and callable(validate):
        try:
            validate()
        except Invalid as exc:
            raise FieldError(_join(place, exc.place), exc.reason) from None


def _children(value: object) -> Iterator[tuple[str, object]]:
    """The parts of ``value`` that may hold Structs, each with its name in the file (a list
    of numbers is skipped whole)."""
    if isinstance(value, msgspec.Struct):
        names = zip(value.__struct_fields__, value.__struct_encode_fields__, strict=True)
        for name, saved_as in names:
            child = getattr(value, name)
            if isinstance(child, (msgspec.Struct, list, dict)):
                yield saved_as, child
    elif isinstance(value, list) and value and isinstance(value[0], (msgspec.Struct, list)):
        yield from ((f"[{i}]", item) for i, item in enumerate(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, msgspec.Struct):
                yield str(key), item


def _join(where: str, place: str) -> str:
    if not place:
        return where
    if not where or place.startswith("["):
        return where + place
    return f"{where}.{place}"


# -- msgspec's messages in perflab's words ---------------------------------------------------

Step = str | int | None  # a field or key, a list index; None: a key msgspec did not name

_AT = re.compile(r"^(?P<message>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[(\.\.\.)\]")
_FIELD = re.compile(r"^Object (?P<what>missing required|contains unknown) field `(?P<name>[^`]*)`$")
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]+)`(?:, got `(?P<got>[^`]+)`|(?P<bound> .+))$")
_WORDS = {
    "list": "a list",
    "dict": "an object",
    "int": "a whole number",
    "float": "a finite number",
    "float | null": "a finite number or null",
    "str": "text",
    "bool": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "null",
    "bytes": "base64 text",
}


def _translate(message: str, doc: object, kind: type) -> tuple[str, str]:
    """(place, reason) of a msgspec ValidationError: ``$.samples_ns[3]`` becomes
    ``samples_ns[3]``, "Expected `float` >= 0.0" "must be a finite number >= 0.0, not -1.0"."""
    found = _AT.match(message)
    assert found is not None  # the pattern matches any text
    text = found["message"]
    steps = _name_keys(_steps(found["path"] or ""), doc, kind)
    named = _FIELD.match(text)
    if named:
        place = _render([*steps, named["name"]])
        return place, "is missing" if named["what"] == "missing required" else "is not known"
    expected = _EXPECTED.match(text)
    if expected is None:
        return _render(steps), text
    want = _WORDS.get(expected["want"], expected["want"])
    if expected["got"]:
        return _render(steps), f"must be {want}, not {_WORDS.get(expected['got'], expected['got'])}"
    value = _value_text(_value_at(doc, steps))
    return _render(steps), f"must be {want}{expected['bound']}, not {value}"


def _steps(path: str) -> list[Step]:
    return [name or (int(index) if index else None) for name, index, _ in _STEP.findall(path)]


def _render(steps: list[Step]) -> str:
    text = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in steps)
    return text.lstrip(".")


def _name_keys(steps: list[Step], doc: object, kind: type) -> list[Step]:
    """``steps`` with each key msgspec left unnamed (``$.extra[...]``) found: the first key
    of that object which alone still fails there (msgspec checks keys in order)."""
    steps = list(steps)
    for n, step in enumerate(steps):
        holder = _value_at(doc, steps[:n])
        if step is not None or not isinstance(holder, dict):
            continue
        prefix = _render(steps[:n])
        for key, value in holder.items():
            try:
                msgspec.convert(_replaced(doc, steps[:n], {key: value}), type=kind)
            except msgspec.ValidationError as exc:
                found = _AT.match(str(exc))
                path = _render(_steps(found["path"] or "")) if found else ""
                if path.startswith(f"{prefix}.") or (not prefix and path):
                    steps[n] = str(key)
                    break
    return steps


def _replaced(doc: object, steps: list[Step], value: object) -> object:
    """A copy of ``doc`` (copied only along ``steps``) with ``value`` at ``steps``."""
    if not steps:
        return value
    head, rest = steps[0], steps[1:]
    if isinstance(doc, dict) and isinstance(head, str):
        return {**doc, head: _replaced(doc[head], rest, value)}
    if isinstance(doc, list) and isinstance(head, int):
        return [*doc[:head], _replaced(doc[head], rest, value), *doc[head + 1 :]]
    return doc


def _value_at(doc: object, steps: list[Step]) -> object:
    """The value at ``steps`` in ``doc`` (Ellipsis where a step leads nowhere)."""
    value = doc
    for step in steps:
        value = _child(value, step)
    return value


def _child(value: object, step: Step) -> object:
    if isinstance(value, dict) and isinstance(step, str):
        return value.get(step, Ellipsis)
    if isinstance(value, list) and isinstance(step, int) and step < len(value):
        return value[step]
    return Ellipsis


def _value_text(value: object) -> str:
    if value is Ellipsis:
        return "..."
    if isinstance(value, (list, dict, str)) and len(value) > 40:  # never repr a whole column
        unit = {"str": "characters", "list": "items", "dict": "keys"}[type(value).__name__]
        return f"{_WORDS[type(value).__name__]} of {len(value):,} {unit}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
