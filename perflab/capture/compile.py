"""Compile CUDA C++ (nvcc) and Triton (ahead of time) to PTX, cubin and SASS; no GPU needed.

CUDA: ``nvcc -cubin -lineinfo -Xptxas -v --keep`` in a private folder gives the PTX, the
cubin and ptxas' resource report in one run; ``nvdisasm -g -gi -gp`` (on first use of the
SASS) maps every instruction to the user's line and to its PTX line. CCCL headers (CUB,
Thrust, libcu++) come from the ``nvidia-cuda-cccl`` wheel, which nvcc's wheel already
puts on its include path.

Triton: ``triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget(...))``
keeps ttir, ttgir, llir, PTX and cubin. Triton 3.6 and 3.9 take the same ASTSource
arguments (checked against both): ``signature`` maps every parameter name to a type
string, with ``"constexpr"`` for compile-time constants, and ``constexprs`` maps those
names to values. :func:`_triton_ast_source` is the one place to branch should a later
release change this.

Results are cached on disk (``$PERFLAB_CACHE_DIR`` or ``~/.cache/perflab``, under
``compile/``) by source, options, target and tool versions, as JSON plus a SASS text file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import linecache
import os
import re
import shlex
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perflab.analysis.ptx import parse_files, parse_ptx
from perflab.analysis.sass import parse_ptxas_resources, parse_res_usage, parse_sass
from perflab.capture import toolchain
from perflab.capture.toolchain import DEFAULT_TIMEOUT_S, Arch, Tool
from perflab.errors import InputError, NoGPUError, PerflabError, SchemaError, ToolchainError
from perflab.model.kernel import (
    CompileResult,
    Diagnostic,
    KernelArtifacts,
    Resources,
    SassLine,
)
from perflab.model.serialize import dump_json, load_json
from perflab.model.timing import TimingResult

CACHE_VERSION = 1
CELL_FILE = "cell.cu"
STDS = ("c++11", "c++14", "c++17", "c++20")
MIN_TRITON = (3, 6)
DEFAULT_BLOCK_THREADS = 256

# ---- the flags a cell may pass ----------------------------------------------------------
#
# nvcc runs its sub-tools through ``sh -c`` with these flags inside, so a flag is accepted
# only when its name is in this table exactly and its value matches a strict pattern
# (no shell metacharacters, no commas where nvcc would split a list). Outputs, modes,
# host compilers and option files are not in the table, so they cannot be passed.


@dataclass(frozen=True)
class ValueRule:
    pattern: re.Pattern[str]  # the whole value must match
    shown: str  # how the refusal message names it


def _rule(pattern: str, shown: str) -> ValueRule:
    return ValueRule(re.compile(pattern), shown)


_MACRO = r"[A-Za-z_][A-Za-z0-9_]*"
_V_DEFINE = _rule(rf"{_MACRO}(=[A-Za-z0-9_.:+-]*)?", "NAME[=VALUE]")
_V_MACRO = _rule(_MACRO, "NAME")
_V_DIR = _rule(r"[A-Za-z0-9_./+][A-Za-z0-9_./+-]*", "DIR")
_V_LEVEL = _rule(r"[0-3]", "0-3")
_V_REGISTERS = _rule(r"[1-9][0-9]{0,2}", "N")
_V_THREADS = _rule(r"[0-9]{1,2}", "N")
_V_BOOL = _rule(r"true|false", "true|false")
_V_STREAM = _rule(r"legacy|null|per-thread", "legacy|null|per-thread")
_V_DIAG = _rule(r"[0-9]{1,5}(,[0-9]{1,5})*", "NUMBER[,NUMBER]")
_WERROR_KINDS = (
    "all-warnings|cross-execution-space-call|reorder|default-stream-launch|"
    "missing-launch-bounds|ext-lambda-captures-this|deprecated-declarations"
)
_V_WERROR = _rule(rf"({_WERROR_KINDS})(,({_WERROR_KINDS}))*", "KIND[,KIND]")
_V_LOAD_CACHE = _rule(r"ca|cg|cs|lu|cv", "ca|cg|cs|lu|cv")
_V_STORE_CACHE = _rule(r"wb|cg|cs|wt", "wb|cg|cs|wt")
# the value of -Xptxas: ptxas options (checked one by one against _PTXAS_FLAGS)
_V_PTXAS = ValueRule(re.compile(r".*"), "OPT[,OPT]")


@dataclass(frozen=True)
class FlagRule:
    """One flag: its spellings, its value (None: takes none) and whether the value may
    follow a one-letter name directly (``-DN=4``, ``-O3``)."""

    names: tuple[str, ...]
    value: ValueRule | None = None
    attached: bool = False

    def shown(self) -> str:
        return "/".join(self.names) + (f" {self.value.shown}" if self.value else "")


NVCC_FLAGS: tuple[FlagRule, ...] = (
    FlagRule(("-D", "--define-macro"), _V_DEFINE, attached=True),
    FlagRule(("-U", "--undefine-macro"), _V_MACRO, attached=True),
    FlagRule(("-I", "--include-path"), _V_DIR, attached=True),
    FlagRule(("-isystem", "--system-include"), _V_DIR),
    FlagRule(("-O", "--optimize"), _V_LEVEL, attached=True),
    FlagRule(("-maxrregcount", "--maxrregcount"), _V_REGISTERS),
    FlagRule(("-Xptxas", "--ptxas-options"), _V_PTXAS),
    FlagRule(("-use_fast_math", "--use_fast_math")),
    FlagRule(("-ftz", "--ftz"), _V_BOOL),
    FlagRule(("-prec-div", "--prec-div"), _V_BOOL),
    FlagRule(("-prec-sqrt", "--prec-sqrt"), _V_BOOL),
    FlagRule(("-fmad", "--fmad"), _V_BOOL),
    FlagRule(("-rdc", "--relocatable-device-code"), _V_BOOL),
    FlagRule(("-extended-lambda", "--extended-lambda")),
    FlagRule(("-expt-extended-lambda", "--expt-extended-lambda")),
    FlagRule(("-expt-relaxed-constexpr", "--expt-relaxed-constexpr")),
    FlagRule(("-extra-device-vectorization", "--extra-device-vectorization")),
    FlagRule(("-restrict", "--restrict")),
    FlagRule(("-lineinfo", "--generate-line-info")),
    FlagRule(("-G", "--device-debug")),
    FlagRule(("-w", "--disable-warnings")),
    FlagRule(("-Wreorder", "--Wreorder")),
    FlagRule(("-Wno-deprecated-gpu-targets", "--Wno-deprecated-gpu-targets")),
    FlagRule(("-Wno-deprecated-declarations", "--Wno-deprecated-declarations")),
    FlagRule(("-Werror", "--Werror"), _V_WERROR),
    FlagRule(("-diag-suppress", "--diag-suppress"), _V_DIAG),
    FlagRule(("-diag-warn", "--diag-warn"), _V_DIAG),
    FlagRule(("-diag-error", "--diag-error"), _V_DIAG),
    FlagRule(("-default-stream", "--default-stream"), _V_STREAM),
    FlagRule(("-t", "--threads"), _V_THREADS),
)
# ptxas options inside -Xptxas (NAME or NAME=VALUE, one per comma-separated part)
PTXAS_FLAGS: tuple[FlagRule, ...] = (
    FlagRule(("-v", "--verbose")),
    FlagRule(("-warn-spills", "--warn-on-spills")),
    FlagRule(("-warn-lmem-usage", "--warn-on-local-memory-usage")),
    FlagRule(("-warn-double-usage", "--warn-on-double-precision-use")),
    FlagRule(("-suppress-stack-size-warning", "--suppress-stack-size-warning")),
    FlagRule(("-Werror", "--warning-as-error")),
    FlagRule(("-w", "--disable-warnings")),
    FlagRule(("-O", "--opt-level"), _V_LEVEL, attached=True),
    FlagRule(("-maxrregcount", "--maxrregcount"), _V_REGISTERS),
    FlagRule(("-dlcm", "--def-load-cache"), _V_LOAD_CACHE),
    FlagRule(("-dscm", "--def-store-cache"), _V_STORE_CACHE),
    FlagRule(("-fmad", "--fmad"), _V_BOOL),
    FlagRule(("-allow-expensive-optimizations", "--allow-expensive-optimizations"), _V_BOOL),
)


def allowed_flags_text() -> str:
    """What a refusal lists: every flag in the tables above."""
    nvcc = ", ".join(rule.shown() for rule in NVCC_FLAGS)
    ptxas = ", ".join(rule.shown() for rule in PTXAS_FLAGS)
    return f"allowed: {nvcc}; -Xptxas OPT is one of: {ptxas}"


def _by_name(rules: Sequence[FlagRule]) -> dict[str, FlagRule]:
    return {name: rule for rule in rules for name in rule.names}


_NVCC_BY_NAME = _by_name(NVCC_FLAGS)
_PTXAS_BY_NAME = _by_name(PTXAS_FLAGS)


def _match_flag(token: str, by_name: Mapping[str, FlagRule]) -> tuple[FlagRule, str | None] | None:
    """The rule ``token`` names and its value in the token (None: none given), or None
    when no rule fits. ``NAME``, ``NAME=VALUE`` and, for one-letter names, ``-XVALUE``."""
    if token in by_name:
        return by_name[token], None
    name, sep, value = token.partition("=")
    rule = by_name.get(name)
    if sep and rule is not None and rule.value is not None and len(name) > 2:
        return rule, value
    rule = by_name.get(token[:2])
    if rule is not None and rule.attached and len(token) > 2:
        return rule, token[2:]
    return None


def _refuse(what: str) -> InputError:
    return InputError(f"--flags: {what} is not allowed; {allowed_flags_text()}")


def _check_value(rule: FlagRule, value: str) -> None:
    if rule.value is _V_PTXAS:
        for part in value.split(","):
            _check_ptxas_option(part)
    elif rule.value is not None and not rule.value.pattern.fullmatch(value):
        raise _refuse(f"{rule.names[0]} {value!r} (the value must be {rule.value.shown})")


def _check_ptxas_option(part: str) -> None:
    found = _match_flag(part, _PTXAS_BY_NAME)
    if found is None:
        raise _refuse(f"ptxas option {part!r}")
    rule, value = found
    if (rule.value is None) != (value is None) or (
        rule.value is not None and value is not None and not rule.value.pattern.fullmatch(value)
    ):
        raise _refuse(f"ptxas option {part!r}")


def check_flags(flags: str | Sequence[str]) -> list[str]:
    """Split and vet extra nvcc flags (a string is split like a shell would, but no
    shell ever runs here). Every flag must be in :data:`NVCC_FLAGS` exactly, with a
    value matching its pattern; raises InputError naming the first flag refused and
    listing what is allowed. Returns the tokens as given."""
    try:
        tokens = shlex.split(flags) if isinstance(flags, str) else [str(f) for f in flags]
    except ValueError as exc:
        raise InputError(f"--flags: cannot split {flags!r}: {exc}") from None
    position = 0
    while position < len(tokens):
        token = tokens[position]
        found = _match_flag(token, _NVCC_BY_NAME)
        if found is None:
            raise _refuse(repr(token))
        rule, value = found
        if rule.value is None and value is not None:
            raise _refuse(repr(token))
        if rule.value is not None and value is None:  # the value is the next token
            position += 1
            if position == len(tokens):
                raise InputError(f"--flags: {token} needs a value ({rule.value.shown})")
            value = tokens[position]
        if value is not None:
            _check_value(rule, value)
        position += 1
    return tokens


# ---- errors -------------------------------------------------------------------------------


class CompileError(InputError):
    """The compiler rejected the source; ``diagnostics`` point at the user's lines.

    ``source`` (the name diagnostics give the user's source, and its text) and
    ``columns`` (0-based, one per diagnostic, None where the tool gave none) let the
    message show each error's line with a caret under the column and
    the line before it, as a compiler does: EDG reports a missing ``;`` at the next token.
    """

    def __init__(
        self,
        tool: str,
        diagnostics: list[Diagnostic],
        log: str,
        *,
        source: tuple[str, str] | None = None,
        columns: Sequence[int | None] = (),
    ) -> None:
        self.diagnostics = diagnostics
        self.log = log
        name, text = source or ("", "")
        lines = text.splitlines()
        located = list(zip(diagnostics, [*columns, *[None] * len(diagnostics)], strict=False))
        # errors and the notes that go with them; everything when there is no error
        errors = [p for p in located if p[0].severity in ("error", "fatal")]
        if errors:
            errors = [p for p in located if p[0].severity in ("error", "fatal", "note")]
        errors = errors or located
        self.details = "\n".join(
            str(d) + (source_excerpt(lines, d.line, column) if d.file == name else "")
            for d, column in errors[:MAX_SHOWN_ERRORS]
        )
        self.details = self.details or log.strip()[-4000:]
        super().__init__(f"{tool} failed:\n{self.details}")


MAX_SHOWN_ERRORS = 20


def source_excerpt(lines: Sequence[str], line: int | None, column: int | None) -> str:
    """The line before and ``line`` of ``lines`` (1-based), numbered, with a caret under
    ``column`` (0-based) when known: ``""`` when the line is not in ``lines``."""
    if line is None or not 1 <= line <= len(lines):
        return ""
    width = len(str(line))
    out = [f"{n:>{width + 2}} | {lines[n - 1]}" for n in range(max(line - 1, 1), line + 1)]
    if column is not None and 0 <= column <= len(lines[line - 1]):
        # keep the line's tabs so that the caret lands under the same character
        lead = "".join("\t" if c == "\t" else " " for c in lines[line - 1][:column])
        out.append(f"{'':>{width + 2}} | {lead}^")
    return "\n" + "\n".join(out)


_NVCC_DIAG_RE = re.compile(
    r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|"
    r"remark|note)[^:]*: (?P<msg>.*)$"
)
_GCC_DIAG_RE = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|"
    r"note): (?P<msg>.*)$"
)
_TOOL_DIAG_RE = re.compile(
    r"^(?P<file>ptxas|nvcc|nvlink|cicc|nvdisasm)\s+(?P<sev>error|fatal|warning)\s*: (?P<msg>.*)$"
)
# ptxas reports PTX errors per line: "ptxas /tmp/x/cell.ptx, line 33; error   : ..."
_PTXAS_LINE_RE = re.compile(
    r"^ptxas (?P<file>\S+?), line (?P<line>\d+); (?P<sev>error|fatal|warning)\s*: (?P<msg>.*)$"
)
# EDG (nvcc's front end) echoes the line indented by two spaces, then a caret line
_EDG_INDENT = 2
_EDG_CARET_RE = re.compile(r"^ *\^$")
_SEVERITY = {"catastrophic error": "error", "fatal error": "error", "fatal": "error"}
_MISSING_CCCL_RE = re.compile(r"(cub|thrust|cuda/std|cuda)/[\w/.]+: No such file")


def parse_diagnostics(log: str, paths: Mapping[str, str]) -> list[Diagnostic]:
    """Compiler messages, with the scratch file's path replaced by the user's name.

    ``paths`` maps a path the compiler saw (full or bare) to the name to show.
    """
    return [d for d, _ in located_diagnostics(log, paths)]


def located_diagnostics(log: str, paths: Mapping[str, str]) -> list[tuple[Diagnostic, int | None]]:
    """:func:`parse_diagnostics` with the 0-based column each message points at, from
    GCC's ``file:line:col:`` or EDG's caret line (None where the tool gave none)."""
    found: list[tuple[Diagnostic, int | None]] = []
    raw_lines = log.splitlines()
    for index, raw in enumerate(raw_lines):
        line = raw.rstrip()
        edg = _NVCC_DIAG_RE.match(line)
        m = edg or _GCC_DIAG_RE.match(line) or _PTXAS_LINE_RE.match(line)
        m = m or _TOOL_DIAG_RE.match(line)
        if m is None:
            continue
        fields = m.groupdict()
        sev = _SEVERITY.get(fields["sev"], fields["sev"])
        number = int(fields["line"]) if fields.get("line") else None
        message = fields["msg"].strip()
        if _MISSING_CCCL_RE.search(message):
            message += " (CUB/Thrust/libcu++ headers: pip install nvidia-cuda-cccl)"
        shown = paths.get(fields["file"]) or paths.get(os.path.basename(fields["file"]))
        diagnostic = Diagnostic(shown or os.path.basename(fields["file"]), number, sev, message)
        column = int(fields["col"]) - 1 if fields.get("col") else None
        if edg is not None:
            column = _edg_column(raw_lines[index + 1 : index + 3])
        found.append((diagnostic, column))
    return found


def _edg_column(after: Sequence[str]) -> int | None:
    if len(after) == 2 and _EDG_CARET_RE.match(after[1].rstrip()):
        return max(after[1].index("^") - _EDG_INDENT, 0)
    return None


# ---- options --------------------------------------------------------------------------------


def _check_std(std: str) -> str:
    if std not in STDS:
        raise InputError(f"std must be one of {', '.join(STDS)}, not {std!r}")
    return std


# ---- cache ----------------------------------------------------------------------------------


def cache_root() -> Path:
    base = os.environ.get("PERFLAB_CACHE_DIR") or str(Path.home() / ".cache" / "perflab")
    return Path(base) / "compile"


def cache_key(parts: Mapping[str, Any]) -> str:
    doc = json.dumps({"cache_version": CACHE_VERSION, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


@dataclass
class _CacheEntry:
    key: str
    root: Path = field(default_factory=cache_root)

    @property
    def json_path(self) -> Path:
        return self.root / self.key[:2] / f"{self.key}.json"

    @property
    def sass_path(self) -> Path:
        return self.root / self.key[:2] / f"{self.key}.sass"

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
        try:
            return self.sass_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def write_sass(self, text: str) -> None:
        try:
            self.sass_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.sass_path.with_name(self.sass_path.name + f".{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(self.sass_path)
        except OSError:
            pass


# ---- SASS (lazy) --------------------------------------------------------------------------


def disassemble(cubin: bytes, *, timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """``nvdisasm -g -gi -gp -c`` of a cubin: code with source and PTX line comments."""
    nvdisasm = toolchain.require_tool("nvdisasm")
    with toolchain.private_tempdir() as tmp:
        (tmp / "k.cubin").write_bytes(cubin)
        done = toolchain.run_tool(
            nvdisasm, ["-g", "-gi", "-gp", "-c", "k.cubin"], cwd=tmp, timeout=timeout
        )
    if done.returncode != 0:
        raise ToolchainError(f"nvdisasm failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def _attach_sass(result: CompileResult, entry: _CacheEntry | None, timeout: float) -> None:
    """Give every kernel a loader that disassembles the cubin once, on first use."""

    @functools.cache
    def functions() -> dict[str, list[SassLine]]:
        text = entry.read_sass() if entry is not None else None
        if text is None:
            text = disassemble(result.cubin, timeout=timeout)
            if entry is not None:
                entry.write_sass(text)
        return parse_sass(text, user_files={result.source_path})

    for kernel in result.kernels:
        if kernel._sass_lines is None:
            kernel._sass_loader = _loader(functions, kernel.mangled)


def _loader(
    functions: Callable[[], dict[str, list[SassLine]]], name: str
) -> Callable[[], list[SassLine]]:
    return lambda: functions().get(name, [])


# ---- CUDA -----------------------------------------------------------------------------------


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
    modes are perflab's). ``source_name`` is how diagnostics name the source. Raises
    :class:`CompileError` with the compiler's diagnostics on bad code, ToolchainError
    when a tool is missing or times out.
    """
    if not isinstance(source, str) or not source.strip():
        raise InputError("the CUDA source is empty")
    checked = check_flags(flags)
    _check_std(std)
    nvcc = toolchain.require_tool("nvcc")
    target = toolchain.check_arch(arch, nvcc)
    includes = [str(Path(d).resolve()) for d in include_dirs]
    entry = (
        _CacheEntry(
            cache_key(
                {
                    "lang": "cuda",
                    "source": source,
                    "flags": checked,
                    "arch": target.name,
                    "std": std,
                    "include_dirs": includes,
                    "tools": toolchain.versions_key(),
                }
            )
        )
        if cache
        else None
    )
    result = entry.load() if entry is not None else None
    if result is None:
        result = _run_nvcc(nvcc, source, target, checked, std, includes, source_name, timeout)
        if entry is not None:
            entry.store(result)
    result.source_name = source_name
    _attach_sass(result, entry, timeout)
    return result


def _run_nvcc(
    nvcc: Tool,
    source: str,
    arch: Arch,
    flags: list[str],
    std: str,
    includes: list[str],
    source_name: str,
    timeout: float,
) -> CompileResult:
    started = time.perf_counter()
    with toolchain.private_tempdir() as tmp:
        cell = tmp / CELL_FILE
        cell.write_text(source, encoding="utf-8")
        args = [
            "-cubin",
            "-lineinfo",
            f"-arch={arch.name}",
            f"-std={std}",
            "-Xptxas",
            "-v",
            "--keep",
            "--keep-dir",
            str(tmp),
            *[f"-I{d}" for d in includes],
            *flags,
            CELL_FILE,
            "-o",
            "cell.cubin",
        ]
        done = toolchain.run_tool(nvcc, args, cwd=tmp, timeout=timeout)
        log = done.stderr + done.stdout
        paths = {str(cell): source_name, CELL_FILE: source_name}
        if done.returncode != 0:
            located = located_diagnostics(log, paths)
            raise CompileError(
                "nvcc",
                [d for d, _ in located],
                log,
                source=(source_name, source),
                columns=[c for _, c in located],
            )
        ptx = (tmp / "cell.ptx").read_text(encoding="utf-8", errors="replace")
        cubin = (tmp / "cell.cubin").read_bytes()
        constants = _constant_bank_sizes(tmp, timeout)
    resources = parse_ptxas_resources(log)
    for name, size in constants.items():
        if name in resources and not resources[name].constant:
            resources[name].constant = size
    kernels = _kernels(ptx, str(cell), arch.name, resources)
    warnings = [d for d in parse_diagnostics(log, paths) if d.severity == "warning"]
    return CompileResult(
        lang="cuda",
        arch=arch.name,
        source=source,
        source_name=source_name,
        kernels=kernels,
        ptx=ptx,
        cubin=cubin,
        source_path=str(cell),
        flags=flags,
        log=log,
        warnings=warnings,
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
    try:
        import triton
    except ImportError:
        raise ToolchainError("Triton is not installed: pip install triton") from None
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
    triton = _triton()
    constexprs = dict(constexprs or {})
    target = toolchain.parse_arch(arch)
    for label, value in (("num_warps", num_warps), ("num_stages", num_stages)):
        if not isinstance(value, int) or value < 1:
            raise InputError(f"{label} must be a positive integer, not {value!r}")
    sig = triton_signature(fn, signature, constexprs)
    aligned_params = _aligned_params(sig, aligned)
    code = fn.fn.__code__
    entry = (
        _CacheEntry(
            cache_key(
                {
                    "lang": "triton",
                    "fn": fn.cache_key,
                    "name": fn.__name__,
                    "signature": sig,
                    "constexprs": {k: repr(v) for k, v in constexprs.items()},
                    "arch": target.name,
                    "num_warps": num_warps,
                    "num_stages": num_stages,
                    "aligned": aligned_params,
                    "triton": triton.__version__,
                    "fp_fusion": _fusion_env(),
                    "file": code.co_filename,
                    "tools": toolchain.versions_key(("nvdisasm",)),
                }
            )
        )
        if cache
        else None
    )
    result = entry.load() if entry is not None else None
    if result is None:
        result = _run_triton(
            triton,
            fn,
            sig,
            constexprs,
            aligned_params,
            target,
            (num_warps, num_stages),
            timeout,
            source_name or Path(code.co_filename).name,
        )
        if entry is not None:
            entry.store(result)
    _attach_sass(result, entry, timeout)
    return result


def _run_triton(
    triton: Any,
    fn: Any,
    sig: dict[str, str],
    constexprs: dict[str, Any],
    aligned: list[str],
    target: Arch,
    warps_stages: tuple[int, int],
    timeout: float,
    source_name: str,
) -> CompileResult:
    from triton.backends.compiler import GPUTarget

    started = time.perf_counter()
    code = fn.fn.__code__
    num_warps, num_stages = warps_stages
    try:
        with warnings.catch_warnings():
            # Triton 3.9 warns on every first compile that its FP-fusion default will
            # change; the default is kept and the result says which setting was used
            warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
            compiled = triton.compile(
                _triton_ast_source(triton, fn, sig, constexprs, aligned),
                target=GPUTarget("cuda", target.cc, 32),
                options={"num_warps": num_warps, "num_stages": num_stages},
            )
    except PerflabError:
        raise
    except Exception as exc:  # Triton raises many types for bad kernels; all are the user's
        raise triton_compile_error(exc, _python_source(fn), source_name) from None
    asm = compiled.asm
    fp_fusion = bool(compiled.metadata.enable_fp_fusion)
    ptx = str(asm["ptx"])
    name = str(compiled.metadata.name)
    ptx_arch = re.search(r"^\.target\s+(\w+)", ptx, re.MULTILINE)
    arch_name = ptx_arch.group(1) if ptx_arch else target.name
    resources = _triton_resources(
        ptx,
        bytes(asm["cubin"]),
        target,
        arch_name,
        fp_fusion,
        timeout,
    )
    shared = int(getattr(compiled.metadata, "shared", 0) or 0)
    for r in resources.values():
        r.shared_dynamic, r.shared_static = shared, 0  # Triton's smem is all dynamic
    user_file = defining_file(ptx, code.co_filename)
    kernels = _kernels(ptx, user_file, arch_name, resources)
    return CompileResult(
        lang="triton",
        arch=arch_name,
        source=_python_source(fn),
        source_name=f"{name} ({Path(code.co_filename).name})",
        kernels=kernels,
        ptx=ptx,
        cubin=bytes(asm["cubin"]),
        source_path=user_file,
        flags=[f"num_warps={num_warps}", f"num_stages={num_stages}", _fusion_flag(fp_fusion)],
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


def triton_compile_error(exc: BaseException, source: str, source_name: str) -> CompileError:
    """Triton's error as compiler diagnostics at lines of the file defining the kernel.

    Triton counts a position from the ``def`` line of the function it was compiling
    ("at 4:31"); the error in a called ``@triton.jit`` function is the ``__cause__`` of
    the caller's. So the innermost error is reported with its message and each caller
    as a note, all at file (cell) lines with the column Triton gave.
    """
    lines = source.splitlines()
    chain = _compilation_chain(exc)
    if not chain:  # not a positioned error
        message = str(exc).strip() or type(exc).__name__
        return CompileError("triton", [Diagnostic(source_name, None, "error", message)], message)
    diagnostics: list[Diagnostic] = []
    columns: list[int | None] = []
    for depth, err in enumerate(reversed(chain)):
        line, column = _file_position(err, lines)
        if depth == 0:
            diagnostics.append(Diagnostic(source_name, line, "error", _triton_message(err)))
        else:
            diagnostics.append(Diagnostic(source_name, line, "note", "called from here"))
        columns.append(column)
    return CompileError(
        "triton", diagnostics, str(exc), source=(source_name, source), columns=columns
    )


def _compilation_chain(exc: BaseException) -> list[Any]:
    """Triton's positioned errors (``src`` and ``node``), outermost first."""
    chain: list[Any] = []
    current: BaseException | None = exc
    while current is not None and hasattr(getattr(current, "node", None), "lineno"):
        chain.append(current)
        current = current.__cause__
    return chain


_EXCEPTION_REPR_RE = re.compile(r"^(\w+)\((['\"])(.*)\2\)$", re.DOTALL)


def _triton_message(err: Any) -> str:
    """The message of Triton's innermost error: ``AttributeError("no foo")`` (a repr,
    as Triton stores it) reads ``AttributeError: no foo``."""
    text = str(getattr(err, "error_message", "") or "").strip()
    if not text and err.__cause__ is not None:
        text = f"{type(err.__cause__).__name__}: {err.__cause__}".strip()
    m = _EXCEPTION_REPR_RE.match(text)
    return f"{m.group(1)}: {m.group(3)}" if m else text or type(err).__name__


def _file_position(err: Any, lines: Sequence[str]) -> tuple[int | None, int | None]:
    """``err``'s (line, 0-based column) in ``lines``: its function's ``def`` found there
    by text (Triton's ``src`` is the function from ``def`` on, dedented)."""
    src = str(getattr(err, "src", "") or "").splitlines()
    head = [text.strip() for text in src[:3]]
    for start in range(len(lines)):
        if [text.strip() for text in lines[start : start + len(head)]] == head and head:
            indent = len(lines[start]) - len(lines[start].lstrip())
            return start + err.node.lineno, indent + int(getattr(err.node, "col_offset", 0))
    return None, None


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
    from perflab.capture.timer import bench

    if not env.cuda_available():
        raise NoGPUError("no GPU: --run needs a CUDA GPU; the kernel was compiled, not run")
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
        return bench(lambda: fn[grid](*args, **kwargs), backend="cuda", name=chosen.name)
    import cupy

    module = cupy.cuda.function.Module()
    module.load(result.cubin)
    function = module.get_function(chosen.mangled)
    block = tuple(spec.get("block", (DEFAULT_BLOCK_THREADS,)))
    shared = int(spec.get("shared", 0))
    return bench(
        lambda: function(grid, block, args, shared_mem=shared), backend="cuda", name=chosen.name
    )
