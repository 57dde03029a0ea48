"""Whether timed code ran a Triton kernel in Triton's interpreter.

With ``TRITON_INTERPRET=1`` set before Triton is imported, ``@triton.jit`` makes
interpreted functions: each launch copies its tensors to the host and runs the kernel
program by program in numpy on the CPU. A time of that is the interpreter's, not the
kernel's, and must not be set against compiled code (``TimingResult.compare`` refuses).

The watch sees it happen rather than guessing from the environment: while open, it counts
the launches that go through the interpreter's ``GridExecutor``, the object every
interpreted launch calls. perflab never imports Triton for this: when the interpreter
module is not loaded no kernel can run in it, and when the watched code loads it itself,
its launches cannot be seen and the answer is unknown.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from perflab.model.timing import NO_INTERPRETER, TRITON_INTERPRETER

INTERPRETER_MODULE = "triton.runtime.interpreter"


@dataclass
class InterpreterSeen:
    """What a watch saw: the interpreted launches it counted, and whether it could see
    them at all (False when Triton's interpreter was loaded during the watch, or has no
    ``GridExecutor`` to watch)."""

    launches: int = 0
    visible: bool = True

    @property
    def interpreter(self) -> str | None:
        """``TimingResult.interpreter``: "triton", "none", or None (unknown)."""
        if self.launches:
            return TRITON_INTERPRETER
        return NO_INTERPRETER if self.visible else None


def _executor() -> type | None:
    """The interpreter's launch class, if the interpreter is loaded and has one."""
    module = sys.modules.get(INTERPRETER_MODULE)
    executor = getattr(module, "GridExecutor", None)
    return executor if isinstance(executor, type) else None


@contextmanager
def watch_interpreter() -> Iterator[InterpreterSeen]:
    """Count the Triton kernel launches run in Triton's interpreter inside the ``with``
    block (launches of compiled code pay nothing: only the interpreter's path is wrapped,
    and it is put back as it was on the way out, whatever happens)."""
    seen = InterpreterSeen()
    loaded = INTERPRETER_MODULE in sys.modules
    executor = _executor()
    if executor is None:
        seen.visible = not loaded  # loaded without a GridExecutor: a Triton we cannot watch
        yield seen
        seen.visible = seen.visible and INTERPRETER_MODULE not in sys.modules
        return
    own = "__call__" in vars(executor)
    original: Callable[..., object] = executor.__call__

    def counted(self: object, *args: object, **kwargs: object) -> object:
        seen.launches += 1
        return original(self, *args, **kwargs)

    setattr(executor, "__call__", counted)  # noqa: B010  (a method of Triton's class)
    try:
        yield seen
    finally:
        if own:
            setattr(executor, "__call__", original)  # noqa: B010
        else:
            delattr(executor, "__call__")
