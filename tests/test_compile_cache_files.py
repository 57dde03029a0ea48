"""A cached compile is only as good as the files it read: an entry records every header the
compile read, and a lookup where one of them changed (or went missing) compiles again. A
result from the cache says so: ``(cached)`` in text and HTML, ``"cached": true`` in JSON.

The Triton job keys on the kernel as loaded, constants of the user's own modules that it
reads by attribute included (Triton's own key leaves them out)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from perflab.capture.compile import compile_cuda
from perflab.capture.compile_cache import _CacheEntry
from perflab.cli import main
from perflab.model.kernel import CompileResult

if TYPE_CHECKING:
    from perflab.capture.compile_cache import Compiled, FileDigest

KERNEL = """#include "h.cuh"
__global__ void k(float* y, const float* x) { y[threadIdx.x] = f(x[threadIdx.x]); }
"""
PLAIN = "#pragma once\n__device__ float f(float x) { return x * 2.0f; }\n"
TRANSCENDENTAL = "#pragma once\n__device__ float f(float x) { return __expf(x) * __sinf(x); }\n"


def _compile_json(path: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["compile", str(path), "--json", *extra]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def _mufu(doc: dict[str, Any]) -> int:
    return sum("MUFU" in line["text"] for line in doc["kernels"][0]["sass_lines"])


def _write(path: Path, text: str) -> None:
    """Write ``text`` with an mtime in the past: a file changed while a compile runs
    keeps its result out of the cache, and this test compiles right after writing."""
    path.write_text(text, encoding="utf-8")
    past = time.time() - 60
    os.utime(path, (past, past))


def test_an_edited_header_is_compiled_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, header = tmp_path / "a.cu", tmp_path / "h.cuh"
    _write(source, KERNEL)
    _write(header, PLAIN)
    first = _compile_json(source, capsys=capsys)
    assert first["cached"] is False and _mufu(first) == 0
    again = _compile_json(source, capsys=capsys)
    assert again["cached"] is True and _mufu(again) == 0
    _write(header, TRANSCENDENTAL)
    edited = _compile_json(source, capsys=capsys)
    assert edited["cached"] is False and _mufu(edited) > 0  # was the old entry: 0, cached
    assert _compile_json(source, capsys=capsys)["cached"] is True
    assert main(["compile", str(source)]) == 0
    assert "(cached)" in capsys.readouterr().out.splitlines()[0]


def test_the_notebook_view_says_cached() -> None:
    from perflab.render.ptx_view import CompileView

    source = "__global__ void view_cached(float* y) { y[0] = 7.0f; }"
    assert "(cached)" not in CompileView(compile_cuda(source))._repr_mimebundle_()["text/html"]
    bundle = CompileView(compile_cuda(source))._repr_mimebundle_()
    assert "(cached)" in bundle["text/html"] and "(cached)" in bundle["text/plain"]


def _stores(lines: dict[str, Any]) -> list[str]:
    return [s["text"] for s in lines["kernels"][0]["sass_lines"] if "STG" in s["text"]]


def test_angle_includes_from_include_flags_and_device_only_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``<v.h>`` through ``--flags "-I inc"``, and a header only the device pass includes
    (nvcc's -MD lists the host pass's headers alone)."""
    (tmp_path / "inc").mkdir()
    _write(tmp_path / "inc" / "v.h", "#pragma once\n#define V 1.0f\n")
    _write(tmp_path / "dev.cuh", "#pragma once\n#define SCALE 3.0f\n")
    source = tmp_path / "b.cu"
    _write(
        source,
        '#include <v.h>\n#ifdef __CUDA_ARCH__\n#include "dev.cuh"\n#endif\n'
        "__global__ void k(float* y) { y[0] = V * SCALE; }\n",
    )
    flags = ("--flags", f"-I {tmp_path / 'inc'}")
    assert _compile_json(source, *flags, capsys=capsys)["cached"] is False
    assert _compile_json(source, *flags, capsys=capsys)["cached"] is True
    _write(tmp_path / "inc" / "v.h", "#pragma once\n#define V 2.0f\n")
    assert _compile_json(source, *flags, capsys=capsys)["cached"] is False
    assert _compile_json(source, *flags, capsys=capsys)["cached"] is True
    _write(tmp_path / "dev.cuh", "#pragma once\n#define SCALE 5.0f\n")
    assert _compile_json(source, *flags, capsys=capsys)["cached"] is False


