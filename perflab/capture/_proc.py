"""Run one command in its own process group and never leave a child of it behind.

nvcc runs ``sh -c cicc ...``, ``sh -c ptxas ...`` and the host compiler as children:
killing nvcc alone on a timeout leaves them running (cicc can hold hundreds of MB for a
minute). So every command starts a new session (``start_new_session=True``, its own
process group) and the whole group is killed on a timeout, on any error while waiting
and on KeyboardInterrupt, before the exception goes on.

A new session also means that a SIGTERM or SIGHUP sent to perflab (``timeout``, systemd,
a closed terminal, a kernel shutdown) does not reach the compiler. So while a command
runs, or a scratch folder exists (:func:`cleanup_on_signals`), those signals kill every
group started here first; then the handler that was there before runs, or, where that
was the default, the scratch folders are removed and the process dies of the signal as
it would have. At interpreter exit, groups and folders still there are cleaned up too.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

from perflab.errors import ToolchainError

# after SIGKILL, how long to wait for the pipes to close before giving up on the output
_REAP_TIMEOUT_S = 5.0
# the signals that end a process from outside and that perflab cleans up after
CLEANUP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_running: set[subprocess.Popen[str]] = set()  # commands started here and not reaped yet
_scratch: set[Path] = set()  # scratch folders not removed yet


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
    with cleanup_on_signals():
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
        _running.add(proc)
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except BaseException:  # timeout, KeyboardInterrupt, a signal, a failure while reading
            kill_group(proc)
            raise
        finally:
            _running.discard(proc)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL every process in ``proc``'s group, then reap ``proc``. The group id is
    the leader's pid, still ours because the leader has not been reaped yet."""
    _kill(proc)
    try:
        proc.communicate(timeout=_REAP_TIMEOUT_S)
    except (subprocess.TimeoutExpired, ValueError, OSError, RuntimeError):
        proc.kill()
        proc.wait()


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.returncode is not None:
        return  # reaped: the group id may belong to someone else by now
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(proc.pid, signal.SIGKILL)


def kill_all_groups() -> None:
    """SIGKILL every group started here that is still running (safe in a signal handler:
    nothing is waited for)."""
    for proc in list(_running):
        _kill(proc)


# ---- scratch folders ------------------------------------------------------------------------


@contextlib.contextmanager
def scratch_folder(path: Path) -> Iterator[Path]:
    """``path`` (a fresh folder), removed on exit, error, interrupt, SIGTERM or SIGHUP
    and, failing all of those, at interpreter exit."""
    with cleanup_on_signals():
        _scratch.add(path)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
            _scratch.discard(path)


def _remove_scratch() -> None:
    for path in list(_scratch):
        shutil.rmtree(path, ignore_errors=True)
        _scratch.discard(path)


@atexit.register
def _at_exit() -> None:  # e.g. a compile in a daemon thread when the interpreter exits
    kill_all_groups()
    _remove_scratch()


# ---- signals --------------------------------------------------------------------------------


class _Terminating(BaseException):
    """Unwinds perflab's own frames (their ``finally`` clauses clean up) up to the
    outermost :func:`cleanup_on_signals`, which then dies of ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_Handler = Callable[[int, FrameType | None], object] | int
_depth = 0  # nested cleanup_on_signals in the main thread; the outermost installs


@contextlib.contextmanager
def cleanup_on_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP first kill every group started here.

    Then the handler there before runs (a Jupyter kernel's, say; if it returns, the
    interrupted work stops with a ToolchainError), or, where it was the default, the
    stack unwinds to here (removing scratch folders on the way) and the process dies
    of the signal with the default handler back. An ignored signal stays ignored.
    Handlers can only be set in the main thread: elsewhere this does nothing.
    """
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth:  # an outer one has installed the handlers
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    previous = _install()
    _depth = 1
    try:
        yield
    except _Terminating as stop:
        _restore(previous)
        previous = {}
        _die_of(stop.signum)
    finally:
        _depth = 0
        _restore(previous)


def _install() -> dict[int, _Handler]:
    previous: dict[int, _Handler] = {}
    for signum in CLEANUP_SIGNALS:
        before = signal.getsignal(signum)
        if before is signal.SIG_IGN or before is None:
            continue  # ignored, or a handler set outside Python that cannot be chained
        signal.signal(signum, _handler(before))
        previous[signum] = before
    return previous


def _restore(previous: Mapping[int, _Handler]) -> None:
    for signum, before in previous.items():
        signal.signal(signum, before)


def _handler(before: _Handler) -> Callable[[int, FrameType | None], None]:
    def on_signal(signum: int, frame: FrameType | None) -> None:
        kill_all_groups()
        if callable(before):
            before(signum, frame)
            name = signal.Signals(signum).name
            raise ToolchainError(f"stopped by {name}: the compiler's processes were killed")
        raise _Terminating(signum)

    return on_signal


def _die_of(signum: int) -> None:
    """End the process as ``signum``'s default action would (its exit status says so)."""
    _remove_scratch()
    os.kill(os.getpid(), signum)
    raise SystemExit(128 + signum)  # only reached should the signal be blocked
