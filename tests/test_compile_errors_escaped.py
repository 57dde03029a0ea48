"""Compile messages reach terminals (``perflab compile``, ``%%ptx``, a traceback), and they
echo what the user chose: the file's name and its source lines. Whatever a terminal would
act on in them (ESC sequences, BEL, bidirectional overrides) is shown as its escape."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.capture.compile import CompileError, compile_cuda, source_excerpt
from perflab.capture.compile_errors import triton_compile_error
from perflab.cli import main

# clears the screen, retitles the window, rings the bell, then reverses what follows
HOSTILE = "\x1b[2J\x1b]0;title\x07\u202e"
ESCAPED = r"\x1b[2J\x1b]0;title\x07\u202e"


def _acted_on(text: str) -> list[str]:
    """What a terminal would act on in ``text``, newlines and tabs aside."""
    return [c for c in text if c not in "\n\t" and (not c.isprintable() or c in "\u202e\u2028")]


def test_the_cli_escapes_the_file_name_and_the_echoed_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / f"k{HOSTILE}.cu"
    source.write_text(f"__global__ void k(float* y) {{\n  y[0] = 1.0f; oops /* {HOSTILE} */\n}}\n")
    assert main(["compile", str(source)]) == 1
    err = capsys.readouterr().err
    assert not _acted_on(err), err
    assert f'k{ESCAPED}.cu:2: error: identifier "oops" is undefined' in err
    assert f"oops /* {ESCAPED} */" in err  # the echoed line, escaped


def test_a_compile_error_from_python_is_escaped() -> None:
    with pytest.raises(CompileError) as info:
        compile_cuda(f"__global__ void k() {{ oops; }} // {HOSTILE}", source_name=f"a{HOSTILE}.cu")
    assert not _acted_on(str(info.value)) and f"a{ESCAPED}.cu:1: error" in str(info.value)


def test_warnings_that_quote_the_source_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "w.cu"
    source.write_text(f'#warning "{HOSTILE}"\n__global__ void k(float* y) {{ y[0] = 1.0f; }}\n')
    assert main(["compile", str(source)]) == 0
    out = capsys.readouterr().out
    assert not _acted_on(out) and f'#warning "{ESCAPED}"' in out


def test_the_caret_stays_under_its_character_after_an_escape() -> None:
    line = f"x = {HOSTILE}; oops;"
    shown = source_excerpt([line], 1, line.index("oops")).splitlines()
    assert shown[1].index("oops") == shown[2].index("^")
    assert not _acted_on("\n".join(shown))
    tabbed = source_excerpt(["\tq\x07 = oops;"], 1, 6).splitlines()
    assert tabbed[2].endswith("| \t" + " " * 8 + "^")  # q, the 4 characters of \x07, " = "
    assert tabbed[1].index("oops") == tabbed[2].index("^")


def test_triton_errors_escape_the_file_name_and_message() -> None:
    error = triton_compile_error(ValueError(f"bad {HOSTILE}"), "", f"t{HOSTILE}.py")
    assert not _acted_on(str(error)) and f"t{ESCAPED}.py: error: bad {ESCAPED}" in str(error)