def test_the_entry_lists_the_users_headers_by_their_own_paths(tmp_path: Path) -> None:
    from perflab.capture.compile_cache import file_digest

    header = tmp_path / "with space's.cuh"
    _write(header, PLAIN)
    source = KERNEL.replace("h.cuh", header.name)
    result = compile_cuda(source, include_dirs=[tmp_path])
    assert not result.cached
    entries = [_recorded(p) for p in _entries_of("k(float*, float const*)")]
    read = {f.path: f.sha256 for files in entries for f in files}
    assert read[str(header)] == file_digest(str(header))
    assert not any("/include-" in p for p in read)  # perflab's links, not the user's folder
    assert compile_cuda(source, include_dirs=[tmp_path]).cached


def _recorded(entry: Path) -> list[FileDigest]:
    """The files a cache entry says its compile read."""
    from perflab.capture.compile_cache import _read_list

    found = _read_list(json.loads(entry.read_text())["read"])
    assert found is not None
    return found


def _entries_of(kernel_name: str) -> list[Path]:
    from perflab.capture.compile import cache_root

    return [p for p in cache_root().rglob("*.json") if kernel_name in p.read_text()]


def _compiled(read: list[str], started_ns: int) -> Compiled:
    from perflab.capture.compile_cache import Compiled

    result = CompileResult(
        lang="cuda", arch="sm_90a", source="", source_name="x", kernels=[], ptx=""
    )
    return Compiled(result, read, started_ns)


def test_a_missing_or_changed_file_is_a_miss(tmp_path: Path) -> None:
    header = tmp_path / "h.cuh"
    _write(header, PLAIN)
    entry = _CacheEntry("cd" + "1" * 62, root=tmp_path / "cache")
    entry.store(_compiled([str(header)], time.time_ns()))
    loaded = entry.load()
    assert loaded is not None and loaded.cached
    _write(header, TRANSCENDENTAL)
    assert entry.load() is None
    _write(header, PLAIN)
    assert entry.load() is not None
    header.unlink()
    assert entry.load() is None


