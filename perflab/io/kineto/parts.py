"""Column parts: the numpy pieces that each slice of records adds to each column, kept until
the columns are joined at the end, and the lookup tables over interned keys (event keys, grid
and block sizes) that the pieces' codes index."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from perflab.io.kineto.values import Ids

SMALL_PARTS = 256  # slices' column parts joined into one block (see ColumnParts.put)
SMALL_PART_BYTES = 64 << 10  # parts this large are left as they are
RETURN_FREED_BYTES = 4 << 20  # see return_freed_memory
S = TypeVar("S", bound=np.generic)


class KeyTable:
    """Numpy lookup columns over the ids of an :class:`Ids`, extended as keys arrive."""

    def __init__(
        self,
        describe: Callable[[list[Any]], dict[str, list[Any]]],
        dtypes: Mapping[str, npt.DTypeLike],
    ) -> None:
        self.ids = Ids()
        self.describe = describe
        self.dtypes = dtypes
        self.lists: dict[str, list[object]] = {name: [] for name in dtypes}
        self.arrays: dict[str, npt.NDArray[Any]] = {}

    def __getitem__(self, column: str) -> npt.NDArray[Any]:
        if self.ids.new:
            for name, values in self.describe(self.ids.new).items():
                self.lists[name].extend(values)
            self.ids.new = []
            self.arrays = {}
        if column not in self.arrays:
            dtype = np.dtype(self.dtypes[column])  # (int64, 3): rows of three
            array = np.array(self.lists[column], dtype=dtype.base)
            self.arrays[column] = array.reshape(-1, *dtype.shape)
        return self.arrays[column]


class ColumnParts:
    """Each column's parts by key, in the order they were added (``put``); ``take`` joins
    one column and lets go of its parts."""

    def __init__(self) -> None:
        self.parts: dict[str, list[npt.NDArray[np.generic]]] = {}
        self.small_parts: dict[str, int] = {}  # parts appended since the last join, per key

    def put(self, **columns: npt.NDArray[np.generic]) -> None:
        for key, values in columns.items():
            parts = self.parts.setdefault(key, [])
            parts.append(narrowed(values))
            # a slice's parts are small heap blocks; joined a few hundred at a time into one
            # large (mmapped) block, the heap's holes are reused instead of growing with the
            # file (a 3M-event load peaked at 255 MB instead of 344 MB). Large parts (a
            # helper's chunk) are blocks of their own already: joining them would only copy
            # (a 10M-event load spent a second on it)
            small = self.small_parts.get(key, 0) + 1 if values.nbytes < SMALL_PART_BYTES else 0
            if small >= SMALL_PARTS:
                parts[-small:] = [np.concatenate(parts[-small:])]
                small = 0
            self.small_parts[key] = small

    def take(self, key: str, dtype: type[S]) -> npt.NDArray[S]:
        """The column joined, as ``dtype``; each part is let go of once copied."""
        parts = self.parts.pop(key, [])
        self.small_parts.pop(key, None)
        column = np.empty(sum(len(p) for p in parts), dtype=dtype)
        freed, at = 0, 0
        parts.reverse()  # popped from the end, in the order they were put
        while parts:
            part = parts.pop()
            column[at : at + len(part)] = part
            at, freed = at + len(part), freed + part.nbytes
            del part
        if freed >= RETURN_FREED_BYTES:
            return_freed_memory()
        return column

    def handover(self) -> dict[str, npt.NDArray[np.generic]]:
        """Every column joined (in the narrowest integer type that holds it); these parts are
        let go of at once (see Columns.export)."""
        arrays = {key: np.concatenate(parts) for key, parts in self.parts.items()}
        self.parts, self.small_parts = {}, {}
        return arrays


_NARROWER = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32))


def narrowed(values: npt.NDArray[S]) -> npt.NDArray[Any]:
    """An int64 part in the narrowest integer type that holds its values: most columns
    (durations, ids, devices and streams) need far fewer than 64 bits, and a part is held
    until its column is joined, which widens it again (numpy joins parts of several integer
    types into the widest; ``take`` gives the column its type)."""
    if values.dtype != np.int64 or len(values) == 0:
        return values
    low, high = int(values.min()), int(values.max())
    for dtype in _NARROWER:
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return values.astype(dtype)
    return values


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return None
    return trim


@functools.cache
def _mallopt() -> Callable[[int, int], int] | None:
    try:
        mallopt: Callable[[int, int], int] = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc
        return None
    return mallopt


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
LARGE_BLOCK = 1 << 20  # blocks this large get mappings of their own (see large_blocks_mapped)


def large_blocks_mapped() -> None:
    """Blocks of LARGE_BLOCK bytes or more come from mappings of their own, handed back to
    the system as soon as they are freed, for the rest of the process. glibc otherwise
    raises that threshold as large blocks are freed (up to 32 MB), after which the columns
    and temporaries of a large trace's analyses (megabytes to tens of megabytes each) are
    carved from the heap, whose freed holes a later, larger column does not fit in: the
    summary of 10M generated events peaked at 889 MB, at 791 MB with the threshold held."""
    mallopt = _mallopt()
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK)


def return_freed_memory() -> None:
    """Hand the pages of freed heap blocks back to the system (glibc's malloc_trim). The
    columns' parts, freed as each column is joined, leave holes in the heap that a larger
    column does not fit in; resident, they counted in the load's peak (a 3M-event load with
    a helper: 391 MB without, 290 MB with)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
