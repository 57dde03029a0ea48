"""What ran on a GPU: the list of GPU-path files is complete (every module of the package
that touches a GPU is on it), a validation record holds the commit and each file's sha256,
and ``perflab info`` names the files changed since, read from the installed package with
no git."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from data_paths import ROOT
from gpu_scripts import load_script

from perflab.cli import main
from perflab.machine import gpu_paths
from perflab.machine.gpu_paths import GPU_PATHS

# what makes a module a GPU path: importing CuPy, NVML (pynvml, or perflab's NVML module)
# or Triton's runtime or testing; torch.cuda or cupy.cuda; a Triton kernel (triton.jit);
# a call of the CUDA runtime or NVML by name (cudaEventRecord, nvmlInit, ...); memory on
# the GPU (device="cuda")
GPU_MODULES = ("cupy", "pynvml", "triton.runtime", "triton.testing", "perflab.capture.nvml")
IMPORTING_CALLS = ("import_extra", "importorskip", "import_module")
RUNTIME_CALL = re.compile(r"^(cuda|nvml)[A-Z]\w*$")


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _imported(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        return [base, *(f"{base}.{alias.name}" for alias in node.names)]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        value = node.args[0].value
        return [value] if name in IMPORTING_CALLS and isinstance(value, str) else []
    return []


def _is_cuda_device(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.keyword)
        and node.arg == "device"
        and isinstance(node.value, ast.Constant)
        and node.value.value == "cuda"
    )


def gpu_uses(tree: ast.Module, package: str) -> set[str]:
    """Why a module is on a GPU path (empty when it is not)."""
    found = set()
    for node in ast.walk(tree):
        for name in _imported(node, package):
            found |= {f"imports {m}" for m in GPU_MODULES if name == m or name.startswith(m + ".")}
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if re.search(r"(^|\.)(torch|cupy)\.cuda$", dotted):
                found.add(dotted.rsplit(".", 2)[-2] + ".cuda")
            if RUNTIME_CALL.match(node.attr):
                found.add(f"calls {node.attr}")
            if node.attr == "jit" and _dotted(node.value).endswith("triton"):
                found.add("a Triton kernel")
        if _is_cuda_device(node):
            found.add('device="cuda"')
    return found


def _module_uses(root: Path) -> dict[str, set[str]]:
    uses = {}
    for path in sorted((root / "perflab").rglob("*.py")):
        rel = path.relative_to(root)
        module = ".".join(rel.with_suffix("").parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = gpu_uses(ast.parse(path.read_text(encoding="utf-8")), package)
        if found:
            uses[rel.as_posix()] = found
    return uses


def test_every_module_that_touches_a_gpu_is_a_gpu_path() -> None:
    uses = _module_uses(ROOT)
    missing = {path: sorted(why) for path, why in uses.items() if path not in GPU_PATHS}
    assert missing == {}, "add these to perflab/machine/gpu_paths.py GPU_PATHS"
    assert all((ROOT / path).is_file() for path in GPU_PATHS)
    assert len(set(GPU_PATHS)) == len(GPU_PATHS)
    # the reading finds what it should: the engine's clocks, a Triton kernel, NVML, CuPy
    assert "torch.cuda" in uses["perflab/capture/gpu_clock.py"]
    assert "a Triton kernel" in uses["perflab/machine/_triton_add.py"]
    assert "imports pynvml" in uses["perflab/capture/nvml.py"]
    assert "imports cupy" in uses["perflab/capture/env.py"]


def test_the_reading_sees_each_kind_of_gpu_use() -> None:
    cases = {
        "import cupy": "imports cupy",
        "from triton.testing import do_bench": "imports triton.testing",
        "from . import nvml": "imports perflab.capture.nvml",
        "x = import_extra('pynvml', 'x')": "imports pynvml",
        "torch.cuda.synchronize()": "torch.cuda",
        "self.cupy.cuda.Event()": "cupy.cuda",
        "lib.cudaEventRecord(e)": "calls cudaEventRecord",
        "@triton.jit\ndef k(): pass": "a Triton kernel",
        "t = torch.ones(4, device='cuda')": 'device="cuda"',
    }
    for source, why in cases.items():
        assert gpu_uses(ast.parse(source), "perflab.capture") == {why}, source
    for plain in ("import torch\ntorch.ones(4)", "'torch.cuda'", "import triton.language"):
        assert gpu_uses(ast.parse(plain), "perflab.capture") == set(), plain


def _copy_package(tmp_path: Path) -> Path:
    """The package as installed elsewhere: a copy of perflab/ with no git around it."""
    shutil.copytree(
        ROOT / "perflab", tmp_path / "perflab", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


def test_an_edited_gpu_path_file_is_listed_as_changed_since(tmp_path: Path) -> None:
    root = _copy_package(tmp_path)
    record = gpu_paths.validation_record("NVIDIA H200", "2026-12-07T10:00:00+00:00", root)
    assert (record["commit"], record["dirty"]) == (None, None)  # no git here
    assert set(record["files"]) == set(GPU_PATHS)
    assert gpu_paths.changed_since(record, root) == []
    timer = root / "perflab/capture/timer.py"
    timer.write_text(timer.read_text() + "\n# edited\n")
    (root / "perflab/machine/h2d.py").unlink()
    assert gpu_paths.changed_since(record, root) == [
        "perflab/capture/timer.py",
        "perflab/machine/h2d.py",
    ]
    del record["files"]["perflab/machine/launch.py"]  # a file new on a GPU path
    assert "perflab/machine/launch.py" in gpu_paths.changed_since(record, root)


def test_perflab_info_reads_the_record_of_the_installed_package(tmp_path: Path) -> None:
    """A copy of the package with its own record, then an edit: perflab info --json, run
    against the copy, lists the edited file, and the text says it is not validated."""
    root = _copy_package(tmp_path)
    record = gpu_paths.validation_record("NVIDIA H200", "2026-12-07T10:00:00+00:00", root)
    record["commit"] = "0123456789abcdef0123456789abcdef01234567"
    gpu_paths.write_record(record, root / "perflab" / "gpu_validation.json")
    clock = root / "perflab/capture/gpu_clock.py"
    clock.write_text(clock.read_text().replace("CALIBRATION_CYCLES = ", "CALIBRATION_CYCLES = 2*"))

    def info(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "perflab", "info", *args],
            cwd=root,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout

    doc = json.loads(info("--json"))["gpu_validation"]
    assert doc["changed_since"] == ["perflab/capture/gpu_clock.py"]
    assert doc["device"] == "NVIDIA H200" and doc["commit"] == record["commit"]
    assert doc["date"] == record["date"] and doc["files"] == record["files"]
    assert info().splitlines()[-1] == (
        "GPU paths validated on NVIDIA H200 at 0123456789ab (2026-12-07); 1 files changed "
        "since, not validated on a GPU: perflab/capture/gpu_clock.py"
    )


def test_the_committed_record_is_the_h200_run() -> None:
    """The record made from benchmarks/results/gpu-check-NVIDIA-H200-2026-12-04.json: its
    date, and the commit that added that file, whose files the checksums are of."""
    record = gpu_paths.read_record()
    assert record is not None
    results = json.loads(
        (ROOT / "benchmarks/results/gpu-check-NVIDIA-H200-2026-12-04.json").read_text()
    )
    assert record["date"] == results["date"] and results["exit_code"] == 0
    assert record["device"] == "NVIDIA H200"
    assert record["commit"] == "822b70478add7bae6a27a320e00439a0dd2a184c"
    assert set(record["files"]) <= set(GPU_PATHS)
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in record["files"].values())


def test_info_says_where_the_gpu_paths_were_validated(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["gpu_validation"]
    assert {"device", "commit", "date", "files", "changed_since"} <= set(doc)
    assert main(["info"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("GPU paths validated on NVIDIA H200 at 822b70478add (2026-12-04)")


def test_a_record_of_another_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gpu_validation.json"
    assert gpu_paths.read_record(path) is None
    for doc in ([], {"perflab": "other"}, {"perflab": "gpu-validation", "device": "x"}):
        path.write_text(json.dumps(doc))
        with pytest.raises(ValueError, match="record"):
            gpu_paths.read_record(path)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=perflab", "-c", "user.email=perflab@example.invalid", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_adopting_a_record_without_a_commit_takes_heads_when_its_files_match(
    tmp_path: Path,
) -> None:
    """A device run from a copy of the tree has no git: adopting its record fills in this
    checkout's commit only when every file it recorded is the one committed here."""
    if shutil.which("git") is None:
        pytest.skip("no git")
    root = _copy_package(tmp_path)
    record = gpu_paths.validation_record("NVIDIA H200", "2026-12-07T10:00:00+00:00", root)
    _git(root, "init", "-q")
    _git(root, "add", "perflab")
    _git(root, "commit", "-q", "-m", "the tree the device run was copied from")
    head = _git(root, "rev-parse", "HEAD")
    assert gpu_paths.commit_of(root) == (head, False)
    kept = gpu_paths.adopt(record, root)
    assert kept["commit"] == head and head[:12] in kept["note"]
    assert gpu_paths.adopt(kept, root) == kept  # a record with its commit is kept as it is
    launch = root / "perflab/machine/launch.py"
    launch.write_text(launch.read_text() + "# edited after the run\n")
    with pytest.raises(ValueError, match=r"not of this checkout's HEAD.*machine/launch\.py"):
        gpu_paths.adopt(record, root)
    _git(root, "commit", "-q", "-am", "a change after the run")
    with pytest.raises(ValueError, match=r"machine/launch\.py"):  # committed, still not it
        gpu_paths.adopt(record, root)


def test_gpu_check_adopt_refuses_what_is_not_a_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load_script("gpu-check").main(["--adopt", str(tmp_path / "absent.json")]) == 1
    assert "gpu-check: error: " in capsys.readouterr().err
