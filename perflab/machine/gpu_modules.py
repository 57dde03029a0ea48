"""What ``scripts/gpu-check`` needs importable, read from the code it runs, checked before
any section starts.

The lent GPU machine has Python, torch, triton, cupy, nvidia-ml-py and pytest, and no
package registry: perflab's core dependencies msgspec, isal and google-re2 are not there,
nor IPython (which the ``%%ptx`` gpu test runs the magic in). A package
missing there would surface as a failed gpu test minutes into the run (or, in the dry run,
not at all: the GPU-only tests are skipped on the CPU), so the check reads the imports of
everything it runs and stops at once, exit 2, naming what is missing and how to bring it.

What is read: the import statements of gpu-check's own code and of the gpu tests it runs
(each test file's module level, its gpu-marked tests and fixtures, conftest.py), followed
through every perflab module they reach, both at module level and inside functions (so
``profile()``'s lazy import of the Kineto decoder counts). Render and front-end modules
are the exception: gpu-check never runs them, so only what importing one runs (its module
level) is followed. Every third-party package reached must be in :data:`PACKAGES` (needed,
or optional with what happens without it) or :data:`NOT_RUN` (reached only by code these
paths do not call, with why); one in neither is treated as needed, and a test of the
suite fails until it is classified.

Missing packages travel as wheels in ``.whl/`` (fetched by ``scripts/gpu-wheels`` on a
machine with a registry: binary wheels without their dependencies for perflab's core, and
IPython with its pure-Python dependencies for the ``%%ptx`` gpu test) and are installed
from there with no network into a scratch folder that the check and its subprocesses put
first on their path.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeGuard

ROOT = Path(__file__).resolve().parents[2]
WHEEL_DIR = ROOT / ".whl"
PIP_TIMEOUT_S = 300
# the lent machine's Python; scripts/gpu-wheels also fetches for the Python that runs it
LENT_PYTHON = "3.12"
ISAL_MACHINES = ("x86_64", "AMD64", "aarch64", "arm64")  # pyproject's marker for isal


@dataclass(frozen=True)
class Package:
    """A third-party package the checked code imports: its distribution, whether a run
    needs it, what for (or what happens without it), whether the lent machine has it,
    whether it can travel in ``.whl/`` (as a binary wheel), and whether the wheels of its
    dependencies travel with it (else it has none that the lent machine lacks)."""

    dist: str
    needed: bool
    why: str
    on_lent_machine: bool
    travels: bool = False
    with_dependencies: bool = False


PACKAGES: dict[str, Package] = {
    "numpy": Package("numpy", True, "perflab's core", True),
    "msgspec": Package(
        "msgspec",
        True,
        "perflab's core: saved results (gpu-check's ceilings) and the Kineto decoder "
        "(profile() in the gpu tests)",
        False,
        travels=True,
    ),
    "isal": Package(
        "isal",
        platform.machine() in ISAL_MACHINES,
        "perflab's core on x86-64 and ARM: gunzip of traces (zlib's, slower, without it)",
        False,
        travels=True,
    ),
    "re2": Package(
        "google-re2",
        True,
        "perflab's core: users' patterns (trace diff --rename re:, category rules) in linear "
        "time (plain-text patterns only without it)",
        False,
        travels=True,
    ),
    "torch": Package("torch", True, "the timing engine, the microbenchmarks, the gpu tests", True),
    "pytest": Package("pytest", True, "the gpu tests", True),
    "triton": Package(
        "triton", False, "latency's Triton chase, tried after CuPy's; without it, a warning", True
    ),
    "cupy": Package(
        "cupy-cuda13x", False, "the CuPy clock and chase; without it, torch's are used", True
    ),
    "pynvml": Package(
        "nvidia-ml-py", False, "the throttle check; without it, it says unavailable", True
    ),
    "nvtx": Package("nvtx", False, "ranges; without it, torch.cuda.nvtx's are used", False),
    "IPython": Package(
        "ipython",
        True,
        "the %%ptx --run gpu test runs the magic in IPython's InteractiveShell "
        "(tests/test_ptx_magic.py)",
        False,
        travels=True,
        with_dependencies=True,
    ),
}
# reached only inside functions that gpu-check and its gpu tests do not call
NOT_RUN: dict[str, str] = {
    "tqdm": "progress bars: gpu-check and the gpu tests pass show_progress=False",
    "ipywidgets": "notebook progress bars (perflab.io._progress), only inside a notebook",
    "pandas": "to_pandas() only",
    "ncu_report": "reading Nsight Compute .ncu-rep reports",
}
# perflab modules whose functions gpu-check never runs: the render layer and front-ends
FRONT_ENDS = (
    "perflab.render",
    "perflab.magics",
    "perflab.commands",
    "perflab.cli",
    "perflab.frontend",
    "perflab.labext",
)
# The files whose `gpu` tests gpu-check runs (pytest -m gpu on them): the one list, of every
# test file with a gpu-marked test (a test of the suite holds them equal)
GPU_TEST_FILES = (
    "tests/test_timing_gpu.py",
    "tests/test_bench.py",
    "tests/test_bandwidth_loops.py",
    "tests/test_collectives.py",
    "tests/test_trace_cli.py",
    "tests/test_ptx_magic.py",
)
# gpu-check's own code: every import in it is followed
OWN_MODULES = (
    "perflab.machine.gpu_check",
    "perflab.machine.gpu_check_run",
    "perflab.machine.gpu_check_engine",
    "perflab.machine.gpu_check_do_bench",
    "perflab.machine.gpu_check_bench",
)
OWN_CODE = ("scripts/gpu-check", *(m.replace(".", "/") + ".py" for m in OWN_MODULES))
CONFTEST = "tests/conftest.py"
# how tests/conftest.py names, in a gpu-only run's summary, a gpu file it left out
NOT_COLLECTED = "not collected (-m gpu): "


# --- reading the imports -------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """One import: the dotted module name and where, and whether it runs only when the
    function holding it is called."""

    module: str
    path: str
    line: int
    deferred: bool


# calls that import the module named by their first argument (a string literal)
_IMPORTING_CALLS = ("importorskip", "import_extra", "import_module")


def _sites_in(nodes: Iterable[ast.AST], path: str, package: str, deferred: bool) -> Iterator[Site]:
    for node in nodes:
        if _type_checking_only(node):
            yield from _sites_in(node.orelse, path, package, deferred)
            continue
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _sites_of(node, path, package, deferred)
        yield from _sites_in(ast.iter_child_nodes(node), path, package, inner)


def _sites_of(node: ast.AST, path: str, package: str, deferred: bool) -> Iterator[Site]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield Site(alias.name, path, node.lineno, deferred)
    elif isinstance(node, ast.ImportFrom):
        base = _absolute(node.module, node.level, package)
        yield Site(base, path, node.lineno, deferred)
        for alias in node.names:  # `from perflab.machine import latency` imports a module
            yield Site(f"{base}.{alias.name}", path, node.lineno, deferred)
    elif isinstance(node, ast.Call) and node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0]
        if name in _IMPORTING_CALLS and isinstance(first, ast.Constant):
            yield from _literal_site(first.value, path, node.lineno, deferred)


def _literal_site(value: object, path: str, line: int, deferred: bool) -> Iterator[Site]:
    if isinstance(value, str):
        yield Site(value, path, line, deferred)


def _type_checking_only(node: ast.AST) -> TypeGuard[ast.If]:
    """``if TYPE_CHECKING:``: its body is read by type checkers, never run."""
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


def _absolute(module: str | None, level: int, package: str) -> str:
    if not level:
        return module or ""
    parts = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join([*parts, module] if module else parts)


def _is_gpu_test_or_fixture(node: ast.AST, whole_module_gpu: bool) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    marks = " ".join(ast.unparse(d) for d in node.decorator_list)
    if "fixture" in marks:
        return True
    return "mark.gpu" in marks or (whole_module_gpu and node.name.startswith("test"))


def gpu_test_sites(tree: ast.Module, path: str) -> list[Site]:
    """A test file's imports that a ``pytest -m gpu`` run executes: its module level,
    its gpu-marked tests (all tests where ``pytestmark`` or their class is gpu), its
    fixtures, and a class's body."""
    whole = any(
        isinstance(n, ast.Assign) and _assigns_pytestmark(n) and "mark.gpu" in ast.unparse(n.value)
        for n in tree.body
    )
    return _test_sites(tree.body, path, whole)


