"""Compile CUDA C++ (nvcc) and Triton (ahead of time) to PTX, cubin and SASS; no GPU needed.

CUDA: ``nvcc -cubin -lineinfo -Xptxas -v --keep`` in a private folder gives the PTX, the
cubin and ptxas' resource report in one run; ``nvdisasm -g -gi -gp -hex`` (on first use
of the SASS) maps every instruction to the user's line and to its PTX line and gives its
scheduling controls, while ``nvdisasm -lrm count`` beside it counts the live registers.
CCCL headers (CUB, Thrust, libcu++) come from the ``nvidia-cuda-cccl`` wheel, which
nvcc's wheel already puts on its include path. The files a compile read, which its cache
entry is checked against, are those named by the line markers of the preprocessed
device and host code ``--keep`` leaves (nvcc's ``-MD`` lists the host pass's alone, and
misses a header only device code includes).

Triton's ahead-of-time job is :mod:`perflab.capture.compile_triton`, the disk cache and
the SASS both share :mod:`perflab.capture.compile_cache`; their public names are
importable from here too.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perflab.analysis.sass import parse_ptxas_resources
from perflab.capture import toolchain

# the cache and SASS, the Triton job, the flag allow-list and the diagnostics have their
# own modules; re-exported here
from perflab.capture.compile_cache import Compiled, kernel_artifacts, res_usage, tool_versions
from perflab.capture.compile_cache import _CacheEntry as _CacheEntry
from perflab.capture.compile_cache import cache_key as cache_key
from perflab.capture.compile_cache import cache_root as cache_root
from perflab.capture.compile_cache import cached_run as cached_run
from perflab.capture.compile_cache import disassemble as disassemble
from perflab.capture.compile_errors import CompileError as CompileError
from perflab.capture.compile_errors import located_diagnostics as located_diagnostics
from perflab.capture.compile_errors import parse_diagnostics as parse_diagnostics
from perflab.capture.compile_errors import source_excerpt as source_excerpt
from perflab.capture.compile_flags import NVCC_FLAGS as NVCC_FLAGS
from perflab.capture.compile_flags import PTXAS_FLAGS as PTXAS_FLAGS
from perflab.capture.compile_flags import allowed_flags_text as allowed_flags_text
from perflab.capture.compile_flags import check_flags as check_flags
from perflab.capture.compile_flags import split_include_flags
from perflab.capture.compile_triton import TritonSpec as TritonSpec
from perflab.capture.compile_triton import compile_triton as compile_triton
from perflab.capture.toolchain import DEFAULT_TIMEOUT_S, Arch, Tool
from perflab.errors import InputError, import_extra
from perflab.model.kernel import CompileResult
from perflab.model.timing import TimingResult

CELL_FILE = "cell.cu"
STDS = ("c++11", "c++14", "c++17", "c++20")
DEFAULT_BLOCK_THREADS = 256

# ---- options ---------------------------------------------------------------------------------


def _check_std(std: str) -> str:
    if std not in STDS:
        raise InputError(f"std must be one of {', '.join(STDS)}, not {std!r}")
    return std


# ---- CUDA ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CudaJob:
    """One nvcc compilation: the arguments :func:`compile_cuda` checked, and (less the
    name and the timeout) the cache key."""

    source: str
    arch: Arch
    flags: tuple[str, ...] = ()  # as given, -I and -isystem included
    std: str = "c++17"
    include_dirs: tuple[tuple[str, str], ...] = ()  # ("-I" or "-isystem", resolved folder)
    source_name: str = CELL_FILE
    timeout: float = DEFAULT_TIMEOUT_S

    def cache_parts(self) -> dict[str, object]:
        return {
            "lang": "cuda",
            "source": self.source,
            "flags": list(self.flags),
            "arch": self.arch.name,
            "std": self.std,
            "include_dirs": [list(d) for d in self.include_dirs],
            "tools": toolchain.versions_key(),
        }

    def nvcc_flags(self, links: Sequence[Path]) -> list[str]:
        """The flags nvcc gets: the include folders as ``links`` (one per folder, in
        order, named by perflab) and the other flags as given."""
        rest, _ = split_include_flags(self.flags)
        dirs = zip(self.include_dirs, links, strict=True)
        return [*[arg for (option, _), link in dirs for arg in (option, str(link))], *rest]


def compile_cuda(
    source: str,
    *,
    arch: str = "sm_90a",
    flags: str | Sequence[str] = (),
    std: str = "c++17",
    timeout: float = DEFAULT_TIMEOUT_S,
    source_name: str = CELL_FILE,
    include_dirs: Sequence[str | os.PathLike[str]] = (),
    cache: bool = True,
) -> CompileResult:
    """Compile CUDA C++ ``source`` for ``arch``; no GPU needed.

    ``flags`` are extra nvcc flags (``"-maxrregcount=32 -DN=4"`` or a list; outputs and
    modes are perflab's). ``source_name`` is how diagnostics name the source.
    ``include_dirs`` and the ``-I``/``-isystem`` folders of ``flags`` (relative ones from
    the current folder) must exist; nvcc sees each under a name of perflab's only, so a
    folder's name never reaches nvcc's shell lines. Raises :class:`CompileError` with
    the compiler's diagnostics on bad code, ToolchainError when a tool is missing or
    times out.
    """
    if not isinstance(source, str) or not source.strip():
        raise InputError("the CUDA source is empty")
    checked = tuple(check_flags(flags))
    _check_std(std)
    timeout = toolchain.check_timeout(timeout)
    nvcc = toolchain.require_nvcc()
    job = CudaJob(
        source,
        toolchain.check_arch(arch, nvcc),
        checked,
        std,
        _include_folders(include_dirs, checked),
        source_name,
        timeout,
    )
    result = cached_run(job, lambda: _run_nvcc(nvcc, job), cache=cache)
    result.source_name = source_name
    return result


def _include_folders(
    include_dirs: Sequence[str | os.PathLike[str]], flags: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    """``include_dirs`` (as ``-I``), then the include folders of ``flags``, resolved
    from the current folder; a missing one is refused, naming it."""
    given = [("-I", os.fspath(d), "include_dirs") for d in include_dirs]
    given += [(option, d, f"--flags: {option} {d}") for option, d in split_include_flags(flags)[1]]
    found = []
    for option, folder, what in given:
        resolved = Path(folder).resolve()
        if not resolved.is_dir():
            raise InputError(f"{what}: no such folder ({resolved})")
        found.append((option, str(resolved)))
    return tuple(found)


def _link_include_folders(job: CudaJob, tmp: Path) -> tuple[list[Path], dict[str, str]]:
    """A link in ``tmp`` to each include folder of ``job`` (``include-0``...), and what
    diagnostics should call a file found through each (``link/`` -> ``folder/``)."""
    links, shown = [], {}
    for number, (_, folder) in enumerate(job.include_dirs):
        link = tmp / f"include-{number}"
        link.symlink_to(folder, target_is_directory=True)
        links.append(link)
        shown[f"{link}/"] = f"{folder.rstrip('/')}/"
    return links, shown


def _nvcc_args(job: CudaJob, scratch: Path, links: Sequence[Path]) -> list[str]:
    return [
        "-cubin",
        "-lineinfo",
        f"-arch={job.arch.name}",
        f"-std={job.std}",
        "-Xptxas",
        "-v",
        "--keep",
        "--keep-dir",
        str(scratch),
        *job.nvcc_flags(links),
        CELL_FILE,
        "-o",
        "cell.cubin",
    ]


def _run_nvcc(nvcc: Tool, job: CudaJob) -> Compiled:
    started, started_ns = time.perf_counter(), time.time_ns()
    with toolchain.private_tempdir() as tmp:
        cell = tmp / CELL_FILE
        cell.write_text(job.source, encoding="utf-8")
        links, paths = _link_include_folders(job, tmp)
        args = _nvcc_args(job, tmp, links)
        done = toolchain.run_tool(nvcc, args, cwd=tmp, timeout=job.timeout)
        log = done.stderr + done.stdout
        paths |= {str(cell): job.source_name, CELL_FILE: job.source_name}
        if done.returncode != 0:
            located = located_diagnostics(log, paths)
            raise CompileError(
                "nvcc",
                [d for d, _ in located],
                log,
                source=(job.source_name, job.source),
                columns=[c for _, c in located],
            )
        ptx = (tmp / "cell.ptx").read_text(encoding="utf-8", errors="replace")
        cubin = (tmp / "cell.cubin").read_bytes()
        constants = _constant_bank_sizes(tmp, job.timeout)
        read = files_read(tmp, job)
    resources = parse_ptxas_resources(log)
    for name, size in constants.items():
        if name in resources and not resources[name].constant:
            resources[name].constant = size
    result = CompileResult(
        lang="cuda",
        arch=job.arch.name,
        source=job.source,
        source_name=job.source_name,
        kernels=kernel_artifacts(ptx, str(cell), job.arch.name, resources),
        ptx=ptx,
        cubin=cubin,
        source_path=str(cell),
        flags=list(job.flags),
        log=log,
        warnings=[d for d in parse_diagnostics(log, paths) if d.severity == "warning"],
        versions=tool_versions(),
        compile_s=time.perf_counter() - started,
    )
    return Compiled(result, read, started_ns)


# a line marker of preprocessed code: # LINE "FILE" FLAGS (FILE with C escapes)
_LINE_MARKER_RE = re.compile(rb'^# \d+ "((?:[^"\\\n]|\\.)*)"', re.MULTILINE)
_C_ESCAPE_RE = re.compile(rb"\\(?:([0-7]{1,3})|(.))", re.DOTALL)


def files_read(tmp: Path, job: CudaJob) -> tuple[str, ...]:
    """Every file the compile in ``tmp`` read besides the cell: the files the kept
    preprocessed code (``*.ii``, device and host passes) names, a file found through an
    include link named by its own folder. A compile that kept no preprocessed code
    reports ``tmp`` itself, which no lookup finds unchanged."""
    kept = sorted(tmp.glob("*.ii"))
    if not kept:
        return (str(tmp),)
    links = {f"{tmp}/include-{n}/": folder for n, (_, folder) in enumerate(job.include_dirs)}
    named = {_unescape(m) for ii in kept for m in _LINE_MARKER_RE.findall(ii.read_bytes())}
    found = (_user_path(name, tmp, links) for name in named if not name.startswith("<"))
    return tuple(sorted({path for path in found if path is not None}))


def _unescape(name: bytes) -> str:
    """A line marker's file name, its C escapes (backslash, quote, octal byte) undone."""
    return os.fsdecode(_C_ESCAPE_RE.sub(_escaped_byte, name))


def _escaped_byte(match: re.Match[bytes]) -> bytes:
    octal, char = match.groups()
    return bytes([int(octal, 8) & 0xFF]) if octal is not None else char


def _user_path(name: str, tmp: Path, links: Mapping[str, str]) -> str | None:
    """The path of a file the compiler named (relative ones from ``tmp``): through an
    include link, in the user's folder; the cell and other scratch files, None."""
    path = os.path.join(tmp, name)
    for link, folder in links.items():
        if path.startswith(link):
            return os.path.join(folder, path[len(link) :])
    if not path.startswith(f"{tmp}/"):
        return path
    outside = os.path.normpath(path)  # '../x.h' from the cell (tmp holds no other links)
    return None if outside.startswith(f"{tmp}/") else outside


def _constant_bank_sizes(tmp: Path, timeout: float) -> dict[str, int]:
    """Bank-0 constant bytes per kernel (ptxas 13 no longer prints them)."""
    return {name: u.get("CONSTANT[0]", 0) for name, u in res_usage(tmp, timeout).items()}


# ---- running on a GPU ------------------------------------------------------------------------


def launch(
    result: CompileResult, spec: Mapping[str, Any], *, kernel: str | None = None
) -> TimingResult:
    """Launch a compiled kernel on the GPU and time it with the timing engine.

    CUDA: ``spec = {"grid": (blocks,), "block": (threads,), "args": (...), "shared": 0}``,
    loaded from the cubin with CuPy. Triton: ``{"fn": jit_fn, "grid": (...), "args": (...),
    "kwargs": {...}}``, launched through Triton (which compiles for the GPU present).
    """
    from perflab.capture import env
    from perflab.capture.timer import time_function

    env.require_gpu("--run", "the kernel was compiled, not run")
    chosen = result.kernel(kernel)
    try:
        grid = tuple(spec["grid"])
        args = tuple(spec.get("args", ()))
    except (KeyError, TypeError):
        raise InputError("the launch spec needs 'grid' (a tuple) and 'args'") from None
    if result.lang == "triton":
        fn, kwargs = spec.get("fn"), dict(spec.get("kwargs", {}))
        if fn is None:
            raise InputError("a Triton launch spec needs 'fn': the @triton.jit function")
        return time_function(lambda: fn[grid](*args, **kwargs), backend="cuda", name=chosen.name)
    cupy = import_extra("cupy", "--run of a CUDA C++ kernel")
    module = cupy.cuda.function.Module()
    module.load(result.cubin)
    function = module.get_function(chosen.mangled)
    block = tuple(spec.get("block", (DEFAULT_BLOCK_THREADS,)))
    shared = int(spec.get("shared", 0))
    return time_function(
        lambda: function(grid, block, args, shared_mem=shared), backend="cuda", name=chosen.name
    )
