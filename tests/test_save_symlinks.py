"""Saving never writes through a symbolic link planted where perflab writes: not at the
temporary file beside the target (a committed ``.perflab/nb.ipynb.history.json.tmp ->
../../victim.txt`` once made the next result overwrite ``victim.txt``), and not at the target
when it points out of its folder. Every save path goes through one writer
(:func:`perflab.model.serialize.write_atomic`); each is checked here, and a seeded fuzz test
plants links of every kind and accepts only a correct save or perflab's own error."""

from __future__ import annotations

import json
import os
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from data_paths import TRACES

from perflab import labext
from perflab.errors import InputError, PerflabError
from perflab.io import export_chrome, load_trace
from perflab.model import serialize
from perflab.model.ceilings import Ceilings, load_ceilings, save_ceilings
from perflab.model.serialize import WriteError, write_atomic
from perflab.model.timing import TimingResult
from perflab.model.trace import Trace

VICTIM = b"a file outside the folder: no save may change it\n"
TRACE = TRACES / "kineto" / "triton_example_a100.json.gz"


@dataclass(frozen=True)
class Saver:
    """One way perflab saves a file: ``save(path)`` writes it, ``check(path)`` reads it back
    and asserts it holds what was saved."""

    name: str
    save: Callable[[Path], object]
    check: Callable[[Path], None]


def _timing() -> TimingResult:
    samples = 1000.0 + np.arange(20, dtype=np.float64)
    return TimingResult(samples_ns=samples, backend="cpu", device="CPU: test", name="t")


def _json_saver() -> Saver:
    def check(path: Path) -> None:
        assert serialize.load_json("Thing", path)["x"] == [1, 2]

    return Saver("dump_json", lambda p: serialize.dump_json("Thing", {"x": [1, 2]}, p), check)


def _arrays_saver() -> Saver:
    values = np.arange(7, dtype=np.int64)

    def check(path: Path) -> None:
        arrays, header = serialize.load_arrays(path, ["a"])
        np.testing.assert_array_equal(arrays["a"], values)
        assert header == {"h": 1}

    return Saver("save_arrays", lambda p: serialize.save_arrays(p, {"a": values}, {"h": 1}), check)


def _timing_saver() -> Saver:
    result = _timing()

    def check(path: Path) -> None:
        np.testing.assert_array_equal(TimingResult.load(path).samples_ns, result.samples_ns)

    return Saver("TimingResult.save", result.save, check)


def _trace_saver(trace: Trace) -> Saver:
    def check(path: Path) -> None:
        back = Trace.load(path)
        assert len(back) == len(trace) and back.strings == trace.strings

    return Saver("Trace.save", trace.save, check)


def _history_saver() -> Saver:
    def save(path: Path) -> None:
        history = labext.History(path)
        history.add(_timing())
        history.save()

    def check(path: Path) -> None:
        assert [e.result.name for e in labext.History.load(path).entries] == ["t"]

    return Saver("lab history", save, check)


def _ceilings_saver() -> Saver:
    ceilings = Ceilings("CPU: test", "cpu", {"fp32": 100.0}, {"DRAM": 20.0})

    def check(path: Path) -> None:
        back = load_ceilings("CPU: test", path)
        assert back is not None and back.to_dict() == ceilings.to_dict()

    return Saver("ceilings", lambda p: save_ceilings(ceilings, p), check)


def _chrome_saver(trace: Trace) -> Saver:
    def check(path: Path) -> None:
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert doc["otherData"]["exported_by"] == "perflab" and doc["traceEvents"]

    return Saver("export_chrome", lambda p: export_chrome(trace, p), check)


def _html_saver(name: str, save: Callable[[Path], object], title: str) -> Saver:
    def check(path: Path) -> None:
        text = path.read_text(encoding="utf-8")
        assert "<html" in text.lower() and title in text

    return Saver(name, save, check)


