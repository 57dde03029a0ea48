"""Every notebook in notebooks/ executes headless from a copy of what a fresh clone has (the
tracked notebooks and test data, nothing else: no ../shared, no untracked files), with no error
output; and the outputs committed with each notebook are current (see tests/notebook_exec.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from notebook_exec import (
    NOTEBOOK_DIR,
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


# how a notebook shows an exercise, answers it and, for a prediction, checks it after measuring
SHOWN = re.compile(r"^ *(\w+) = exercises\.get\(\s*\"([a-z0-9-]+)\"", re.MULTILINE)
# an answer rule built in a notebook would put the answer in sight
CHECKERS = re.compile(r"\b(?:Exercise|number|choice|ranges|kernel_check|predicate)\(")


def _code_cells(path: Path) -> list[str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"]


def _shown(path: Path) -> dict[str, tuple[str, int]]:
    """Exercise id -> (variable, index of the code cell that shows it)."""
    found = {}
    for index, source in enumerate(_code_cells(path)):
        for variable, key in SHOWN.findall(source):
            assert key not in found, f"{key} shown twice"
            found[key] = (variable, index)
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_shows_two_exercises_by_id_and_has_conclusions(path: Path) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "\n".join(_code_cells(path))
    shown = _shown(path)
    assert len(shown) >= 2, "fewer than two exercises shown with perflab.exercises.get(ID)"
    for variable, _ in shown.values():
        assert f"{variable}.answer(" in code, f"{variable} is never answered"
    assert "## Conclusions" in markdown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_notebook_holds_an_answer_in_its_code(path: Path) -> None:
    """Questions, answer rules, hints and solutions live in perflab.exercises: a notebook's
    code builds no checker, asks for no solution and stores no revealed answer."""
    for index, source in enumerate(_code_cells(path)):
        assert not CHECKERS.search(source), f"code cell {index} builds an answer rule"
        assert ".solution(" not in source and "reveal=" not in source, f"code cell {index}"
    stored = path.read_text(encoding="utf-8")
    assert "The accepted answer" not in stored and "Solution (" not in stored


def test_every_exercise_is_shown_in_its_own_notebook_predictions_before_measuring() -> None:
    from perflab.exercises import catalogue

    shown = {path.stem: _shown(path) for path in NOTEBOOKS}
    for spec in catalogue():
        assert spec.id in shown.get(spec.notebook, {}), f"{spec.id} is not in {spec.notebook}"
        variable, asked = shown[spec.notebook][spec.id]
        cells = _code_cells(NOTEBOOK_DIR / f"{spec.notebook}.ipynb")
        answered = [i for i, s in enumerate(cells) if f"{variable}.answer(" in s]
        checked = [i for i, s in enumerate(cells) if f"{variable}.check(" in s]
        assert answered and min(answered) > asked, spec.id
        if spec.prediction:
            # asked and answered, then at least one cell that measures, then checked
            assert len(checked) == 1 and checked[0] > max(answered) + 1, spec.id
        else:
            assert not checked, spec.id
    known = {spec.id for spec in catalogue()}
    for name, found in shown.items():
        assert found.keys() <= known, f"{name} shows unknown exercises {found.keys() - known}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_names_the_installed_kernel(path: Path) -> None:
    """Opened in JupyterLab, a notebook that names its kernel differently from the installed
    kernelspec is rewritten as soon as the kernel starts: it would open with unsaved changes."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    assert dict(nb.metadata.get("kernelspec", {})) == kernelspec()
