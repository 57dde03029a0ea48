"""Compile CUDA C++ (nvcc) and Triton (ahead of time) to PTX, cubin and SASS; no GPU needed.

CUDA: ``nvcc -cubin -lineinfo -Xptxas -v --keep`` in a private folder gives the PTX, the
cubin and ptxas' resource report in one run; ``nvdisasm -g -gi -gp -hex`` (on first use
of the SASS) maps every instruction to the user's line and to its PTX line and gives its
scheduling controls, while ``nvdisasm -lrm count`` beside it counts the live registers.
CCCL headers (CUB, Thrust, libcu++) come from the ``nvidia-cuda-cccl`` wheel, which
nvcc's wheel already puts on its include path.

Triton: ``triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget(...))``
keeps ttir, ttgir, llir, PTX and cubin. Triton 3.6 and 3.9 take the same ASTSource
arguments (checked against both): ``signature`` maps every parameter name to a type
string, with ``"constexpr"`` for compile-time constants, and ``constexprs`` maps those
names to values. :func:`_triton_ast_source` is the one place to branch should a later
release change this.

Results are cached on disk (``$PERFLAB_CACHE_DIR`` or ``~/.cache/perflab``, under
``compile/``) by source, options, target and tool versions, as JSON plus the two
nvdisasm texts (code with encodings, and live registers).
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import json
import linecache
import os
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from perflab.analysis.ptx import parse_files, parse_ptx
from perflab.analysis.sass import parse_disassembly, parse_ptxas_resources, parse_res_usage
from perflab.capture import _proc, toolchain

# the flag allow-list and the diagnostics have their own modules; re-exported here
from perflab.capture.compile_errors import CompileError as CompileError
from perflab.capture.compile_errors import located_diagnostics as located_diagnostics
from perflab.capture.compile_errors import parse_diagnostics as parse_diagnostics
from perflab.capture.compile_errors import source_excerpt as source_excerpt
from perflab.capture.compile_errors import triton_compile_error as triton_compile_error
from perflab.capture.compile_flags import NVCC_FLAGS as NVCC_FLAGS
from perflab.capture.compile_flags import PTXAS_FLAGS as PTXAS_FLAGS
from perflab.capture.compile_flags import allowed_flags_text as allowed_flags_text
from perflab.capture.compile_flags import check_flags as check_flags
from perflab.capture.compile_flags import split_include_flags
from perflab.capture.toolchain import DEFAULT_TIMEOUT_S, Arch, Tool
from perflab.errors import InputError, PerflabError, SchemaError, ToolchainError, import_extra
from perflab.model.kernel import CompileResult, KernelArtifacts, Resources, SassLine
from perflab.model.serialize import cache_dir, dump_json, load_json, write_text
from perflab.model.timing import TimingResult

CACHE_VERSION = 1
SASS_SUFFIX = "hex.sass"  # nvdisasm -g -gi -gp -c -hex, beside a cache entry
LIVE_SUFFIX = "live.txt"  # nvdisasm -c -lrm count
CELL_FILE = "cell.cu"
STDS = ("c++11", "c++14", "c++17", "c++20")
MIN_TRITON = (3, 6)
DEFAULT_BLOCK_THREADS = 256

# ---- options --------------------------------------------------------------------------------


def _check_std(std: str) -> str:
    if std not in STDS:
        raise InputError(f"std must be one of {', '.join(STDS)}, not {std!r}")
    return std


# ---- cache ----------------------------------------------------------------------------------


def cache_root() -> Path:
    return cache_dir() / "compile"


def cache_key(parts: Mapping[str, Any]) -> str:
    doc = json.dumps({"cache_version": CACHE_VERSION, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


class CompileJob(Protocol):
    """What :func:`cached_run` needs of a job: its cache key and its timeout."""

    @property
    def timeout(self) -> float: ...

    def cache_parts(self) -> dict[str, Any]: ...


@dataclass
class _CacheEntry:
    key: str
    root: Path = field(default_factory=cache_root)

    @property
    def json_path(self) -> Path:
        return self.root / self.key[:2] / f"{self.key}.json"

    @property
    def sass_path(self) -> Path:
        # the disassembly with encodings (-hex); an entry written before perflab read them
        # has only '<key>.sass', which is left alone: its SASS is disassembled again
        return self.root / self.key[:2] / f"{self.key}.{SASS_SUFFIX}"

    @property
    def live_path(self) -> Path:
        return self.root / self.key[:2] / f"{self.key}.{LIVE_SUFFIX}"

    def load(self) -> CompileResult | None:
        if not self.json_path.is_file():
            return None
        try:
            result = CompileResult.from_dict(load_json("compile", self.json_path))
        except SchemaError:
            return None  # an unreadable entry is recompiled, and overwritten
        result.cached = True
        return result

    def store(self, result: CompileResult) -> None:
        try:
            self.json_path.parent.mkdir(parents=True, exist_ok=True)
            dump_json("compile", result.to_dict(sass=False), self.json_path)
        except OSError:
            pass  # a read-only or full cache disk only costs a recompile

    def read_sass(self) -> str | None:
        return _read_cached(self.sass_path)

    def write_sass(self, text: str) -> None:
        _write_cached(self.sass_path, text)

    def read_live(self) -> str | None:
        return _read_cached(self.live_path)

    def write_live(self, text: str) -> None:
        _write_cached(self.live_path, text)


def _read_cached(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _write_cached(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)  # never through a link planted in the cache
    except OSError:
        pass


def cached_run(
    job: CompileJob, run: Callable[[], CompileResult], *, cache: bool = True
) -> CompileResult:
    """``run()``'s result for ``job``, from the disk cache when an entry has the job's
    key (else run and stored), with SASS attached to disassemble on first use."""
    entry = _CacheEntry(cache_key(job.cache_parts())) if cache else None
    result = entry.load() if entry is not None else None
    if result is None:
        result = run()
        if entry is not None:
            entry.store(result)
    attach_sass(result, entry, job.timeout)
    return result


# ---- SASS (lazy) --------------------------------------------------------------------------


def disassemble(cubin: bytes, *, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """``nvdisasm -g -gi -gp -c -hex`` of a cubin: code with source and PTX line comments
    and each instruction's encoding (whose high word holds its scheduling controls)."""
    return _nvdisasm(cubin, ["-g", "-gi", "-gp", "-c", "-hex"], timeout=timeout)


