"""Without a CUDA driver, asking whether there is a GPU does not import torch or CuPy (which
takes a second or more): ``perflab info`` answers at once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from perflab.capture import env

PROBE = (
    "import sys; from perflab.capture import env; "
    "print(env.cuda_available(), env.default_backend(), 'torch' in sys.modules, "
    "'cupy' in sys.modules)"
)


@pytest.mark.skipif(env._cuda_driver_loads(), reason="a CUDA driver is installed here")
def test_no_driver_means_no_gpu_without_importing_torch_or_cupy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "cpu", "False", "False"]


def test_the_driver_probe_agrees_with_torch() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():  # torch sees a GPU only through a driver that loads
        assert env._cuda_driver_loads()
