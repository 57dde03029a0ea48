"""Reading a Kineto file: streamed in one process, streamed with chunks shared out to helper
processes, or decoded whole.

Large files are streamed: decompressed and decoded a slice of ``traceEvents`` at a time, so
memory stays a small multiple of the columns (see :mod:`.fast`); files with an unusual layout
are decoded whole. For files of 64 MB of JSON or more, helper processes on spare cores decode
chunks of the text that this process decompresses and gives them whenever one is free (see
:mod:`perflab.io._parallel`); their columns are merged, in text order, into the very trace
one process builds. A file read whole is first checked for JSON syntax by a pass
that keeps no events, and a gzip file read whole may expand at most 64-fold (see
:func:`perflab.io._common.text_limit`). A load that takes more than about two seconds shows
its progress (:mod:`perflab.io._progress`).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypedDict

import numpy as np
import numpy.typing as npt

from perflab._gc import gc_paused
from perflab.errors import InputError
from perflab.io import _parallel, _progress, _tempdirs
from perflab.io._common import read_bytes
from perflab.io.kineto import fast
from perflab.io.kineto.columns import Columns, build, return_freed_memory
from perflab.io.kineto.decode import (
    check_syntax,
    decode_file,
    decode_slice,
    doc_of,
    event_stream,
    reread,
)
from perflab.io.kineto.part import find_part
from perflab.io.kineto.parts import large_blocks_mapped
from perflab.io.kineto.records import Records
from perflab.model.trace import Trace
from perflab.model.trace_part import Part, Request, part_of

PARALLEL_MIN_TEXT = 64 << 20  # JSON bytes per helper process that repay its start-up
LARGE_TEXT = 64 << 20  # JSON bytes from which large blocks get their own mappings
_HELPER_MODULE = "perflab.io.kineto.helper"
TEMP_PREFIX = "perflab-load-"  # + owner pid: see perflab.io._tempdirs


def load_kineto(
    path: str | os.PathLike[str],
    *,
    python: bool = False,
    workers: int | None = None,
    progress: bool = True,
    part: Request | None = None,
) -> Trace:
    """Read a torch.profiler / Kineto trace (``.json`` or ``.json.gz``).

    ``part``: read only one step or a window of time (see :mod:`.part`): the file is read
    twice, in this process, and memory follows the events kept.

    ``workers``: helper processes that decode parts of a large file at the same time (the
    result is the same). None: one per spare core, up to 7, for files of 64 MB of JSON or
    more; 0: this process only. ``progress``: show how far a load that takes more than a
    couple of seconds has got (see :mod:`perflab.io._progress`). From 64 MB of JSON on,
    blocks of memory of 1 MB or more come from mappings of their own for the rest of the
    process, so the analyses of a large trace return what they free (see
    :func:`perflab.io.kineto.parts.large_blocks_mapped`).
    """
    source = str(path)
    if _text_size(path) >= LARGE_TEXT:
        large_blocks_mapped()  # the trace's analyses then do not fragment the heap
    helpers = _helper_count(path, workers) if part is None else 0
    label = f"reading {Path(path).name}"
    if part is not None:
        label += f" ({part.described()})"
    with gc_paused():
        try:
            window = _find_part(path, python, part, progress) if part else None
            with _progress.Progress(label, _text_size(path), enabled=progress) as shown:
                trace = _load_parallel(path, source, python, helpers, shown) if helpers else None
                return trace or _load_streaming(path, source, python, shown, window)
        except fast.Unusual:
            pass  # decoded whole below, which also explains what is wrong
        data = read_bytes(path)
        check_syntax(data, source)
        whole = build(decode_file(data, source), source, python=python)
        return whole if part is None else part_of(whole, part)


def _find_part(
    path: str | os.PathLike[str], python: bool, request: Request, progress: bool
) -> Part:
    label = f"finding {request.described()} in {Path(path).name}"
    with _progress.Progress(label, _text_size(path), enabled=progress) as shown:
        return find_part(path, request, python=python, shown=shown)


def _text_size(path: str | os.PathLike[str]) -> int:
    try:
        return fast.text_size(path)
    except (OSError, InputError):
        return 0  # reading it will say what is wrong


def loads_kineto(data: bytes, source: str = "<bytes>", *, python: bool = False) -> Trace:
    """Like :func:`load_kineto`, from bytes already in memory (not gzip)."""
    with gc_paused():
        return build(decode_file(data, source), source, python=python)


def _load_streaming(
    path: str | os.PathLike[str],
    source: str,
    python: bool,
    shown: _progress.Progress,
    part: Part | None = None,
) -> Trace:
    columns = Columns(source, python, part)
    with event_stream(path) as stream:
        for events in stream:
            columns.add(events)
            del events  # freed before the next slice is decoded (see fast)
            shown.update(stream.cursor.end)
    doc = doc_of(*stream.top_level(), events=())
    trace = columns.finish(doc, lambda: reread(path))
    if part is not None:
        trace.meta["part"] = part.meta()
    return trace


# -- parallel loading: chunks of the text shared with helper processes (see io._parallel) -----

CHUNK_MIN, CHUNK_MAX = 1 << 20, 8 << 20  # text per chunk; smaller towards the end of the file
CHUNKS_AHEAD = 2  # chunks given to a helper and not yet answered: one in work, one waiting


def _helper_count(path: str | os.PathLike[str], workers: int | None) -> int:
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            message = f"workers must be a whole number >= 0, not {workers!r}"
            raise InputError(message, source=str(path))
        return workers
    size = _text_size(path)
    spare = min(_parallel.available_cores() - 1, _parallel.MAX_HELPERS)
    return max(0, min(spare, size // PARALLEL_MIN_TEXT))


def slot_path(directory: str | os.PathLike[str], helper: int, slot: int) -> Path:
    """The file through which a helper receives its chunks' text: each helper has
    CHUNKS_AHEAD of them, used in turn, so that their pages are written again rather than
    allocated for every chunk."""
    return Path(directory, f"helper-{helper}-slot-{slot}.json")


def read_slot(path: Path, length: int, buf: bytearray | None = None) -> bytearray:
    """A chunk's text, ``length`` bytes from the start of its slot file, as
    ``buf[1 : 1 + length]`` (a byte on either side for brackets: see fast.chunk_events);
    ``buf`` is used again when it is large enough. RangeLayout when the file holds less."""
    if buf is None or len(buf) < length + 2:
        buf = bytearray(length + 2)
    with open(path, "rb") as fh:
        if fh.readinto(memoryview(buf)[1 : 1 + length]) != length:
            raise fast.RangeLayout("a chunk's text is shorter than said")
    return buf


def result_path(directory: str | os.PathLike[str], k: int) -> Path:
    return Path(directory, f"chunk-{k}.columns")


@dataclass(frozen=True)
class _Given:
    """Where a chunk's text went: the helper, its slot, the text's length."""

    helper: int
    slot: int
    length: int


Exported = tuple[dict[str, npt.NDArray[np.generic]], dict[str, object]]  # see Columns.export


class LoadJob(TypedDict):
    """What every helper of one load is told: the folder they share and how to read."""

    dir: str
    source: str
    python: bool


class HelperJob(LoadJob):
    helper: int  # its number, which names its slots


class _Team:
    """The helpers of one load: which one takes the next chunk, and the chunks' results.

    Each helper has CHUNKS_AHEAD slots (one chunk in work, the next waiting); a slot is
    written again only once the result of the chunk in it is saved."""

    def __init__(
        self, helpers: dict[int, _parallel.PipedHelper], job: LoadJob, text_size: int
    ) -> None:
        self.helpers = helpers  # by the number in their job
        self.job = job
        self.directory = job["dir"]
        self.text_size = text_size
        self.given: list[_Given] = []  # per chunk
        self.in_slot: dict[tuple[int, int], int] = {}  # (helper, slot) -> chunk not yet done
        self.taker: tuple[int, int] | None = None  # the helper and slot that offer chose
        self.writing: tuple[int, int] | None = None  # the slot's file and bytes written
        self.decoded_here = 0  # chunks given to helpers that ended without their result

    def offer(self, pos: int) -> int:
        """How much text, from offset ``pos`` on, to give a helper now (0: none)."""
        left = self.text_size - pos
        size = min(CHUNK_MAX, max(CHUNK_MIN, left // (4 * (len(self.helpers) + 1))))
        if left < 2 * size:  # the end of the file stays here: no one waits for a helper
            return 0
        self.taker = next(self._free_slots(), None)
        return size if self.taker else 0

    def _free_slots(self) -> Iterator[tuple[int, int]]:
        for i, helper in self.helpers.items():
            helper.poll()
            if helper.ready and not helper.gone:
                for slot in range(CHUNKS_AHEAD):
                    k = self.in_slot.get((i, slot))
                    if k is None or self.answered(k):
                        yield i, slot

    def give(self, part: fast.Chunk) -> int | None:
        """Write a part of a chunk's text to the slot that ``offer`` chose (over what was
        there: its pages are used again); once its last part is written, the helper is told,
        and the chunk's number is returned. Should the helper be gone, this process decodes
        the chunk at the end."""
        assert self.taker is not None, "give() follows an offer()"
        i, slot = self.taker
        if self.writing is None:
            flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            self.writing = os.open(slot_path(self.directory, i, slot), flags, 0o600), 0
        fd, length = self.writing
        os.pwrite(fd, part.text, length)
        self.writing = fd, length + len(part.text)
        if not part.last:
            return None
        self.close_slot()
        k = len(self.given)
        self.given.append(_Given(i, slot, length + len(part.text)))
        self.in_slot[i, slot] = k
        self.helpers[i].give(f"{k} {slot} {self.given[k].length}")  # if gone, see result()
        return k

    def close_slot(self) -> None:
        if self.writing is not None:
            os.close(self.writing[0])
            self.writing = None

    def answered(self, k: int) -> bool:
        """Whether chunk k's result is saved (or was taken in already: k is -1). A helper
        says so once the result file is in place."""
        if k < 0:
            return True
        helper = self.helpers[self.given[k].helper]
        if k not in helper.done:
            helper.poll()
        return k in helper.done

    def result(self, k: int) -> Exported:
        """Chunk k's columns as its helper saved them, else (the helper broke down first)
        decoded here from its slot, which nothing has written since."""
        saved, given = result_path(self.directory, k), self.given[k]
        if saved.exists():
            try:
                arrays, meta = _parallel.load_columns(saved)
            except InputError:  # unreadable; its slot may hold another chunk by now
                raise fast.RangeLayout("a chunk's result is unreadable") from None
            saved.unlink()
        else:  # a short slot is a RangeLayout: one process reads the file again
            slot = slot_path(self.directory, given.helper, given.slot)
            arrays, meta = chunk_columns(read_slot(slot, given.length), given.length, self.job)
            self.decoded_here += 1
        if self.in_slot[given.helper, given.slot] == k:  # else a later chunk is in it
            self.in_slot[given.helper, given.slot] = -1  # done: the slot is free
        return arrays, meta

    def no_more_chunks(self) -> None:
        for helper in self.helpers.values():
            helper.no_more_work()

    def wait_for(self, k: int, deadline: float) -> None:
        """Until chunk k's result is saved, or its helper has ended without it (it is then
        decoded here) or has not saved it by ``deadline`` (it is then stopped)."""
        helper = self.helpers[self.given[k].helper]
        while not self.answered(k) and not helper.ended():
            if time.monotonic() > deadline:
                helper.kill()
                return
            time.sleep(0.001)

    def kill(self) -> None:
        self.close_slot()
        for helper in self.helpers.values():
            helper.kill()

    def warn_if_failed(self) -> None:
        """A helper that broke down (this process then decoded its chunks) is reported with
        the last line it wrote."""
        if not self.decoded_here:
            return
        logs = sorted(Path(self.directory).glob("helper-*.log"))
        last = [line for log in logs for line in log.read_text(errors="replace").splitlines()]
        warnings.warn(
            "a helper process of the parallel trace load failed"
            + (f" ({last[-1]})" if last else "")
            + f"; this process decoded its {self.decoded_here} chunk(s) instead",
            RuntimeWarning,
            stacklevel=5,
        )


class _InOrder:
    """Columns absorbed in text order as they become ready: this process's own slices
    between the chunks, and the chunks' results once their helpers have saved them."""

    def __init__(self, base: Columns, team: _Team) -> None:
        self.base = base  # the whole trace's columns
        self.current = base  # where this process's slices go
        self.team = team
        self.waiting: deque[Exported | int] = deque()  # chunk numbers and exported columns

    def add(self, events: Records) -> None:
        self.current.add(events)

    def chunk_given(self, k: int) -> None:
        if self.current is not self.base:
            self.waiting.append(self.current.export())
        self.waiting.append(k)
        self.current = Columns(self.base.source, self.base.python)

    def absorb_ready(self, *, deadline: float | None = None) -> None:
        """Absorb what is ready from the front; with a ``deadline``, everything, waiting
        for the helpers' results (see _Team.wait_for)."""
        while self.waiting:
            front = self.waiting[0]
            if isinstance(front, int):
                if deadline is not None:
                    self.team.wait_for(front, deadline)
                elif not self.team.answered(front):
                    return
                front = self.team.result(front)
            self.base.absorb(*front)
            self.waiting.popleft()
        if self.current is not self.base:  # all before it absorbed: it goes on in base
            self.base.absorb(*self.current.export())
            self.current = self.base


