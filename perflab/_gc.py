"""Garbage-collection control shared by the timing engine and the importers."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector (restored on exit, also on errors).

    Timing: a collection inside a sample would be measured as the user's time.
    Importing: millions of small acyclic objects come and go, and the collector would
    walk them again and again for nothing.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
