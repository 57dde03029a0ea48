"""The disk cache of compile results and what every compile job shares: nvdisasm's SASS
(attached to a result, disassembled on first use), the kernels of a PTX module, and the
tool versions a result records.

Results are cached on disk (``$PERFLAB_CACHE_DIR`` or ``~/.cache/perflab``, under
``compile/``) by source, options, target and tool versions, as JSON plus the two
nvdisasm texts (code with encodings, and live registers). An entry also records every
other file the compile read (headers, the toolkit's included: their packages upgrade
apart from nvcc, whose version alone is in the key) with a digest of its bytes; a lookup
checks them again (by status alone for a file that had been quiet, see :data:`QUIET_NS`),
and one that changed or went missing makes the entry a miss. A file that changed while
it compiled keeps the result out of the cache. A header that did not exist when the
entry was made, but would now be found first on the include path, is not noticed (as
with ccache's direct mode).
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from perflab.analysis.ptx import parse_ptx
from perflab.analysis.sass import parse_disassembly, parse_res_usage
from perflab.capture import _proc, toolchain
from perflab.capture.toolchain import DEFAULT_TIMEOUT_S
from perflab.errors import InputError, SchemaError, ToolchainError
from perflab.model.kernel import CompileResult, KernelArtifacts, Resources, SassLine
from perflab.model.serialize import cache_dir, dump_json, load_json, open_regular, write_text

if TYPE_CHECKING:
    from perflab.model.saved import CacheReadDoc

CACHE_VERSION = 2  # 2: entries record the files the compile read
ENTRY_KIND = "CompileCacheEntry"
SASS_SUFFIX = "hex.sass"  # nvdisasm -g -gi -gp -c -hex, beside a cache entry
LIVE_SUFFIX = "live.txt"  # nvdisasm -c -lrm count

# ---- cache -----------------------------------------------------------------------------------


def cache_root() -> Path:
    return cache_dir() / "compile"


def cache_key(parts: Mapping[str, object]) -> str:
    doc = json.dumps({"cache_version": CACHE_VERSION, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


class CompileJob(Protocol):
    """What :func:`cached_run` needs of a job: its cache key and its timeout."""

    @property
    def timeout(self) -> float: ...

    def cache_parts(self) -> dict[str, object]: ...


@dataclass(frozen=True)
class Compiled:
    """What a job's run gives :func:`cached_run`: the result, every file the compile read
    besides the source in the key (absolute paths), and the wall clock (``time.time_ns``)
    when it started, so that a file changed since cannot vouch for the result."""

    result: CompileResult
    read: Sequence[str] = ()
    started_ns: int = 0


# a file untouched this long before a compile started vouches by its status (device, inode,
# size, modification and change times) alone, as git's index does: any later write or
# utime() sets its change time to a later tick, and so does a file renamed over it
QUIET_NS = 2_000_000_000


@dataclass(frozen=True)
class FileDigest:
    """A file a cached compile read, the SHA-256 of its bytes then and, when it had been
    quiet for :data:`QUIET_NS` before the compile, its status (:func:`_status`): a lookup
    that finds the same status need not read the file again."""

    path: str
    sha256: str
    status: tuple[int, ...] | None = None

    def unchanged(self) -> bool:
        if self.status is not None:
            try:
                if _status(os.stat(self.path)) == self.status:
                    return True
            except OSError:
                return False
        return file_digest(self.path) == self.sha256


def _status(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def file_digest(path: str) -> str | None:
    """The SHA-256 of a regular file's bytes; None when it is missing, not a regular file,
    or unreadable."""
    found = _file_state(path, before_ns=None)
    return found.sha256 if found is not None else None


def _file_state(path: str, *, before_ns: int | None) -> FileDigest | None:
    """``path``'s digest, with its status when it was quiet long enough before
    ``before_ns``; None when it cannot be read or (with ``before_ns``) was modified at or
    after that time."""
    try:
        with open_regular(path) as fh:
            info = os.fstat(fh.fileno())
            if before_ns is not None and info.st_mtime_ns >= before_ns:
                return None
            digest = hashlib.sha256()
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except (InputError, OSError):
        return None
    quiet = before_ns is not None and max(info.st_mtime_ns, info.st_ctime_ns) < before_ns - QUIET_NS
    return FileDigest(path, digest.hexdigest(), _status(info) if quiet else None)


def _digests(paths: Iterable[str], before_ns: int) -> list[FileDigest] | None:
    """Each file's digest, or None when one cannot vouch for the result."""
    found = []
    for path in dict.fromkeys(paths):
        state = _file_state(path, before_ns=before_ns)
        if state is None:
            return None
        found.append(state)
    return found


