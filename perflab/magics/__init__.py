"""IPython front-end: ``%load_ext perflab`` registers the cell magics.

Each magic module (``gpuprofile``, ``ptx``) exposes a ``Magics`` subclass named
``MAGICS`` and stays thin: parse options, call the library, display.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.magic import Magics

MAGIC_MODULES = ("gpuprofile", "ptx")
HELP_WORDS = ("-h", "--help")


def help_requested(line: str) -> bool:
    """Whether a magic's line asks for help. IPython's ``magic_arguments`` parsers have
    no ``--help`` option, and an empty cell-magic body is refused before the magic
    runs, so each magic checks this itself (in both its line and its cell form)."""
    return any(word in HELP_WORDS for word in line.split())


def magic_help(magic: object) -> str:
    """A magic's help: its docstring, which ``magic_arguments`` fills with the options
    (less the leading ``::`` it puts there for reStructuredText)."""
    return str(getattr(magic, "__doc__", "") or "").strip().removeprefix("::").lstrip("\n")


def shell_of(magics: Magics) -> InteractiveShell:
    """The shell of registered magics (IPython sets it when it registers them)."""
    if magics.shell is None:
        raise RuntimeError("perflab's magics run only once registered with a shell")
    return magics.shell


def load_ipython_extension(ipython: InteractiveShell) -> None:
    for name in MAGIC_MODULES:
        module_name = f"perflab.magics.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        ipython.register_magics(module.MAGICS)


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Nothing to undo beyond IPython's own bookkeeping."""
