"""Single field values of Kineto events -> what their columns hold: interned ids, device and
stream ids given as text, grid/block triples, memcpy directions, names."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import msgspec
import numpy as np
import numpy.typing as npt

from perflab.io._common import StringTable
from perflab.io.kineto.records import I64_MAX, I64_MIN, LANE_TEXT
from perflab.model.trace import MAX_NAME_TEXT, MEMCPY_DIRECTIONS
from perflab.model.units import shorten

DIRECTION_CODE = {d.lower(): i for i, d in enumerate(MEMCPY_DIRECTIONS)}


class Ids(dict[Hashable, int]):
    """Interns values: a new value gets the next id and is remembered in ``new``."""

    def __init__(self) -> None:
        super().__init__()
        self.new: list[Hashable] = []

    def __missing__(self, key: Hashable) -> int:
        self[key] = value = len(self)
        self.new.append(key)
        return value

    def codes(self, values: Iterable[Hashable], n: int) -> npt.NDArray[np.int32]:
        return np.fromiter(map(self.__getitem__, values), np.int32, count=n)


def lane_id(value: object, name: str) -> int:
    """A device or stream id: an integer, or text in LANE_TEXT; pointers of 2**63 and above
    become negative (two's complement), so that distinct pointers stay distinct."""
    if type(value) is int and I64_MIN <= value <= I64_MAX:
        return value
    if not isinstance(value, str) or not LANE_TEXT.match(value):
        raise TypeError(f"'{name}' must be an integer or a hex string, not {str(value)[:40]!r}")
    if value == "(nil)":
        return 0
    number = int(value, 16) if value[:2] in ("0x", "0X") else int(value)
    return number - (1 << 64) if number > I64_MAX else number


def hashable(value: object) -> Hashable:
    """A grid or block that came back through JSON (a list) as the records hold it: a tuple."""
    if isinstance(value, list):
        return tuple(value)
    if not isinstance(value, Hashable):
        raise TypeError(f"not a grid or block: {value!r}")
    return value


def name_text(value: object) -> str:
    """A metadata event's ``args.name`` as text ("" when it is not a string), at most
    MAX_NAME_TEXT long."""
    if isinstance(value, msgspec.Raw):
        raw = bytes(value)
        if raw[:1] != b'"':
            return ""
        value = msgspec.json.decode(raw)
    if not isinstance(value, str):
        return ""
    text = value.strip()
    return shorten(text, MAX_NAME_TEXT)


def sequence_number(value: object) -> int:
    """A collective's "Seq" (a count; digit text is read as the number); -1 otherwise."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    return value if type(value) is int and value >= 0 else -1


def id_column(values: list[object], text_ids: Ids) -> npt.NDArray[np.int64]:
    """pid/tid: integers as they are; names (e.g. "Spans") become stable negative ids."""
    try:
        return np.array(values, dtype=np.int64)
    except (ValueError, TypeError):
        return np.array([id_value(v, text_ids) for v in values], dtype=np.int64)


def id_value(value: object, text_ids: Ids) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    # numbered in order of first use, so the same in every slicing of the file
    return int(text) if text.lstrip("-").isdigit() else -2 - text_ids[text]


def dim3(values: Iterable[object]) -> list[list[int]]:
    """grid/block triples; -1s where absent or not three integers."""
    missing = (-1, -1, -1)
    rows = [v if isinstance(v, tuple) and len(v) == 3 else missing for v in values]
    triples: list[list[int]] = np.array(rows, dtype=np.int64).tolist()
    return triples


def memcpy_direction(name: str) -> int:
    """``"Memcpy HtoD (Pageable -> Device)"`` -> the code of ``"HtoD"`` in MEMCPY_DIRECTIONS."""
    words = name.split()
    token = words[1].lower() if len(words) > 1 and words[0].lower() == "memcpy" else ""
    return DIRECTION_CODE.get(token, 0)


def translated(
    local: npt.NDArray[np.int32], new_id: npt.NDArray[np.int32]
) -> npt.NDArray[np.int32]:
    """Ids of one table as ids of another (``new_id``: local id -> id there); -1 stays."""
    if len(new_id) == 0:
        return local
    return np.where(local >= 0, new_id[np.maximum(local, 0)], -1).astype(np.int32)


def raw_strings(raws: list[msgspec.Raw], strings: StringTable) -> npt.NDArray[np.int32]:
    """JSON fragments (shapes, dtypes) as string ids; -1 where absent."""
    return np.array(
        [strings.add(bytes(r).decode("utf-8", "replace")) if len(r) else -1 for r in raws],
        dtype=np.int32,
    )