# an entry's ``read``, three strings (a list of a thousand objects, CUB's headers, took
# longer to load and check than the rest of the entry): the paths joined by NUL, which no
# path holds, the digests end to end, and one line of status per file ("-": none)
_READ_FIELDS = {"paths", "sha256", "status"}
_HEX_RE = re.compile(r"[0-9a-f]*")


def _read_doc(read: Sequence[FileDigest]) -> CacheReadDoc:
    from perflab.model.saved import CacheReadDoc

    return CacheReadDoc(
        paths="\0".join(f.path for f in read),
        sha256="".join(f.sha256 for f in read),
        status="\n".join(" ".join(map(str, f.status)) if f.status else "-" for f in read),
    )


def _read_list(doc: object) -> list[FileDigest] | None:
    """An entry's ``read`` (:func:`_read_doc`); None when it is not one perflab wrote."""
    if not isinstance(doc, dict) or set(doc) != _READ_FIELDS:
        return None
    paths, digests, statuses = doc["paths"], doc["sha256"], doc["status"]
    if not (isinstance(paths, str) and isinstance(digests, str) and isinstance(statuses, str)):
        return None
    names = paths.split("\0") if paths else []
    lines = statuses.split("\n") if statuses else []
    if len(digests) != 64 * len(names) or len(lines) != len(names):
        return None
    if _HEX_RE.fullmatch(digests) is None:
        return None
    try:
        status = [None if line == "-" else _parsed_status(line) for line in lines]
    except ValueError:
        return None
    return [
        FileDigest(name, digests[64 * i : 64 * (i + 1)], status[i]) for i, name in enumerate(names)
    ]


def _parsed_status(line: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in line.split(" "))
    if len(values) != 5:
        raise ValueError(line)
    return values


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
        """The cached result, when there is one and every file its compile read still
        holds the same bytes."""
        if not self.json_path.is_file():
            return None
        try:
            doc = load_json(ENTRY_KIND, self.json_path)
            read = _read_list(doc.get("read"))
            if read is None or not all(f.unchanged() for f in read):
                return None
            result = CompileResult.from_dict(doc.get("result"), source=str(self.json_path))
        except SchemaError:
            return None  # an unreadable entry is recompiled, and overwritten
        result.cached = True
        return result

    def store(self, compiled: Compiled) -> None:
        """Keep ``compiled`` with the digests of the files it read (nothing is kept when
        one of them changed while it compiled)."""
        read = _digests(compiled.read, compiled.started_ns)
        if read is None:
            return
        from perflab.model.saved import CacheEntryDoc
        from perflab.model.schema import encode

        doc = encode(
            CacheEntryDoc(result=compiled.result.document(sass=False), read=_read_doc(read))
        )
        try:
            self.json_path.parent.mkdir(parents=True, exist_ok=True)
            for stale in (self.sass_path, self.live_path):  # an earlier cubin's disassembly
                stale.unlink(missing_ok=True)
            dump_json(ENTRY_KIND, doc, self.json_path)
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
    job: CompileJob, run: Callable[[], Compiled], *, cache: bool = True
) -> CompileResult:
    """``run()``'s result for ``job``, from the disk cache when an entry has the job's
    key and the files its compile read are unchanged (its ``cached`` is then True; else
    run and stored), with SASS attached to disassemble on first use."""
    entry = _CacheEntry(cache_key(job.cache_parts())) if cache else None
    result = entry.load() if entry is not None else None
    if result is None:
        compiled = run()
        result = compiled.result
        if entry is not None:
            entry.store(compiled)
    attach_sass(result, entry, job.timeout)
    return result


# ---- SASS (lazy) -----------------------------------------------------------------------------


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


# ---- what a result is made of ----------------------------------------------------------------


def res_usage(tmp: Path, timeout: float) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage`` of ``tmp/cell.cubin``; empty when cuobjdump is missing."""
    cuobjdump = toolchain.find_tool("cuobjdump")
    if cuobjdump is None:
        return {}
    done = toolchain.run_tool(cuobjdump, ["-res-usage", "cell.cubin"], cwd=tmp, timeout=timeout)
    return parse_res_usage(done.stdout) if done.returncode == 0 else {}


def kernel_artifacts(
    ptx: str, user_file: str, arch: str, resources: Mapping[str, Resources]
) -> list[KernelArtifacts]:
    """One entry per kernel of the PTX module, with its demangled name, PTX span and
    ``resources``; ``user_file`` is the source whose lines the PTX's line info names."""
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


def tool_versions() -> dict[str, str]:
    """The environment's versions and those of the compile tools found."""
    from perflab.capture.env import versions

    found = versions()
    for name in toolchain.TOOLS:
        tool = toolchain.find_tool(name)
        if tool is not None and tool.version:
            found[name] = tool.version
    return found