def _html_savers(trace: Trace) -> list[Saver]:
    """The timeline's and the roofline's HTML, where bokeh is installed."""
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return []
    from perflab.render.roofline import roofline
    from perflab.render.timeline import timeline

    page = timeline(trace)
    chart = roofline([("k", 1e9, 1e8, 1e-3)], device="H200")
    return [
        _html_saver("Timeline.save", lambda p: page.save(p, title="saved timeline"), "saved"),
        _html_saver("Roofline.save", chart.save, "roofline"),
    ]


@pytest.fixture(scope="module")
def savers() -> dict[str, Saver]:
    trace = load_trace(TRACE)
    every = [
        _json_saver(),
        _arrays_saver(),
        _timing_saver(),
        _trace_saver(trace),
        _history_saver(),
        _ceilings_saver(),
        _chrome_saver(trace),
        *_html_savers(trace),
    ]
    return {s.name: s for s in every}


SAVERS = [
    "dump_json",
    "save_arrays",
    "TimingResult.save",
    "Trace.save",
    "lab history",
    "ceilings",
    "export_chrome",
    "Timeline.save",
    "Roofline.save",
]


@pytest.fixture(params=SAVERS)
def saver(request: pytest.FixtureRequest, savers: dict[str, Saver]) -> Saver:
    """Each save path in turn."""
    if request.param not in savers:
        pytest.skip(f"{request.param} needs bokeh, which is not installed")
    return savers[request.param]


@dataclass
class Scene:
    """A repository folder (``repo/.perflab``) and, outside it, a victim file and folder."""

    folder: Path
    outside: Path
    victim: Path

    @classmethod
    def make(cls, root: Path) -> Scene:
        folder, outside = root / "repo" / ".perflab", root / "outside"
        folder.mkdir(parents=True)
        (outside / "dir").mkdir(parents=True)
        victim = outside / "victim.txt"
        victim.write_bytes(VICTIM)
        return cls(folder, outside, victim)

    def outside_state(self) -> list[tuple[str, bytes | None]]:
        """Every path under the outside folder with its bytes (None for a folder)."""
        return [
            (str(p.relative_to(self.outside)), p.read_bytes() if p.is_file() else None)
            for p in sorted(self.outside.rglob("*"))
        ]

    def assert_untouched(self, before: list[tuple[str, bytes | None]]) -> None:
        assert not self.victim.is_symlink() and self.victim.read_bytes() == VICTIM
        assert self.outside_state() == before


@pytest.fixture
def scene(tmp_path: Path) -> Scene:
    return Scene.make(tmp_path)


# -- each save path --------------------------------------------------------------------------


def test_a_planted_tmp_link_is_never_followed(saver: Saver, scene: Scene) -> None:
    target = scene.folder / "nb.ipynb.history.json"
    planted = scene.folder / (target.name + ".tmp")
    planted.symlink_to(Path("..", "..", "outside", "victim.txt"))
    before = scene.outside_state()
    saver.save(target)
    scene.assert_untouched(before)
    assert not target.is_symlink()
    saver.check(target)
    assert os.readlink(planted) == str(Path("..", "..", "outside", "victim.txt"))
    assert sorted(p.name for p in scene.folder.iterdir()) == sorted([target.name, planted.name])


def test_a_target_linked_out_of_its_folder_is_refused(saver: Saver, scene: Scene) -> None:
    target = scene.folder / "result.json"
    target.symlink_to(scene.victim)
    before = scene.outside_state()
    with pytest.raises(InputError) as info:
        saver.save(target)
    scene.assert_untouched(before)
    assert str(target) in str(info.value)
    if isinstance(info.value, WriteError):
        assert "outside its folder" in str(info.value) and str(scene.victim) in str(info.value)
    else:  # ceilings are read before they are written: the victim is no ceilings file
        assert saver.name == "ceilings"
    assert [p.name for p in scene.folder.iterdir()] == ["result.json"]  # no temporary file


