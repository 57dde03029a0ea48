"""What gpu-check needs importable: the imports read from the code it runs (its sections,
the gpu tests it selects, conftest.py) through perflab, their classification, the wheels
that bring missing ones with no network, and the collection guard of ``pytest -m gpu``."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import conftest
import pytest
from data_paths import ROOT
from gpu_scripts import load_script

from perflab.machine import gpu_modules
from perflab.machine.gpu_modules import NOT_RUN, PACKAGES, WHEEL_PINS

# --- the imports of the checked code, on this tree -------------------------------------


def test_every_package_the_checked_code_imports_is_classified() -> None:
    """A new import on a GPU path (in a gpu test, a section, or perflab code they reach)
    of a package in neither table fails here: add it to PACKAGES (needed or optional,
    on the lent machine or not) or NOT_RUN (with why gpu-check never runs it)."""
    found = gpu_modules.reach()
    reached = set(found.third_party)
    unclassified = {n: found.chain(n) for n in reached - set(PACKAGES) - set(NOT_RUN)}
    assert not unclassified
    assert set(PACKAGES) <= reached, "an entry of PACKAGES nothing imports any more"
    assert set(NOT_RUN) <= reached, "an entry of NOT_RUN nothing imports any more"


def test_saved_results_make_msgspec_needed_on_the_gpu_machine() -> None:
    """gpu-check saves the ceilings it measured, through the saved-results schema, which
    imports msgspec lazily (and the GPU profile test's Kineto decoder needs it too): this
    reading finds the first path, from gpu-check's own code."""
    found = gpu_modules.reach()
    chain = found.chain("msgspec")
    assert chain[0].startswith("perflab/machine/gpu_check")  # gpu_check.py or a part of it
    # the first lazy import of a declared schema: a saved file's or a printed document's
    assert chain[-1].startswith(("perflab/model/schema.py:", "perflab/model/json_outputs.py:"))
    assert gpu_modules.is_needed("msgspec") and gpu_modules.is_needed("torch")
    assert not gpu_modules.is_needed("triton") and not gpu_modules.is_needed("cupy")
    assert gpu_modules.is_needed("some_new_package")  # unclassified: assumed needed
    assert not gpu_modules.is_needed("tqdm")


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_reach_follows_what_gpu_tests_run_and_nothing_else(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "scripts/gpu-check": "import json\n",
            "perflab/__init__.py": "",
            "perflab/machine/__init__.py": "",
            **{path: "import os\n" for path in gpu_modules.OWN_CODE[1:]},
            "perflab/eager.py": "import eager_pkg\n",
            "perflab/lazy.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    import typed_only_pkg\n"
                "def load():\n"
                "    import deep_pkg\n"
                "    from perflab.render import view\n"
            ),
            "perflab/render/__init__.py": "",
            "perflab/render/view.py": "import render_eager_pkg\ndef draw():\n    import draw_pkg\n",
            "tests/conftest.py": "import pytest\n",
            "tests/helper.py": "import helper_pkg\n",
            "tests/test_x.py": (
                "import pytest\n"
                "import helper\n"
                "from perflab import eager\n"
                "import perflab.render.view\n"
                "def test_cpu():\n"
                "    import cpu_only_pkg\n"
                "@pytest.mark.gpu\n"
                "def test_gpu():\n"
                "    from perflab.lazy import load\n"
                "    pytest.importorskip('skip_pkg')\n"
                "@pytest.mark.gpu\n"
                "class TestGpu:\n"
                "    def test_method(self):\n"
                "        import method_pkg\n"
                "class TestCpu:\n"
                "    def test_method(self):\n"
                "        import cpu_method_pkg\n"
            ),
        },
    )
    found = gpu_modules.reach(("tests/test_x.py",), root=tmp_path)
    # not: a CPU test's import, a TYPE_CHECKING import, a render function's import
    assert set(found.third_party) == {
        "pytest",
        "helper_pkg",
        "eager_pkg",
        "render_eager_pkg",  # importing a render module runs its module level
        "deep_pkg",
        "skip_pkg",
        "method_pkg",
    }
    assert found.chain("deep_pkg") == ["tests/test_x.py:9", "perflab/lazy.py:5"]
    assert found.chain("helper_pkg") == ["tests/test_x.py:2", "tests/helper.py:1"]


def test_gpu_tests_are_found_by_their_marks_not_by_text(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "test_text.py": '"""pytest.mark.gpu in a docstring"""\nX = "mark.gpu"  # mark.gpu\n',
            "test_decorated.py": "import pytest\n@pytest.mark.gpu\ndef test_a():\n    pass\n",
            "test_class.py": "import pytest\n@pytest.mark.gpu\nclass TestA:\n    pass\n",
            "test_module.py": "import pytest\npytestmark = [pytest.mark.gpu]\n",
        },
    )
    found = {p.stem: gpu_modules.has_gpu_tests(p) for p in tmp_path.glob("test_*.py")}
    assert found == {
        "test_text": False,
        "test_decorated": True,
        "test_class": True,
        "test_module": True,
    }


