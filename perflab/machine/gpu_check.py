"""The sections of ``scripts/gpu-check``: the packages they need (checked first: the check
stops there, exit 2, when one is missing), the environment, the timing engine on real
kernels (:mod:`~perflab.machine.gpu_check_engine`), the microbenchmarks
(:mod:`~perflab.machine.gpu_check_bench`) and the ``gpu`` tests, run and reported by
:mod:`~perflab.machine.gpu_check_run`. Each section is a function of the backend, so
``--dry-run`` runs the very same code on the CPU backend (no GPU needed) and the plumbing
is tested here and in CI.

Runs from the source tree (``PYTHONPATH=.``) with numpy, torch, pytest and perflab's core
(msgspec, isal; cupy, triton and pynvml when present): no render code, no progress bars,
no bokeh, hypothesis, nbformat or nvtx (IPython only for the ``%%ptx`` gpu test).
:mod:`perflab.machine.gpu_modules` reads what the sections and the gpu tests import and
brings missing wheels from ``.whl/``.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

from perflab.capture import env
from perflab.capture.toolchain import tool_output
from perflab.machine import gpu_modules
from perflab.machine.gpu_check_bench import BenchSections

# what the scripts, gpu_record and the tests use, importable from here as before
from perflab.machine.gpu_check_engine import _engine_checks as _engine_checks
from perflab.machine.gpu_check_engine import timing_engine
from perflab.machine.gpu_check_run import CheckFailed as CheckFailed
from perflab.machine.gpu_check_run import MissingPackages as MissingPackages
from perflab.machine.gpu_check_run import Report as Report
from perflab.machine.gpu_check_run import Section as Section
from perflab.machine.gpu_check_run import exit_code as exit_code
from perflab.machine.gpu_check_run import run_all as run_all
from perflab.machine.gpu_check_run import run_section as run_section
from perflab.machine.gpu_check_run import summary_table as summary_table
from perflab.machine.gpu_modules import GPU_TEST_FILES as GPU_TEST_FILES

SMI_TIMEOUT_S = 30
ROOT = Path(__file__).resolve().parents[2]
PYTEST_TIMEOUT_S = 240


# --- modules ---------------------------------------------------------------------------


def missing_instructions(exc: MissingPackages) -> str:
    """What to do about the packages a :class:`MissingPackages` names."""
    result = exc.result
    return str(result.get("instructions", "")) if isinstance(result, dict) else ""


def modules(backend: str, wheel_dir: Path = gpu_modules.WHEEL_DIR) -> dict[str, object]:
    """Every third-party package that the sections and the gpu tests import is here (or
    optional); missing ones with a wheel in ``wheel_dir`` are installed from it first."""
    found = gpu_modules.reach(GPU_TEST_FILES)
    checked = gpu_modules.check_and_bring(found, wheel_dir)
    result = checked.to_dict()
    if checked.missing:
        result["instructions"] = gpu_modules.instructions(checked)
        names = ", ".join(gpu_modules.dist_of(n) for n in sorted(checked.missing))
        raise MissingPackages(f"missing: {names}", result)
    return result


# --- environment ----------------------------------------------------------------------


def _driver_version() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    out = tool_output([smi, "--query-gpu=driver_version", "--format=csv,noheader"], SMI_TIMEOUT_S)
    lines = (out or "").strip().splitlines()
    return lines[0].strip() if lines else None


def _cuda_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        import torch

        found["torch_cuda"] = str(torch.version.cuda)
    except ImportError:
        found["torch"] = "not installed"
    try:
        import cupy

        found["cuda_runtime"] = str(cupy.cuda.runtime.runtimeGetVersion())
        found["cuda_driver_api"] = str(cupy.cuda.runtime.driverGetVersion())
    except Exception as exc:  # cupy missing or unable to reach the driver
        found["cupy"] = f"unavailable ({type(exc).__name__})"
    try:
        import pynvml  # noqa: F401

        found["pynvml"] = "present"
    except ImportError:
        found["pynvml"] = "absent: NVML is read from libnvidia-ml.so.1 through ctypes"
    return found


def environment(backend: str) -> dict[str, object]:
    return {
        "backend": backend,
        "machine": env.info(),
        "driver": _driver_version(),
        "versions": {**env.versions(), **_cuda_versions()},
    }


# --- gpu tests --------------------------------------------------------------------------


def gpu_tests(backend: str) -> dict[str, object]:
    """``pytest -m gpu`` on the GPU test files (on the CPU they collect and skip)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "gpu",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=--strict-markers -ra",
        *GPU_TEST_FILES,
    ]
    # the source tree first, then what was there (a folder of wheels installed by `modules`)
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(_path_with(str(ROOT)))}
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a timeout ends all of it
    )
    try:
        out, _ = proc.communicate(timeout=PYTEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise CheckFailed(f"gpu tests timed out after {PYTEST_TIMEOUT_S} s", _tail(out)) from None
    tail = _tail(out)
    result: dict[str, object] = {"returncode": proc.returncode, "command": cmd[2:], **tail}
    if proc.returncode != 0:
        raise CheckFailed(f"gpu tests: {tail['summary']}", result)
    left_out = not_collected(out)
    if left_out:  # conftest leaves out a gpu file whose imports are missing: not a pass
        result["not_collected"] = left_out
        raise CheckFailed(f"gpu tests: {len(left_out)} file(s) not collected", result)
    return result


def not_collected(pytest_output: str) -> list[str]:
    """The files that tests/conftest.py left out of a gpu-only run, with why."""
    mark = gpu_modules.NOT_COLLECTED
    return [ln.split(mark, 1)[1] for ln in pytest_output.splitlines() if mark in ln]


def _path_with(first: str) -> list[str]:
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != first]
    return [first, *rest]


class Tail(TypedDict):
    summary: str
    tail: str


def _tail(out: str) -> Tail:
    lines = [ln for ln in (out or "").splitlines() if ln.strip()]
    return {"summary": lines[-1] if lines else "", "tail": "\n".join(lines[-40:])}


def sections(
    skip_tests: bool = False,
    wheel_dir: Path = gpu_modules.WHEEL_DIR,
    record_dir: Path | None = None,
) -> list[Section]:
    """Every section in order; seconds are estimates (H200: about 2x what a run on
    one took, 2026-12-04; this 2-core VM's CPU)."""
    steps = [
        Section("modules", 15, 5, functools.partial(modules, wheel_dir=wheel_dir)),
        Section("environment", 5, 5, environment),
        Section("timing engine", 10, 15, timing_engine),
    ]
    steps += BenchSections(record_dir).sections()
    if not skip_tests:  # last: a run cut short by its time limit keeps the measurements
        steps.append(Section("gpu tests", 60, 45, gpu_tests))
    return steps
