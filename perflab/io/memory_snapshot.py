"""CUDA caching-allocator snapshots -> :class:`perflab.model.memory.MemorySnapshot`.

``torch.cuda.memory._snapshot()`` returns a dict (segments with their blocks and the stacks
that allocated them; with ``_record_memory_history`` on, the allocator's trace in
``device_traces``), and ``_dump_snapshot`` pickles it. A pickle is a program: loading one
with :func:`pickle.load` can run any code it names. So a snapshot file is read in two steps,
neither of which runs anything the file says:

1. :func:`check_opcodes` walks the pickle's opcodes before anything is built. Only the
   opcodes that make plain values are allowed (dicts, lists, tuples, sets, numbers,
   strings, bytes, None, booleans, and the memo); one that names a class or function or
   calls one (``GLOBAL``, ``STACK_GLOBAL``, ``REDUCE``, ``BUILD``, ``INST``, ``OBJ``,
   ``NEWOBJ``, the extension registry, persistent ids, out-of-band buffers) is refused.
   Every length must fit in what is left of the file and every memo index in what was read
   so far: CPython's unpickler sizes its memo by the largest index it is given, so a
   twelve-byte pickle could otherwise make it clear gigabytes.
2. A :class:`pickle.Unpickler` whose ``find_class`` and ``persistent_load`` refuse
   everything builds the values (so nothing but plain values could come out even if the
   check missed an opcode).

The file may hold at most :data:`MAX_FILE_BYTES`; the values are then checked field by field
(types, ranges; a file or function name is kept to :data:`MAX_TEXT` characters and a stack
to :data:`MAX_FRAMES` frames) while they become columns, with at most
:data:`VISITS_PER_BYTE` values looked at per byte of the file, so a pickle that shares one
list many times over cannot make the walk explode. Every failure is an
:class:`~perflab.errors.InputError` naming the file and the place.
"""

from __future__ import annotations

import io
import operator
import os
import pickle
import pickletools
import re
from collections.abc import Iterator
from functools import cache
from typing import Any, NoReturn

import numpy as np

from perflab.errors import InputError
from perflab.model.memory import BLOCK_STATES, MAX_BYTES, TRACE_ACTIONS, MemorySnapshot, Stack
from perflab.model.serialize import open_regular

MAX_FILE_BYTES = 4 << 30  # the largest snapshot file read
MAX_TEXT = 512  # characters kept of a frame's file or function name
MAX_FRAMES = 256  # frames kept of a stack (innermost first)
VISITS_PER_BYTE = 8  # values the field check may look at, per byte of the file
PICKLE_PROTOCOLS = range(2, 6)  # what _dump_snapshot writes (and older Pythons wrote)
ADDRESS_MAX = 2**64 - 1

# opcodes that name, build or call Python objects, or take data from outside the file
REFUSED = frozenset(
    {
        "GLOBAL",
        "STACK_GLOBAL",
        "REDUCE",
        "BUILD",
        "INST",
        "OBJ",
        "NEWOBJ",
        "NEWOBJ_EX",
        "EXT1",
        "EXT2",
        "EXT4",
        "PERSID",
        "BINPERSID",
        "NEXT_BUFFER",
        "READONLY_BUFFER",
    }
)
_FRAME = operator.itemgetter("filename", "line", "name")
_PUTS = frozenset({"PUT", "LONG_BINPUT"})  # memo stores whose index is not bounded by its size
_CHECKED = _PUTS | {"FRAME", "STOP"}  # fixed-size opcodes whose argument is checked too