def test_missing_at_import_reads_a_test_files_module_level(tmp_path: Path) -> None:
    path = tmp_path / "tests" / "test_y.py"
    _write(
        tmp_path,
        {
            "tests/test_y.py": (
                "import pytest\nimport no_such_pkg_xyz\nfrom perflab import errors\n"
                "def test_a():\n    import other_missing_xyz\n"
            )
        },
    )
    assert gpu_modules.missing_at_import(path) == ["no_such_pkg_xyz"]


# --- the tables ------------------------------------------------------------------------


def test_core_dependencies_are_needed_and_those_the_lent_machine_lacks_travel() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dists = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0] for d in project["dependencies"]}
    by_dist = {package.dist: name for name, package in PACKAGES.items()}
    assert dists <= set(by_dist)
    core = {by_dist[d] for d in dists}  # as imported: google-re2 is re2
    assert all(PACKAGES[n].needed for n in core if n != "isal" or platform.machine() == "x86_64")
    lacking = {n for n in core if not PACKAGES[n].on_lent_machine}
    assert lacking == {"msgspec", "isal", "re2"}
    # and IPython, for the %%ptx gpu test, with its dependencies
    travel = set(gpu_modules.lent_machine_lacks())
    assert travel == set(WHEEL_PINS) == lacking | {"IPython"}
    assert [n for n in travel if PACKAGES[n].with_dependencies] == ["IPython"]
    for name, version in WHEEL_PINS.items():
        assert re.fullmatch(r"\d+(\.\d+)+", version), name


def test_pins_are_this_venvs_versions() -> None:
    version = importlib.metadata.version("msgspec")
    assert gpu_modules.pinned("msgspec") == f"msgspec=={version}"
    assert gpu_modules.pinned("torch") == f"torch=={gpu_modules.version_of('torch')}"
    assert "+" not in gpu_modules.pinned("torch")  # 2.13.0, not 2.13.0+cpu


def test_instructions_name_the_packages_and_give_the_download_line() -> None:
    checked = gpu_modules.ModuleCheck(
        missing={"msgspec": "ModuleNotFoundError: x", "torch": "ModuleNotFoundError: y"},
        reached_through={"msgspec": ["tests/test_trace_cli.py:12", "perflab/io/kineto.py:3"]},
    )
    text = gpu_modules.instructions(checked)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    line = (
        f"  python3 -m pip download --no-deps --only-binary=:all: --python-version {python} "
        f"--implementation cp --platform manylinux_2_28_{platform.machine()} "
        f"--platform manylinux_2_17_{platform.machine()} -d .whl "
        f"{gpu_modules.pinned('msgspec')}"
    )
    lines = text.splitlines()
    assert line in lines
    assert "  scripts/gpu-wheels" in lines
    assert "    reached through tests/test_trace_cli.py:12 -> perflab/io/kineto.py:3" in lines
    assert lines[-1] == "Not carried as wheels (install them on this machine): torch"


# --- wheels ----------------------------------------------------------------------------


def _fake_wheel(folder: Path, name: str, version: str, requires: str = "") -> Path:
    """A minimal pure-Python wheel: a package holding VALUE = 42 (and importing
    ``requires``, a package it declares it needs, when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    needs = f"Requires-Dist: {requires}\n" if requires else ""
    files = {
        f"{name}/__init__.py": (f"import {requires}\n" if requires else "") + "VALUE = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{needs}",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{f},,\n" for f in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as zf:
        for rel, text in {**files, f"{info}/RECORD": record}.items():
            zf.writestr(rel, text)
    return path


def test_a_missing_package_with_a_wheel_is_installed_from_it_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The .whl/ path, with a made-up package no other test imports: pip with no index
    and no config installs it into a scratch folder that this process and its children
    then import from."""
    name = "perflab_fake_wheel_pkg"
    _fake_wheel(tmp_path / "wheels", name, "1.0")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    found = gpu_modules.Reach(third_party={name: "tests/test_x.py:1"})
    try:
        before = gpu_modules.check(found)
        assert list(before.missing) == [name] and before.unclassified == [name]
        checked = gpu_modules.check_and_bring(found, tmp_path / "wheels")
        assert checked.missing == {}
        assert checked.installed_from_wheels == [name] and checked.present == {name: "1.0"}
        site = Path(sys.path[0])
        assert site.name.startswith("perflab-gpu-site-") and (site / name).is_dir()
        assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(site)
    finally:
        sys.modules.pop(name, None)


