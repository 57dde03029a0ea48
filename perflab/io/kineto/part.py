"""The first read of a partial Kineto load (see :mod:`perflab.model.trace_part`): each complete
event's category, name, start and duration only (msgspec skips the rest of each event), for
the trace's first and last times and where its ``ProfilerStep#N`` ranges lie."""

from __future__ import annotations

import math
import os
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from perflab.io._progress import Progress
from perflab.io.kineto.decode import decode_records, event_stream
from perflab.io.kineto.keys import CATEGORIES, skipped_categories
from perflab.io.kineto.records import (
    DROPPED,
    FLOW_MARKS,
    INSTANT_MARK,
    METADATA_MARK,
    NO_RAW,
    Event,
    EventExact,
    FastTime,
    Phased,
    Records,
    slice_decoder,
)
from perflab.io.kineto.times import DUR_MAX_US, exact_ns, us_to_ns
from perflab.model.trace_part import Extent, Part, Request

_GPU_CATEGORIES = frozenset(cat for cat, (_, on_gpu) in CATEGORIES.items() if on_gpu)


# Complete events decoded to four fields (msgspec skips the rest of each event); every other
# phase to an empty mark.
class _Span(Phased, tag="X"):
    cat: str = ""
    name: str = ""
    ts: FastTime = math.nan
    dur: float = math.nan


_SpanExact = msgspec.defstruct(
    "_SpanExact",
    [
        (f.name, msgspec.Raw, NO_RAW) if f.name == "ts" else (f.name, f.type, f.default)
        for f in msgspec.structs.fields(_Span)
    ],
    bases=(Phased,),
    tag="X",
)
_SPANS = (_Span, _SpanExact)
_WHOLE = (Event, EventExact)
_MARKS = (METADATA_MARK, INSTANT_MARK, *FLOW_MARKS, *DROPPED)
_SPAN_DECODERS = (slice_decoder(_Span, *_MARKS), slice_decoder(_SpanExact, *_MARKS))


def _times(spans: list[Any]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Start and duration in ns; events whose times a load would refuse are left to it
    (they count as zero here)."""
    dur = np.fromiter((s.dur for s in spans), np.float64, count=len(spans))
    dur = np.where((dur >= 0) & (dur <= DUR_MAX_US), dur, 0.0)
    if type(spans[0].ts) is msgspec.Raw:
        start, _ = exact_ns([s.ts for s in spans])
    else:
        ts = np.fromiter((s.ts for s in spans), np.float64, count=len(spans))
        start = us_to_ns(np.where(np.isfinite(ts), ts, 0.0))
    return start, np.rint(dur * 1000.0).astype(np.int64)


def find_part(
    path: str | os.PathLike[str], request: Request, *, python: bool, shown: Progress
) -> Part:
    """Read the file once for its times and steps, and work out the part ``request`` asks
    for (a perflab error naming the steps there are when the step is missing)."""
    skip = skipped_categories(python)
    extent = Extent()
    with event_stream(path, decode=_decode_spans) as stream:
        for records in stream:
            # a small file comes decoded whole, as records of every phase
            spans: list[Any] = [s for s in records if type(s) in _SPANS or _complete(s)]
            spans = [s for s in spans if s.cat not in skip]
            if spans:
                start, dur = _times(spans)
                on_gpu = [s.cat in _GPU_CATEGORIES for s in spans]
                extent.add([s.name for s in spans], start, dur, on_gpu)
            shown.update(stream.cursor.end)
    return extent.part(request, str(path))


def _complete(record: Any) -> bool:
    return type(record) in _WHOLE and record.ph == "X"


def _decode_spans(piece: bytes | memoryview) -> Records:
    return decode_records(_SPAN_DECODERS, piece)
