"""Streaming a Kineto JSON document as slices of its ``traceEvents`` array.

A 1M-event trace is about 200 MB of JSON; decoding it whole holds the text and every decoded
event at once. Here the file is decompressed block by block and the events array is cut at
``},`` between two elements. (Inflating in a helper thread, which zlib allows, measured no
faster on two cores: the decoding thread slowed down by as much as it gained.)

A cut is only accepted when the slice decodes: JSON strings cannot hold a raw quote and every
container must close, so a slice cut inside a string or a nested object never decodes. The
pieces are, in order,

- the head: everything before ``"traceEvents": [``, closed as ``... "traceEvents": []}``;
- event slices: ``[`` + complete elements + ``]``;
- the tail: ``{"traceEvents": [`` + the rest of the file (last events and trailing keys).

Concatenated with the removed commas they are the original text, so the file is valid JSON
exactly when every piece is. Anything irregular (no events key, odd layout, corrupt gzip,
malformed JSON) raises :class:`Unusual`, and the caller decodes the whole file the ordinary way,
which also gives the precise error message.

Slices are small (half a MB of text, ~2.5k events) so that the decoded records are still in
the CPU cache when they are turned into columns: about 15% faster than 8 MB slices. A slice is
decoded where it lies in the text buffer: the separators on either side stand in as brackets.

For parallel loading the array is also split into ranges, each ending at the first ``},``
followed by ``{`` after a given offset; every process finds the same ends. A range's pieces are
cut and checked as above, except that its last piece must end at the range's end. The caller
accepts the ranges only when every piece decoded and their texts abut, comma by comma, so the
argument above still holds; otherwise it reads the file in one process.
"""

from __future__ import annotations

import codecs
import os
import re
import zlib
from collections.abc import Callable, Generator, Iterator
from typing import Any, BinaryIO

from perflab.model.serialize import open_regular, regular_size

try:  # ISA-L's inflate (python-isal, zlib's API) is about 2.5x zlib's on x86-64
    from isal import isal_zlib

    _zlib: Any = isal_zlib
except ImportError:  # pragma: no cover - platforms without isal wheels
    _zlib = zlib
_INFLATE_ERROR: type[Exception] = _zlib.error

GZIP_MAGIC = b"\x1f\x8b"
READ_SIZE = 1 << 20  # compressed bytes read at a time
PIECE_SIZE = 512 << 10  # decompressed bytes per decoded slice: ~2.5k events, ~1.3 MB decoded
HEAD_LIMIT = 64 << 20  # a head larger than this is not a Kineto layout we stream
CUT_RETRIES = 8  # earlier cut points tried when a cut lands inside an element
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT = b"},"
# where ranges for parallel loading end: "}," before the next element's "{", which skips the
# "}," of an object followed by another key inside an element
_RANGE_CUT = re.compile(rb"},\s*\{")


class Unusual(Exception):
    """The file cannot be streamed safely; decode it whole instead."""


class RangeLayout(Unusual):
    """The file's ranges cannot be cut for parallel loading (one stream may still read it);
    every other Unusual would stop a single stream just the same."""


class Truncated(Exception):
    """Raised by a slice decoder when the slice ends inside an element (a bad cut)."""


# -- decompressed blocks -------------------------------------------------------------------