def is_snapshot_file(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts as a pickle of protocol 2 to 5 does (PROTO n)."""
    with open_regular(path) as fh:
        head = fh.read(2)
    return len(head) == 2 and head[0] == 0x80 and head[1] in PICKLE_PROTOCOLS


def load_memory_snapshot(path: str | os.PathLike[str]) -> MemorySnapshot:
    """Read a CUDA caching-allocator snapshot file without running any of its code.

    The file is what ``torch.cuda.memory._dump_snapshot(path)`` writes (a pickle of
    ``torch.cuda.memory._snapshot()``): the allocator's segments and blocks with the stacks
    that allocated them, and, when ``torch.cuda.memory._record_memory_history()`` was on,
    its trace of allocations and frees. It is never given to :func:`pickle.load`: its
    opcodes are checked to make plain values only, and an unpickler that refuses every class
    builds them (the module docstring says how). Files up to 4 GiB are read; no GPU or
    torch is needed::

        torch.cuda.memory._record_memory_history()
        train_a_few_steps()
        torch.cuda.memory._dump_snapshot("snapshot.pickle")
        ...
        snapshot = perflab.load_memory_snapshot("snapshot.pickle")
        snapshot.summary()  # reserved memory by segment and stream, largest allocations

    Returns a :class:`perflab.model.memory.MemorySnapshot` (its columns; ``summary()``
    for the report). Raises :class:`perflab.errors.InputError` naming the file (and the
    place in it) for a file that is not such a snapshot, is damaged, too large, or names a
    class or function. ``perflab trace memory FILE`` reads the same files."""
    source = str(path)
    data = _read(path, source)
    if data[:1] != b"\x80" or len(data) < 2 or data[1] not in PICKLE_PROTOCOLS:
        raise InputError("not a memory snapshot: not a pickle of protocol 2 to 5", source=source)
    value = plain_loads(data, source)
    return snapshot_from_object(value, source, visits=VISITS_PER_BYTE * len(data) + 100_000)


def _read(path: str | os.PathLike[str], source: str) -> bytes:
    """The file's bytes, at most MAX_FILE_BYTES (told by its size first: a read of the
    limit would allocate a buffer that large)."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"larger than {MAX_FILE_BYTES >> 30} GiB", source=source)
        try:
            data = fh.read(size + 1)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    if len(data) > size:
        raise InputError("the file grew while it was read", source=source)
    return data


def plain_loads(data: bytes, source: str) -> object:
    """The plain values a pickle holds; an InputError for anything else (see the module
    docstring)."""
    check_opcodes(data, source)
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused as exc:
        raise InputError(f"the pickle refers to Python code ({exc})", source=source) from None
    except (Exception, RecursionError) as exc:  # a malformed pickle, in any of its ways
        message = f"not a readable pickle: {type(exc).__name__}: {str(exc)[:200]}"
        raise InputError(message, source=source) from None


class _Refused(Exception):
    pass


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain values only: every class, function and persistent id is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise _Refused(f"{module[:100]}.{name[:100]}")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("a persistent id")


# -- the opcode check --------------------------------------------------------------------


@cache
def _opcode_table() -> tuple[list[tuple[str, int, int] | None], re.Pattern[bytes]]:
    """Per opcode byte: (name, kind, n) with kind 0 for n fixed argument bytes, 1 for an
    n-byte length and that many bytes, 2 for a line of text; None for opcodes that are
    refused or do not exist. And a pattern matching a run of opcodes that need no more
    check than their sizes (fixed arguments, short strings), which the walk skips at once."""
    table: list[tuple[str, int, int] | None] = [None] * 256
    simple: dict[int, list[int]] = {}
    counted = {
        pickletools.TAKEN_FROM_ARGUMENT1: 1,
        pickletools.TAKEN_FROM_ARGUMENT4: 4,
        pickletools.TAKEN_FROM_ARGUMENT4U: 4,
        pickletools.TAKEN_FROM_ARGUMENT8U: 8,
    }
    for op in pickletools.opcodes:
        code = op.code.encode("latin-1")[0]
        n = 0 if op.arg is None else op.arg.n
        if op.name in REFUSED:
            continue
        if n >= 0:
            table[code] = (op.name, 0, n)
            if op.name not in _CHECKED:
                simple.setdefault(n, []).append(code)
        elif n == pickletools.UP_TO_NEWLINE:
            table[code] = (op.name, 2, 0)
        else:
            table[code] = (op.name, 1, counted[n])
    parts = [
        b"[" + b"".join(re.escape(bytes([c])) for c in codes) + b"]" + b"." * n
        for n, codes in sorted(simple.items())
    ]
    # SHORT_BINUNICODE (most of a snapshot's strings): one branch per length byte
    short = b"\x8c(?:" + b"|".join(re.escape(bytes([k])) + b"." * k for k in range(256)) + b")"
    run = re.compile(b"(?:" + b"|".join([*parts, short]) + b"){1,4096}", re.DOTALL)
    return table, run


