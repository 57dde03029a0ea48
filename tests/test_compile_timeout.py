"""``--timeout`` of ``perflab compile`` and ``%%ptx``: a value out of range is perflab's
error with the range accepted, not an OverflowError from the waiting code."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from perflab.capture.compile import compile_cuda, compile_triton
from perflab.capture.toolchain import MAX_TIMEOUT_S, check_timeout
from perflab.cli import main
from perflab.errors import InputError

OUT_OF_RANGE = ["inf", "1e308", "1e400", "9999999999999", "nan", "-1", "0", "-inf", "3600.5"]
RANGE = r"timeout must be a positive number of seconds, at most 3600, not "


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_cli_refuses_a_timeout_out_of_range(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1.f; }\n")
    assert main(["compile", str(tmp_path / "k.cu"), "--arch", "sm_80", f"--timeout={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perflab: error: {RANGE}") and "Traceback" not in err


def test_ptx_magic_refuses_a_timeout_out_of_range() -> None:
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "perflab")
    for value in ("inf", "1e400", "nan"):
        res = shell.run_cell(  # type: ignore[no-untyped-call]
            f"%%ptx --timeout {value}\n__global__ void k(float* x) {{ x[0] = 1; }}"
        )
        assert isinstance(res.error_in_exec, UsageError) and RANGE in str(res.error_in_exec)


@pytest.mark.parametrize("value", [math.inf, math.nan, 1e308, -1.0, 0, True, "60", None])
def test_library_refuses_it_before_anything_runs(value: object) -> None:
    with pytest.raises(InputError, match=RANGE):
        compile_cuda("__global__ void k() {}", arch="sm_80", timeout=value, cache=False)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=RANGE):  # before Triton is even imported
        compile_triton(object(), signature=[], timeout=value)  # type: ignore[arg-type]


def test_the_range_ends_are_accepted() -> None:
    assert check_timeout(MAX_TIMEOUT_S) == 3600.0 and check_timeout(1) == 1.0
    assert check_timeout(0.25) == 0.25
