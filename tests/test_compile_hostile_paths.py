"""Folder and file names never reach nvcc's shell lines.

nvcc writes its ``-I`` folders into its own ``sh -c`` lines inside double quotes, where
a backtick still runs a command (``mkdir 'e`cd;id>PWNED`'`` then ``perflab compile
'e`cd;id>PWNED`/k.cu'`` wrote ``$HOME/PWNED``) and a ``"`` ends the quotes. perflab
compiles a copy of the source under a fixed name in its own scratch folder, hands nvcc
each include folder as a link there (``include-0``...), keeps scratch folders under
names of safe characters, and refuses a hostile ``-I`` value as it does any flag.
Diagnostics and the line mapping still name the user's files and lines.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from perflab.capture import toolchain
from perflab.capture.compile import compile_cuda
from perflab.cli import main
from perflab.errors import InputError, ToolchainError

# each hostile piece carries a tag, so that an execve trace shows whether it got through
SOURCE_DIRS = ("e`cd;id>PWNED`TAGA", '$(cd;id>PWNED)"TAGB"', "-TAGC\nx", "a'TAGD; b|c&d")
FILE_NAME = "-k`cd;id>PWNED`TAGE.cu"
INCLUDE_CWD = "w$(cd;touch PWNED)TAGF"
TAGS = ("TAGA", "TAGB", "TAGC", "TAGD", "TAGE", "TAGF", "TAGG")
HEADER = "__device__ float twice_of(float v) { return 2.f * v; }\n"
EXTRA = "__device__ float plus_one(float v) { return v + 1.f; }\n"
KERNEL = """#include "helper.cuh"
#include "extra.cuh"
__global__ void twice(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = plus_one(twice_of(x[i]));
}
"""
STORE_LINE = 5  # the line of the store above


def strace_works() -> bool:
    if shutil.which("strace") is None:
        return False
    done = subprocess.run(
        ["strace", "-f", "-e", "trace=execve", "-o", os.devnull, "true"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return done.returncode == 0


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """$HOME for the commands under test: where ``cd;id>PWNED`` would write."""
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def pwned(root: Path) -> list[Path]:
    """What a payload that got through would have written (``PWNED``, ``FUZZ<n>``)."""
    return [p for p in root.rglob("*") if re.fullmatch(r"PWNED|FUZZ\d+", p.name)]


def hostile_project(root: Path) -> tuple[Path, Path]:
    """``root/<hostile dirs>/<hostile file>.cu`` including a header beside it and one from
    a folder ``inc`` under another hostile folder; returns (source, that folder's parent)."""
    folder = root.joinpath(*SOURCE_DIRS)
    folder.mkdir(parents=True)
    (folder / "helper.cuh").write_text(HEADER)
    source = folder / FILE_NAME
    source.write_text(KERNEL)
    cwd = root / INCLUDE_CWD
    (cwd / "inc").mkdir(parents=True)
    (cwd / "inc" / "extra.cuh").write_text(EXTRA)
    return source, cwd


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "HOME": str(home), **extra}