def check_opcodes(data: bytes, source: str) -> None:
    """Refuse a pickle that names or calls Python objects, declares a length beyond its end,
    stores into a memo index beyond what it has read, or does not end with STOP."""
    table, run = _opcode_table()
    pos, end = 0, len(data)
    while pos < end:
        skipped = run.match(data, pos)
        if skipped is not None:
            pos = skipped.end()
            continue
        at, code = pos, data[pos]
        entry = table[code]
        if entry is None:
            _refuse_opcode(code, at, source)
        name, kind, n = entry
        pos += 1
        if kind == 0:
            argument = data[pos : pos + n]
            pos += n
        elif kind == 1:
            size = int.from_bytes(data[pos : pos + n], "little", signed=n == 4)
            pos += n
            if not 0 <= size <= end - pos:
                _bad(f"a length of {size} bytes past the end of the file ({name})", at, source)
            pos += size
        else:
            line_end = data.find(b"\n", pos)
            if line_end < 0:
                _bad(f"{name} without the end of its line", at, source)
            argument, pos = data[pos:line_end], line_end + 1
        if pos > end:
            _bad(f"the file ends inside {name}", at, source)
        if name == "FRAME":
            size = int.from_bytes(argument, "little")
            if size > end - pos:
                _bad(f"a frame of {size} bytes past the end of the file", at, source)
        elif name in _PUTS:
            index = _memo_index(argument, name)
            if not 0 <= index <= at:
                _bad(f"a memo index of {index} beyond the {at} bytes read", at, source)
        elif name == "STOP":
            return
    raise InputError("not a pickle: it ends without STOP", source=source)


def _memo_index(argument: bytes, name: str) -> int:
    if name == "LONG_BINPUT":
        return int.from_bytes(argument, "little")
    text = argument.strip()
    return int(text) if text.isdigit() and len(text) < 19 else -1


def _refuse_opcode(code: int, at: int, source: str) -> NoReturn:
    known = next((op.name for op in pickletools.opcodes if op.code == chr(code)), None)
    if known is None:
        _bad(f"not a pickle opcode: {code:#04x}", at, source)
    raise InputError(
        f"the pickle refers to Python code ({known}): a memory snapshot holds only plain "
        "values (dicts, lists, numbers, strings), so it is not read",
        source=source,
        position=f"byte {at}",
    )


def _bad(what: str, at: int, source: str) -> NoReturn:
    raise InputError(f"not a readable pickle: {what}", source=source, position=f"byte {at}")


# -- plain values -> columns ---------------------------------------------------------------


