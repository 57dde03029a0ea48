"""Extra nvcc flags are matched exactly against one table: shell payloads, look-alike
names and bad values are refused (through the library, ``perflab compile`` and
``%%ptx --flags``), nothing reaches nvcc or its ``sh -c`` children, and a seeded fuzz
of the validator only ever refuses or returns flags that are in the table exactly."""

from __future__ import annotations

import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import perflab
import perflab.magics.ptx as ptx_magic
from perflab.capture.compile import (
    NVCC_FLAGS,
    PTXAS_FLAGS,
    allowed_flags_text,
    check_flags,
)
from perflab.cli import main
from perflab.commands.ptx import join_dash_values
from perflab.errors import InputError

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 2.f; }\n"
SHELL_METACHARACTERS = ("$(", "`", ";", "|", "&", ">", "<")


def payloads(marker: Path) -> list[str]:
    """The reported attacks, each of which would create ``marker`` if a shell ran it."""
    return [
        f"-DX=$(touch${{IFS}}{marker})",
        f"-DX=`touch {marker}`",
        f"-D$(touch${{IFS}}{marker})=1",
        f"-Xptxas=-v,-O3`touch {marker}`",
        f"-Xptxas -v,-O3$(touch${{IFS}}{marker})",
        f"-DX=1;touch {marker}",
        f"-I/tmp|touch {marker}",
        f"-DX=1&touch {marker}",
        f"-DX=1>{marker}",
        f"-time={marker}",
        "-tile-only",
        "-target-dir=/etc",
    ]


PAYLOAD_NAMES = [
    "dollar-paren",
    "backticks",
    "macro-name",
    "ptxas-backticks",
    "ptxas-dollar",
    "semicolon",
    "pipe",
    "ampersand",
    "redirect",
    "time-file",
    "tile-only",
    "target-dir",
]


@pytest.mark.parametrize("index", range(len(PAYLOAD_NAMES)), ids=PAYLOAD_NAMES)
def test_payloads_are_refused_by_the_library(tmp_path: Path, index: int) -> None:
    marker = tmp_path / "PWNED"
    flags = payloads(marker)[index]
    with pytest.raises(InputError, match=r"--flags: .* is not allowed; allowed: -D"):
        perflab.compile_cuda(KERNEL, arch="sm_80", flags=flags, cache=False)
    assert not marker.exists()


@pytest.mark.parametrize("form", ["equals", "separate"])
def test_payloads_are_refused_by_perflab_compile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    source = tmp_path / "k.cu"
    source.write_text(KERNEL)
    marker = tmp_path / "PWNED"
    for flags in payloads(marker):
        argv = [f"--flags={flags}"] if form == "equals" else ["--flags", flags]
        assert main(["compile", str(source), "--arch", "sm_80", *argv]) == 2
        err = capsys.readouterr().err
        assert "perflab: error: --flags:" in err and "allowed:" in err, flags
        assert "Traceback" not in err
    assert not marker.exists()


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "perflab")
    return shell


def run_cell(ip: Any, text: str) -> Any:
    return ip.run_cell(text)


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    monkeypatch.setattr(ptx_magic, "display", seen.append)
    return seen