def live_ranges(cubin: bytes, *, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """``nvdisasm -c -lrm count`` of a cubin: registers live at each instruction. A run of
    its own: with ``--print-life-ranges`` nvdisasm ignores the line-info options."""
    return _nvdisasm(cubin, ["-c", "-lrm", "count"], timeout=timeout)


def _nvdisasm(cubin: bytes, options: list[str], *, timeout: float) -> str:
    nvdisasm = toolchain.require_tool("nvdisasm")
    with toolchain.private_tempdir() as tmp:
        (tmp / "k.cubin").write_bytes(cubin)
        done = toolchain.run_tool(nvdisasm, [*options, "k.cubin"], cwd=tmp, timeout=timeout)
    if done.returncode != 0:
        raise ToolchainError(f"nvdisasm failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def _disassembly(cubin: bytes, entry: _CacheEntry | None, timeout: float) -> tuple[str, str | None]:
    """The code and the live-register texts, from the cache or from nvdisasm; the two runs
    go side by side (a cold ``%%ptx`` waits for one nvdisasm, not two in a row). Live
    registers are None when that run fails: the SASS does not need them."""
    code = entry.read_sass() if entry is not None else None
    live = entry.read_live() if entry is not None else None
    if code is not None and live is not None:
        return code, live
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(live_ranges, cubin, timeout=timeout) if live is None else None
        try:
            if code is None:
                code = disassemble(cubin, timeout=timeout)
            if pending is not None:
                live = _live_or_none(pending)
        except KeyboardInterrupt:
            _proc.kill_all_groups()  # the other nvdisasm too: it runs in the worker thread
            raise
    if entry is not None:
        entry.write_sass(code)
        if live is not None:
            entry.write_live(live)
    return code, live


def _live_or_none(pending: concurrent.futures.Future[str]) -> str | None:
    try:
        return pending.result()
    except ToolchainError:
        return None


def attach_sass(result: CompileResult, entry: _CacheEntry | None, timeout: float) -> None:
    """Give every kernel a loader that disassembles the cubin once, on first use (the
    texts are kept next to the cache entry, when there is one)."""

    @functools.cache
    def functions() -> dict[str, list[SassLine]]:
        code, live = _disassembly(result.cubin, entry, timeout)
        return parse_disassembly(code, live, user_files={result.source_path})

    for kernel in result.kernels:
        kernel.defer_sass(_loader(functions, kernel.mangled))


def _loader(
    functions: Callable[[], dict[str, list[SassLine]]], name: str
) -> Callable[[], list[SassLine]]:
    return lambda: functions().get(name, [])


# ---- CUDA -----------------------------------------------------------------------------------


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

    def cache_parts(self) -> dict[str, Any]:
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


def _run_nvcc(nvcc: Tool, job: CudaJob) -> CompileResult:
    started = time.perf_counter()
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
    resources = parse_ptxas_resources(log)
    for name, size in constants.items():
        if name in resources and not resources[name].constant:
            resources[name].constant = size
    return CompileResult(
        lang="cuda",
        arch=job.arch.name,
        source=job.source,
        source_name=job.source_name,
        kernels=_kernels(ptx, str(cell), job.arch.name, resources),
        ptx=ptx,
        cubin=cubin,
        source_path=str(cell),
        flags=list(job.flags),
        log=log,
        warnings=[d for d in parse_diagnostics(log, paths) if d.severity == "warning"],
        versions=_versions(),
        compile_s=time.perf_counter() - started,
    )


def _res_usage(tmp: Path, timeout: float) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage`` of ``tmp/cell.cubin``; empty when cuobjdump is missing."""
    cuobjdump = toolchain.find_tool("cuobjdump")
    if cuobjdump is None:
        return {}
    done = toolchain.run_tool(cuobjdump, ["-res-usage", "cell.cubin"], cwd=tmp, timeout=timeout)
    return parse_res_usage(done.stdout) if done.returncode == 0 else {}


def _constant_bank_sizes(tmp: Path, timeout: float) -> dict[str, int]:
    """Bank-0 constant bytes per kernel (ptxas 13 no longer prints them)."""
    return {name: u.get("CONSTANT[0]", 0) for name, u in _res_usage(tmp, timeout).items()}


def _kernels(
    ptx: str, user_file: str, arch: str, resources: Mapping[str, Resources]
) -> list[KernelArtifacts]:
    module = parse_ptx(ptx, user_files={user_file})
    names = toolchain.demangle(module.entries)
    kernels = []
    for mangled, span in module.entries.items():
        kernels.append(
            KernelArtifacts(
                name=names.get(mangled, mangled),
                mangled=mangled,
                arch=arch,
                module_ptx=ptx,
                ptx_span=span,
                ptx_lines_source=[pl.source_line for pl in module.entry_lines(mangled)],
                resources=resources.get(mangled, Resources()),
            )
        )
    return kernels


def _versions() -> dict[str, str]:
    from perflab.capture.env import versions

    found = versions()
    for name in toolchain.TOOLS:
        tool = toolchain.find_tool(name)
        if tool is not None and tool.version:
            found[name] = tool.version
    return found


# ---- Triton ---------------------------------------------------------------------------------


@dataclass
class TritonSpec:
    """What ``%%ptx`` needs to compile a ``@triton.jit`` function ahead of time.

    ``signature`` gives each non-constexpr parameter's type: a dict (``{"x_ptr": "*fp32",
    "n": "i32"}``) or the types in parameter order (``["*fp32", "i32"]``); ``constexprs``
    gives the ``tl.constexpr`` parameters' values. Create one in a ``%%ptx --lang triton``
    cell (``spec = TritonSpec(add, signature=[...], constexprs={"BLOCK": 1024})``) and
    the magic compiles it.
    """

    fn: Any
    signature: Mapping[str, str] | Sequence[str]
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    aligned: Sequence[str] | None = None  # None: every pointer (as the JIT sees torch tensors)

    def compile(
        self,
        arch: str = "sm_90a",
        timeout: float = DEFAULT_TIMEOUT_S,
        *,
        source_name: str | None = None,
    ) -> CompileResult:
        return compile_triton(
            self.fn,
            signature=self.signature,
            constexprs=self.constexprs,
            arch=arch,
            num_warps=self.num_warps,
            num_stages=self.num_stages,
            aligned=self.aligned,
            timeout=timeout,
            source_name=source_name,
        )


def _triton() -> Any:
    triton = import_extra("triton", "compiling Triton kernels")
    version = tuple(int(p) for p in re.findall(r"\d+", triton.__version__)[:2])
    if version < MIN_TRITON:
        raise ToolchainError(f"Triton {triton.__version__} is too old: perflab needs >= 3.6")
    return triton


def triton_signature(
    fn: Any, signature: Mapping[str, str] | Sequence[str], constexprs: Mapping[str, Any]
) -> dict[str, str]:
    """Every parameter name -> type string, ``"constexpr"`` for constants."""
    params = list(getattr(fn, "arg_names", []))
    if not params:
        raise InputError(f"{fn!r} is not a @triton.jit function")
    unknown = sorted(set(constexprs) - set(params))
    if unknown:
        raise InputError(f"constexprs {unknown} are not parameters of {fn.__name__}{params}")
    runtime = [p for p in params if p not in constexprs]
    if isinstance(signature, Mapping):
        types = {str(k): str(v) for k, v in signature.items() if v != "constexpr"}
    else:
        if isinstance(signature, str):
            signature = [t.strip() for t in signature.split(",") if t.strip()]
        if len(signature) != len(runtime):
            raise InputError(
                f"signature has {len(signature)} types but {fn.__name__} has "
                f"{len(runtime)} non-constexpr parameters: {', '.join(runtime)}"
            )
        types = dict(zip(runtime, (str(t) for t in signature), strict=True))
    missing = [p for p in runtime if p not in types]
    extra = sorted(set(types) - set(runtime))
    if missing or extra:
        raise InputError(f"signature for {fn.__name__}: missing {missing}, unknown {extra}")
    return {p: ("constexpr" if p in constexprs else types[p]) for p in params}


def _triton_ast_source(
    triton: Any,
    fn: Any,
    signature: dict[str, str],
    constexprs: Mapping[str, Any],
    aligned: Sequence[str],
) -> Any:
    """The one place that knows ASTSource's arguments (identical in Triton 3.6 and 3.9):
    ``attrs`` maps a parameter's index path to ``[["tt.divisibility", 16]]`` for the
    16-byte-aligned ones, as the JIT does for the tensors it is called with."""
    params = list(signature)
    attrs = {(params.index(name),): [["tt.divisibility", 16]] for name in aligned}
    return triton.compiler.ASTSource(
        fn, signature=signature, constexprs=dict(constexprs), attrs=attrs
    )


def _aligned_params(sig: Mapping[str, str], aligned: Sequence[str] | None) -> list[str]:
    if aligned is None:
        return [name for name, ty in sig.items() if ty.startswith("*")]
    unknown = [name for name in aligned if sig.get(name, "constexpr") == "constexpr"]
    if unknown:
        raise InputError(f"aligned: {unknown} are not runtime parameters")
    return list(aligned)


@dataclass(frozen=True)
class TritonJob:
    """One ahead-of-time Triton compilation, checked: ``signature`` names every
    parameter's type (``"constexpr"`` for constants). Less the name and the timeout,
    also the cache key."""

    fn: Any  # the @triton.jit function
    signature: Mapping[str, str]
    constexprs: Mapping[str, Any]
    arch: Arch
    num_warps: int = 4
    num_stages: int = 3
    aligned: tuple[str, ...] = ()  # parameters treated as 16-byte aligned (or divisible)
    source_name: str = ""
    timeout: float = DEFAULT_TIMEOUT_S

    def cache_parts(self) -> dict[str, Any]:
        return {
            "lang": "triton",
            "fn": self.fn.cache_key,
            "name": self.fn.__name__,
            "signature": dict(self.signature),
            "constexprs": {k: repr(v) for k, v in self.constexprs.items()},
            "arch": self.arch.name,
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
            "aligned": list(self.aligned),
            "triton": _triton().__version__,
            "fp_fusion": _fusion_env(),
            "file": self.fn.fn.__code__.co_filename,
            "tools": toolchain.versions_key(("nvdisasm",)),
        }


def _require_compilable(fn: Any) -> None:
    """``fn`` is a kernel Triton compiles: with TRITON_INTERPRET=1 set when the kernel was
    defined, ``@triton.jit`` gives Triton's interpreter instead, which has no compiler."""
    if hasattr(fn, "cache_key") and hasattr(fn, "fn"):
        return
    kind = type(fn).__name__
    if kind == "InterpretedFunction" or os.environ.get("TRITON_INTERPRET") not in (None, "", "0"):
        raise InputError(
            f"{getattr(fn, '__name__', kind)} is run by Triton's interpreter (TRITON_INTERPRET "
            "is set), which cannot compile ahead of time: compile in a process without "
            "TRITON_INTERPRET, or run the interpreter in a subprocess"
        )
    raise InputError(f"compile_triton needs a @triton.jit function, not {kind}")


