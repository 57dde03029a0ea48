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
from collections.abc import Callable, Iterator
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
    """The pid a process wrote to ``path`` (with ``echo``)."""
    return int(wait_for_text(path, timeout))


def wait_for_text(path: Path, timeout: float = 60.0) -> str:
    """What a process wrote to ``path``, once it has written a whole line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text().strip()
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
    return soon(lambda: not alive(pid), timeout)


def soon(done: Callable[[], bool], timeout: float) -> bool:
    """``done()`` within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not done():
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


# ---- SIGTERM and SIGHUP -------------------------------------------------------------------

# nvcc stand-in: answers the version and target queries, and for a compile starts a child
# that ignores SIGTERM, records its group and scratch folder, and waits
SLOW_NVCC = """#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 12.8, V12.8.93"; exit 0 ;;
  --list-gpu-code) echo sm_80; exit 0 ;;
esac
sh -c 'trap "" TERM; sleep 300' &
echo "$$ $PWD" > "$SLOW_NVCC_STARTED"
wait
"""


def group_members(pgid: int) -> list[int]:
    """Running (not zombie) processes whose process group is ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def group_gone_soon(pgid: int, timeout: float = 10.0) -> bool:
    return soon(lambda: not group_members(pgid), timeout)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_terminated_compile_leaves_no_compiler_and_no_scratch(
    signum: int, tmp_path: Path
) -> None:
    nvcc, started, scratch_parent = tmp_path / "nvcc", tmp_path / "started", tmp_path / "tmp"
    nvcc.write_text(SLOW_NVCC)
    nvcc.chmod(0o755)
    scratch_parent.mkdir()
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1.f; }\n")
    env = {
        **os.environ,
        "PERFLAB_NVCC": str(nvcc),
        "SLOW_NVCC_STARTED": str(started),
        "TMPDIR": str(scratch_parent),
    }
    cli = subprocess.Popen(
        [sys.executable, "-m", "perflab", "compile", "k.cu", "--arch", "sm_80"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        pgid_text, scratch = wait_for_text(started).split(maxsplit=1)
        assert Path(scratch).parent == scratch_parent and group_members(int(pgid_text))
        cli.send_signal(signum)
        cli.communicate(timeout=60)
    finally:
        cli.kill()
        cli.wait()
    assert cli.returncode == -signum  # it still dies of the signal, as it would have
    assert group_gone_soon(int(pgid_text)), group_members(int(pgid_text))
    assert not Path(scratch).exists() and list(scratch_parent.iterdir()) == []


@pytest.fixture
def sigterm_when_written(tmp_path: Path) -> Iterator[Path]:
    """Send this process SIGTERM once the grandchild's pid file is written."""
    pid_file = tmp_path / "grandchild.pid"

    def signal_when_written() -> None:
        wait_for_file(pid_file)
        os.kill(os.getpid(), signal.SIGTERM)

    watcher = threading.Thread(target=signal_when_written, daemon=True)
    watcher.start()
    yield pid_file
    watcher.join(timeout=35)


def test_sigterm_chains_to_the_handler_there_before(sigterm_when_written: Path) -> None:
    """In a Jupyter kernel, say: the kernel's handler still runs, after the group is
    killed, and is the handler again afterwards."""
    calls: list[int] = []

    def kernels_own(signum: int, frame: FrameType | None) -> None:
        calls.append(signum)

    previous = signal.signal(signal.SIGTERM, kernels_own)
    try:
        with pytest.raises(ToolchainError, match="stopped by SIGTERM"):
            _proc.run([*FAMILY, str(sigterm_when_written)], timeout=120.0)
        assert signal.getsignal(signal.SIGTERM) is kernels_own
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert calls == [signal.SIGTERM]
    assert gone_soon(wait_for_file(sigterm_when_written))


def test_an_ignored_signal_stays_ignored_and_threads_install_nothing() -> None:
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with _proc.cleanup_on_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, previous)
    seen: list[object] = []

    def in_a_thread() -> None:
        with _proc.cleanup_on_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join(timeout=30)
    assert seen == [signal.SIG_DFL]


def test_interpreter_exit_kills_groups_and_removes_scratch(tmp_path: Path) -> None:
    """A compile still running in a daemon thread when the interpreter exits."""
    pid_file = tmp_path / "grandchild.pid"
    script = f"""
import tempfile, threading, time
from pathlib import Path
from perflab.capture import _proc, toolchain
tempfile.tempdir = {str(tmp_path)!r}
def compile_forever():
    with toolchain.private_tempdir():
        _proc.run({[*FAMILY, str(pid_file)]!r}, timeout=300)
threading.Thread(target=compile_forever, daemon=True).start()
while not Path({str(pid_file)!r}).exists():
    time.sleep(0.02)
"""
    done = subprocess.run([sys.executable, "-c", script], timeout=120, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert gone_soon(wait_for_file(pid_file))
    assert [p.name for p in tmp_path.iterdir()] == [pid_file.name]