def _test_sites(body: list[ast.stmt], path: str, gpu: bool) -> list[Site]:
    sites: list[Site] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if _is_gpu_test_or_fixture(node, gpu):
                sites += _sites_in(node.body, path, "", deferred=True)
        elif isinstance(node, ast.ClassDef):
            marked = gpu or any("mark.gpu" in ast.unparse(d) for d in node.decorator_list)
            sites += _test_sites(node.body, path, marked)
        else:
            sites += _sites_in([node], path, "", deferred=False)
    return sites


class _Source:
    """Where modules live: perflab's package and the tests folder's helper modules."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.trees: dict[Path, ast.Module] = {}

    def file_of(self, module: str) -> Path | None:
        parts = module.split(".")
        if parts[0] == "perflab":
            base = self.root.joinpath(*parts)
            for candidate in (base / "__init__.py", base.with_suffix(".py")):
                if candidate.is_file():
                    return candidate
            return None
        local = self.root / "tests" / f"{module}.py"
        return local if len(parts) == 1 and local.is_file() else None

    def third_party(self, top: str) -> bool:
        """A top-level name that is neither the standard library, perflab nor a test helper."""
        return bool(top) and top not in sys.stdlib_module_names and self.file_of(top) is None

    def tree(self, path: Path) -> ast.Module:
        if path not in self.trees:
            self.trees[path] = ast.parse(path.read_text(encoding="utf-8"), str(path))
        return self.trees[path]

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def package_of(self, module: str, path: Path) -> str:
        return module if path.name == "__init__.py" else module.rpartition(".")[0]


@dataclass
class Reach:
    """What the checked code imports: third-party top-level names with the first place
    that imports each, and the perflab and test modules followed."""

    third_party: dict[str, str] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)
    via: dict[str, str] = field(default_factory=dict)  # module -> the import that ran it
    module_at: dict[str, str] = field(default_factory=dict)  # file -> its module

    def chain(self, name: str) -> list[str]:
        """How the checked code comes to import ``name``: its first import, then the
        import of each module on the way back to a gpu test or gpu-check's own code."""
        steps = [self.third_party[name]]
        while len(steps) < 20:
            module = self.module_at.get(steps[-1].rpartition(":")[0])
            if module is None or module not in self.via:
                break
            steps.append(self.via[module])
        return steps[::-1]


