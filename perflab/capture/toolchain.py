"""Find and run the CUDA tools: ``PERFLAB_<TOOL>`` overrides, the pip wheels, Triton's
copies, PATH. Every run gets an argument list (never a shell), a timeout of at most
:data:`MAX_TIMEOUT_S`, its own process group (killed whole on timeout, interrupt, SIGTERM
or SIGHUP, see :mod:`perflab.capture._proc`) and, through :func:`private_tempdir`, a
scratch folder that is always removed, under a path no shell line can misread."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from perflab.capture import _proc
from perflab.errors import InputError, ToolchainError, missing_extra

# target names and suffix rules live in the one architecture table (re-exported here)
from perflab.model.arch import Arch as Arch
from perflab.model.arch import parse_arch as parse_arch

TOOLS = ("nvcc", "ptxas", "nvdisasm", "cuobjdump")
VERSION_TIMEOUT_S = 20
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 3600.0  # an hour: no single compile here takes near that
DEMANGLE_TIMEOUT_S = 20
# Where each tool comes from on PyPI (for the "not found" hint).
_WHEELS = {
    "nvcc": "nvidia-cuda-nvcc",
    "ptxas": "nvidia-cuda-nvcc",
    "nvdisasm": "nvidia-cuda-nvdisasm",
    "cuobjdump": "nvidia-cuda-cuobjdump",
}
# what each tool is for (the "not found" message says it)
_PURPOSE = {
    "nvcc": "compiling CUDA C++",
    "ptxas": "assembling PTX",
    "nvdisasm": "showing SASS",
    "cuobjdump": "reading kernel resources",
}


@dataclass(frozen=True)
class Tool:
    name: str
    path: Path
    origin: str  # "env", "wheel", "triton" or "path"

    @property
    def version(self) -> str | None:
        try:
            stamp = self.path.stat().st_mtime_ns
        except OSError:
            return None
        return _cached_version(self.path, stamp)


@functools.lru_cache(maxsize=32)
def _cached_version(path: Path, mtime_ns: int) -> str | None:
    """One ``--version`` run per tool binary (keyed by its mtime, so upgrades show)."""
    return tool_version(path)


def _wheel_bin_dirs() -> list[Path]:
    """``site-packages/nvidia/cu*/bin`` and ``nvidia/cuda_*/bin`` in every sys.path entry."""
    dirs: list[Path] = []
    for entry in sys.path:
        root = Path(entry) / "nvidia"
        if not root.is_dir():
            continue
        for sub in sorted(root.iterdir()):
            if (sub / "bin").is_dir():
                dirs.append(sub / "bin")
    return dirs


def _triton_bin_dirs() -> list[Path]:
    for entry in sys.path:
        d = Path(entry) / "triton" / "backends" / "nvidia" / "bin"
        if d.is_dir():
            return [d]
    return []


def find_tool(name: str) -> Tool | None:
    """Locate one tool; the first hit in override, wheel, Triton, PATH order wins."""
    override = os.environ.get(f"PERFLAB_{name.upper()}")
    if override:
        p = Path(override)
        return Tool(name, p, "env") if p.is_file() else None
    for origin, dirs in (("wheel", _wheel_bin_dirs()), ("triton", _triton_bin_dirs())):
        for d in dirs:
            candidate = d / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return Tool(name, candidate, origin)
    found = shutil.which(name)
    return Tool(name, Path(found), "path") if found else None


def tool_output(argv: list[str], timeout: float = VERSION_TIMEOUT_S) -> str | None:
    """Standard output of a short query command, or None when it cannot run or hangs."""
    try:
        return _proc.run(argv, timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None


def tool_version(path: Path) -> str | None:
    out = tool_output([str(path), "--version"])
    if out is None:
        return None
    full = re.search(r"release \d+\.\d+, V([\d.]+)", out)
    if full:
        return full.group(1)
    short = re.search(r"release (\d+\.\d+)", out)
    return short.group(1) if short else None


class FoundTool(TypedDict):
    path: str
    origin: str
    version: str | None


def describe() -> dict[str, FoundTool | None]:
    """``{tool: {"path", "origin", "version"}}``, or ``None`` for a tool not found."""
    result: dict[str, FoundTool | None] = {}
    for name in TOOLS:
        tool = find_tool(name)
        result[name] = (
            None
            if tool is None
            else {"path": str(tool.path), "origin": tool.origin, "version": tool.version}
        )
    return result


def require_tool(name: str) -> Tool:
    """:func:`find_tool`, or a :class:`ToolchainError` saying how to get the tool."""
    tool = find_tool(name)
    if tool is None:
        override = os.environ.get(f"PERFLAB_{name.upper()}")
        if override:
            raise ToolchainError(f"PERFLAB_{name.upper()}={override} is not a file")
        wheel = _WHEELS.get(name, name)
        alternative = f"or pip install {wheel}, or set PERFLAB_{name.upper()} to its path"
        raise missing_extra(_PURPOSE.get(name, "this step"), name, alternative)
    return tool


def check_timeout(timeout: object) -> float:
    """``timeout`` in seconds: a number above 0 and at most :data:`MAX_TIMEOUT_S` (an
    infinite, NaN or huge one would reach the waiting code as an OverflowError)."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT_S
    ):
        raise InputError(
            f"timeout must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}, "
            f"not {timeout!r}"
        )
    return float(timeout)


# characters that stay active inside double quotes in a shell line
_SHELL_ACTIVE_RE = re.compile(r'[`$"\\\x00-\x1f\x7f]')


