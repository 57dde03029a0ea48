"""`make lab` opens the learner's working copy of the course (scripts/course), never the
committed notebooks/: the copy is made once, beside notebooks/, with the recordings and perf
histories; it is kept as the learner left it; `make course-reset` moves it aside for a fresh
one; and every file a notebook names reads the same from the copy."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "course"
NOTEBOOKS = ROOT / "notebooks"


def course(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` and a digest of its bytes."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout in small: a notebook, a recording, a perf history and a checkpoint."""
    nb = tmp_path / "notebooks"
    (nb / "recordings" / "h200" / "00-quickstart").mkdir(parents=True)
    (nb / "recordings" / "h200" / "00-quickstart" / "r.json").write_text('{"r": 1}')
    (nb / ".perflab").mkdir()
    (nb / ".perflab" / "00-a.ipynb.history.json").write_text('{"h": 1}')
    (nb / ".ipynb_checkpoints").mkdir()
    (nb / ".ipynb_checkpoints" / "00-a-checkpoint.ipynb").write_text("autosaved")
    (nb / "00-a.ipynb").write_text('{"cells": ["pristine"]}')
    return tmp_path


def test_the_copy_holds_the_course_and_leaves_notebooks_alone(repo: Path) -> None:
    before = snapshot(repo / "notebooks")
    proc = course(repo, "copy")
    assert proc.returncode == 0, proc.stderr
    assert f"the course: {repo / 'course'} (a fresh copy of notebooks/)" in proc.stdout
    assert "make course-reset" in proc.stdout
    assert snapshot(repo / "notebooks") == before
    copied = snapshot(repo / "course")
    assert copied == {k: v for k, v in before.items() if not k.startswith(".ipynb_checkpoints")}
    assert ".perflab/00-a.ipynb.history.json" in copied
    assert "recordings/h200/00-quickstart/r.json" in copied
    assert not (repo / "course.partial").exists()


def test_the_learners_copy_is_kept_then_moved_aside_on_reset(repo: Path) -> None:
    assert course(repo, "copy").returncode == 0
    work = repo / "course" / "00-a.ipynb"
    work.write_text('{"cells": ["my answer"]}')
    again = course(repo, "copy")
    assert again.returncode == 0 and "as you left it" in again.stdout
    assert work.read_text() == '{"cells": ["my answer"]}'

    reset = course(repo, "reset")
    assert reset.returncode == 0, reset.stderr
    [aside] = repo.glob("course.old-*")
    assert f"moved aside to {aside}" in reset.stdout
    assert (aside / "00-a.ipynb").read_text() == '{"cells": ["my answer"]}'
    assert work.read_text() == '{"cells": ["pristine"]}'
    assert course(repo, "reset").returncode == 0  # a second reset keeps both old copies
    assert len(list(repo.glob("course.old-*"))) == 2


def test_an_interrupted_copy_is_made_again(repo: Path) -> None:
    (repo / "course.partial").mkdir()
    (repo / "course.partial" / "half.ipynb").write_text("half")
    assert course(repo, "copy").returncode == 0
    assert not (repo / "course" / "half.ipynb").exists()
    assert (repo / "course" / "00-a.ipynb").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--to", "elsewhere/course"), "must sit beside notebooks"),
        (("--to", "notebooks"), "is the course itself"),
        (("--from", "missing"), "missing is not a folder of notebooks"),
    ],
)
def test_a_copy_that_would_not_work_is_refused(
    repo: Path, args: tuple[str, ...], message: str
) -> None:
    (repo / "elsewhere").mkdir()
    before = snapshot(repo)
    proc = course(repo, "copy", *args)
    assert proc.returncode == 1 and proc.stderr.startswith("course: error: ")
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(repo) == before


def test_a_file_in_the_copys_place_is_refused(repo: Path) -> None:
    (repo / "course").write_text("not a folder")
    proc = course(repo, "copy")
    assert proc.returncode == 1 and "exists and is not a folder" in proc.stderr


# a string in a notebook's code that may name a file
QUOTED = re.compile(r"""(?<![\w])(?:"([^"\n]+)"|'([^'\n]+)')""")


def named_paths(notebook: Path) -> set[str]:
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    return {a or b for a, b in QUOTED.findall(code)}


def test_every_file_a_notebook_names_reads_the_same_from_the_copy(tmp_path: Path) -> None:
    """The committed notebooks copied as `make lab` copies them: each string in their code
    that names a file or folder from notebooks/ (``recordings/h200/...``,
    ``../tests/data/...``) or from the recordings (``perflab.recordings.recorded(...)``)
    names the same one from the copy."""
    from perflab.recordings import RECORDINGS

    shutil.copytree(NOTEBOOKS, tmp_path / "notebooks")
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # what ../tests/data reaches
    proc = course(tmp_path, "copy")
    assert proc.returncode == 0, proc.stderr
    copy = tmp_path / "course"
    checked = []
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        for name in named_paths(notebook):
            for base in (Path(), RECORDINGS):
                if name.strip() and (NOTEBOOKS / base / name).exists():
                    assert (copy / base / name).exists(), f"{notebook.name}: {name}"
                    checked.append(name)
    assert any(n.startswith("../tests/data") for n in checked)
    assert any(n.startswith("recordings/") for n in checked) and len(checked) > 20
    assert (copy / RECORDINGS / "MANIFEST.json").is_file()
    assert snapshot(copy / "recordings") == snapshot(NOTEBOOKS / "recordings")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_lab_opens_the_copy_and_lab_dev_the_course() -> None:
    def commands(target: str) -> str:
        return subprocess.run(
            ["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60
        ).stdout

    lab = commands("lab")
    assert "scripts/course --from notebooks --to course copy" in lab
    assert "jupyter lab course/" in lab and "jupyter lab notebooks/" not in lab
    assert lab.index("scripts/course") < lab.index("jupyter lab course/")
    assert "jupyter lab notebooks/" in commands("lab-dev")
    assert "scripts/course --from notebooks --to course reset" in commands("course-reset")


def test_the_copies_are_not_committed() -> None:
    paths = ["course/00-quickstart.ipynb", "course.old-20260101-000000/x.ipynb"]
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.split() == paths
