"""Tool runs leave no process behind: a timeout, an error while waiting or Ctrl-C kills
the command's whole process group (nvcc's ``sh`` and ``cicc`` children included), and
nvcc's temporary files stay in the private folder that is removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from perflab.capture import _proc
from perflab.capture.compile import CompileError, compile_cuda
from perflab.errors import ToolchainError

# a child (sh, quick to start even on a busy machine) that starts a grandchild which
# ignores SIGTERM, writes the grandchild's pid to $1 and waits for it
FAMILY = ["/bin/sh", "-c", 'trap "" TERM; sleep 300 & echo $! > "$1"; wait', "sh"]


def alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped by init counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_file(path: Path, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written")


def test_a_timeout_kills_the_grandchild_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    with pytest.raises(subprocess.TimeoutExpired):
        _proc.run([*FAMILY, str(pid_file)], timeout=3.0)
    assert gone_soon(wait_for_file(pid_file))


def gone_soon(pid: int, timeout: float = 5.0) -> bool:
    """The process exits within ``timeout`` (SIGKILL is delivered asynchronously, and a busy
    machine may take a moment to tear it down); a survivor fails the test."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def interrupt_when_written(tmp_path: Path) -> Iterator[Path]:
    """Raise KeyboardInterrupt in this thread, as Ctrl-C would, once the grandchild's pid
    file is written (so the interrupt lands while the command runs, however busy the
    machine is); yields the pid file's path."""
    pid_file = tmp_path / "grandchild.pid"

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    def signal_when_written() -> None:
        wait_for_file(pid_file)
        os.kill(os.getpid(), signal.SIGALRM)

    previous = signal.signal(signal.SIGALRM, interrupt)
    watcher = threading.Thread(target=signal_when_written, daemon=True)
    watcher.start()
    try:
        yield pid_file
    finally:
        watcher.join(timeout=35)
        signal.signal(signal.SIGALRM, previous)


def test_ctrl_c_kills_the_whole_group(interrupt_when_written: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        _proc.run([*FAMILY, str(interrupt_when_written)], timeout=120.0)
    assert gone_soon(wait_for_file(interrupt_when_written))


def test_a_finished_command_returns_its_output(tmp_path: Path) -> None:
    done = _proc.run(
        [sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"],
        timeout=30.0,
        stdin="abc",
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (3, "ABC", "")


def big_kernel(statements: int) -> str:
    """A kernel whose front end (cicc) runs for about a minute on this machine."""
    body = "\n".join(
        f"  a = a * {i}.5f + x[(threadIdx.x + {i}) % 1024];" for i in range(statements)
    )
    return f"__global__ void big(float* x) {{\n  float a = x[0];\n{body}\n  x[0] = a;\n}}\n"


def processes_naming(text: str) -> list[str]:
    """Command lines of running processes that mention ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not alive(int(entry.name)):
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def test_a_compile_timeout_leaves_no_compiler_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # scratch folders under tmp_path, so every sh/cicc/ptxas of this compile names it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:  # what ran during the compile (so the test is not vacuous)
        while not stop.is_set():
            seen.update(
                line.split()[1].rsplit("/", 1)[-1] for line in processes_naming(str(tmp_path))
            )
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with pytest.raises(ToolchainError, match="nvcc timed out after 5 s"):
            compile_cuda(big_kernel(20000), arch="sm_80", timeout=5.0, cache=False)
    finally:
        stop.set()
        watcher.join()
    assert "cicc" in seen, seen  # the front end was running when the timeout came
    assert processes_naming(str(tmp_path)) == []
    assert list(tmp_path.iterdir()) == []  # the scratch folder is gone too


def test_failed_compiles_leave_no_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nvcc puts cell-*.lgenfe.bc in $TMPDIR: point both Python's and the tools' temp
    # folders into tmp_path, so that nothing another process does can interfere
    python_tmp, tools_tmp = tmp_path / "python", tmp_path / "env"
    python_tmp.mkdir()
    tools_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(python_tmp))
    monkeypatch.setenv("TMPDIR", str(tools_tmp))
    for broken in ("__global__ void f(int* x) {\n  x[0] = 1\n}\n", "__global__ void g() { oops }"):
        with pytest.raises(CompileError):
            compile_cuda(broken, arch="sm_80", cache=False)
    assert list(python_tmp.iterdir()) == [] and list(tools_tmp.iterdir()) == []


def test_tools_run_with_tmpdir_in_their_scratch_folder(tmp_path: Path) -> None:
    from perflab.capture.toolchain import Tool, run_tool

    python = Tool("python", Path(sys.executable), "path")
    done = run_tool(python, ["-c", "import os; print(os.environ['TMPDIR'])"], cwd=tmp_path)
    assert done.stdout.strip() == str(tmp_path)
    assert os.environ.get("TMPDIR") != str(tmp_path)  # only the child's is changed
