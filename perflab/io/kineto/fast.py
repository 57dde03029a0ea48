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
the CPU cache when they are turned into columns: about 15% faster than 8 MB slices. For the
same reason a slice is let go (here and by every caller) before the next one is decoded: its
records are then freed while still in the cache, and the next slice's are made in the memory
they leave. A slice is decoded where it lies in the text buffer: the separators on either
side stand in as brackets.

For parallel loading the stream also hands out chunks: whole elements, undecoded, each
ending at the first ``},`` followed by ``{`` after a size of text that the caller asks for
(see :meth:`EventStream.shared`). A helper process decodes a chunk's pieces as above, except
that its last piece must end at the chunk's end (:func:`chunk_events`). The chunks and the
slices between them follow one another comma by comma, so the argument above still holds;
a chunk end that fell inside a string makes its decode or the next slice's fail, and the
file is then read by one stream.
"""

from __future__ import annotations

import codecs
import os
import re
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from perflab.model.serialize import open_regular, regular_size

if TYPE_CHECKING:
    import msgspec

    from perflab.io.kineto.records import Records

try:  # ISA-L's inflate (python-isal, zlib's API) is about 2.5x zlib's on x86-64
    from isal import isal_zlib

    _zlib: Any = isal_zlib
except ImportError:  # pragma: no cover - platforms without isal wheels
    _zlib = zlib
_INFLATE_ERROR: type[Exception] = _zlib.error

GZIP_MAGIC = b"\x1f\x8b"
READ_SIZE = 64 << 10  # compressed bytes read at a time (the unconsumed rest is copied per block)
PIECE_SIZE = 512 << 10  # decompressed bytes per decoded slice: ~2.5k events, ~1.3 MB decoded
# decompressed bytes per block: below malloc's mmap threshold (128 KiB), so that the blocks
# reuse the same heap memory instead of each mapping (and faulting in) fresh pages
BLOCK_SIZE = 64 << 10
HEAD_LIMIT = 64 << 20  # a head larger than this is not a Kineto layout we stream
CUT_RETRIES = 8  # earlier cut points tried when a cut lands inside an element
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT = b"},"
# where chunks for helper processes end: "}," before the next element's "{", which skips the
# "}," of an object followed by another key inside an element
_CHUNK_END = re.compile(rb"},\s*\{")


class Unusual(Exception):
    """The file cannot be streamed safely; decode it whole instead."""


class RangeLayout(Unusual):
    """The file cannot be cut into chunks for helper processes (one stream may still read
    it); every other Unusual would stop a single stream just the same."""


class Truncated(Exception):
    """Raised by a slice decoder when the slice ends inside an element (a bad cut)."""


# -- decompressed blocks -------------------------------------------------------------------


class _BlockReader:
    """Yields the file's bytes (gunzipped when gzip) in blocks of at most BLOCK_SIZE."""

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
        return block or self.fh.read(BLOCK_SIZE)

    def _next_gzip(self) -> bytes:
        while True:
            if not self.pending:
                self.pending = self.fh.read(READ_SIZE)
                if not self.pending:
                    if not self.inflate.eof:
                        raise Unusual("truncated gzip")
                    return b""
            try:
                block: bytes = self.inflate.decompress(self.pending, BLOCK_SIZE)
            except _INFLATE_ERROR as exc:
                raise Unusual(f"corrupt gzip: {exc}") from None
            self.pending = self.inflate.unconsumed_tail
            if self.inflate.eof:
                self._next_member()
            if block:
                return block

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


SAMPLE_TEXT = 8 << 20  # decompressed bytes whose compression ratio stands for the file's


def estimated_text_size(path: str | os.PathLike[str]) -> int:
    """The decompressed size of the file, before reading it: exact for plain files; for
    gzip, the trailer's size (which is modulo 2**32) taken in the wrap nearest to what the
    compression ratio of the file's first SAMPLE_TEXT bytes gives for the whole file, so a
    file of more than 4 GiB of text is not taken for a small one."""
    size = regular_size(path)
    with open(path, "rb") as fh:
        if fh.read(2) != GZIP_MAGIC or size < 18:
            return size
        fh.seek(-4, os.SEEK_END)
        stated = int.from_bytes(fh.read(4), "little")
        fh.seek(0)
        ratio = _sampled_ratio(fh)
    guess = size * ratio
    wraps = max(0, round((guess - stated) / 2**32))
    return stated + wraps * 2**32


def _sampled_ratio(fh: BinaryIO) -> float:
    """Decompressed bytes per compressed byte over the start of a gzip file (1.0 when the
    start does not decompress: reading it will say what is wrong)."""
    inflate = _zlib.decompressobj(wbits=31)
    read = out = 0
    try:
        while out < SAMPLE_TEXT:
            chunk = fh.read(BLOCK_SIZE)
            if not chunk:
                break
            read += len(chunk)
            out += len(inflate.decompress(chunk))
            if inflate.eof:
                break
    except _INFLATE_ERROR:
        return 1.0
    return out / read if read else 1.0


class _Cursor:
    """A forward-only window on the decompressed text, addressed by offsets from its start.
    The text is checked to be UTF-8 as it arrives (msgspec does not check inside strings).

    The window is ``buf[:size]``: two buffers take turns, each written over rather than
    allocated again, so that the text does not cost fresh pages (page faults) for every
    window. A buffer that decoded values still refer to (msgspec.Raw fields are views of it)
    is replaced instead of written over."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self.blocks = blocks
        self.buf = bytearray()  # writable: pieces borrow their brackets (see _decode_piece)
        self.size = 0
        self.spare = bytearray()
        self.base = 0  # offset of buf[0]
        self.eof = False
        self.utf8 = codecs.getincrementaldecoder("utf-8")()

    @property
    def end(self) -> int:
        return self.base + self.size

    def fill(self, upto: int, keep_from: int) -> bool:
        """Read until the window reaches ``upto`` (False when the text ends first), keeping
        the bytes from ``keep_from`` on."""
        if self.end >= upto:
            return True
        keep = max(keep_from, self.base)
        parts = [memoryview(self.buf)[keep - self.base : self.size]]
        end = self.base + self.size
        while end < upto:
            block = next(self.blocks, None)
            if block is None:
                self._check_utf8(b"", final=True)
                self.eof = True
                break
            self._check_utf8(block)
            parts.append(memoryview(block))
            end += len(block)
        self._refill(parts, end - keep)
        self.base = keep
        return end >= upto

    def _refill(self, parts: list[memoryview], size: int) -> None:
        """The window becomes ``parts``, copied into the spare buffer (one byte longer, for
        the bracket after a piece), which then swaps with the current one."""
        target = self.spare
        if len(target) <= size or not _unshared(target):
            target = bytearray(size + size // 4 + PIECE_SIZE)
        at = 0
        for part in parts:
            target[at : at + len(part)] = part
            at += len(part)
        parts.clear()  # the views of the old buffer go before it is kept as the spare
        self.spare, self.buf, self.size = self.buf, target, size

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
            found = pattern.search(self.buf, max(start - self.base, 0), self.size)
            if found:
                return self.base + found.start()
            if not self.fill(self.end + PIECE_SIZE, min(keep_from, self._match_may_begin())):
                found = pattern.search(self.buf, max(start - self.base, 0), self.size)
                return self.base + found.start() if found else -1

    def _match_may_begin(self) -> int:
        """Where a "},"-match not found yet may still begin once more text arrives: at a
        final "}," followed by nothing but whitespace, or at the last byte."""
        last = self.buf.rfind(_CUT, 0, self.size)
        if last >= 0 and not self.buf[last + 2 : self.size].strip():
            return self.base + last
        return self.base + max(self.size - 1, 0)

    def text(self, start: int, stop: int) -> memoryview:
        return memoryview(self.buf)[start - self.base : stop - self.base]


def _unshared(buf: bytearray) -> bool:
    """Whether nothing holds a view of ``buf`` (so that writing over it changes nothing
    that is still read)."""
    try:
        buf.append(0)  # a resize: refused while a view exists
    except BufferError:
        return False
    del buf[-1]
    return True


@dataclass(frozen=True)
class Chunk:
    """A part of a chunk's text: whole elements of ``traceEvents``, undecoded, for a helper
    process. A chunk comes in parts, in order, so that the window never holds much more than
    a slice of it; ``last``: the chunk ends with this part (just past an element's "}").
    ``text`` is valid until the stream is read on."""

    text: memoryview
    last: bool


class _Pieces:
    """Decoding pieces of the text in a cursor's window (see :meth:`_decode_piece`)."""

    def __init__(self, cursor: _Cursor, decode_events: Callable[[memoryview], Records]) -> None:
        self.cursor = cursor
        self.decode_events = decode_events

    def _decode_piece(self, start: int, stop: int) -> Records:
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

    def _cut(self, start: int, end: int) -> tuple[Records, int]:
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

    def _elements(self, start: int, stop: int) -> Iterator[Records]:
        """Events of text[start:stop], which must be whole elements (a chunk): slices of
        about PIECE_SIZE, the last one ending at ``stop``; RangeLayout when it does not."""
        pos, window = start, PIECE_SIZE
        while stop - pos > window:
            events, cut = self._cut(pos, pos + window)
            if cut < 0:
                window += PIECE_SIZE  # an element longer than the window
                continue
            yield events
            del events  # see the module docstring: let go before the next slice decodes
            pos, window = cut + 2, PIECE_SIZE
        if pos < stop:
            try:
                yield self._decode_piece(pos, stop)
            except Truncated:  # the chunk's end is fixed: no earlier cut to fall back on
                raise RangeLayout("a chunk ends inside an element") from None


def chunk_events(
    buf: bytearray, length: int, decode_events: Callable[[memoryview], Records]
) -> Iterator[Records]:
    """The events of a :class:`Chunk`'s text, slice by slice, as the stream that cut it would
    have decoded them; RangeLayout when the text is not whole elements. The text is
    ``buf[1 : 1 + length]``: the bytes on either side stand in as brackets (the buffer may be
    longer, to be used again)."""
    if len(buf) < length + 2:
        raise ValueError("a chunk's buffer needs a spare byte on either side of the text")
    cursor = _Cursor(iter(()))
    cursor.buf, cursor.size, cursor.base, cursor.eof = buf, length + 2, -1, True
    return _Pieces(cursor, decode_events)._elements(0, length)


class EventStream(_Pieces):
    """Decodes the events of a Kineto file slice by slice.

    Iterating yields every event (the tail's included). ``shared(offer)`` also hands out
    chunks of whole elements, undecoded, for helper processes: whenever ``offer`` asks for
    some. ``head`` and ``tail`` hold the decoded top level around the array (the head's own
    events excluded)."""

    def __init__(
        self,
        blocks: Iterator[bytes],
        decode_events: Callable[[memoryview], Records],
        decode_file: Callable[[bytes], msgspec.Struct],
        events_of: Callable[[msgspec.Struct], Records],
    ) -> None:
        super().__init__(_Cursor(blocks), decode_events)
        self.decode_file = decode_file
        self.events_of = events_of
        self.head: msgspec.Struct | None = None
        self.tail: msgspec.Struct | None = None
        self.key_start, self.array_start = self._find_array()

    def __iter__(self) -> Iterator[Records]:
        for item in self.shared(lambda pos: 0):
            assert not isinstance(item, Chunk)  # none was asked for
            yield item
            del item

    def shared(self, offer: Callable[[int], int]) -> Iterator[Records | Chunk]:
        """Slices of decoded events and, wherever ``offer(offset)`` (asked before each slice
        with the text offset reached) names a size of text, a chunk (in Chunk parts) that
        ends at the first element boundary after that many bytes, in text order. A chunk ends
        at ``},`` before a ``{``: should that lie inside a string, the chunk's decode or the
        slice after it fails with RangeLayout, and the file is read by one stream instead."""
        self._decode_head()
        pos, window, cut_here = self.array_start, PIECE_SIZE, False
        while True:
            size = offer(pos) if window == PIECE_SIZE else 0
            if size > 0:
                pos = yield from self._chunk(pos, pos + size)
                cut_here = True
                continue
            try:
                if not self.cursor.fill(pos + window, pos - 1):  # with the separator before
                    self.tail = tail = self._decode_tail(pos)
                    yield self.events_of(tail)
                    return
                events, cut = self._cut(pos, pos + window)
            except Unusual:
                if cut_here:  # the chunk's end may have been inside a string
                    raise RangeLayout("the text after a chunk does not decode") from None
                raise
            if cut < 0:
                window += PIECE_SIZE  # no cut decoded: an element longer than the window
                if window > HEAD_LIMIT:  # not an event: the whole-file path, size-capped
                    raise (RangeLayout if cut_here else Unusual)("an element over HEAD_LIMIT")
                continue
            pos, window, cut_here = cut + 2, PIECE_SIZE, False
            yield events
            del events

    def _chunk(self, start: int, size_end: int) -> Generator[Chunk, None, int]:
        """The text from ``start`` to the first element boundary at or after ``size_end``, in
        parts; the offset after the boundary's comma. RangeLayout when there is none (the
        events end first: an estimate of the text's size was wrong)."""
        cursor, written = self.cursor, start
        while cursor.end <= size_end:  # all of it is the chunk's: hand it on as it comes
            if cursor.end > written:
                yield Chunk(cursor.text(written, cursor.end), last=False)
                written = cursor.end
            if not cursor.fill(min(size_end + 1, cursor.end + PIECE_SIZE), written):
                raise RangeLayout("the text ends inside a chunk")
        stop = cursor.find(_CHUNK_END, size_end, written)
        if stop < 0:
            raise RangeLayout("no element boundary after a chunk's size")
        yield Chunk(cursor.text(written, stop + 1), last=True)
        return stop + 2

    def _find_array(self) -> tuple[int, int]:
        cursor = self.cursor
        while True:
            found = _EVENTS_KEY.search(cursor.buf, 0, cursor.size)
            if found:
                return found.start(), found.end()
            if cursor.eof or cursor.end > HEAD_LIMIT:
                raise Unusual("no traceEvents array near the start")
            cursor.fill(cursor.end + 1, 0)

    def _decode_head(self) -> None:
        head = self.cursor.text(0, self.key_start)
        self.head = self.decode_file(b"".join([head, b'"traceEvents":[]}']))

    def top_level(self) -> tuple[msgspec.Struct, msgspec.Struct]:
        """The decoded top level before and after the events, once they are all read."""
        if self.head is None or self.tail is None:
            raise Unusual("the events were not read to their end")
        return self.head, self.tail

    def _decode_tail(self, pos: int) -> msgspec.Struct:
        rest = self.cursor.text(pos, self.cursor.end)
        return self.decode_file(b"".join([b'{"traceEvents":[', rest]))