def test_payloads_are_refused_by_the_magic(
    ip: InteractiveShell, shown: list[Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "PWNED"
    for flags in payloads(marker):
        quote = "'" if "'" not in flags else '"'
        res = run_cell(ip, f"%%ptx --arch sm_80 --flags {quote}{flags}{quote}\n{KERNEL}")
        assert isinstance(res.error_in_exec, UsageError), flags
        assert "is not allowed; allowed:" in capsys.readouterr().err, flags
    assert not marker.exists() and shown == []


@pytest.mark.parametrize(
    "line",
    ['--flags "-DSCALE=3"', "--flags '-DSCALE=3'", "--flags=-DSCALE=3", "--flags -DSCALE=3"],
)
def test_magic_accepts_a_dash_value_in_every_form(
    ip: InteractiveShell, shown: list[Any], line: str
) -> None:
    cell = "__global__ void k(float* x) { x[threadIdx.x] = SCALE; }\n"
    res = run_cell(ip, f"%%ptx -o --arch sm_80 {line}\n{cell}")
    assert res.success, res.error_in_exec
    assert res.result.flags == ["-DSCALE=3"]


def test_cli_accepts_a_dash_value_as_a_separate_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(float* x) { x[threadIdx.x] = SCALE; }\n")
    for argv in (["--flags", "-DSCALE=3"], ["--flags=-DSCALE=3"], ["--flags", "-DSCALE=3 -O3"]):
        assert main(["compile", str(source), "--arch", "sm_80", *argv]) == 0, argv
        assert "kernel k(float*) [sm_80]" in capsys.readouterr().out


def test_join_dash_values_only_joins_the_named_option() -> None:
    assert join_dash_values(["--flags", "-DX=1", "--arch", "sm_80"]) == [
        "--flags=-DX=1",
        "--arch",
        "sm_80",
    ]
    assert join_dash_values(["--flags", "plain", "--kernel", "-x"]) == [
        "--flags",
        "plain",
        "--kernel",
        "-x",
    ]
    assert join_dash_values(["--flags"]) == ["--flags"]


def test_the_refusal_lists_every_flag_in_the_table() -> None:
    with pytest.raises(InputError) as info:
        check_flags("-time=x.csv")
    message = str(info.value)
    assert message.startswith("--flags: '-time=x.csv' is not allowed; allowed: ")
    assert allowed_flags_text() in message
    for rule in (*NVCC_FLAGS, *PTXAS_FLAGS):
        assert all(name in message for name in rule.names)


@pytest.mark.parametrize(
    "flags",
    [
        "-DN=4 -D M -DT=cuda::std::int32_t -DX=-1.5f",
        "--define-macro=Y=2 -UZ",
        "-O3 -O 2 --optimize=1",
        "-maxrregcount=32 --maxrregcount 64",
        "-Xptxas -v,-O3,-dlcm=cg --ptxas-options=-warn-spills",
        "-ftz=true --fmad false -rdc=true",
        "--diag-suppress=177,550 -Werror all-warnings",
        "-I /usr/include -isystem=inc/x --use_fast_math -lineinfo",
    ],
)
def test_allowed_flags_pass_as_given(flags: str) -> None:
    assert check_flags(flags) == shlex.split(flags)
    assert check_flags(shlex.split(flags)) == shlex.split(flags)  # a list works the same


@pytest.mark.parametrize(
    "flags",
    [
        "-D",  # a value is missing
        "-D 1X",  # not a macro name
        "-DX=a,b",  # nvcc would split the list
        "-D=X",
        "-DX='a b'",  # a space: one token, refused
        "-O4",
        "-Ofast",
        "-maxrregcount=0",
        "-maxrregcount=32x",
        "-ftz",
        "-ftz=yes",
        "-use_fast_math=true",
        "-G0",
        "-I-o",
        "-I ~/x",
        "-Xptxas -o,/tmp/x",
        "-Xptxas -v,",
        "-Xptxas -O",
        "-Xptxas --options-file=x",
        "-Xptxas -dlcm=zz",
        "--compiler-bindir=/tmp",
        "-ccbin /tmp",
        "--keep-dir=/etc",
        "-odir /tmp",
        "-t=4;id",
        "-default-stream=per-thread;",
    ],
)
def test_look_alikes_and_bad_values_are_refused(flags: str) -> None:
    with pytest.raises(InputError, match="--flags"):
        check_flags(flags)


# ---- nothing with a shell metacharacter reaches nvcc's children ---------------------------

DRIVER = """
import sys
from perflab.capture.compile import compile_cuda
try:
    compile_cuda(open(sys.argv[1]).read(), arch="sm_80", flags=sys.argv[2], cache=False)
except Exception as exc:
    print(type(exc).__name__)
"""
LEGAL_FLAGS = "-DN=4 -O3 -Xptxas -v,-warn-spills --use_fast_math -maxrregcount=64"


def traced_execs(tmp_path: Path, flags: str) -> list[list[str]]:
    """argv of every program started (execve) while a child process compiles KERNEL."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (apt-get install strace)")
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "drive.py").write_text(DRIVER)
    log = tmp_path / "execve.log"
    env = {**os.environ, "PERFLAB_CACHE_DIR": str(tmp_path / "cache")}
    traced = [sys.executable, str(tmp_path / "drive.py"), str(tmp_path / "k.cu"), flags]
    subprocess.run(
        [strace, "-f", "-qq", "-s", "65536", "-e", "trace=execve", "-o", str(log), *traced],
        check=True,
        timeout=300,
        env=env,
        capture_output=True,
    )
    calls = re.findall(r'execve\("[^"]*", \[(.*?)\], 0x', log.read_text())
    return [re.findall(r'"((?:[^"\\]|\\.)*)"', args) for args in calls]


def test_a_legal_compile_passes_no_shell_metacharacter(tmp_path: Path) -> None:
    execs = traced_execs(tmp_path, LEGAL_FLAGS)
    driver = [argv for argv in execs if argv and argv[-1] == LEGAL_FLAGS]
    children = [argv for argv in execs if argv not in driver]
    assert any("cicc" in " ".join(a) for a in children), "nvcc ran its sub-tools"
    assert any("-warn-spills" in " ".join(a) for a in children), "the flags reached ptxas"
    for argv in children:
        for arg in argv:
            assert not any(c in arg for c in SHELL_METACHARACTERS), argv


def test_a_payload_starts_no_compiler(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    execs = traced_execs(tmp_path, payloads(marker)[0])
    assert not any("nvcc" in " ".join(argv) for argv in execs)
    assert not marker.exists()


# ---- fuzz ---------------------------------------------------------------------------------

FUZZ_SECONDS = float(os.environ.get("PERFLAB_FUZZ_SECONDS", "0"))
FUZZ_CASES = 4000  # when no time budget is set: a fixed, seeded number (about a second)
PIECES = [
    *(name for rule in (*NVCC_FLAGS, *PTXAS_FLAGS) for name in rule.names),
    "-t", "-time", "-o", "-ccbin", "-Xcompiler", "--keep-dir", "-odir", "-E", "-x",
    "=", ",", " ", "-", "--", "X", "N", "1", "32", "true", "cg", "/tmp", "a.b",
    "$(", ")", "`", ";", "|", "&", ">", "<", "${IFS}", "'", '"', "\\", "\n", "*", "?",
    "~", "!", "#", "{", "}", "touch", "PWNED", "-v", "-O3",
]  # fmt: skip
SAFE_TOKEN_RE = re.compile(r"[A-Za-z0-9_./:+=,-]+")


def in_table(tokens: list[str]) -> bool:
    """An independent reading of an accepted list: every flag is a table name, alone,
    as NAME=VALUE, or a one-letter name with its value attached, and every token is
    made of characters no shell gives a meaning to."""
    names = {name: rule for rule in NVCC_FLAGS for name in rule.names}
    position = 0
    while position < len(tokens):
        token = tokens[position]
        if not SAFE_TOKEN_RE.fullmatch(token):
            return False
        head = token.split("=", 1)[0]
        rule = names.get(token) or names.get(head) or names.get(token[:2])
        if rule is None:
            return False
        if token in names and rule.value is not None:
            position += 1  # its value is the next token
            if position == len(tokens) or not SAFE_TOKEN_RE.fullmatch(tokens[position]):
                return False
        position += 1
    return True


def random_flags(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8)))


def outcome(text: str) -> list[str] | str:
    """The accepted tokens, or the refusal's message."""
    try:
        return check_flags(text)
    except InputError as exc:
        return str(exc)


def test_fuzzed_flags_are_refused_or_exactly_in_the_table() -> None:
    rng = random.Random(20261203)
    deadline = time.monotonic() + FUZZ_SECONDS
    tried = accepted = 0
    while tried < FUZZ_CASES or time.monotonic() < deadline:
        text = random_flags(rng)
        tried += 1
        result = outcome(text)
        if isinstance(result, str):
            assert result.startswith("--flags: "), (text, result)
        else:
            accepted += 1
            assert in_table(result), (text, result)
    print(f"flag fuzz: {tried} tried, {accepted} accepted, {tried - accepted} refused")
    assert accepted > 0 and tried - accepted > 0  # both outcomes were exercised
