"""Kineto JSON text -> slices of typed records (see :mod:`.records`), and bad text -> errors.

A file is decoded whole (:func:`decode_file`, which names the file and the event in its
InputError) or streamed slice by slice (:func:`event_stream`, on :mod:`.fast`), where any
doubt raises :class:`~perflab.io.kineto.fast.Unusual` and the caller decodes the file whole.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TypeVar

import msgspec

from perflab.errors import InputError
from perflab.io.kineto import fast
from perflab.io.kineto.records import (
    DECODERS,
    FLOW_SLICE_DECODERS,
    SKIPPER,
    SLICE_DECODERS,
    Records,
)

_Decoded = TypeVar("_Decoded")


@dataclass
class Doc:
    """A decoded file: its events, slice by slice, and the top-level keys perflab keeps."""

    events: Iterable[Records]  # slices of typed records with the attributes of Event
    devices: list[object] = field(default_factory=list)  # deviceProperties: dicts
    distributed: dict[str, object] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)


def check_syntax(data: bytes, source: str) -> None:
    """Malformed JSON is reported before any event is decoded: a skipping pass holds no
    decoded events, so a large broken file costs its text and one quick pass."""
    try:
        SKIPPER.decode(data)
    except msgspec.ValidationError:
        pass  # not an object at the top level: the typed decode says so
    except msgspec.DecodeError as exc:
        raise InputError(f"malformed JSON: {exc}", source=source) from None
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", source=source) from None


def decode_file(data: bytes, source: str) -> Doc:
    """The whole file at once; bad input is an InputError that names the event if it can."""
    try:
        f = _decode_typed(DECODERS, data)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at ")
        if not where or "`$`" in where or "required field `traceEvents`" in message:
            raise InputError(f"not a Kineto trace: {message}", source=source) from None
        raise InputError(message, source=source, position=where.strip("`") or None) from None
    except msgspec.DecodeError as exc:
        raise InputError(f"malformed JSON: {exc}", source=source) from None
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", source=source) from None
    _check_utf8_strings(data, source)
    return doc_of(f, f)


def doc_of(
    head: msgspec.Struct, tail: msgspec.Struct, events: Iterable[Records] | None = None
) -> Doc:
    """A Doc from the decoded top level (the same object twice when decoded whole); a key
    found in both head and tail takes the tail's value, as a whole-file decode would."""

    def last(name: str) -> object:
        value: object = getattr(tail, name)
        return getattr(head, name) if value is None else value

    base = last("baseTimeNanoseconds")
    devices, distributed = last("deviceProperties"), last("distributedInfo")
    return Doc(
        [trace_events(head)] if events is None else events,
        devices if isinstance(devices, list) else [],  # as the File types declare them
        distributed if isinstance(distributed, dict) else {},
        {"base_time_ns": base} if base is not None else {},
    )


def trace_events(top: msgspec.Struct) -> Records:
    """A decoded top level's traceEvents."""
    events: Records = _TRACE_EVENTS(top)
    return events


_TRACE_EVENTS = attrgetter("traceEvents")


def _check_utf8_strings(data: bytes, source: str) -> None:
    """msgspec does not reject invalid UTF-8 inside strings; the standard says we must."""
    if data.isascii():
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", source=source, position=f"byte {exc.start}") from None


@contextlib.contextmanager
def event_stream(
    path: str | os.PathLike[str],
    *,
    flows: bool = False,
    decode: Callable[[bytes | memoryview], Records] | None = None,
) -> Iterator[fast.EventStream]:
    """The file's events, slice by slice (``flows``: flow events in full, complete events
    empty; ``decode``: slices decoded by that instead); the file is closed when the block
    ends."""
    blocks = fast.read_blocks(path)
    decode = decode or (decode_flow_slice if flows else decode_slice)
    try:
        yield fast.EventStream(blocks, decode, _decode_top_level, trace_events)
    finally:
        blocks.close()


def reread(path: str | os.PathLike[str]) -> Iterator[Records]:
    """The file's events again, for their flows."""
    with event_stream(path, flows=True) as stream:
        yield from stream


def decode_slice(piece: bytes | memoryview) -> Records:
    """One streamed slice of traceEvents; any doubt sends the caller to the whole-file path.
    (The stream has checked that the text is UTF-8.)"""
    return decode_records(SLICE_DECODERS, piece)


def decode_flow_slice(piece: bytes | memoryview) -> Records:
    return decode_records(FLOW_SLICE_DECODERS, piece)


def _decode_typed(
    decoders: tuple[msgspec.json.Decoder[_Decoded], msgspec.json.Decoder[_Decoded]],
    text: bytes | memoryview,
) -> _Decoded:
    """Decoded by the fast types, or by the exact ones where a time does not fit them (a
    ValidationError then comes from the exact types, which hold times as text)."""
    try:
        return decoders[0].decode(text)
    except msgspec.ValidationError:
        return decoders[1].decode(text)


def decode_records(
    decoders: tuple[msgspec.json.Decoder[Records], msgspec.json.Decoder[Records]],
    piece: bytes | memoryview,
) -> Records:
    try:
        events = _decode_typed(decoders, piece)
    except msgspec.ValidationError:
        raise fast.Unusual("invalid event") from None
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc):
            raise fast.Truncated from None
        raise fast.Unusual("malformed JSON") from None
    except RecursionError:
        raise fast.Unusual("nested too deeply") from None
    return events


def _decode_top_level(piece: bytes) -> msgspec.Struct:
    try:
        return _decode_typed(DECODERS, piece)
    except (msgspec.DecodeError, RecursionError):
        raise fast.Unusual("unusual top level") from None