class _Walk:
    """The field check: each value's type and range, with the place in error messages, and
    a budget of values looked at."""

    def __init__(self, source: str, visits: int) -> None:
        self.source = source
        self.left = visits
        self.stacks: dict[Stack, int] = {}
        self.stack_of_list: dict[int, tuple[list[Any], int]] = {}  # id -> (the list, stack)

    def error(self, what: str, where: str) -> InputError:
        return InputError(what, source=self.source, position=where)

    def spend(self, n: int, where: str) -> None:
        self.left -= n
        if self.left < 0:
            raise self.error("more values than a snapshot of this size holds", where)

    def items(self, value: object, where: str) -> Iterator[tuple[int, dict[str, Any], str]]:
        """The dicts of a list, each with its index and place."""
        if not isinstance(value, list):
            raise self.error(f"not a list but {type(value).__name__}", where)
        self.spend(len(value), where)
        for i, item in enumerate(value):
            place = f"{where}[{i}]"
            if not isinstance(item, dict):
                raise self.error(f"not a dict but {type(item).__name__}", place)
            self.spend(len(item), place)
            yield i, item, place

    def number(
        self,
        d: dict[str, Any],
        key: str,
        where: str,
        low: int,
        high: int,
        default: int | None = None,
    ) -> int:
        value = d.get(key, default)
        if type(value) is not int or not low <= value <= high:
            if value is None:
                raise self.error(f"no '{key}'", where)
            raise self.error(f"'{key}' is not a whole number from {low} to {high}", where)
        return value

    def text(self, d: dict[str, Any], key: str, where: str) -> str:
        value = d.get(key, "")
        if not isinstance(value, str):
            raise self.error(f"'{key}' is not text", where)
        return value[:MAX_TEXT]

    def choice(self, d: dict[str, Any], key: str, where: str, names: tuple[str, ...]) -> int:
        value = d.get(key)
        if value not in names:
            shown = repr(value)[:60]
            raise self.error(f"'{key}' is {shown}, not one of {', '.join(names)}", where)
        return names.index(value)

    def stack(self, frames: object, where: str) -> int:
        """The stack id of a frames list (-1: none); a list shared by many blocks is read
        once."""
        if frames is None:
            return -1
        if not isinstance(frames, list):
            raise self.error("'frames' is not a list", where)
        seen = self.stack_of_list.get(id(frames))
        if seen is not None and seen[0] is frames:
            return seen[1]
        key = self._plain_stack(frames, where)
        found = self.stacks.setdefault(key, len(self.stacks))
        self.stack_of_list[id(frames)] = (frames, found)
        return found

    def _plain_stack(self, frames: list[Any], where: str) -> Stack:
        """A frames list as a stack: at once when every frame is as torch writes it (a dict
        of a file name, a line and a function name), else frame by frame, naming the first
        one that is not."""
        kept = frames[:MAX_FRAMES]
        self.spend(len(kept), where)
        columns: list[tuple[Any, ...]] = [(), (), ()]
        try:  # C-level passes: a snapshot has a million frames
            columns = list(zip(*map(_FRAME, kept), strict=True)) or columns
        except (TypeError, KeyError):
            columns = [(None,), (), ()]
        files, lines, names = columns
        if (
            set(map(type, files)) | set(map(type, names)) <= {str}
            and set(map(type, lines)) <= {int}
            and (not lines or (min(lines) >= -1 and max(lines) < 2**31))
        ):
            if max(map(len, (*files, *names)), default=0) > MAX_TEXT:
                files, names = (tuple(t[:MAX_TEXT] for t in texts) for texts in (files, names))
            return tuple(zip(files, lines, names, strict=True))
        return tuple(
            (
                self.text(frame, "filename", place),
                self.number(frame, "line", place, -1, 2**31 - 1, default=-1),
                self.text(frame, "name", place),
            )
            for _, frame, place in self.items(kept, f"{where}.frames")
        )


def snapshot_from_object(
    value: object, source: str = "<snapshot>", *, visits: int = 1 << 40
) -> MemorySnapshot:
    """A snapshot from what ``torch.cuda.memory._snapshot()`` returns (or the plain values a
    snapshot file holds): its fields checked, as columns. Older files are a list of
    segments."""
    walk = _Walk(source, visits)
    if isinstance(value, list):
        value = {"segments": value}
    if not isinstance(value, dict):
        raise walk.error(f"not a memory snapshot: a {type(value).__name__}", "top level")
    segments, blocks = _segments(value.get("segments", []), walk)
    actions = _actions(value.get("device_traces", []), walk)
    stacks = list(walk.stacks)
    return MemorySnapshot(source, segments, blocks, actions, stacks)