def test_the_victim_of_a_link_as_target_is_refused_even_as_ceilings(scene: Scene) -> None:
    """A victim that reads as a ceilings file is still not written through."""
    other = Ceilings("GPU: other", "cuda", {"fp32": 1.0}, {"HBM": 1.0})
    scene.victim.unlink()
    save_ceilings(other, scene.victim)
    before = scene.outside_state()
    target = scene.folder / "ceilings.json"
    target.symlink_to(scene.victim)
    with pytest.raises(WriteError, match="outside its folder"):
        save_ceilings(Ceilings("CPU: test", "cpu", {"fp32": 2.0}, {"DRAM": 2.0}), target)
    assert scene.outside_state() == before


def test_a_link_inside_its_folder_is_written_through(scene: Scene) -> None:
    real = scene.folder / "run-3.json"
    latest = scene.folder / "latest.json"
    latest.symlink_to("run-3.json")
    serialize.dump_json("Thing", {"x": 1}, latest)
    assert latest.is_symlink() and serialize.load_json("Thing", real)["x"] == 1


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        (lambda t: t.symlink_to(t.name), "cannot be followed"),
        (lambda t: t.mkdir(), "is a directory"),
        (lambda t: (t.parent / "d").mkdir() or t.symlink_to("d"), "is a directory"),
    ],
)
def test_loops_and_directories_as_targets_are_write_errors(
    scene: Scene, plant: Callable[[Path], object], message: str
) -> None:
    target = scene.folder / "x.json"
    plant(target)
    with pytest.raises(WriteError, match=message) as info:
        serialize.dump_json("Thing", {}, target)
    assert str(target) in str(info.value)
    assert isinstance(info.value, OSError)  # code that handles a failed write handles this