def reach(test_files: Sequence[str] = GPU_TEST_FILES, root: Path = ROOT) -> Reach:
    """Follow the imports of gpu-check's own code, conftest.py and the gpu tests of
    ``test_files`` (paths relative to ``root``) through perflab (see the module doc)."""
    src = _Source(root)
    own: list[Site] = []
    for rel in OWN_CODE:
        path = root / rel
        package = "perflab.machine" if rel.endswith(".py") else ""
        own += _sites_in([src.tree(path)], rel, package, deferred=False)
    tests = list(_sites_in([src.tree(root / CONFTEST)], CONFTEST, "", deferred=False))
    for rel in test_files:
        tests += gpu_test_sites(src.tree(root / rel), rel)
    found = Reach(modules=set(OWN_MODULES))
    # gpu-check's own code first, to the end: a package it needs is said to be reached
    # through it, whatever a test also imports
    for todo in (own, tests):
        while todo:
            site = todo.pop(0)
            todo += _follow(site, src, found)
    return found


def _follow(site: Site, src: _Source, found: Reach) -> list[Site]:
    """The sites of each module that importing ``site.module`` runs, once per module;
    a third-party top-level name is recorded instead."""
    top = site.module.partition(".")[0]
    if src.third_party(top):
        found.third_party.setdefault(top, f"{site.path}:{site.line}")
        return []
    if not top or top in sys.stdlib_module_names:
        return []
    if site.deferred and site.module.startswith(FRONT_ENDS):
        return []  # a lazy import of render or front-end code: not run by gpu-check
    new: list[Site] = []
    parts = site.module.split(".")
    for i in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
        name = ".".join(parts[:i])
        path = src.file_of(name)
        if path is None or name in found.modules:
            continue
        found.modules.add(name)
        found.via[name] = f"{site.path}:{site.line}"
        found.module_at[src.rel(path)] = name
        tree = src.tree(path)
        package = src.package_of(name, path)
        front = name.startswith(FRONT_ENDS)
        for s in _sites_in([tree], src.rel(path), package, deferred=False):
            if not (front and s.deferred):  # a front end's functions are not run
                new.append(s)
    return new


