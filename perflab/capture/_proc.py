"""Run one command in its own process group and never leave a child of it behind.

nvcc runs ``sh -c cicc ...``, ``sh -c ptxas ...`` and the host compiler as children:
killing nvcc alone on a timeout leaves them running (cicc can hold hundreds of MB for a
minute). So every command starts a new session (``start_new_session=True``, its own
process group) and the whole group is killed on a timeout, on any error while waiting
and on KeyboardInterrupt, before the exception goes on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

# after SIGKILL, how long to wait for the pipes to close before giving up on the output
_REAP_TIMEOUT_S = 5.0


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path | str | None = None,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``argv`` (a list: no shell) with text output captured; raises
    ``subprocess.TimeoutExpired`` after ``timeout`` seconds and ``OSError`` when it
    cannot start, in both cases with no process of its group left running."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except BaseException:  # timeout, KeyboardInterrupt, or a failure while reading
        kill_group(proc)
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL every process in ``proc``'s group, then reap ``proc``. The group id is
    the leader's pid, still ours because the leader has not been reaped yet."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=_REAP_TIMEOUT_S)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        proc.kill()
        proc.wait()