def test_a_missing_folder_is_a_write_error_naming_the_file(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "r.json"
    with pytest.raises(WriteError, match="cannot write: No such file") as info:
        _timing().save(target)
    assert str(target) in str(info.value) and info.value.strerror == "No such file or directory"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old")

    def fail(_: Any) -> None:
        raise ValueError("not serialisable")

    with pytest.raises(ValueError, match="not serialisable"):
        write_atomic(target, fail)

    def full(_: Any) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(WriteError, match="No space left"):
        write_atomic(target, full)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_a_saved_file_has_the_mode_open_would_give(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        path = serialize.dump_json("Thing", {}, tmp_path / "r.json")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_the_cli_says_it_will_not_write_through_a_link(scene: Scene, capsys: Any) -> None:
    from perflab.cli import main

    out = scene.folder / "trace.json"
    out.symlink_to(scene.victim)
    assert main(["trace", "export", str(TRACE), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error: ") and "outside its folder" in err
    assert scene.victim.read_bytes() == VICTIM


# -- fuzz: links of every kind wherever perflab might write --------------------------------------

TARGET_NAME = "result.json"


def _temp_looking_names(rng: random.Random) -> list[str]:
    letters = string.ascii_lowercase + string.digits + "_"
    random_part = "".join(rng.choice(letters) for _ in range(8))
    return [
        f"{TARGET_NAME}.tmp",
        f".{TARGET_NAME}.tmp",
        f"{TARGET_NAME}.{os.getpid()}.tmp",
        f".{TARGET_NAME}.{random_part}.tmp",
        f"tmp{random_part}",
    ]


def _link_destinations(scene: Scene, name: str) -> list[str]:
    """What a planted link at ``name`` may point to: the victim, the outside folder, nothing
    (dangling, inside or out), a folder inside, itself, or a loop through another link."""
    return [
        str(scene.victim),
        os.path.join("..", "..", "outside", "victim.txt"),
        os.path.join("..", "..", "outside", "dir"),
        os.path.join("..", "..", "outside", "new.txt"),
        "missing.json",
        "inner",
        name,
        "loop-b",
    ]


def _plant(scene: Scene, rng: random.Random) -> dict[str, str]:
    """Links at the target and at temporary-looking names; each name -> where it points."""
    (scene.folder / "inner").mkdir()
    (scene.folder / "loop-b").symlink_to("loop-a")
    (scene.folder / "loop-a").symlink_to("loop-b")
    planted = {"loop-a": "loop-b", "loop-b": "loop-a"}
    names = _temp_looking_names(rng)
    chosen = rng.sample(names, rng.randint(1, len(names)))
    if rng.random() < 0.5:
        chosen.append(TARGET_NAME)
    for name in chosen:
        destination = rng.choice(_link_destinations(scene, name))
        (scene.folder / name).symlink_to(destination)
        planted[name] = destination
    return planted


def _save_or_refusal(saver: Saver, target: Path) -> str | None:
    """None when ``saver`` saved ``target``; perflab's error message when it refused (any
    other exception fails the test)."""
    try:
        saver.save(target)
    except PerflabError as exc:
        return str(exc)
    return None


def test_fuzz_planted_links_give_a_correct_save_or_a_perflab_error(
    savers: dict[str, Saver], tmp_path: Path
) -> None:
    rng = random.Random(20240611)
    outcomes = {"saved": 0, "refused": 0}
    for case in range(60):
        scene = Scene.make(tmp_path / f"case-{case}")
        saver = savers[rng.choice(sorted(savers))]
        planted = _plant(scene, rng)
        before = scene.outside_state()
        target = scene.folder / TARGET_NAME
        where = f"case {case}: {saver.name} with {planted}"
        refusal = _save_or_refusal(saver, target)
        if refusal is None:
            saver.check(target)
            outcomes["saved"] += 1
        else:
            assert str(target) in refusal, where
            outcomes["refused"] += 1
        scene.assert_untouched(before)
        for name, destination in planted.items():
            link = scene.folder / name
            assert link.is_symlink() and os.readlink(link) == destination, where
        expected = {*planted, "inner", TARGET_NAME, "missing.json"}  # (written through a link)
        stray = {p.name for p in scene.folder.iterdir()} - expected
        assert not stray, f"{where}: left {stray}"
    assert outcomes["saved"] > 10 and outcomes["refused"] > 10  # both outcomes were exercised


def test_the_compile_cache_sass_never_follows_a_planted_link(scene: Scene) -> None:
    """The SASS beside a cached compile went through ``<key>.sass.<pid>.tmp``, opened as a
    plain file: a link planted under that name made the cache overwrite its target."""
    from perflab.capture.compile import _CacheEntry

    before = scene.outside_state()
    entry = _CacheEntry("ab" + "0" * 62, root=scene.folder)
    entry.sass_path.parent.mkdir(parents=True)
    planted = entry.sass_path.with_name(f"{entry.sass_path.name}.{os.getpid()}.tmp")
    planted.symlink_to(scene.victim)
    entry.write_sass("        /*0000*/  EXIT ;\n")
    assert entry.read_sass() == "        /*0000*/  EXIT ;\n"
    assert not entry.sass_path.is_symlink() and planted.is_symlink()
    scene.assert_untouched(before)


# -- folders on the way --------------------------------------------------------------------------


@dataclass
class LinkedFolder:
    """A repository (the current folder) whose ``.perflab`` folder is a link out of it."""

    repo: Path
    link: Path
    outside: Path

    @classmethod
    def make(cls, root: Path, monkeypatch: pytest.MonkeyPatch) -> LinkedFolder:
        repo, outside = root / "repo", root / "outside"
        repo.mkdir()
        outside.mkdir()
        (outside / "victim.txt").write_bytes(VICTIM)
        link = repo / ".perflab"
        link.symlink_to(Path("..", "outside"), target_is_directory=True)
        monkeypatch.chdir(repo)
        return cls(repo, link, outside)

    def outside_state(self) -> list[tuple[str, bytes]]:
        return [(p.name, p.read_bytes()) for p in sorted(self.outside.iterdir())]


@pytest.fixture
def linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LinkedFolder:
    return LinkedFolder.make(tmp_path, monkeypatch)


@pytest.mark.parametrize("spelled", ["relative", "absolute"])
def test_a_folder_linked_out_of_the_current_folder_is_refused(
    saver: Saver, linked: LinkedFolder, spelled: str
) -> None:
    """``.perflab -> ../outside`` committed in a repository: the notebook's history, a
    result saved to ``.perflab/x.json``, however the path is spelled, stays out of it."""
    target = Path(".perflab", "result.json")
    if spelled == "absolute":
        target = Path.cwd() / target
    before = linked.outside_state()
    with pytest.raises(WriteError) as info:
        saver.save(target)
    assert linked.outside_state() == before
    message = str(info.value)
    assert str(target) in message and "symbolic link" in message
    assert str(linked.outside.resolve()) in message  # the folder to name, to save there


def test_a_folder_linked_out_deeper_on_the_way_is_refused(linked: LinkedFolder) -> None:
    (linked.repo / "runs" / "today").mkdir(parents=True)
    (linked.repo / "runs" / "today" / "sub").symlink_to(linked.outside)
    with pytest.raises(WriteError, match="runs/today/sub is a symbolic link"):
        _timing().save("runs/today/sub/x.json")
    with pytest.raises(WriteError, match="symbolic link"):
        _timing().save("runs/../runs/today/sub/x.json")
    assert [p.name for p in linked.outside.iterdir()] == ["victim.txt"]


def test_a_folder_linked_inside_the_current_folder_is_followed(linked: LinkedFolder) -> None:
    (linked.repo / "results-v2").mkdir()
    (linked.repo / "results").symlink_to("results-v2", target_is_directory=True)
    _timing().save("results/x.json")
    assert TimingResult.load(linked.repo / "results-v2" / "x.json").name == "t"


def test_the_folder_a_link_points_to_can_be_named_and_saved_to(linked: LinkedFolder) -> None:
    """Named itself (outside the current folder), the folder is the user's choice; so is an
    absolute path elsewhere whose own folders are links (``/tmp -> /private/tmp``)."""
    _timing().save(linked.outside / "x.json")
    assert TimingResult.load(linked.outside / "x.json").name == "t"
    elsewhere = linked.repo.parent / "elsewhere"
    elsewhere.symlink_to(linked.outside, target_is_directory=True)
    _timing().save(elsewhere / "y.json")
    assert (linked.outside / "y.json").is_file()
    _timing().save("../outside/z.json")  # above the current folder: named by the path
    assert (linked.outside / "z.json").is_file()


def test_the_cache_folder_may_itself_be_a_link_but_not_a_folder_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``~/.cache`` on another disk is common; a link planted inside the cache is not."""
    real = tmp_path / "big-disk" / "cache"
    real.mkdir(parents=True)
    (tmp_path / "cache").symlink_to(real, target_is_directory=True)
    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path / "cache"))
    serialize.dump_json("Thing", {"x": 1}, tmp_path / "cache" / "ceilings.json")
    assert (real / "ceilings.json").is_file()
    (tmp_path / "outside").mkdir()
    (real / "compile").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(WriteError, match="compile is a symbolic link"):
        serialize.dump_json("Thing", {"x": 1}, tmp_path / "cache" / "compile" / "k.json")
    assert not any((tmp_path / "outside").iterdir())


def test_a_looping_folder_link_is_a_write_error(linked: LinkedFolder) -> None:
    (linked.repo / "loop").symlink_to("loop")
    with pytest.raises(WriteError, match="cannot be followed"):
        _timing().save("loop/x.json")


def test_the_cli_refuses_a_linked_output_folder(
    linked: LinkedFolder, capsys: pytest.CaptureFixture[str]
) -> None:
    from perflab.cli import main

    assert main(["trace", "export", str(TRACE), "-o", ".perflab/trace.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error: ") and "symbolic link" in err
    assert [p.name for p in linked.outside.iterdir()] == ["victim.txt"]
