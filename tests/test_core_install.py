"""The core install: ``pip install perflab`` without extras, in a fresh virtual environment,
reads and summarises traces from the command line, and a command that needs an extra says
which one to install (no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from data_paths import ROOT

from perflab.capture.compile import compile_triton
from perflab.capture.toolchain import require_tool
from perflab.cli import main
from perflab.errors import MissingExtraError, import_extra

TRACE = "kineto/nccl_2ranks_a100.json.gz"
# what the extras bring (pip's distribution names); none of it may come with the core
EXTRAS_ONLY = {"torch", "triton", "cupy-cuda13x", "nvtx", "ipython", "ipywidgets", "jupyterlab"}
EXTRAS_ONLY |= {"bokeh", "holoviews", "panel", "nvidia-cuda-nvcc", "nvidia-cuda-nvdisasm"}


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the project installed without extras (pip's own wheel cache and
    indexes; a non-editable install, so the source tree is not what runs)."""
    venv = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(ROOT)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def _run(core: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(core / "bin" / "perflab"), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=core,  # away from the source tree
    )


def test_the_core_brings_no_extra(core: Path) -> None:
    listing = subprocess.run(
        [str(core / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    installed = {p["name"].lower() for p in json.loads(listing)}
    assert {"perflab", "numpy", "msgspec"} <= installed
    assert installed & EXTRAS_ONLY == set()


def test_trace_summary_in_the_core_matches_the_full_install(
    core: Path, trace_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(trace_data / TRACE)
    done = _run(core, "trace", "summary", trace, "--json")
    assert done.returncode == 0, done.stderr
    assert main(["trace", "summary", trace, "--json"]) == 0
    assert json.loads(done.stdout) == json.loads(capsys.readouterr().out)


def test_timeline_without_the_lab_extra_names_it(
    core: Path, trace_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "t.html"
    done = _run(core, "timeline", str(trace_data / TRACE), "-o", str(out))
    assert done.returncode == 2 and not out.exists()
    assert done.stderr.strip() == (
        "perflab: error: perflab timeline needs bokeh, which is not installed: "
        "pip install 'perflab[lab]'"
    )


def test_a_missing_extra_is_named_where_it_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("bokeh", "bokeh.plotting"):  # importing them now fails as if absent
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtraError, match=r"^x needs bokeh, .*'perflab\[lab\]'$"):
        import_extra("bokeh.plotting", "x")
    monkeypatch.setitem(sys.modules, "triton", None)
    with pytest.raises(MissingExtraError, match=r"Triton kernels needs triton.*perflab\[gpu\]"):
        compile_triton(object(), signature=[])
    monkeypatch.setenv("PERFLAB_NVDISASM", "")
    monkeypatch.setattr(sys, "path", [])  # no wheels, no Triton copies
    monkeypatch.setenv("PATH", "")
    with pytest.raises(MissingExtraError, match=r"SASS needs nvdisasm.*perflab\[compile\]"):
        require_tool("nvdisasm")


def test_a_package_missing_inside_an_extra_is_not_blamed_on_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the package is there, but something it imports is not: that error stays as it is
    (tmp_path / "present_pkg").mkdir()
    (tmp_path / "present_pkg" / "__init__.py").write_text("import absent_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as caught:
        import_extra("present_pkg", "x")
    assert not isinstance(caught.value, MissingExtraError)
    assert caught.value.name == "absent_dependency_xyz"