def has_gpu_tests(path: Path) -> bool:
    """Whether the test file marks any test ``gpu``: a decorator or ``pytestmark`` that
    names ``mark.gpu`` (text elsewhere, in a string or a comment, does not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            marks = node.decorator_list
        elif isinstance(node, ast.Assign) and _assigns_pytestmark(node):
            marks = [node.value]
        else:
            continue
        if any("mark.gpu" in ast.unparse(m) for m in marks):
            return True
    return False


def _assigns_pytestmark(node: ast.Assign) -> bool:
    return any(getattr(t, "id", "") == "pytestmark" for t in node.targets)


def missing_at_import(path: Path) -> list[str]:
    """Third-party packages that importing the test file ``path`` needs (its module-level
    imports) and that are not installed here."""
    src = _Source(path.resolve().parent.parent)
    tree = src.tree(path)
    names = {s.module.partition(".")[0] for s in _sites_in([tree], "", "", False) if not s.deferred}
    return sorted(n for n in names if src.third_party(n) and importlib.util.find_spec(n) is None)


# --- checking -------------------------------------------------------------------------


@dataclass
class ModuleCheck:
    """The outcome: needed packages present (with versions) and missing (with the
    error), optional ones absent (with what happens without them), and how the checked
    code comes to import each (from a gpu test or gpu-check's own code to the import)."""

    present: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    optional_absent: dict[str, str] = field(default_factory=dict)
    unclassified: list[str] = field(default_factory=list)
    reached_through: dict[str, list[str]] = field(default_factory=dict)
    installed_from_wheels: list[str] = field(default_factory=list)
    modules_followed: int = 0

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def is_needed(name: str) -> bool:
    """Needed: in PACKAGES as needed, or in neither table (unclassified: assume so)."""
    package = PACKAGES.get(name)
    return package.needed if package is not None else name not in NOT_RUN


def check(found: Reach) -> ModuleCheck:
    """Import every needed package (a broken binary counts as missing); look up the
    optional ones without importing them."""
    result = ModuleCheck(modules_followed=len(found.modules))
    for name in sorted(found.third_party):
        if name in NOT_RUN:
            continue
        result.reached_through[name] = found.chain(name)
        if name not in PACKAGES:
            result.unclassified.append(name)
        if is_needed(name):
            error = _import_error(name)
            if error is None:
                result.present[name] = version_of(name) or "present"
            else:
                result.missing[name] = error
        elif importlib.util.find_spec(name) is None:
            result.optional_absent[name] = PACKAGES[name].why
        else:
            result.present[name] = version_of(name) or "present"
    return result


def _import_error(name: str) -> str | None:
    try:
        importlib.import_module(name)
    except Exception as exc:  # ImportError, or a binary built for another Python
        return f"{type(exc).__name__}: {exc}"
    return None


def dist_of(name: str) -> str:
    package = PACKAGES.get(name)
    return package.dist if package is not None else name


def version_of(name: str) -> str | None:
    """The installed distribution's version, without a local label (2.13.0, not
    2.13.0+cpu), or None when it is not installed."""
    try:
        return importlib.metadata.version(dist_of(name)).split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return None


# --- wheels ---------------------------------------------------------------------------


# the versions checked with this tree (the dev venv's); gpu-wheels pins to its own venv's
WHEEL_PINS = {"msgspec": "0.23.0", "isal": "1.9.1", "re2": "1.1.20251105", "IPython": "9.19.1"}


def pinned(name: str) -> str:
    """``dist==version``: the version installed here, else the one checked with this tree."""
    version = version_of(name) or WHEEL_PINS.get(name)
    return f"{dist_of(name)}=={version}" if version else dist_of(name)


# glibc 2.28 and later (google-re2 builds only for those), or 2.17 and later
MANYLINUX = ("manylinux_2_28", "manylinux_2_17")


def wheel_platforms() -> list[str]:
    return [f"{tag}_{platform.machine()}" for tag in MANYLINUX]


def brings_dependencies(names: Iterable[str]) -> bool:
    """Whether any of ``names`` travels with the wheels of its dependencies."""
    return any(name in PACKAGES and PACKAGES[name].with_dependencies for name in names)


def download_command(
    names: Iterable[str], python_version: str, dest: str = ".whl", python: str = "python3"
) -> list[str]:
    """The ``pip download`` of binary wheels for ``names``, pinned, for one Python: with
    the wheels of their dependencies when they travel with them (pip resolves them for
    that Python and platform), else without."""
    names = list(names)
    return [
        python,
        "-m",
        "pip",
        "download",
        *([] if brings_dependencies(names) else ["--no-deps"]),
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        *(arg for tag in wheel_platforms() for arg in ("--platform", tag)),
        "-d",
        dest,
        *(pinned(n) for n in names),
    ]


def instructions(result: ModuleCheck) -> str:
    """What to print when needed packages are missing: which, where first imported, and
    how to bring the ones that travel as wheels."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    names = sorted(result.missing)
    lines = ["gpu-check: stopped before any section: needed packages are missing"]
    for name in names:
        why = PACKAGES[name].why if name in PACKAGES else "imported by the checked code"
        lines += [
            f"  {dist_of(name)}: {why} ({result.missing[name]})",
            "    reached through " + " -> ".join(result.reached_through.get(name, [])),
        ]
    wheels = [n for n in names if n in PACKAGES and PACKAGES[n].travels]
    others = [n for n in names if n not in wheels]
    if wheels:
        lines += [
            "On a machine with a package registry, in this checkout, fetch them into .whl/:",
            "  scripts/gpu-wheels",
            "or by hand:",
            *("  " + " ".join(cmd) for cmd in download_commands(wheels, python)),
            "then bring .whl/ along with the tree: gpu-check installs from it (no network).",
        ]
    if others:
        lines.append(
            "Not carried as wheels (install them on this machine): "
            + ", ".join(dist_of(n) for n in others)
        )
    return "\n".join(lines)


def download_commands(
    names: Iterable[str], python_version: str, dest: str = ".whl", python: str = "python3"
) -> list[list[str]]:
    """The downloads that bring ``names``: one for those that travel alone, one for those
    that bring their dependencies (so that the first kind never pulls any)."""
    names = list(names)
    alone = [n for n in names if not brings_dependencies([n])]
    together = [n for n in names if brings_dependencies([n])]
    return [download_command(g, python_version, dest, python) for g in (alone, together) if g]


def lent_machine_lacks() -> list[str]:
    """The packages gpu-check needs that the lent machine lacks and that travel as wheels."""
    return [n for n, p in PACKAGES.items() if p.travels and not p.on_lent_machine]


def wheels_for(names: Iterable[str], wheel_dir: Path = WHEEL_DIR) -> list[str]:
    """Which of ``names`` have a wheel in ``wheel_dir`` (any version or Python)."""
    if not wheel_dir.is_dir():
        return []
    stems = {_normal(p.name.split("-")[0]) for p in wheel_dir.glob("*.whl")}
    return [n for n in names if _normal(dist_of(n)) in stems]


def _normal(dist: str) -> str:
    """A distribution name as wheel files and indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", dist).lower()


def install_wheels(names: Sequence[str], target: Path, wheel_dir: Path = WHEEL_DIR) -> None:
    """``pip install --no-index`` of ``names`` from ``wheel_dir`` into ``target``: no
    index, no config file, no PIP_* setting (so nothing but the folder is looked at);
    pip picks each package's wheel for this Python, and the dependencies' wheels from
    the folder too for a package that travels with them. Raises RuntimeError on failure."""
    from perflab.capture import _proc

    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-index",
        *([] if brings_dependencies(names) else ["--no-deps"]),
        "--disable-pip-version-check",
        "--find-links",
        str(wheel_dir),
        "--target",
        str(target),
        *(dist_of(n) for n in names),
    ]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ["PIP_CONFIG_FILE"] = os.devnull
    try:
        done = _proc.run(cmd, timeout=PIP_TIMEOUT_S, env=environ)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"pip install from {wheel_dir} timed out") from None
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise RuntimeError(f"pip install from {wheel_dir} failed: " + " | ".join(tail))


