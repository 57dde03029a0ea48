"""Helper processes that share a load's work on spare cores.

Two ways of handing out work:

- :class:`Claims`: the work is numbered (the files of a job); the processes claim numbers one
  at a time, in increasing order, so that a process that starts late or runs slow simply takes
  fewer of them. A claim is the atomic creation of a file named after the number in a private
  directory (``O_CREAT | O_EXCL``: one process wins on every operating system, with no lock
  and no shared memory).
- :class:`PipedHelper`: the caller hands out each piece of work as it goes (the chunks of one
  large file that it decompresses) by a line on the helper's standard input, and the helper
  answers with a line on its standard output when the result is saved.

Either way a result is saved in the private directory as numeric arrays plus a JSON header
(no pickle): a job's traces as ``.npz`` files, a chunk's columns as a plain columns file
(:func:`save_columns`); the caller reads them back in order.

Helpers are ``python -m <module> JOB`` subprocesses (an argument list, no shell): unlike
``multiprocessing`` they neither fork a process that may hold threads (a Jupyter kernel does)
nor import the caller's ``__main__`` again.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.model.serialize import parse_json, save_arrays

MAX_HELPERS = 7
HELPER_START_S = 60.0  # allowance for a helper's start-up in the wait below
DATA_ERROR = 3  # a helper's exit status for bad input: the caller's own path explains it


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class Claims:
    """Work numbers 0..n-1 (a job's files) handed out once each, across processes, in
    increasing order within each process."""

    def __init__(self, directory: str | os.PathLike[str], n: int) -> None:
        self.directory = Path(directory)
        self.n = n
        self.next = 0

    def claim(self) -> int | None:
        while self.next < self.n:
            k, self.next = self.next, self.next + 1
            try:
                os.close(os.open(self.directory / f"claim-{k}", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                continue  # another process has it
            return k
        return None

    def result_path(self, k: int) -> Path:
        return self.directory / f"result-{k}.npz"


def save_result(
    path: Path, arrays: dict[str, npt.NDArray[np.generic]], meta: dict[str, object]
) -> None:
    save_arrays(path, arrays, meta, compress=False)  # read back at once: not worth packing


# Columns that a helper hands back to the process that reads them at once, on this machine:
# raw arrays after a JSON header, each read straight into its own array (an .npz costs a zip
# directory and a CRC per array). The header is checked all the same.
_COLUMNS_MAGIC = b"perflab columns 1\n"
_COLUMN_TYPES = frozenset({"|b1", "|i1", "<i2", "<i4", "<i8", "<f8"})
_ALIGN = 8


def save_columns(
    path: Path, arrays: Mapping[str, npt.NDArray[np.generic]], meta: Mapping[str, object]
) -> None:
    """1-D numeric arrays and a JSON ``meta``, written aside and renamed."""
    listed = [[name, a.dtype.str, len(a)] for name, a in arrays.items()]
    header = json.dumps({"arrays": listed, "meta": meta}, allow_nan=False).encode()
    header += b" " * (-len(header) % _ALIGN)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(_COLUMNS_MAGIC + len(header).to_bytes(8, "little") + header)
        for values in arrays.values():
            data = np.ascontiguousarray(values).view(np.uint8).data
            fh.write(data)
            fh.write(b"\0" * (-len(data) % _ALIGN))
    tmp.replace(path)


def load_columns(path: Path) -> tuple[dict[str, npt.NDArray[np.generic]], dict[str, object]]:
    """What :func:`save_columns` wrote, each array read into its own memory (so that each
    is freed on its own). InputError for anything else."""
    with open(path, "rb") as fh:
        head = fh.read(len(_COLUMNS_MAGIC) + 8)
        size = int.from_bytes(head[len(_COLUMNS_MAGIC) :], "little")
        total = os.fstat(fh.fileno()).st_size
        if not head.startswith(_COLUMNS_MAGIC) or len(head) + size > total:
            raise InputError("not a columns file", source=str(path))
        doc = parse_json(fh.read(size), str(path), error=InputError)
        listed = doc.get("arrays") if isinstance(doc, dict) else None
        if not isinstance(listed, list) or not isinstance(doc.get("meta"), dict):
            raise InputError("not a columns file", source=str(path))
        arrays: dict[str, npt.NDArray[np.generic]] = {}
        for entry in listed:
            name, dtype, count = _column_entry(entry, path)
            values = np.empty(count, dtype)
            width = values.nbytes
            if fh.readinto(values.view(np.uint8).data) != width:
                raise InputError(f"column {name!r} is cut short", source=str(path))
            fh.seek(-width % _ALIGN, os.SEEK_CUR)
            arrays[name] = values
        if fh.tell() != total:
            raise InputError("not a columns file: bytes after the columns", source=str(path))
    return arrays, doc["meta"]


def _column_entry(entry: object, path: Path) -> tuple[str, str, int]:
    if isinstance(entry, list) and len(entry) == 3:
        name, dtype, count = entry
        if isinstance(name, str) and dtype in _COLUMN_TYPES and type(count) is int and count >= 0:
            return name, dtype, count
    raise InputError(f"not a column: {str(entry)[:60]}", source=str(path))


def start_helper(
    module: str, job: Mapping[str, object], log: Path, *, piped: bool = False
) -> subprocess.Popen[bytes] | None:
    """``python -m module JOB`` with this interpreter's module search path (``piped``: with
    pipes to its standard input and output); None when no Python can be started."""
    if not sys.executable:
        return None
    # this interpreter's search path, in its order: the helper imports the same perflab (and
    # numpy) even when sys.path was changed at run time, as notebooks often do
    search = [str(Path(p).resolve()) for p in sys.path if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(search)}
    stdio = subprocess.PIPE if piped else subprocess.DEVNULL
    try:
        with open(log, "wb") as err:
            return subprocess.Popen(
                [sys.executable, "-m", module, json.dumps(job)],
                stdin=stdio,
                stdout=stdio,
                stderr=err,
                env=env,
                start_new_session=True,  # own process group: a terminal's Ctrl-C is ours
            )
    except OSError:
        return None


READY = b"ready"  # a piped helper's first line, once it can take work


class PipedHelper:
    """A helper process that takes work as lines on its standard input, says READY on its
    standard output once it has started and then answers a line for every piece of work
    done (the piece's number). The caller never blocks on it while it hands out work."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        if process.stdin is None or process.stdout is None:
            raise ValueError("a piped helper needs pipes to its standard input and output")
        self.process = process
        self.work, self.said = process.stdin, process.stdout
        self.ready = False
        self.gone = False  # it ended, or its pipe broke
        self.done: set[int] = set()  # the numbers it answered
        self._partial = b""
        os.set_blocking(self.said.fileno(), False)

    @classmethod
    def start(cls, module: str, job: Mapping[str, object], log: Path) -> PipedHelper | None:
        process = start_helper(module, job, log, piped=True)
        return cls(process) if process is not None else None

    def poll(self) -> None:
        """Take in what it has said by now, without waiting."""
        while not self.gone:
            try:
                said = os.read(self.said.fileno(), 1 << 16)
            except BlockingIOError:
                return
            except (OSError, ValueError):  # closed here
                said = b""
            if not said:
                self.gone = True
                return
            *lines, self._partial = (self._partial + said).split(b"\n")
            for line in lines:
                if line == READY:
                    self.ready = True
                elif line.isdigit():
                    self.done.add(int(line))

    def give(self, line: str) -> bool:
        """Send a line of work; False when the helper is gone."""
        try:
            self.work.write(line.encode() + b"\n")
            self.work.flush()
        except (BrokenPipeError, ValueError):
            self.gone = True
            return False
        return True

    def no_more_work(self) -> None:
        """Close its work: it ends once it has done what it was given."""
        with contextlib.suppress(BrokenPipeError, ValueError):
            self.work.close()

    def ended(self) -> bool:
        return self.process.poll() is not None

    def kill(self) -> None:
        """End the helper now, if it still runs, and close its pipes."""
        stop_helpers([self.process])
        for pipe in (self.work, self.said):
            with contextlib.suppress(OSError, ValueError):
                pipe.close()


def finish_helpers(helpers: list[subprocess.Popen[bytes]], timeout: float) -> list[int]:
    """Wait for the helpers (each is busy with one piece of work at most by now); those still
    running after ``timeout`` seconds are killed. Their exit statuses."""
    deadline = time.monotonic() + timeout
    # polled every millisecond: Popen.wait(timeout) sleeps up to 50 ms past the exit
    while any(h.poll() is None for h in helpers) and time.monotonic() < deadline:
        time.sleep(0.001)
    stop_helpers(helpers)
    return [h.wait() for h in helpers]


def stop_helpers(helpers: list[subprocess.Popen[bytes]]) -> None:
    for helper in helpers:
        if helper.poll() is None:
            helper.kill()
            helper.wait()