def compile_triton(
    fn: Any,
    *,
    signature: Mapping[str, str] | Sequence[str],
    constexprs: Mapping[str, Any] | None = None,
    arch: str = "sm_90a",
    num_warps: int = 4,
    num_stages: int = 3,
    aligned: Sequence[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    cache: bool = True,
    source_name: str | None = None,
) -> CompileResult:
    """Compile a ``@triton.jit`` function ahead of time for ``arch``; no GPU needed.

    ``aligned`` names the parameters to treat as 16-byte aligned (pointers) or divisible
    by 16 (integers); by default every pointer, which is what the JIT assumes for the
    tensors it is usually called with (and what enables 128-bit loads).

    Keeps ttir, ttgir, llir (in ``stages``), PTX, cubin and SASS. ``signature`` and
    ``constexprs`` as in :class:`TritonSpec`. ``source_name`` is how errors name the
    file that defines ``fn`` (``%%ptx`` passes "cell"; default: the file's name); their
    line numbers are that file's. Triton's FP-fusion default is kept (its warning about
    it is not shown) and the setting used is one of the result's ``flags``.
    """
    timeout = toolchain.check_timeout(timeout)
    triton = _triton()
    _require_compilable(fn)
    constexprs = dict(constexprs or {})
    target = toolchain.parse_arch(arch)
    for label, value in (("num_warps", num_warps), ("num_stages", num_stages)):
        if not isinstance(value, int) or value < 1:
            raise InputError(f"{label} must be a positive integer, not {value!r}")
    sig = triton_signature(fn, signature, constexprs)
    job = TritonJob(
        fn,
        sig,
        constexprs,
        target,
        num_warps,
        num_stages,
        tuple(_aligned_params(sig, aligned)),
        source_name or Path(fn.fn.__code__.co_filename).name,
        timeout,
    )
    return cached_run(job, lambda: _run_triton(triton, job), cache=cache)


def _triton_compiled(triton: Any, job: TritonJob) -> Any:
    """``triton.compile`` of the job; the kernel's errors as a CompileError at its lines."""
    from triton.backends.compiler import GPUTarget

    source = _triton_ast_source(triton, job.fn, dict(job.signature), job.constexprs, job.aligned)
    try:
        with warnings.catch_warnings():
            # Triton 3.9 warns on every first compile that its FP-fusion default will
            # change; the default is kept and the result says which setting was used
            warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
            return triton.compile(
                source,
                target=GPUTarget("cuda", job.arch.cc, 32),
                options={"num_warps": job.num_warps, "num_stages": job.num_stages},
            )
    except PerflabError:
        raise
    except Exception as exc:  # Triton raises many types for bad kernels; all are the user's
        raise triton_compile_error(exc, _python_source(job.fn), job.source_name) from None


def _run_triton(triton: Any, job: TritonJob) -> CompileResult:
    started = time.perf_counter()
    compiled = _triton_compiled(triton, job)
    asm, code = compiled.asm, job.fn.fn.__code__
    fp_fusion = bool(compiled.metadata.enable_fp_fusion)
    ptx, cubin = str(asm["ptx"]), bytes(asm["cubin"])
    ptx_arch = re.search(r"^\.target\s+(\w+)", ptx, re.MULTILINE)
    arch_name = ptx_arch.group(1) if ptx_arch else job.arch.name
    resources = _triton_resources(ptx, cubin, job.arch, arch_name, fp_fusion, job.timeout)
    shared = int(getattr(compiled.metadata, "shared", 0) or 0)
    for r in resources.values():
        r.shared_dynamic, r.shared_static = shared, 0  # Triton's smem is all dynamic
    user_file = defining_file(ptx, code.co_filename)
    warps_stages = [f"num_warps={job.num_warps}", f"num_stages={job.num_stages}"]
    return CompileResult(
        lang="triton",
        arch=arch_name,
        source=_python_source(job.fn),
        source_name=f"{compiled.metadata.name} ({Path(code.co_filename).name})",
        kernels=_kernels(ptx, user_file, arch_name, resources),
        ptx=ptx,
        cubin=cubin,
        source_path=user_file,
        flags=[*warps_stages, _fusion_flag(fp_fusion)],
        stages={k: str(asm[k]) for k in ("ttir", "ttgir", "llir") if k in asm},
        versions=_versions(),
        compile_s=time.perf_counter() - started,
    )


def defining_file(ptx: str, filename: str) -> str:
    """The path line info in ``ptx`` names for the user's code (``filename`` defines the
    kernel). Triton's own cache may hand back PTX compiled earlier under another name:
    a re-run notebook cell (the file with the same text is the user's), or another
    process, such as a restarted Jupyter kernel, whose cell files are named per process.
    Triton's cache key covers the function's text and first line, so then the file of
    the kernel's own (not inlined) lines is the user's, with the same line numbers."""
    files = parse_files(ptx)
    if filename in files.values():
        return filename
    current = linecache.getlines(filename)
    for path in files.values():
        if current and linecache.getlines(path) == current:
            return path
    return _kernel_file(ptx, files) or filename


_OWN_LOC_RE = re.compile(r"^\s*\.loc\s+(\d+)\s+[1-9]\d*\s+\d+\s*(?://.*)?$")


def _kernel_file(ptx: str, files: Mapping[int, str]) -> str | None:
    """The file most ``.loc`` lines without ``inlined_at`` name: the kernel's own."""
    counts = Counter(int(m.group(1)) for m in map(_OWN_LOC_RE.match, ptx.splitlines()) if m)
    for index, _ in counts.most_common(1):
        return files.get(index)
    return None


def _python_source(fn: Any) -> str:
    """The whole file (or notebook cell) that defines ``fn``, so that line numbers in
    the PTX and SASS match it; else the function alone, padded to its first line."""
    code = fn.fn.__code__
    lines = linecache.getlines(code.co_filename)
    if lines:
        return "".join(str(line) for line in lines)
    padding: str = "\n" * (code.co_firstlineno - 1)
    return padding + str(getattr(fn, "src", ""))


_FUSION_ENV = ("TRITON_DEFAULT_FP_FUSION", "TRITON_FORCE_DISABLE_FP_FUSION")


def _fusion_env() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in _FUSION_ENV}


