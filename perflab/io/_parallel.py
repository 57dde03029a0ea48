"""Helper processes for loading one large file on several cores.

The file is split into ranges that the processes claim one at a time, in increasing order, so
that a process that starts late or runs slow simply takes fewer of them. A claim is the atomic
creation of a file named after the range in a private directory (``O_CREAT | O_EXCL``: one
process wins on every operating system, with no lock and no shared memory). A helper writes
each range's result next to the claims as ``.npz`` arrays plus a JSON header (no pickle), and
the caller reads them back in range order.

Helpers are ``python -m <module> JOB`` subprocesses (an argument list, no shell): unlike
``multiprocessing`` they neither fork a process that may hold threads (a Jupyter kernel does)
nor import the caller's ``__main__`` again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy.typing as npt

from perflab.model.serialize import load_arrays, save_arrays

MAX_HELPERS = 7
HELPER_START_S = 60.0  # allowance for a helper's start-up in the wait below
DATA_ERROR = 3  # a helper's exit status for bad input: the caller's own path explains it


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class Claims:
    """Range numbers 0..n-1 handed out once each, across processes, in increasing order
    within each process."""

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
        return self.directory / f"range-{k}.npz"


def save_result(path: Path, arrays: dict[str, npt.NDArray[Any]], meta: dict[str, Any]) -> None:
    save_arrays(path, arrays, meta, compress=False)  # read back at once: not worth packing


def load_result(path: Path) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
    arrays, meta = load_arrays(path)
    return arrays, meta


def start_helper(module: str, job: dict[str, Any], log: Path) -> subprocess.Popen[bytes] | None:
    """``python -m module JOB`` with this interpreter's module search path; None when no
    Python can be started."""
    if not sys.executable:
        return None
    # this interpreter's search path, in its order: the helper imports the same perflab (and
    # numpy) even when sys.path was changed at run time, as notebooks often do
    search = [str(Path(p).resolve()) for p in sys.path if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(search)}
    try:
        with open(log, "wb") as err:
            return subprocess.Popen(
                [sys.executable, "-m", module, json.dumps(job)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                start_new_session=True,  # own process group: a terminal's Ctrl-C is ours
            )
    except OSError:
        return None


def finish_helpers(helpers: list[subprocess.Popen[bytes]], timeout: float) -> list[int]:
    """Wait for the helpers (each is busy with one range at most by now); those still
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
