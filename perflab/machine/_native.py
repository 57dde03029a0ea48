"""Small C kernels compiled at run time with the system C compiler (``gcc``, ``cc``, or
``$PERFLAB_CC``) and loaded through ctypes: the CPU pointer chase and the CPU bandwidth
loops. The compiler runs in its own process group with a timeout, in a scratch folder
removed right after: the loaded library stays mapped."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Sequence

from perflab.capture import _proc, toolchain
from perflab.errors import ToolchainError

COMPILE_TIMEOUT_S = 60
CC_ENV = "PERFLAB_CC"


def c_compiler(purpose: str) -> str:
    """The C compiler's path: ``$PERFLAB_CC`` (a name on PATH or a path), else gcc or cc.
    ``purpose`` says what needs it, for the error when there is none."""
    chosen = os.environ.get(CC_ENV)
    if chosen:
        found = shutil.which(chosen)
        if found is None:
            raise ToolchainError(f"{CC_ENV}={chosen!r} is not an executable C compiler")
        return found
    found = shutil.which("gcc") or shutil.which("cc")
    if found is None:
        raise ToolchainError(f"no C compiler found: {purpose}; install gcc or set {CC_ENV}")
    return found


def load_c_library(
    source: str, name: str, *, purpose: str, flags: Sequence[str] = ("-O2",)
) -> ctypes.CDLL:
    """Compile ``source`` into a shared library with ``flags`` and load it. ``name``
    names the files and the errors (``"chase"`` -> "gcc failed on the chase kernel")."""
    compiler = c_compiler(purpose)
    with toolchain.private_tempdir() as tmp:
        src, lib = tmp / f"{name}.c", tmp / f"{name}.so"
        src.write_text(source, encoding="utf-8")
        argv = [compiler, *flags, "-shared", "-fPIC", "-o", str(lib), str(src)]
        try:
            done = _proc.run(argv, cwd=tmp, timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ToolchainError(f"{compiler} took over {COMPILE_TIMEOUT_S} s") from None
        except OSError as exc:
            raise ToolchainError(f"cannot run {compiler}: {exc.strerror}") from None
        if done.returncode != 0:
            raise ToolchainError(f"{compiler} failed on the {name} kernel:\n{done.stderr[-2000:]}")
        return ctypes.CDLL(str(lib))