def use_site(target: Path) -> None:
    """Put ``target`` first on this process's path and its subprocesses' PYTHONPATH."""
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(target), *([before] if before else [])])


def scratch_site() -> Path:
    """A fresh private folder for the installed wheels, removed at exit."""
    import atexit

    target = Path(tempfile.mkdtemp(prefix="perflab-gpu-site-"))
    atexit.register(shutil.rmtree, target, True)
    return target


def check_and_bring(found: Reach, wheel_dir: Path = WHEEL_DIR) -> ModuleCheck:
    """Check; install from ``wheel_dir`` what is missing and has a wheel there; check again."""
    first = check(found)
    bring = wheels_for(first.missing, wheel_dir)
    if not bring:
        return first
    target = scratch_site()
    try:
        install_wheels(bring, target, wheel_dir)
    except (RuntimeError, OSError) as exc:
        first.missing = {
            n: f"{e}; and from {wheel_dir}: {exc}" if n in bring else e
            for n, e in first.missing.items()
        }
        return first
    use_site(target)
    second = check(found)
    second.installed_from_wheels = sorted(bring)
    child = _child_import_error([n for n in bring if n not in second.missing])
    if child:  # the gpu tests run in a subprocess: it must see them too
        second.missing.update(dict.fromkeys(bring, child))
    return second


def _child_import_error(names: Sequence[str]) -> str | None:
    """None when a fresh Python with this environment imports ``names``, else why not."""
    from perflab.capture import _proc

    if not names:
        return None
    code = "import " + ", ".join(names)
    try:
        done = _proc.run([sys.executable, "-c", code], timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "a subprocess timed out importing them"
    if done.returncode != 0:
        return "a subprocess cannot import them: " + done.stderr.strip()[-300:]
    return None