class _BlockReader:
    """Yields the file's bytes (gunzipped when gzip) in blocks of about PIECE_SIZE."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        first = fh.read(READ_SIZE)
        self.gzip = first[:2] == GZIP_MAGIC
        self.pending = first
        self.inflate: Any = _zlib.decompressobj(wbits=31) if self.gzip else None
        self.done = False

    def next_block(self) -> bytes | None:
        if self.done:
            return None
        block = self._next_gzip() if self.gzip else self._next_plain()
        if not block:
            self.done = True
            return None
        return block

    def _next_plain(self) -> bytes:
        block, self.pending = self.pending, b""
        return block or self.fh.read(PIECE_SIZE)

    def _next_gzip(self) -> bytes:
        out: list[bytes] = []
        size = 0
        while size < PIECE_SIZE:
            if not self.pending:
                self.pending = self.fh.read(READ_SIZE)
                if not self.pending:
                    if not self.inflate.eof:
                        raise Unusual("truncated gzip")
                    break
            try:
                chunk = self.inflate.decompress(self.pending, PIECE_SIZE - size)
            except _INFLATE_ERROR as exc:
                raise Unusual(f"corrupt gzip: {exc}") from None
            self.pending = self.inflate.unconsumed_tail
            if self.inflate.eof:
                self._next_member()
            out.append(chunk)
            size += len(chunk)
        return b"".join(out)

    def _next_member(self) -> None:
        """gzip files may hold several members back to back; trailing zeros are allowed."""
        rest = self.inflate.unused_data + self.pending
        if rest.startswith(GZIP_MAGIC):
            self.inflate = _zlib.decompressobj(wbits=31)
            self.pending = rest
        elif rest.strip(b"\x00") or self.fh.read(1).strip(b"\x00"):
            raise Unusual("data after the gzip stream")
        else:
            self.pending = b""


def read_blocks(path: str | os.PathLike[str]) -> Generator[bytes, None, None]:
    """Decompressed blocks of the file."""
    with open_regular(path) as fh:  # a FIFO or device is refused, not waited on
        try:
            reader = _BlockReader(fh)
            while (block := reader.next_block()) is not None:
                yield block
        except OSError as exc:
            raise Unusual(str(exc)) from None


# -- slicing ---------------------------------------------------------------------------------


def text_size(path: str | os.PathLike[str]) -> int:
    """The decompressed size of the file: exact for plain files and single-member gzip
    under 4 GiB (gzip's trailer holds the size modulo 2**32), an estimate otherwise."""
    size = regular_size(path)  # a FIFO is refused here, not waited on below
    with open(path, "rb") as fh:
        if fh.read(2) != GZIP_MAGIC or size < 18:
            return size
        fh.seek(-4, os.SEEK_END)
        stated = int.from_bytes(fh.read(4), "little")
    return stated if stated >= size else size * 8  # wrapped past 4 GiB: guess


class _Cursor:
    """A forward-only window on the decompressed text, addressed by offsets from its start.
    The text is checked to be UTF-8 as it arrives (msgspec does not check inside strings)."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self.blocks = blocks
        self.buf = bytearray()  # writable: pieces borrow their brackets (see _decode_piece)
        self.base = 0  # offset of buf[0]
        self.eof = False
        self.utf8 = codecs.getincrementaldecoder("utf-8")()

    @property
    def end(self) -> int:
        return self.base + len(self.buf)

    def fill(self, upto: int, keep_from: int) -> bool:
        """Read until the window reaches ``upto`` (False when the text ends first), keeping
        the bytes from ``keep_from`` on."""
        if self.end >= upto:
            return True
        keep = max(keep_from, self.base)
        parts = [memoryview(self.buf)[keep - self.base :]]
        self.base = keep
        end = self.end
        while end < upto:
            block = next(self.blocks, None)
            if block is None:
                self._check_utf8(b"", final=True)
                self.eof = True
                break
            self._check_utf8(block)
            parts.append(memoryview(block))
            end += len(block)
        self.buf = bytearray().join(parts)
        return end >= upto

    def _check_utf8(self, block: bytes, final: bool = False) -> None:
        if block.isascii() and not final and not self.utf8.getstate()[0]:
            return  # nothing pending from the block before
        try:
            self.utf8.decode(block, final)
        except UnicodeDecodeError:
            raise Unusual("not UTF-8") from None

    def find(self, pattern: re.Pattern[bytes], start: int, keep_from: int) -> int:
        """Offset of the first match of ``pattern`` (which starts with "},") at or after
        ``start``, -1 when there is none; reads on as needed, keeping the bytes from
        ``keep_from`` on."""
        while True:
            found = pattern.search(self.buf, max(start - self.base, 0))
            if found:
                return self.base + found.start()
            if not self.fill(self.end + PIECE_SIZE, min(keep_from, self._match_may_begin())):
                found = pattern.search(self.buf, max(start - self.base, 0))
                return self.base + found.start() if found else -1

    def _match_may_begin(self) -> int:
        """Where a "},"-match not found yet may still begin once more text arrives: at a
        final "}," followed by nothing but whitespace, or at the last byte."""
        last = self.buf.rfind(_CUT)
        if last >= 0 and not self.buf[last + 2 :].strip():
            return self.base + last
        return self.base + max(len(self.buf) - 1, 0)

    def text(self, start: int, stop: int) -> memoryview:
        return memoryview(self.buf)[start - self.base : stop - self.base]


class EventStream:
    """Decodes the events of a Kineto file slice by slice.

    Iterating yields every event (the tail's included). For parallel loading, ``bounds``
    (set once ``array_start`` is known: increasing offsets into the decompressed text) splits
    ``traceEvents`` into ranges: range k ends at the first ``},`` before a ``{`` at or after
    ``bounds[k]``, and the next one starts after that comma; range 0 starts at the array, the
    last one runs to the end of the file. ``ranges(claim)`` decodes the ranges that ``claim``
    hands out, which must increase. ``head`` and ``tail`` hold the decoded top level around
    the array (the head's own events excluded), each once a range that holds it was decoded."""

    def __init__(
        self,
        blocks: Iterator[bytes],
        decode_events: Callable[[memoryview], list[Any]],
        decode_file: Callable[[bytes], Any],
    ) -> None:
        self.cursor = _Cursor(blocks)
        self.decode_events = decode_events
        self.decode_file = decode_file
        self.bounds: list[int] = []
        self.head: Any = None
        self.tail: Any = None
        # text offsets of the last range decoded: from its first byte to past its last "}"
        # (to the end for the tail); None when the events ended before it
        self.span: tuple[int, int] | None = None
        self.key_start, self.array_start = self._find_array()

    def __iter__(self) -> Iterator[list[Any]]:
        return self._range_events(self.array_start, None)

    def ranges(self, claim: Callable[[], int | None]) -> Iterator[tuple[int, Iterator[list[Any]]]]:
        """(k, events of range k) for every range that ``claim`` gives; each range's events
        must be consumed before the next is asked for."""
        while (k := claim()) is not None:
            yield k, self._range(k)

    def _find_array(self) -> tuple[int, int]:
        cursor = self.cursor
        while True:
            found = _EVENTS_KEY.search(cursor.buf)
            if found:
                return found.start(), found.end()
            if cursor.eof or cursor.end > HEAD_LIMIT:
                raise Unusual("no traceEvents array near the start")
            cursor.fill(cursor.end + 1, 0)

    def _range(self, k: int) -> Iterator[list[Any]]:
        self.span = None
        bound = self.bounds[k] if k < len(self.bounds) else None
        if k == 0:
            return self._range_events(self.array_start, bound)
        cut = self._cut_at(self.bounds[k - 1], self.bounds[k - 1])
        if cut < 0:
            return iter(())  # the events ended before this range
        return self._range_events(cut + 2, bound)

    def _cut_at(self, bound: int, keep_from: int) -> int:
        cut = self.cursor.find(_RANGE_CUT, bound, keep_from)
        if 0 <= cut < self.array_start:
            raise RangeLayout("a range bound before the events")
        return cut

    def _range_events(self, start: int, bound: int | None) -> Iterator[list[Any]]:
        """Events of the elements from text offset ``start`` to the range end after
        ``bound`` (None: to the end of the file, whose last part is decoded as the tail)."""
        if start == self.array_start:
            self._decode_head()
        pos, window = start, PIECE_SIZE
        while True:
            if bound is not None and pos + window >= bound:
                stop = self._cut_at(bound, pos - 1)
                if stop >= 0:
                    if stop >= pos:  # else the range is empty: one element spans it
                        yield self._last_piece(pos, stop + 1)
                    self.span = (start, stop + 1)
                    return
                bound = None  # no cut after the bound: this range runs to the end
            if not self.cursor.fill(pos + window, pos - 1):  # with the separator before
                rest = self.cursor.text(pos, self.cursor.end)
                self.tail = self.decode_file(b"".join([b'{"traceEvents":[', rest]))
                self.span = (start, self.cursor.end)
                yield self.tail.traceEvents
                return
            events, cut = self._cut(pos, pos + window)
            if cut < 0:
                window += PIECE_SIZE  # no cut decoded: an element longer than the window
                if window > HEAD_LIMIT:  # not an event: the whole-file path, size-capped
                    raise Unusual("an element longer than HEAD_LIMIT")
                continue
            pos, window = cut + 2, PIECE_SIZE
            yield events

    def _decode_head(self) -> None:
        if self.cursor.base > 0:
            raise RangeLayout("the head was passed already")
        head = self.cursor.text(0, self.key_start)
        self.head = self.decode_file(b"".join([head, b'"traceEvents":[]}']))

    def _last_piece(self, start: int, stop: int) -> list[Any]:
        try:
            return self._decode_piece(start, stop)
        except Truncated:  # the range's end is fixed: no earlier cut to fall back on
            raise RangeLayout("a range ends inside an element") from None

    def _decode_piece(self, start: int, stop: int) -> list[Any]:
        """Decode text[start:stop] as a JSON array without copying it: the separators on
        either side (the "[" or "," before it, the "," after it) stand in as brackets while
        it is decoded."""
        buf = self.cursor.buf
        i, j = start - 1 - self.cursor.base, stop - self.cursor.base
        before, after = buf[i], buf[j]
        buf[i], buf[j] = 0x5B, 0x5D  # "[", "]"
        try:
            return self.decode_events(memoryview(buf)[i : j + 1])
        finally:
            buf[i], buf[j] = before, after

    def _cut(self, start: int, end: int) -> tuple[list[Any], int]:
        """Decode the longest run of whole elements in text[start:end]; returns the events
        and the offset of the ``},`` after them (-1 when no cut worked)."""
        buf, base = self.cursor.buf, self.cursor.base
        for _ in range(CUT_RETRIES):
            cut = buf.rfind(_CUT, start - base, end - base)
            if cut < 0:
                break
            try:
                return self._decode_piece(start, base + cut + 1), base + cut
            except Truncated:
                end = base + cut  # the cut fell inside an element; try the one before
        return [], -1
