"""Helpers shared by the importers: reading (gzip-aware), string interning, tracks."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.model.serialize import open_regular
from perflab.model.trace import EVENT_COLUMNS, TRACK_COLUMNS, Table, TrackKind, unique_rows

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
ZIP_MAGIC = b"PK\x03\x04"
INT64_MAX = np.iinfo(np.int64).max
MIN_TEXT_LIMIT = 256 << 20
GZIP_RATIO_LIMIT = 64
INFLATE_BLOCK = 16 << 20


def read_bytes(path: str | os.PathLike[str], *, limit: int | None = None) -> bytes:
    """The file's bytes, gunzipped when it is gzip; perflab errors for unreadable files,
    for anything but a regular file, and for text larger than ``limit`` (default: what a
    trace of this compressed size can be, see :func:`text_limit`)."""
    source = str(path)
    with open_regular(path) as fh:
        try:
            raw = fh.read() if limit is None else fh.read(limit + 1)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    if raw[:2] != GZIP_MAGIC:
        if limit is not None and len(raw) > limit:
            raise InputError(f"larger than {limit >> 20} MiB", source=source)
        return raw
    return _gunzip(raw, text_limit(len(raw)) if limit is None else limit, source)


def text_limit(compressed: int) -> int:
    """The most text a gzip trace of ``compressed`` bytes is allowed to hold when it is read
    whole: JSON traces shrink 8-15 fold (the real ones in tests/data: 7.5-14.2), so 64-fold
    (and at least 256 MiB) leaves room for any trace while a gzip bomb (1000-fold) stops."""
    return max(MIN_TEXT_LIMIT, GZIP_RATIO_LIMIT * compressed)


def _gunzip(raw: bytes, limit: int, source: str) -> bytes:
    """Decompress gzip members (back to back; zero padding after them is allowed) into at
    most ``limit`` bytes; a text of one block (16 MiB) is returned without a copy."""
    parts: list[bytes] = []
    size, rest = 0, raw
    while rest.strip(b"\x00"):
        inflate = zlib.decompressobj(wbits=31)
        size = _inflate_member(inflate, rest, parts, size, limit, source)
        if size > limit:
            parts.clear()
            raise InputError(
                f"the gzip data expands to more than {limit >> 20} MiB "
                f"({limit // max(len(raw), 1)} times its size): not a trace",
                source=source,
            )
        if not inflate.eof:
            raise InputError(
                "truncated gzip file (ends before the end-of-stream marker)", source=source
            )
        rest = inflate.unused_data
        if rest.strip(b"\x00") and not rest.startswith(GZIP_MAGIC):
            raise InputError("corrupt gzip data: data after the gzip stream", source=source)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class Inflater(Protocol):
    """What is used of a zlib (or ISA-L) decompressor."""

    @property
    def eof(self) -> bool: ...
    @property
    def unconsumed_tail(self) -> bytes: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int = 0, /) -> bytes: ...


def _inflate_member(
    inflate: Inflater, data: bytes, parts: list[bytes], size: int, limit: int, source: str
) -> int:
    """Inflate one gzip member into ``parts`` a block at a time, stopping once the text
    passes ``limit``; returns the text size so far. Blocks keep a bomb's peak near the limit:
    one call with a large max_length holds its buffers and their joined copy, twice that."""
    while not inflate.eof and size <= limit:
        try:
            part = inflate.decompress(data, min(INFLATE_BLOCK, limit + 1 - size))
        except zlib.error as exc:
            raise InputError(f"corrupt gzip data: {exc}", source=source) from None
        data = inflate.unconsumed_tail
        parts.append(part)
        size += len(part)
        if not part and not data:
            break  # the input ended inside the member: the caller reports the truncation
    return size


class StringTable:
    """Interns strings: equal strings share one id; ``strings`` lists them by id."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def add(self, text: str) -> int:
        return self.index.setdefault(text, len(self.index))

    def add_all(self, texts: Iterable[str]) -> npt.NDArray[np.int32]:
        setdefault, index = self.index.setdefault, self.index
        return np.fromiter((setdefault(t, len(index)) for t in texts), dtype=np.int32)

    @property
    def strings(self) -> list[str]:
        return list(self.index)


def build_tracks(
    device: npt.NDArray[np.int64],
    stream: npt.NDArray[np.int64],
    track_kind: npt.NDArray[np.int8],
    strings: StringTable,
    *,
    gpu: str = "GPU",
) -> tuple[Table, npt.NDArray[np.int32]]:
    """Group events by (kind, device, stream) into tracks; returns (tracks, track per event).
    ``gpu``: what GPU tracks are called ("AMD GPU" for a ROCm trace)."""
    keys = np.stack([track_kind.astype(np.int64), device, stream], axis=1)
    if len(keys) == 0:
        return Table(TRACK_COLUMNS), np.zeros(0, dtype=np.int32)
    uniq, inverse = unique_rows(keys)
    labels = [track_label(int(k), int(d), int(s), gpu) for k, d, s in uniq.tolist()]
    tracks = Table(
        TRACK_COLUMNS,
        {
            "rank": np.zeros(len(uniq), dtype=np.int32),
            "device": uniq[:, 1],
            "stream": uniq[:, 2],
            "kind": uniq[:, 0].astype(np.int8),
            "label": strings.add_all(labels),
        },
    )
    return tracks, inverse.reshape(-1).astype(np.int32)


def track_label(kind: int, device: int, stream: int, gpu: str = "GPU") -> str:
    if kind == TrackKind.GPU:
        return f"{gpu} {device} stream {stream}"
    return f"process {device} thread {stream}"


def events_table(columns: Mapping[str, npt.ArrayLike]) -> Table:
    return Table(EVENT_COLUMNS, dict(columns))


def sort_order(start_ns: npt.NDArray[np.int64], track: npt.NDArray[np.int32]) -> npt.NDArray[Any]:
    """Row order by (start, track): what every importer hands out."""
    return np.lexsort((track, start_ns))


def renumber(order: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    """For a permutation ``order`` (new row -> old row): old row -> new row."""
    new_of_old = np.empty(len(order), dtype=np.int64)
    new_of_old[order] = np.arange(len(order), dtype=np.int64)
    return new_of_old


def describe_position(index: int | None, what: str = "traceEvents") -> str | None:
    return None if index is None else f"{what}[{index}]"