def test_a_package_that_travels_with_its_dependencies_gets_them_from_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As IPython for the %%ptx gpu test: its wheel needs others, which pip takes from the
    same folder (still no index); without them there, it stays missing, saying why."""
    parent, child = "perflab_fake_parent_pkg", "perflab_fake_child_pkg"
    _fake_wheel(tmp_path / "wheels", parent, "1.0", requires=child)
    monkeypatch.setitem(PACKAGES, parent, gpu_modules.Package(parent, True, "test", False, True))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    found = gpu_modules.Reach(third_party={parent: "tests/test_x.py:1"})
    try:
        alone = gpu_modules.check_and_bring(found, tmp_path / "wheels")
        # as a core package (no dependencies): installed alone, it cannot be imported
        assert "No module named 'perflab_fake_child_pkg'" in alone.missing[parent]
        monkeypatch.setitem(
            PACKAGES, parent, gpu_modules.Package(parent, True, "test", False, True, True)
        )
        without_child = gpu_modules.check_and_bring(found, tmp_path / "wheels")
        assert child.replace("_", "-") in without_child.missing[parent].replace("_", "-")
        _fake_wheel(tmp_path / "wheels", child, "2.0")
        checked = gpu_modules.check_and_bring(found, tmp_path / "wheels")
        assert checked.missing == {} and checked.installed_from_wheels == [parent]
        site = Path(sys.path[0])
        assert (site / parent).is_dir() and (site / child).is_dir()
    finally:
        sys.modules.pop(parent, None)


def test_a_wheel_that_does_not_install_keeps_the_package_missing(tmp_path: Path) -> None:
    name = "perflab_fake_broken_pkg"
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / f"{name}-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    found = gpu_modules.Reach(third_party={name: "tests/test_x.py:1"})
    checked = gpu_modules.check_and_bring(found, tmp_path / "wheels")
    assert list(checked.missing) == [name] and "pip install" in checked.missing[name]
    assert checked.installed_from_wheels == []


def test_gpu_wheels_downloads_pinned_wheels_for_the_lent_python_and_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from perflab.capture import _proc

    commands: list[list[str]] = []

    def fake_run(argv: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        commands.append(list(argv))
        assert options["timeout"] > 0
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(_proc, "run", fake_run)
    assert load_script("gpu-wheels").main(["--dest", str(tmp_path)]) == 0
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    versions = [cmd[cmd.index("--python-version") + 1] for cmd in commands]
    assert versions == [v for v in sorted({"3.12", here}) for _ in range(2)]
    for alone, together in zip(commands[::2], commands[1::2], strict=True):
        for cmd in (alone, together):
            assert cmd[:4] == [sys.executable, "-m", "pip", "download"]
            assert "--only-binary=:all:" in cmd
        # the core's wheels without dependencies, IPython's with theirs
        assert "--no-deps" in alone and "--no-deps" not in together
        core = [gpu_modules.pinned(n) for n in ("msgspec", "isal", "re2")]
        assert alone[-3:] == core
        assert together[-1] == gpu_modules.pinned("IPython")


def test_gpu_wheels_refuses_a_bad_python_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        load_script("gpu-wheels").main(["--python-version", "3"])
    assert exc.value.code == 2
    assert "X.Y (such as 3.12), not 3" in capsys.readouterr().err


# --- pytest -m gpu by hand ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("markexpr", "only_gpu"),
    [
        ("gpu", True),
        ("gpu and not slow", True),
        ("slow and gpu", True),
        ("", False),
        ("not gpu", False),
        ("gpu or slow", False),
        ("not (gpu and slow)", False),
        ("gpuish", False),
    ],
)
def test_which_selections_keep_only_gpu_tests(markexpr: str, only_gpu: bool) -> None:
    assert conftest.selects_only_gpu(markexpr) is only_gpu


class _Config:
    def __init__(
        self, markexpr: str, args: list[str] | None = None, where: Path = Path("/")
    ) -> None:
        self.markexpr = markexpr
        self.stash = pytest.Stash()
        self.args = args or ["."]
        self.invocation_params = SimpleNamespace(dir=where)

    def getoption(self, name: str) -> str:
        assert name == "markexpr"
        return self.markexpr


def test_pytest_m_gpu_skips_files_without_gpu_tests_or_with_missing_packages(
    tmp_path: Path,
) -> None:
    gpu = "import pytest\n@pytest.mark.gpu\ndef test_g():\n    pass\n"
    _write(
        tmp_path,
        {
            "tests/test_plain.py": "import hypothesis\ndef test_a():\n    pass\n",
            "tests/test_needs.py": "import no_such_pkg_xyz\n" + gpu,
            "tests/test_fine.py": "import numpy\n" + gpu,
        },
    )
    plain, needs, fine = (tmp_path / "tests" / f"test_{n}.py" for n in ("plain", "needs", "fine"))
    only_gpu = _Config("gpu")
    assert conftest.pytest_ignore_collect(plain, only_gpu) is True  # never imported
    assert conftest.pytest_ignore_collect(needs, only_gpu) is True
    assert conftest.pytest_ignore_collect(fine, only_gpu) is None
    assert conftest.pytest_ignore_collect(needs, only_gpu) is True  # visited twice: noted once
    assert only_gpu.stash[conftest._NOT_COLLECTED] == [
        "test_needs.py: its gpu tests need no_such_pkg_xyz, not installed here"
    ]
    # a run naming other files: pytest visits their siblings too, but they were not asked for
    named = _Config("gpu", ["tests/test_fine.py"], where=tmp_path)
    assert conftest.pytest_ignore_collect(needs, named) is True
    assert conftest.pytest_ignore_collect(fine, named) is None
    assert named.stash.get(conftest._NOT_COLLECTED, []) == []
    everything = _Config("")
    for path in (plain, needs, fine):  # other runs collect all: a missing package errors
        assert conftest.pytest_ignore_collect(path, everything) is None