def traced_execs(log: Path) -> list[str]:
    """The execve lines of the processes the traced command started (its own left out)."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if "execve(" in line]
    root = lines[0].split()[0]
    return [line for line in lines if line.split()[0] != root]


@pytest.mark.skipif(not strace_works(), reason="strace is not available here")
def test_no_hostile_name_reaches_nvcc_or_its_children(tmp_path: Path, home: Path) -> None:
    source, cwd = hostile_project(tmp_path)
    # a TMPDIR with a backtick too: the scratch folder moves to /tmp
    hostile_tmp = tmp_path / "t`cd;id>PWNED`TAGG"
    hostile_tmp.mkdir()
    log = tmp_path / "execve.log"
    trace = ["strace", "-f", "-e", "trace=execve", "-s", "65536", "-o", str(log)]
    cli = [sys.executable, "-m", "perflab", "compile", str(source), "--arch", "sm_80"]
    done = subprocess.run(
        [*trace, *cli, "--flags", "-I inc", "--json"],
        cwd=cwd,
        env=cli_env(home, TMPDIR=str(hostile_tmp)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert pwned(tmp_path) == []
    execs = traced_execs(log)
    assert any("cicc" in line for line in execs) and any("ptxas" in line for line in execs)
    leaked = [line[:300] for line in execs if any(tag in line for tag in TAGS)]
    assert leaked == []
    assert any("include-0" in line for line in execs)  # the links are what nvcc sees
    assert list(hostile_tmp.iterdir()) == []
    # the result still names the user's file, and SASS maps to its lines
    doc = json.loads(done.stdout)
    assert doc["source_name"] == str(source)
    (kernel,) = doc["kernels"]
    stores = [s for s in kernel["sass_lines"] if s["opcode"].startswith("STG")]
    assert stores and {s["line"] for s in stores} == {STORE_LINE}


def test_errors_name_the_users_files_in_hostile_folders(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, cwd = hostile_project(tmp_path)
    header = cwd / "inc" / "extra.cuh"
    header.write_text("__device__ float plus_one(float v) {\n  return v + nope;\n}\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    assert main(["compile", str(source), "--arch", "sm_80", "--flags", "-I inc"]) == 1
    err = capsys.readouterr().err
    assert f'{header}:2: error: identifier "nope" is undefined' in err
    assert pwned(tmp_path) == []


@pytest.mark.parametrize(
    "flags",
    [
        "-I 'a`touch PWNED`'",
        "-I '$(touch PWNED)'",
        "-I 'a\"b'",
        '-I "a\'b"',
        "-I 'a\nb'",
        "-I -x",
        "-I-x",
        "-I 'a;b'",
        "-I 'a|b'",
        "-I 'a&b'",
        "-I 'a b'",
        "--include-path='a$b'",
        "-isystem 'a`b`'",
        "--system-include=a;b",
    ],
)
def test_hostile_include_flags_are_refused_naming_the_flag(
    flags: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = tmp_path / "nvcc-ran"
    shim = tmp_path / "nvcc"
    shim.write_text(f"#!/bin/sh\ntouch {ran}\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PERFLAB_NVCC", str(shim))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"^--flags: .*(-I|-isystem|include-path|system-incl)"):
        compile_cuda("__global__ void f() {}", arch="sm_80", flags=flags, cache=False)
    assert not ran.exists() and pwned(tmp_path) == []


def test_a_missing_include_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=rf"--flags: -I nowhere: no such folder \({tmp_path}"):
        compile_cuda("__global__ void f() {}", arch="sm_80", flags="-I nowhere", cache=False)
    with pytest.raises(InputError, match="include_dirs: no such folder"):
        compile_cuda("__global__ void f() {}", include_dirs=[tmp_path / "gone"], cache=False)


def test_scratch_folders_avoid_a_hostile_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = tmp_path / 'a"b`c`'
    hostile.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(hostile))
    with toolchain.private_tempdir() as scratch:
        assert toolchain.safe_path(scratch) and scratch.parent == Path("/tmp")
    assert not scratch.exists()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with toolchain.private_tempdir() as scratch:
        assert scratch.parent == tmp_path


def test_nvcc_under_a_hostile_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "x`touch PWNED`"
    folder.mkdir()
    (folder / "nvcc").write_text("#!/bin/sh\nexit 0\n")
    (folder / "nvcc").chmod(0o755)
    monkeypatch.setenv("PERFLAB_NVCC", str(folder / "nvcc"))
    with pytest.raises(ToolchainError, match=r"nvcc's path .* has a character"):
        compile_cuda("__global__ void f() {}", arch="sm_80", cache=False)


# ---- fuzz ---------------------------------------------------------------------------------

FUZZ_SEED = 20240611
FUZZ_RUNS = 3
HOSTILE_CHARS = "`$()\"';|&<>\n\t *?[]{}~!#\\-=%,:@+"
PAYLOADS = ("`cd;touch FUZZ{n}`", "$(cd;touch FUZZ{n})", '"`cd;touch FUZZ{n}`"', "\n-FUZZ{n}")


def fuzz_name(rng: random.Random, n: int) -> str:
    noise = "".join(rng.choice(HOSTILE_CHARS + "ab") for _ in range(rng.randint(1, 8)))
    payload = rng.choice(PAYLOADS).format(n=n)
    cut = rng.randint(0, len(noise))
    return noise[:cut] + payload + noise[cut:]


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.fixture
def nvcc_argv_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """nvcc behind a shim that logs its arguments (one JSON list a line) and runs it."""
    real = toolchain.require_nvcc()
    log = tmp_path / "nvcc-argv.jsonl"
    shim = tmp_path / "nvcc-shim"
    shim.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv) + '\\n')\n"
        f"os.execv({str(real.path)!r}, [{str(real.path)!r}, *sys.argv[1:]])\n"
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PERFLAB_NVCC", str(shim))
    return log


def test_fuzzed_folder_and_file_names_compile_or_are_refused(
    tmp_path: Path,
    home: Path,
    nvcc_argv_log: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = random.Random(FUZZ_SEED)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    for n in range(FUZZ_RUNS):
        folder = work.joinpath(*[fuzz_name(rng, n) for _ in range(rng.randint(1, 3))])
        folder.mkdir(parents=True)
        (folder / "helper.cuh").write_text(HEADER)
        source = folder / (fuzz_name(rng, n) + ".cu")
        source.write_text(
            f'#include "helper.cuh"\n__global__ void k{n}(float* x) {{ x[0] = 1; }}\n'
        )
        before = files_under(tmp_path)
        code = main(["compile", str(source), "--arch", "sm_80"])
        out, err = capsys.readouterr()
        # compiled, or perflab's own error: never a traceback
        assert code == 0 or (code == 2 and err.startswith("perflab: error:")), (source, err)
        assert "Traceback" not in err
        if code == 0:
            assert f"kernel k{n}(float*)" in out
        created = files_under(tmp_path) - before - {nvcc_argv_log}
        assert created == set() and pwned(tmp_path) == []
    logged = [json.loads(line) for line in nvcc_argv_log.read_text().splitlines()]
    compiles = [argv for argv in logged if "-cubin" in argv]
    assert compiles  # the shim saw real compiles
    assert not any(re.search("FUZZ|`|\\$\\(", arg) for argv in logged for arg in argv)
