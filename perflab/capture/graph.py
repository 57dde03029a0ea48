"""CUDA-graph capture for ``--graph``: capture ``number`` calls (torch or CuPy), say what a
one-call graph does and does not save, and turn a failed capture into a perflab error
after ending the capture and restoring the current stream, so the next run works.

A call that synchronises with the host (``.item()``, printing a CUDA tensor, ``.cpu()``)
cannot be captured: CUDA refuses the sync, which invalidates the capture, and torch then
fails again while ending it. The first error says why; the error raised says it plainly.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from perflab.errors import InputError

if TYPE_CHECKING:
    import torch

SYNC_MESSAGE = (
    "--graph: the cell synchronises with the host (e.g. .item(), print of a CUDA tensor, "
    ".cpu()), which CUDA graph capture does not allow; remove the sync or drop --graph"
)
UNJOINED_MESSAGE = (
    "--graph: the cell forks work to another stream during capture and does not join it "
    "back (make the current stream wait for it: torch.cuda.current_stream().wait_stream(s)), "
    "or drop --graph"
)
OTHER_MESSAGE = (
    "--graph: the cell ran outside CUDA graph capture but failed inside it; drop --graph"
)
ONE_CALL_NOTE = (
    "--graph captured 1 call per replay (no -n): the replay removes launch gaps between the "
    "kernels inside the call, but each sample still pays one graph launch, so a one-kernel "
    "cell saves nothing; -n N captures N calls per replay"
)

# What CUDA and torch say when a capture meets a host sync (cudaErrorStreamCaptureUnsupported,
# the invalidated capture that follows it, torch's check on pageable copies) or work forked
# to a stream that never rejoined (cudaErrorStreamCaptureUnjoined).
_SYNC = re.compile(
    r"not permitted when stream is capturing|StreamCaptureUnsupported|"
    r"previous error during capture|StreamCaptureInvalidated|during CUDA graph capture|"
    r"synchroni[sz]",
    re.IGNORECASE,
)
_UNJOINED = re.compile(r"StreamCaptureUnjoined|not joined|unjoined", re.IGNORECASE)
MAX_CAUSE_CHARS = 200


def one_call_note(number: int) -> str | None:
    """The note for a graph of one call per replay (None for more)."""
    return ONE_CALL_NOTE if number == 1 else None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, newest first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= MAX_CAUSE_CHARS else text[: MAX_CAUSE_CHARS - 3] + "..."


def capture_error(exc: BaseException, library: str = "torch") -> InputError:
    """The perflab error for a capture that failed with ``exc``: why (a host sync, work
    left on another stream, or else), with the first error's first line appended."""
    chain = _chain(exc)
    text = "\n".join(str(e) for e in chain)
    if _UNJOINED.search(text):
        why = UNJOINED_MESSAGE
    elif _SYNC.search(text):
        why = SYNC_MESSAGE
    else:
        why = OTHER_MESSAGE
    return InputError(f"{why} ({library}: {_first_line(chain[-1])})")


def capture_torch(torch: ModuleType, fn: Callable[[], object], number: int) -> Callable[[], object]:
    """Capture ``number`` calls into a torch CUDA graph; return its replay. A failed capture
    is ended, the current stream restored, and a perflab error raised."""
    cuda = torch.cuda
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        fn()  # warm-up on a side stream, as torch's graph docs require
    cuda.current_stream().wait_stream(side)
    graph = cuda.CUDAGraph()
    before = cuda.current_stream()
    try:
        with cuda.graph(graph):
            for _ in range(number):
                fn()
    except BaseException as exc:
        _recover_torch(cuda, graph, before)
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt, SystemExit: cleaned up, passed on
        raise capture_error(exc) from None
    cuda.synchronize()
    replay: Callable[[], object] = graph.replay
    return replay


def _recover_torch(
    cuda: ModuleType, graph: torch.cuda.CUDAGraph, before: torch.cuda.Stream
) -> None:
    """After a failed capture: end it if it is still open, and make ``before`` the current
    stream again (``torch.cuda.graph`` leaves its capture stream current when ending the
    capture raises); then let pending work finish, so the next run starts clean."""
    with contextlib.suppress(Exception):
        if cuda.is_current_stream_capturing():
            graph.capture_end()
    cuda.set_stream(before)
    with contextlib.suppress(Exception):
        cuda.synchronize()


def capture_cupy(cupy: ModuleType, fn: Callable[[], object], number: int) -> Callable[[], object]:
    """Capture ``number`` calls on a new CuPy stream; return a replay on the current stream.
    A failed capture is ended and a perflab error raised."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        try:
            for _ in range(number):
                fn()
        except BaseException as exc:
            with contextlib.suppress(Exception):
                stream.end_capture()
            if not isinstance(exc, Exception):
                raise
            raise capture_error(exc, "cupy") from None
        try:
            graph = stream.end_capture()
        except Exception as exc:  # e.g. work forked to another stream and never joined
            raise capture_error(exc, "cupy") from None
    return lambda: graph.launch(stream=cupy.cuda.get_current_stream())
