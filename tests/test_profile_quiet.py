"""Kineto's routine log lines ("USDT: ... profiler_start") stay out of stderr (Jupyter shows
fd 2 as red error boxes) and are kept in the trace's meta; other stderr text still shows."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from perflab.capture.profile import PROFILER_LOG_LINE, quiet_profiler_log

ROUTINE = "USDT:2026-12-03 01:08:16 5604:5604 SyncActivityProfilerHandler.cpp:52] profiler_start"


def test_routine_lines_are_kept_and_other_text_passes_through(
    capfd: pytest.CaptureFixture[str],
) -> None:
    log: list[str] = []
    with quiet_profiler_log(log):
        os.write(2, f"{ROUTINE}\nCUPTI_ERROR_INSUFFICIENT_PRIVILEGES\n".encode())
    os.write(2, b"after the block\n")
    err = capfd.readouterr().err
    assert "USDT" not in err
    assert "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" in err and "after the block" in err
    assert log == [ROUTINE, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"]


def test_stderr_is_restored_when_the_block_raises(capfd: pytest.CaptureFixture[str]) -> None:
    log: list[str] = []
    before = os.fstat(2).st_ino

    def interrupted() -> None:
        with quiet_profiler_log(log):
            os.write(2, f"{ROUTINE}\n".encode())
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert os.fstat(2).st_ino == before
    os.write(2, b"still visible\n")
    assert capfd.readouterr().err == "still visible\n"
    assert log == [ROUTINE]


def test_a_profiled_cell_writes_no_profiler_lines_to_stderr() -> None:
    """``%%gpuprofile --trace`` through IPython's InteractiveShell in a fresh process: the
    lines come from C++ straight to fd 2, so only the process's own stderr shows whether
    they escaped."""
    pytest.importorskip("torch")
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'perflab')\n"
        "import perflab.capture.profile as capture\n"
        "traces, real = [], capture.profile\n"
        "capture.profile = lambda fn, **kw: traces.append(real(fn, **kw)) or traces[-1]\n"
        "cell = ('import sys, torch\\n'\n"
        "        'print(\"cell stderr\", file=sys.stderr)\\n'\n"
        "        't = torch.ones(64, 64) @ torch.ones(64, 64)')\n"
        "res = ip.run_cell('%%gpuprofile --budget 5 --warmup 1 --trace -o\\n' + cell)\n"
        "assert res.success, res.error_in_exec\n"
        "print('\\n'.join(traces[0].meta['profiler_log']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr
    assert "USDT" not in done.stderr and "profiler_st" not in done.stderr
    assert "cell stderr" in done.stderr  # the user's own output is untouched
    kept = done.stdout.splitlines()
    assert any(PROFILER_LOG_LINE.match(line) and "profiler_start" in line for line in kept)
    assert any("profiler_stop" in line for line in kept)
