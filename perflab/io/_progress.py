"""Progress of long loads: a line on a terminal, a bar in a notebook, nothing otherwise.

Shown only once a load has taken SHOW_AFTER_S seconds, so quick loads print nothing. On a
terminal the line goes to stderr, and only when stderr is a TTY (never into piped output or
``--json``, whose callers pass ``enabled=False``). In a Jupyter kernel an ``ipywidgets``
progress bar is shown when ipywidgets is importable; otherwise nothing (stderr there would
show as an error box).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from perflab.model.terminal import printable

SHOW_AFTER_S = 2.0
UPDATE_EVERY_S = 0.25


class Progress:
    """``update(done)`` as work proceeds (``done`` of ``total`` units, bytes here), then
    ``close()``; cheap enough to call for every slice of a file."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = max(total, 1)
        self.enabled = enabled
        self.clock = clock
        self.start = self.last = clock()
        self.view: _TerminalView | _NotebookView | None = None

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self.last < UPDATE_EVERY_S or now - self.start < SHOW_AFTER_S:
            return
        self.last = now
        if self.view is None:
            self.view = _view(self.label)
            if self.view is None:
                self.enabled = False
                return
        self.view.show(min(done / self.total, 1.0), done)

    def close(self) -> None:
        if self.view is not None:
            self.view.close()
            self.view = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _view(label: str) -> _TerminalView | _NotebookView | None:
    if in_notebook():
        try:
            import ipywidgets
        except ImportError:
            return None
        return _NotebookView(label, ipywidgets)
    stream = sys.stderr
    if stream is not None and stream.isatty():
        # the CLI's stderr escapes control characters; the redrawing "\r" must act
        return _TerminalView(printable(label), getattr(stream, "unescaped", stream))
    return None


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython is imported by then, never here)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None  # type: ignore[attr-defined]
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class _TerminalView:
    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.width = 0

    def show(self, fraction: float, done: int) -> None:
        line = f"{self.label}: {100 * fraction:3.0f}% ({done / 1e6:,.0f} MB)"
        self.width = max(self.width, len(line))
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\r" + " " * self.width + "\r")  # the result replaces the line
        self.stream.flush()


class _NotebookView:
    def __init__(self, label: str, widgets: Any) -> None:
        from IPython.display import display

        self.bar = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, description=label[:30])
        display(self.bar)  # type: ignore[no-untyped-call]

    def show(self, fraction: float, done: int) -> None:
        self.bar.value = fraction

    def close(self) -> None:
        self.bar.close()