def _fusion_flag(enabled: bool) -> str:
    """``fp_fusion=on (Triton's default)``: the setting and what chose it."""
    chosen = [f"{k}={v}" for k, v in _fusion_env().items() if v is not None]
    why = ", ".join(chosen) or "Triton's default"
    return f"fp_fusion={'on' if enabled else 'off'} ({why})"


def _triton_ptxas(cc: int) -> Tool | None:
    """The ptxas Triton itself uses for ``cc`` (``get_ptxas(arch)`` in 3.6 and 3.9), else ours."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return Tool("ptxas", Path(get_ptxas(cc).path), "triton")
    except Exception:  # an older or newer Triton without get_ptxas: use ours
        return toolchain.find_tool("ptxas")


def _triton_resources(
    ptx: str, cubin: bytes, target: Arch, arch_name: str, fp_fusion: bool, timeout: float
) -> dict[str, Resources]:
    """Resources as ptxas reports them for Triton's PTX, re-run with the flags Triton uses
    (Triton keeps its ptxas log to itself); registers and stack from the cubin when
    that ptxas cannot be run."""
    ptxas = _triton_ptxas(target.cc)
    with toolchain.private_tempdir() as tmp:
        (tmp / "k.ptx").write_text(ptx, encoding="utf-8")
        (tmp / "cell.cubin").write_bytes(cubin)
        if ptxas is not None:
            args = [
                "-lineinfo",
                "-v",
                *([] if fp_fusion else ["--fmad=false"]),
                f"--gpu-name={arch_name}",
                "k.ptx",
                "-o",
                "k.cubin",
            ]
            done = toolchain.run_tool(ptxas, args, cwd=tmp, timeout=timeout)
            found = parse_ptxas_resources(done.stderr + done.stdout) if done.returncode == 0 else {}
            if found:
                return found
        usage = _res_usage(tmp, timeout)
    return {
        name: Resources(
            registers=u.get("REG", 0), stack=u.get("STACK", 0), constant=u.get("CONSTANT[0]", 0)
        )
        for name, u in usage.items()
    }


# ---- running on a GPU -------------------------------------------------------------------


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
