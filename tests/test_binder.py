"""binder/ describes an environment in which every notebook runs with no GPU (mybinder.org).

What this machine can check of it: the requirements pin the CPU build of torch from PyTorch's CPU
index and install perflab (which brings the CUDA toolchain wheels for %%ptx); pip resolves the
requirements into a fresh virtual environment, building and installing perflab from the checkout;
postBuild succeeds in it; and a notebook executes with that environment's interpreter as its
kernel.

What it cannot: download.pytorch.org is not reachable from these machines, so the resolution uses
this machine's own copy of the same torch==2.13.0+cpu wheel instead of that index; and to avoid
installing gigabytes again, the fresh environment reuses the packages of the environment running
the tests (a .pth file), so pip checks that they satisfy binder's pins rather than downloading
them; only perflab is built and installed for real. The full set of notebooks runs in
tests/test_notebooks.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest
import tomllib
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell
from notebook_exec import NOTEBOOK_DIR, ROOT, output_problems

BINDER = ROOT / "binder"
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
CUDA_WHEELS = ("nvidia-cuda-nvcc", "nvidia-cuda-nvdisasm", "nvidia-cuda-cuobjdump")
NOTEBOOK = "15-nsight-reports.ipynb"  # quick, and reads the repository's own sample reports


def requirement_lines() -> list[str]:
    text = (BINDER / "requirements.txt").read_text()
    lines = (line.split(" #")[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_requirements_pin_cpu_torch_from_the_cpu_index_and_install_perflab() -> None:
    lines = requirement_lines()
    assert CPU_INDEX in lines
    assert "torch==2.13.0+cpu" in lines  # +cpu: pip cannot pick PyPI's CUDA build instead
    assert ".[lab,compile]" in lines  # perflab from the checkout, with its notebook extras
    assert any(line.startswith("triton") for line in lines)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for wheel in CUDA_WHEELS:
        assert any(dep.startswith(wheel) for dep in extras["compile"]), wheel
    assert os.access(BINDER / "postBuild", os.X_OK)
    assert (BINDER / "runtime.txt").read_text().strip().startswith("python-3.")


def _fresh_venv(path: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120
    )
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    # reuse the packages of the environment running the tests instead of downloading them
    (Path(purelib) / "_reuse_test_environment.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    return python


@pytest.mark.slow
def test_binder_environment_resolves_builds_and_runs_a_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = _fresh_venv(tmp_path / "binder-venv")

    # the requirements without the CPU index, which this machine cannot reach (see above)
    lines = requirement_lines()
    local = tmp_path / "requirements.txt"
    local.write_text("\n".join(line for line in lines if line != CPU_INDEX) + "\n")
    report = tmp_path / "report.json"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--report", str(report), "-r", str(local)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-3000:]
    installed = {item["metadata"]["name"] for item in json.loads(report.read_text())["install"]}
    # perflab itself is built from the checkout and installed; every other requirement is
    # satisfied by the reused packages
    assert installed == {"perflab"}, installed

    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}
    post = subprocess.run(
        ["bash", str(BINDER / "postBuild")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert post.returncode == 0, post.stdout + post.stderr
    assert "perflab: nvcc:" in post.stdout and "missing" not in post.stdout

    kernels = tmp_path / "jupyter" / "kernels" / "binder"
    kernels.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "binder", "language": "python"}
    (kernels / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = nbformat.read(NOTEBOOK_DIR / NOTEBOOK, as_version=4)
    nb.cells.append(new_code_cell("import sys\nprint(sys.prefix)"))
    NotebookClient(
        nb, timeout=300, kernel_name="binder", resources={"metadata": {"path": str(NOTEBOOK_DIR)}}
    ).execute()
    assert output_problems(nb, NOTEBOOK) == []
    assert nb.cells[-1].outputs[0]["text"].strip() == str(python.parent.parent)
