"""Private temporary directories named after the process that owns them.

A load that shares a file with helper processes keeps their results in a temporary directory,
removed when the load ends. A process killed with SIGKILL cannot remove it, so the directory
name carries the owner's process id (``perflab-load-<pid>-<random>``) and the next load
removes the directories whose owner is gone (only this user's, only with a name of that form).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def owned_temp_dir(prefix: str) -> Iterator[str]:
    """A new temporary directory ``<prefix><pid>-...``, removed at the end of the block;
    stale ones of dead owners are removed first."""
    remove_stale(prefix)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-") as tmp:
        yield tmp


def remove_stale(prefix: str, parent: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove this user's ``<prefix><pid>-*`` directories in ``parent`` (the temporary
    directory by default) whose process ``pid`` no longer runs; the paths removed."""
    if os.name != "posix":  # pragma: no cover - os.kill(pid, 0) would end the process there
        return []
    removed = []
    for entry in Path(parent or tempfile.gettempdir()).glob(f"{prefix}*"):
        pid = owner_pid(entry.name, prefix)
        if pid is None or pid == os.getpid() or _running(pid):
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def owner_pid(name: str, prefix: str) -> int | None:
    """The process id in a name ``<prefix><pid>-...``; None for any other name."""
    pid, dash, _ = name[len(prefix) :].partition("-")
    return int(pid) if dash and pid.isascii() and pid.isdigit() and int(pid) > 0 else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # exists, but belongs to someone else
        return True
    return True