def test_a_quiet_file_vouches_by_its_status_and_a_rewrite_is_still_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header untouched for a while is not read again while its status (inode, size,
    times) is the same; rewritten with the same size and its old mtime put back, its
    change time gives it away and its bytes are compared."""
    from perflab.capture import compile_cache

    header = tmp_path / "h.cuh"
    _write(header, PLAIN)
    entry = _CacheEntry("aa" + "4" * 62, root=tmp_path / "cache")
    entry.store(_compiled([str(header)], time.time_ns()))
    (recorded,) = _recorded(entry.json_path)
    assert recorded.status is None  # changed (its ctime) just now: its bytes vouch
    monkeypatch.setattr(compile_cache, "QUIET_NS", 0)
    entry.store(_compiled([str(header)], time.time_ns()))
    (recorded,) = _recorded(entry.json_path)
    assert recorded.status is not None and recorded.status[2] == len(PLAIN)
    reads: list[str] = []
    real_digest = compile_cache.file_digest

    def counted(path: str) -> str | None:
        reads.append(path)
        return real_digest(path)

    monkeypatch.setattr(compile_cache, "file_digest", counted)
    assert entry.load() is not None and reads == []
    before = header.stat()
    header.write_text(PLAIN.replace("2.0f", "3.0f"))  # the same size
    os.utime(header, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert entry.load() is None and reads == [str(header)]


def test_a_file_changed_while_compiling_keeps_the_result_out(tmp_path: Path) -> None:
    header = tmp_path / "h.cuh"
    started = time.time_ns()
    header.write_text(PLAIN)  # written after the compile started
    os.utime(header, ns=(started + 1, started + 1))
    entry = _CacheEntry("ef" + "2" * 62, root=tmp_path / "cache")
    entry.store(_compiled([str(header)], started))
    assert not entry.json_path.exists() and entry.load() is None


def test_a_new_entry_drops_the_disassembly_of_the_old_one(tmp_path: Path) -> None:
    entry = _CacheEntry("ab" + "3" * 62, root=tmp_path / "cache")
    entry.write_sass("old")
    entry.write_live("old")
    entry.store(_compiled([], time.time_ns()))
    assert entry.read_sass() is None and entry.read_live() is None


@pytest.mark.parametrize(
    "read",
    [
        [],
        {"paths": "/a", "sha256": "0" * 64},
        {"paths": "/a", "sha256": "0" * 63, "status": "-"},
        {"paths": "/a", "sha256": "g" * 64, "status": "-"},
        {"paths": "/a\0/b", "sha256": "0" * 128, "status": "-"},
        {"paths": "/a", "sha256": "0" * 64, "status": "1 2 3"},
        {"paths": "/a", "sha256": "0" * 64, "status": "1 2 3 4 x"},
        {"paths": 1, "sha256": "", "status": ""},
    ],
)
def test_an_entry_whose_file_list_is_not_perflabs_is_a_miss(tmp_path: Path, read: object) -> None:
    entry = _CacheEntry("bb" + "5" * 62, root=tmp_path / "cache")
    entry.store(_compiled([], time.time_ns()))
    assert entry.load() is not None
    doc = json.loads(entry.json_path.read_text())
    entry.json_path.write_text(json.dumps({**doc, "read": read}))
    assert entry.load() is None


def test_line_marker_names_are_unescaped(tmp_path: Path) -> None:
    from perflab.capture.compile import CudaJob, files_read
    from perflab.model.arch import parse_arch

    folder = tmp_path / "inc"
    job = CudaJob("", parse_arch("sm_90a"), include_dirs=(("-I", str(folder)),))
    (tmp_path / "cell.cpp1.ii").write_bytes(
        b'# 1 "cell.cu"\n# 1 "<built-in>"\n'
        + f'# 1 "{tmp_path}/include-0/a\\\\b\\"c\\101.h" 1\n'.encode()
        + b'# 7 "/usr/include/x.h" 2 3\n# 1 "../up.h"\nint x;\n'
    )
    assert files_read(tmp_path, job) == tuple(
        sorted([f'{folder}/a\\b"cA.h', "/usr/include/x.h", str(tmp_path.parent / "up.h")])
    )
    (tmp_path / "cell.cpp1.ii").unlink()
    assert files_read(tmp_path, job) == (str(tmp_path),)  # nothing kept: never found again


OWN_MODULE = "perflab_test_scales"
SCALES_PY = """import triton.language as tl

SCALE = tl.constexpr({scale})
"""
KERNEL_PY = f"""import triton
import triton.language as tl

import {OWN_MODULE}


@triton.jit
def scaled(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * {OWN_MODULE}.SCALE, mask=mask)
"""


def test_a_triton_kernel_reading_a_constant_of_its_own_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kernel's file imports a module beside it (as ``python FILE`` would) and reads
    ``module.SCALE``: neither Triton's key nor its own cache saw a change of SCALE."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    _write(tmp_path / f"{OWN_MODULE}.py", SCALES_PY.format(scale="3.0"))
    _write(tmp_path / "k.py", KERNEL_PY)
    args = ("--signature", "*fp32,*fp32,i32", "--constexprs", "BLOCK=128")

    def compile_anew() -> tuple[bool, set[str]]:
        monkeypatch.delitem(sys.modules, OWN_MODULE, raising=False)  # as a new process
        doc = _compile_json(tmp_path / "k.py", *args, capsys=capsys)
        return doc["cached"], set(re.findall(r"0f[0-9A-F]{8}", doc["ptx"]))

    three, five = "0f40400000", "0f40A00000"  # 3.0 and 5.0 as PTX writes them
    assert compile_anew() == (False, {three})
    assert compile_anew() == (True, {three})
    _write(tmp_path / f"{OWN_MODULE}.py", SCALES_PY.format(scale="5.0"))
    assert compile_anew() == (False, {five})
    assert compile_anew() == (True, {five})
    assert str(tmp_path) not in sys.path  # the file's folder was on the path while it ran
