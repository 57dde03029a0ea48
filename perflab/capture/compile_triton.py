"""Compile a ``@triton.jit`` function ahead of time to PTX, cubin and SASS; no GPU needed.

``triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget(...))`` keeps
ttir, ttgir, llir, PTX and cubin. Triton 3.6 and 3.9 take the same ASTSource arguments
(checked against both): ``signature`` maps every parameter name to a type string, with
``"constexpr"`` for compile-time constants, and ``constexprs`` maps those names to
values. :func:`_triton_ast_source` is the one place to branch should a later release
change this. Results are cached as CUDA's are (:mod:`perflab.capture.compile_cache`).

The cache key of a Triton job is the kernel as loaded: Triton's own ``cache_key`` (the
kernel's source and first line, the ``@triton.jit`` functions it calls wherever they are
defined, the constant globals it names), the file that defines it, the options, and the
constants of the user's own modules (not the standard library's or installed packages')
that the kernel can reach by attribute (``helpers.BLOCK``), which Triton's key leaves
out. A module edited on disk but not imported again is compiled as loaded, and keyed so.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import re
import site
import sysconfig
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from perflab.analysis.ptx import parse_files
from perflab.analysis.sass import parse_ptxas_resources
from perflab.capture import toolchain
from perflab.capture.compile_cache import (
    Compiled,
    cached_run,
    kernel_artifacts,
    res_usage,
    tool_versions,
)
from perflab.capture.compile_errors import triton_compile_error
from perflab.capture.toolchain import DEFAULT_TIMEOUT_S, Arch, Tool
from perflab.errors import InputError, PerflabError, ToolchainError, import_extra
from perflab.model.kernel import CompileResult, Resources

MIN_TRITON = (3, 6)


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
    constexprs: Mapping[str, object] = field(default_factory=dict)
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


def _triton() -> ModuleType:
    triton = import_extra("triton", "compiling Triton kernels")
    version = tuple(int(p) for p in re.findall(r"\d+", triton.__version__)[:2])
    if version < MIN_TRITON:
        raise ToolchainError(f"Triton {triton.__version__} is too old: perflab needs >= 3.6")
    return triton


def triton_signature(
    fn: Any, signature: Mapping[str, str] | Sequence[str], constexprs: Mapping[str, object]
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
    triton: ModuleType,
    fn: Any,
    signature: dict[str, str],
    constexprs: Mapping[str, object],
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
    constexprs: Mapping[str, object]
    arch: Arch
    num_warps: int = 4
    num_stages: int = 3
    aligned: tuple[str, ...] = ()  # parameters treated as 16-byte aligned (or divisible)
    source_name: str = ""
    timeout: float = DEFAULT_TIMEOUT_S
    # the constants of the user's modules the kernel reaches (:func:`module_constants`)
    own_constants: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def cache_parts(self) -> dict[str, object]:
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
            "module_constants": {name: dict(v) for name, v in self.own_constants.items()},
            "tools": toolchain.versions_key(("nvdisasm",)),
        }


def module_constants(fn: Any) -> dict[str, dict[str, str]]:
    """The constants (numbers, strings, ``tl.constexpr`` values, dtypes) of each of the
    user's own modules that ``fn`` can reach: the modules among its globals, and those
    of the ``@triton.jit`` functions and modules found in them, by module name."""
    triton = _triton()
    constant = (triton.language.constexpr, triton.language.dtype)
    found: dict[str, dict[str, str]] = {}
    pending, seen = [fn.fn.__globals__], set()
    while pending:
        names = pending.pop()
        if id(names) in seen:
            continue
        seen.add(id(names))
        for value in list(names.values()):
            if isinstance(value, ModuleType) and _own_module(value):
                found.setdefault(value.__name__, _constants(value, constant))
                pending.append(vars(value))
            elif isinstance(value, triton.runtime.JITFunction):
                pending.append(value.fn.__globals__)
    return found


@functools.cache
def _library_roots() -> tuple[str, ...]:
    """Where the standard library and installed packages live."""
    paths = sysconfig.get_paths()
    roots = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    roots += [*site.getsitepackages(), site.getusersitepackages()]
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


def _own_module(module: ModuleType) -> bool:
    """A module of the user's own (a file outside the standard library and packages)."""
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and not os.path.realpath(path).startswith(_library_roots())


def _constants(module: ModuleType, constant: tuple[type, ...]) -> dict[str, str]:
    values = sorted(vars(module).items())
    return {name: repr(v) for name, v in values if _is_constant(v, constant)}


def _is_constant(value: object, constant: tuple[type, ...]) -> bool:
    """A value Triton compiles in as a constant when a kernel reads it by attribute."""
    if isinstance(value, tuple):
        return all(_is_constant(v, constant) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, *constant))


def _require_compilable(fn: object) -> None:
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
    constexprs: Mapping[str, object] | None = None,
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
        module_constants(fn),
    )
    return cached_run(job, lambda: _run_triton(triton, job), cache=cache)


def _triton_compiled(triton: ModuleType, job: TritonJob) -> Any:
    """``triton.compile`` of the job; the kernel's errors as a CompileError at its lines."""
    from triton.backends.compiler import GPUTarget

    source = _triton_ast_source(triton, job.fn, dict(job.signature), job.constexprs, job.aligned)
    try:
        with warnings.catch_warnings(), _triton_cache_bypassed(bool(job.own_constants)):
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


@contextlib.contextmanager
def _triton_cache_bypassed(bypass: bool) -> Iterator[None]:
    """Triton compiles afresh (``TRITON_ALWAYS_COMPILE``, read at each compile by 3.6 and
    3.9) when ``bypass``: its own cache key leaves out the module constants a kernel
    reads by attribute, and would give back a kernel built with their old values."""
    if not bypass:
        yield
        return
    before = os.environ.get(_ALWAYS_COMPILE)
    os.environ[_ALWAYS_COMPILE] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_ALWAYS_COMPILE, None)
        else:
            os.environ[_ALWAYS_COMPILE] = before


_ALWAYS_COMPILE = "TRITON_ALWAYS_COMPILE"


def _run_triton(triton: ModuleType, job: TritonJob) -> Compiled:
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
    return Compiled(
        CompileResult(
            lang="triton",
            arch=arch_name,
            source=_python_source(job.fn),
            source_name=f"{compiled.metadata.name} ({Path(code.co_filename).name})",
            kernels=kernel_artifacts(ptx, user_file, arch_name, resources),
            ptx=ptx,
            cubin=cubin,
            source_path=user_file,
            flags=[*warps_stages, _fusion_flag(fp_fusion)],
            stages={k: str(asm[k]) for k in ("ttir", "ttgir", "llir") if k in asm},
            versions=tool_versions(),
            compile_s=time.perf_counter() - started,
        )
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
        usage = res_usage(tmp, timeout)
    return {
        name: Resources(
            registers=u.get("REG", 0), stack=u.get("STACK", 0), constant=u.get("CONSTANT[0]", 0)
        )
        for name, u in usage.items()
    }