def _columns(
    rows: list[tuple[int, ...]], names: tuple[str, ...], dtypes: tuple[Any, ...]
) -> dict[str, Any]:
    if not rows:
        return {name: np.zeros(0, dtype) for name, dtype in zip(names, dtypes, strict=True)}
    cells = list(zip(*rows, strict=True))
    return {
        name: np.array(col, dtype) for name, col, dtype in zip(names, cells, dtypes, strict=True)
    }


SEGMENT_COLUMNS = (
    "device",
    "address",
    "total_size",
    "allocated_size",
    "active_size",
    "stream",
    "large",
)
_SEGMENT_TYPES = (np.int32, np.uint64, np.int64, np.int64, np.int64, np.uint64, np.bool_)
BLOCK_COLUMNS = ("segment", "address", "size", "requested_size", "state", "stack")
_BLOCK_TYPES = (np.int64, np.uint64, np.int64, np.int64, np.int8, np.int32)
ACTION_COLUMNS = ("device", "action", "addr", "size", "stream", "time_us", "stack", "device_free")
_ACTION_TYPES = (np.int32, np.int8, np.uint64, np.int64, np.uint64, np.int64, np.int32, np.int64)


def _segments(value: object, walk: _Walk) -> tuple[dict[str, Any], dict[str, Any]]:
    segments: list[tuple[int, ...]] = []
    blocks: list[tuple[int, ...]] = []
    for i, seg, place in walk.items(value, "segments"):
        segments.append(
            (
                walk.number(seg, "device", place, 0, 2**31 - 1, default=0),
                walk.number(seg, "address", place, 0, ADDRESS_MAX),
                walk.number(seg, "total_size", place, 0, MAX_BYTES),
                walk.number(seg, "allocated_size", place, -1, MAX_BYTES, default=-1),
                walk.number(seg, "active_size", place, -1, MAX_BYTES, default=-1),
                walk.number(seg, "stream", place, 0, ADDRESS_MAX, default=0),
                seg.get("segment_type") == "large",
            )
        )
        for _, block, where in walk.items(seg.get("blocks", []), f"{place}.blocks"):
            blocks.append(
                (
                    i,
                    walk.number(block, "address", where, 0, ADDRESS_MAX),
                    walk.number(block, "size", where, 0, MAX_BYTES),
                    walk.number(block, "requested_size", where, -1, MAX_BYTES, default=-1),
                    walk.choice(block, "state", where, BLOCK_STATES),
                    walk.stack(block.get("frames"), where),
                )
            )
    return (
        _columns(segments, SEGMENT_COLUMNS, _SEGMENT_TYPES),
        _columns(blocks, BLOCK_COLUMNS, _BLOCK_TYPES),
    )


def _actions(value: object, walk: _Walk) -> dict[str, Any]:
    rows: list[tuple[int, ...]] = []
    if not isinstance(value, list):
        raise walk.error("not a list", "device_traces")
    walk.spend(len(value), "device_traces")
    for device, entries in enumerate(value):
        for _, entry, where in walk.items(entries, f"device_traces[{device}]"):
            action = entry.get("action")
            code = TRACE_ACTIONS.index(action) if action in TRACE_ACTIONS else -1
            rows.append(
                (
                    device,
                    code,
                    walk.number(entry, "addr", where, 0, ADDRESS_MAX, default=0),
                    walk.number(entry, "size", where, 0, MAX_BYTES, default=0),
                    walk.number(entry, "stream", where, 0, ADDRESS_MAX, default=0),
                    walk.number(entry, "time_us", where, -1, 2**62, default=-1),
                    walk.stack(entry.get("frames"), where),
                    walk.number(entry, "device_free", where, -1, MAX_BYTES, default=-1),
                )
            )
    return _columns(rows, ACTION_COLUMNS, _ACTION_TYPES)
