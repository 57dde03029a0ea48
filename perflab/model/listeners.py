"""Listeners told of every TimingResult a front end produces (``%%gpuprofile``, the lab's
profile button, ``perflab.bench``): the JupyterLab history panel is one.

The registry lives in the model layer so that every layer that produces results may call
:func:`notify`; it knows nothing of its listeners."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
Listener = Callable[[object], None]

_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    """Call ``listener(result)`` for every result from now on (added once)."""
    if listener not in _listeners:
        _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def notify(result: T) -> T:
    """Tell every listener of ``result`` and return it. A listener that fails is reported
    as a warning: the user's timing still stands."""
    for listener in list(_listeners):
        try:
            listener(result)
        except Exception as exc:  # a history that cannot be written must not lose the result
            warnings.warn(f"perflab: a result listener failed: {exc}", stacklevel=2)
    return result
