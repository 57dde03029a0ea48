"""Kineto times (microseconds, as floats or as JSON number text) -> int64 nanoseconds.

Times are kept to the nanosecond: a start written in microseconds with a fraction beyond
2**43 us (wall-clock times, ``1680565898123456.789``) is read from its digits, since a float64
steps by 0.25 us there (see :func:`exact_ns`); smaller times and whole numbers are exact as
floats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from perflab.model.trace import DUR_MAX_NS, TIME_MAX_NS, TIME_MIN_NS

# the model's time window in microseconds, a microsecond inside it for the rounding to ns
TS_MIN_US, TS_MAX_US = TIME_MIN_NS / 1000 + 1, TIME_MAX_NS / 1000 - 1
DUR_MAX_US = DUR_MAX_NS / 1000 - 1
# Below 2**43 us (101 days) a float64's spacing is under 1 ns, so a time written to the
# nanosecond (three decimals, as Kineto writes them) rounds back to its exact ns from the
# float; larger times (wall-clock microseconds since 1970, ~1.7e15) are read from their text.
FAST_LIMIT_US = float(2**43)


def ns_of(values: list[object]) -> npt.NDArray[np.int64]:
    """Times in us (floats, or text where they did not fit a float) -> ns, as events get
    theirs; a value that is no time gives -1 (it then matches no event)."""
    if all(type(v) is float for v in values):
        us = np.array(values, dtype=np.float64)
        ok = np.isfinite(us) & (us >= TS_MIN_US) & (us <= TS_MAX_US)
        return np.where(ok, us_to_ns(np.where(ok, us, 0.0)), -1)
    ns, us = exact_ns(values)
    return np.where(np.isfinite(us) & (us >= TS_MIN_US) & (us <= TS_MAX_US), ns, -1)


def us_to_ns(ts: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Microseconds (float, exact up to 2**53) to int64 ns without float rounding of the
    large integer part: whole microseconds * 1000 + rounded fraction."""
    whole = np.floor(ts)
    return whole.astype(np.int64) * 1000 + np.rint((ts - whole) * 1000.0).astype(np.int64)


_MAX_WHOLE_DIGITS = 16  # whole microseconds of the time window (3.5e15) have at most 16
_POWERS = 10 ** np.arange(_MAX_WHOLE_DIGITS + 3, dtype=np.uint64)  # sums stay below 2**64
_COMMA, _DOT, _MINUS, _ZERO = b",.-0"


