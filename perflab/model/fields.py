"""Checked reads of saved-result fields: each failure is a SchemaError naming the file
and the field (``r.json (field samples_ns[3]): must be a finite number >= 0``), so a
tampered file is refused where it enters instead of failing later in a display."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.errors import SchemaError

MAX_TEXT = 100_000
MAX_ITEMS = 50_000_000
MAX_INT = 2**53  # exact in a float64 and in JSON readers everywhere
MAX_FLOAT = 1e300


class Fields:
    """Reads typed values out of one decoded JSON object, for one ``source`` file."""

    def __init__(self, doc: Any, source: str, where: str = "") -> None:
        self.source = source
        self.where = where
        if not isinstance(doc, dict):
            self.fail("", f"must be an object, not {_kind(doc)}")
        self.doc: dict[str, Any] = doc

    def fail(self, key: str, message: str) -> None:
        place = f"{self.where}.{key}" if self.where and key else (self.where or key)
        raise SchemaError(message, source=self.source, position=f"field {place}" if place else None)

    def _get(self, key: str, default: Any, required: bool) -> Any:
        if key not in self.doc:
            if required:
                self.fail(key, "is missing")
            return default
        return self.doc[key]

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> str:
        value = self._get(key, default, required or default is None)
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            self.fail(key, f"must be text (up to {MAX_TEXT:,} characters), not {_kind(value)}")
        return str(value)

    def integer(
        self, key: str, default: int | None = None, *, low: int = 0, high: int = MAX_INT
    ) -> int:
        value = self._get(key, default, default is None)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(key, f"must be a whole number from {low} to {high:,}, not {_short(value)}")
        return int(value)

    def number(
        self, key: str, default: float | None = None, *, low: float = 0.0, optional: bool = False
    ) -> float | None:
        value = self._get(key, default, default is None and not optional)
        if value is None and optional:
            return None
        if not _finite(value) or not low <= value <= MAX_FLOAT:
            self.fail(key, f"must be a finite number >= {low:g}, not {_short(value)}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key, default, False)
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {_short(value)}")
        return bool(value)

    def texts(self, key: str) -> list[str]:
        value = self._get(key, [], False)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(key, "must be a list of text")
        return [str(v) for v in value]

    def text_map(self, key: str) -> dict[str, str]:
        value = self._get(key, {}, False)
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            self.fail(key, "must be an object of text values")
        return {str(k): str(v) for k, v in value.items()}

    def mapping(self, key: str) -> dict[str, Any]:
        value = self._get(key, {}, False)
        if not isinstance(value, dict):
            self.fail(key, f"must be an object, not {_kind(value)}")
        return dict(value)

    def objects(self, key: str) -> list[Any]:
        value = self._get(key, None, True)
        if not isinstance(value, list):
            self.fail(key, f"must be a list, not {_kind(value)}")
        return list(value)

    def child(self, key: str, value: Any) -> Fields:
        return Fields(value, self.source, f"{self.where}.{key}" if self.where else key)

    def numbers(
        self,
        key: str,
        *,
        low: float = 0.0,
        nullable: bool = False,
        required: bool = True,
        size: int | None = None,
    ) -> npt.NDArray[np.float64]:
        """A list of finite numbers >= ``low`` (``null`` read as NaN when ``nullable``)."""
        value = self._get(key, None, required)
        if value is None and not required:
            return np.empty(0)
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            self.fail(key, f"must be a list of numbers, not {_kind(value)}")
        if size is not None and len(value) != size:
            self.fail(key, f"has {len(value)} values where {size} are expected")
        for i, v in enumerate(value):
            if v is None and nullable:
                continue
            if not _finite(v) or not low <= v <= MAX_FLOAT:
                self.fail(f"{key}[{i}]", f"must be a finite number >= {low:g}, not {_short(v)}")
        return np.asarray([math.nan if v is None else v for v in value], dtype=np.float64)


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond float range
        return False


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