def _load_parallel(
    path: str | os.PathLike[str],
    source: str,
    python: bool,
    helpers: int,
    shown: _progress.Progress,
) -> Trace | None:
    """This process decompresses the file and gives chunks of its text to ``helpers``
    helper processes as they are free, decoding the rest itself; None when the file must be
    read by one stream after all (bad input, which that path explains)."""
    began = time.monotonic()
    with _tempdirs.owned_temp_dir(TEMP_PREFIX) as tmp, event_stream(path) as stream:
        job: LoadJob = {"dir": tmp, "source": source, "python": python}
        started = {
            i: _parallel.PipedHelper.start(
                _HELPER_MODULE, HelperJob(**job, helper=i), Path(tmp, f"helper-{i}.log")
            )
            for i in range(helpers)
        }
        running = {i: h for i, h in started.items() if h is not None}
        team = _Team(running, job, fast.text_size(path))
        merged = _InOrder(Columns(source, python), team)
        try:
            for item in stream.shared(team.offer):
                if isinstance(item, fast.Chunk):
                    if (k := team.give(item)) is not None:
                        merged.chunk_given(k)
                else:
                    merged.add(item)
                del item  # freed before the next slice is decoded (see fast)
                merged.absorb_ready()
                shown.update(stream.cursor.end)
            team.no_more_chunks()
            patience = _parallel.HELPER_START_S + 10 * (time.monotonic() - began)
            merged.absorb_ready(deadline=time.monotonic() + patience)
        except (InputError, fast.RangeLayout):
            return None  # one process reads it again (and names the bad event, if any)
        finally:
            team.kill()
        team.warn_if_failed()
        doc = doc_of(*stream.top_level(), events=())
        return merged.base.finish(doc, lambda: reread(path))