def exact_ns(
    values: Sequence[object],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Microseconds given as JSON number text (``msgspec.Raw`` or bytes) or as numbers (ints
    and floats the fast types read) -> (nanoseconds, rounded half to even from the decimal digits
    themselves, never through a float; microseconds as float64, NaN where a value is not a
    number). The ns of a value outside the model's time window is 0 (its float says where it
    lies)."""
    texts: Sequence[Any] = values
    try:  # Raw and bytes join as they are: no step per value in Python
        joined = b",".join(texts)
    except TypeError:  # numbers, or values that are none
        texts = [v if isinstance(v, (bytes, bytearray)) else _number_text(v) for v in values]
        joined = b",".join(texts)
    n = len(texts)
    ns, plain = _plain_ns(joined, n) if n else (np.zeros(0, np.int64), np.zeros(0, bool))
    us = ns / 1000.0
    for i in np.flatnonzero(~plain).tolist():  # exponents, long digit runs, non-numbers
        ns[i], us[i] = _one_exact_ns(bytes(texts[i]))
    return ns, us


def _number_text(value: object) -> bytes | msgspec.Raw:
    """A time value as text bytes (a Raw is used as it is: bytes.join reads it)."""
    if isinstance(value, msgspec.Raw):
        return value
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        return str(value).encode()
    return b"?"  # not a number


def _plain_ns(joined: bytes, n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """ns of the ``n`` comma-joined texts that read ``-?D{1,16}(.D+)?`` (and whether each
    does), computed on their bytes all at once: each digit times its power of ten, summed
    per text."""
    padded = np.frombuffer(joined + b",\0\0\0", np.uint8)  # room for the last row of _aligned_ns
    buf = padded[:-3]
    ends = np.flatnonzero(buf == _COMMA)
    if len(ends) != n:  # a comma inside some value: not numbers; one by one
        return np.zeros(n, np.int64), np.zeros(n, bool)
    starts = np.concatenate([[0], ends[:-1] + 1])
    aligned = _aligned_ns(padded, starts, ends, joined.find(b"."))
    if aligned is not None:
        return aligned
    of_byte = np.repeat(np.arange(n), ends - starts + 1)  # the text each byte belongs to
    digit = (buf >= _ZERO) & (buf <= _ZERO + 9)
    dots = np.flatnonzero(buf == _DOT)
    negative = buf[np.minimum(starts, len(buf) - 1)] == _MINUS
    odd = ~digit
    odd[dots] = False
    odd[ends] = False
    odd[starts[negative]] = False
    point = ends.copy()  # where each text's point is (its end when it has none)
    point[of_byte[dots]] = dots
    whole_digits = point - starts - negative
    plain = (
        (whole_digits >= 1)
        & (whole_digits <= _MAX_WHOLE_DIGITS)
        & (np.bincount(of_byte[dots], minlength=n) <= 1)
        & (np.bincount(of_byte[odd], minlength=n) == 0)
    )
    # a digit's place: 1 for the last whole digit, -1 for the first after the point; in ns
    # it stands for 10**power
    place = point[of_byte] - np.arange(len(buf))
    power = np.where(place > 0, place + 2, place + 3)
    value = (buf - _ZERO).astype(np.uint64)
    counted = digit & (power >= 0)
    magnitude = np.add.reduceat(
        np.where(counted, value * _POWERS[np.clip(power, 0, len(_POWERS) - 1)], 0), starts
    )
    below = digit & (power < 0)  # digits below a nanosecond decide the rounding
    tenth = np.add.reduceat(np.where(below & (power == -1), value, 0), starts)
    rest = np.add.reduceat(below & (power < -1) & (value > 0), starts) > 0
    magnitude += (tenth > 5) | ((tenth == 5) & (rest | (magnitude % 2 == 1)))
    limit = np.where(negative, -TIME_MIN_NS, TIME_MAX_NS).astype(np.uint64)
    inside = plain & (magnitude <= limit)
    signed = np.where(inside, magnitude, 0).astype(np.int64)
    return np.where(negative, -signed, signed), inside


_FRACTION_NS = np.array([0, 100, 10, 1], dtype=np.uint64)  # the point, then three decimals


def _aligned_ns(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp], ends: npt.NDArray[np.intp], dot: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]] | None:
    """The layout of nearly every trace: every text has the same number of whole digits
    (``dot``, the first text's) and one to three decimals. The texts are read as rows of a
    digit matrix, weighted by one product, instead of the general pass's bookkeeping per
    byte; None for any other layout, which the general pass reads. ``buf`` has three bytes
    after the last text's comma, which its row may cover."""
    if not 1 <= dot <= _MAX_WHOLE_DIGITS:
        return None
    decimals = ends - starts - dot - 1
    if decimals.min() < 1 or decimals.max() > 3:
        return None
    width = dot + 4
    # every run of ``width`` bytes, as a view (numpy's sliding_window_view costs more than
    # the rest of this function on a slice's few thousand values)
    windows = np.ndarray((len(buf) - width + 1, width), np.uint8, buf, 0, (1, 1))
    rows = windows[starts]
    if (rows[:, dot] != _DOT).any():
        return None
    digits = rows - np.uint8(_ZERO)  # non-digits wrap around to more than 9
    digits[:, dot] = 0
    digits[:, dot + 1 :] *= np.arange(3) < decimals[:, None]  # past its decimals: unused
    if (digits > 9).any():
        return None
    weights = np.concatenate([_POWERS[dot + 2 : 2 : -1], _FRACTION_NS])  # ns per digit
    magnitude = digits.astype(np.uint64) @ weights
    inside = magnitude <= np.uint64(TIME_MAX_NS)
    return np.where(inside, magnitude, 0).astype(np.int64), inside


def _one_exact_ns(text: bytes) -> tuple[int, float]:
    """(ns, float us) of one JSON number in any notation; (0, NaN) for anything else."""
    try:
        value = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError):
        return 0, math.nan
    if not value.is_finite() or text.strip()[:1] not in b"-0123456789":
        return 0, math.nan
    us = float(value)
    if not TS_MIN_US <= us <= TS_MAX_US:
        return 0, us
    return int((value * 1000).to_integral_value(ROUND_HALF_EVEN)), us