def require_nvcc() -> Tool:
    """:func:`require_tool` for nvcc, refused where nvcc's path has a character that
    would still act inside the double quotes of nvcc's own ``sh -c`` lines, which name
    the folder nvcc is in."""
    nvcc = require_tool("nvcc")
    if _SHELL_ACTIVE_RE.search(str(nvcc.path)):
        raise ToolchainError(
            f"nvcc's path {str(nvcc.path)!r} has a character nvcc passes to a shell "
            'unquoted (one of ` $ \\ " or a control character): install it, or set '
            "PERFLAB_NVCC to it, under a folder without those"
        )
    return nvcc


def run_tool(
    tool: Tool,
    args: Sequence[str],
    *,
    cwd: Path,
    timeout: float = DEFAULT_TIMEOUT_S,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``tool args`` in ``cwd``; a timeout or an unstartable tool is a ToolchainError.

    ``cwd`` is a scratch folder (:func:`private_tempdir`) and also the tool's TMPDIR, so
    the temporary files nvcc and its children make (``cell-*.lgenfe.bc``...) are removed
    with it even when the tool fails. A non-zero exit is returned, not raised: callers
    turn the diagnostics into errors.
    """
    timeout = check_timeout(timeout)
    scratch = str(cwd)
    env = {**os.environ, "TMPDIR": scratch, "TMP": scratch, "TEMP": scratch}
    try:
        return _proc.run([str(tool.path), *args], cwd=cwd, timeout=timeout, stdin=stdin, env=env)
    except subprocess.TimeoutExpired:
        raise ToolchainError(
            f"{tool.name} timed out after {timeout:g} s (pass a larger timeout, e.g. --timeout 120)"
        ) from None
    except OSError as exc:
        raise ToolchainError(f"cannot run {tool.path}: {exc.strerror}") from None


# characters of a path that nvcc may see: nvcc writes its paths into its own ``sh -c``
# lines in double quotes, where a backtick, a quote or a backslash would still act
_SAFE_PATH_RE = re.compile(r"/[A-Za-z0-9_./+@%,:=~-]*")
_FALLBACK_TEMP = "/tmp"  # noqa: S108  (mkdtemp makes a private folder there)


def safe_path(path: str | Path) -> bool:
    """``path`` is absolute and made of characters that no shell line can misread."""
    return _SAFE_PATH_RE.fullmatch(str(path)) is not None


def _scratch_parent() -> str:
    """Python's temp folder, or /tmp where that one's name has characters nvcc would
    hand a shell unescaped (a TMPDIR with a backtick, say)."""
    base = tempfile.gettempdir()
    if safe_path(base):
        return base
    if os.path.isdir(_FALLBACK_TEMP) and os.access(_FALLBACK_TEMP, os.W_OK | os.X_OK):
        return _FALLBACK_TEMP
    raise ToolchainError(
        f"the temporary folder {base!r} has characters the CUDA tools cannot take in a "
        "path: set TMPDIR to a folder whose name has only letters, digits and ._+-/"
    )


@contextlib.contextmanager
def private_tempdir() -> Iterator[Path]:
    """A fresh folder only this process uses, under a name that is safe to hand to the
    tools; removed on exit, error, interrupt, SIGTERM or SIGHUP (see :mod:`_proc`)."""
    fresh = Path(tempfile.mkdtemp(prefix="perflab-", dir=_scratch_parent()))
    with _proc.scratch_folder(fresh) as path:
        yield path


# ---- target architectures -------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _nvcc_codes(nvcc: Path) -> tuple[int, ...]:
    """The ``sm_XY`` targets this nvcc accepts (``nvcc --list-gpu-code``)."""
    out = tool_output([str(nvcc), "--list-gpu-code"])
    if out is None:
        return ()
    return tuple(sorted({int(m) for m in re.findall(r"sm_(\d+)", out)}))


def check_arch(text: str, nvcc: Tool | None = None) -> Arch:
    """Parse ``text`` and make sure the compiler can target it (clear error if not)."""
    arch = parse_arch(text)
    wrong_suffix = arch.suffix_error()
    if wrong_suffix:
        raise InputError(wrong_suffix)
    codes = _nvcc_codes(nvcc.path) if nvcc is not None else ()
    if codes and arch.cc not in codes:
        version = nvcc.version if nvcc is not None else None
        raise InputError(
            f"{arch} is not supported by nvcc {version or ''}".rstrip()
            + f" (it targets {', '.join(f'sm_{c}' for c in codes)})"
        )
    return arch


# ---- names -----------------------------------------------------------------------------


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled C++ names -> readable ones, with ``cu++filt`` or ``c++filt``; names that
    are not mangled (``extern "C"``, Triton) or a missing tool leave names as they are."""
    wanted = sorted({n for n in names if n.startswith("_Z")})
    found = {n: n for n in names}
    tool = find_tool("cu++filt") or find_tool("c++filt")
    if not wanted or tool is None:
        return found
    try:
        out = _proc.run(
            [str(tool.path)], stdin="\n".join(wanted) + "\n", timeout=DEMANGLE_TIMEOUT_S
        ).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return found
    if len(out) == len(wanted):
        found.update(zip(wanted, out, strict=True))
    return found


def versions_key(names: Iterable[str] = TOOLS) -> dict[str, str]:
    """``{tool: "version @ path"}``: what a compile cache entry depends on."""
    key: dict[str, str] = {}
    for name in names:
        tool = find_tool(name)
        key[name] = "missing" if tool is None else f"{tool.version} @ {tool.path}"
    return key