def chunk_columns(buf: bytearray, length: int, job: LoadJob) -> Exported:
    """A chunk's events as exported columns (see Columns.export); its text is
    ``buf[1 : 1 + length]`` (see fast.chunk_events)."""
    columns = Columns(job["source"], job["python"])
    for events in fast.chunk_events(buf, length, decode_slice):
        columns.add(events)
        del events  # freed before the next slice is decoded (see fast)
    return columns.export()


class _Server:
    """A helper's side: chunks read from its slots into one buffer, used again."""

    def __init__(self, job: HelperJob) -> None:
        self.job = job
        self.buf = bytearray()

    def serve(self, line: bytes) -> int:
        """Chunk ``k slot length``: its columns saved; k."""
        k, slot, length = map(int, line.split())
        self.buf = read_slot(slot_path(self.job["dir"], self.job["helper"], slot), length, self.buf)
        arrays, meta = chunk_columns(self.buf, length, self.job)
        _parallel.save_columns(result_path(self.job["dir"], k), arrays, meta)
        del arrays
        return_freed_memory()
        return k


def run_helper(job: HelperJob, work: BinaryIO, said: BinaryIO) -> int:
    """A helper process (``python -m perflab.io.kineto.helper JOB``): READY on ``said``, then
    for every chunk given on ``work`` (a line ``k slot length``), its columns saved and k
    said. Its exit status: DATA_ERROR when a chunk does not decode (the caller's own
    reading explains it)."""
    said.write(_parallel.READY + b"\n")
    said.flush()
    server = _Server(job)
    with gc_paused():
        for line in work:
            try:
                k = server.serve(line)
            except (fast.Unusual, InputError) as exc:
                print(f"chunk {line.decode(errors='replace').strip()}: {exc!r}", file=sys.stderr)
                return _parallel.DATA_ERROR
            said.write(b"%d\n" % k)
            said.flush()
    return 0
