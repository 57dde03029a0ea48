"""Every notebook in notebooks/ executes headless from a copy of what a fresh clone has (the
tracked notebooks and test data, nothing else: no ../shared, no untracked files), with no error
output; and the outputs committed with each notebook are current (see tests/notebook_exec.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from notebook_exec import (
    ROOT,
    execute_all,
    kernelspec,
    notebook_paths,
    output_problems,
    stored_problems,
)

NOTEBOOKS = notebook_paths()
IDS = [p.name for p in NOTEBOOKS]
# what the notebooks may read: themselves and the test data, as a clone has them
CLONE_PATHS = ("notebooks", "tests/data")


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *CLONE_PATHS],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    return [name for name in out.decode().split("\0") if name]


@pytest.fixture(scope="session")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each notebook executed in a copy of the tracked files, two kernels at a time."""
    clone = tmp_path_factory.mktemp("clone")
    for name in _tracked_files():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    copies = notebook_paths(clone / "notebooks")
    return {path.name: result for path, result in execute_all(copies).items()}


def test_the_set_has_every_numbered_notebook() -> None:
    numbers = sorted(int(p.name.split("-")[0]) for p in NOTEBOOKS)
    assert len(numbers) >= 12
    assert numbers[: len(range(13))] == list(range(13))


@pytest.mark.slow
@pytest.mark.parametrize("name", IDS)
def test_notebook_runs_without_errors_from_a_fresh_clone(
    name: str, executed: dict[str, Any]
) -> None:
    result = executed.get(name)
    assert result is not None, f"{name} is not tracked by git: a clone would not have it"
    assert not isinstance(result, BaseException), f"{name}: {str(result)[-3000:]}"
    nb, _seconds = result
    assert output_problems(nb, name) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_stored_outputs_are_current(path: Path) -> None:
    assert stored_problems(path) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_has_two_checked_exercises_and_conclusions(path: Path) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert code.count("Exercise(") >= 2, "fewer than two perflab.exercises checks"
    assert code.count(".answer(") >= 2 and code.count(".solution(") >= 2
    assert "## Conclusions" in markdown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_names_the_installed_kernel(path: Path) -> None:
    """Opened in JupyterLab, a notebook that names its kernel differently from the installed
    kernelspec is rewritten as soon as the kernel starts: it would open with unsaved changes."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    assert dict(nb.metadata.get("kernelspec", {})) == kernelspec()
