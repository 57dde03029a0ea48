"""Every JSON document perflab writes has a declared type: each command with ``--json`` is in
the registry, and each registered type reads the command's real output on the test data
(every key declared, none missing), and each saved file kind reads its files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest
from bench_scripts import load_script

from perflab.cli import build_parser, main
from perflab.commands.json_schemas import COMMAND_OUTPUTS, SAVED_FILES, json_commands, schema
from perflab.machine.topology import from_text
from perflab.model.ceilings import Ceilings, save_ceilings
from perflab.model.machine import AlphaBetaFit, CollectiveResult, CollectiveRow

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "tests" / "data" / "traces"
KINETO = TRACES / "kineto"
RECORDED = ROOT / "notebooks" / "recordings" / "h200"


def test_every_command_with_json_is_registered() -> None:
    commands = set(json_commands(build_parser()))
    assert "trace idle" in commands and "info" in commands
    assert commands == set(COMMAND_OUTPUTS)


def test_the_registry_reads_an_unregistered_command_as_missing() -> None:
    """The check fails on a parser that grows --json without a registered document."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    sub.add_parser("newcommand").add_argument("--json", action="store_true")  # type: ignore[attr-defined]
    assert set(json_commands(parser)) - set(COMMAND_OUTPUTS) == {"newcommand"}


@pytest.mark.parametrize(
    "kind",
    [o.kind for outputs in COMMAND_OUTPUTS.values() for o in outputs] + list(SAVED_FILES.values()),
)
def test_every_declared_type_has_a_json_schema(kind: Any) -> None:
    assert schema(kind)


def _printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> object:
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _command(argv: list[str]) -> str:
    words = [a for a in argv if not a.startswith("-") and "/" not in a and " " not in a]
    return " ".join(words[:2]) if words[0] in ("trace", "machine", "exercises") else words[0]


def _matches(command: str, doc: object) -> str:
    """The ``when`` of the first registered document that reads ``doc``; fails with every
    type's complaint when none does."""
    errors = []
    for output in COMMAND_OUTPUTS[command]:
        try:
            msgspec.convert(doc, output.kind)
        except msgspec.ValidationError as exc:
            errors.append(str(exc))
        else:
            return output.when
    raise AssertionError(f"{command}: {errors}")


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("job")
    load_script("job").generate_job(directory, 3, 6, seed=3)
    return directory


TRACE_RUNS = (
    [
        ["trace", sub, str(KINETO / "triton_example_a100.json.gz"), "--json"]
        for sub in ("summary", "kernels", "idle", "critical", "memory")
    ]
    + [
        ["trace", "summary", str(TRACES / "cpu" / "cpu_only_train.json.gz"), "--json"],
        ["trace", "idle", str(TRACES / "cpu" / "cpu_only_train.json.gz"), "--json"],
        ["trace", "idle", str(TRACES / "hta_critical_path" / "simple_add.json.gz"), "--json"],
        ["trace", "memory", str(TRACES / "cpu" / "cpu_memory_train.json.gz"), "--json"],
        [
            "trace",
            "diff",
            str(ROOT / "tests" / "data" / "trace_diff" / "control.json.gz"),
            str(ROOT / "tests" / "data" / "trace_diff" / "test.json.gz"),
            "--json",
        ],
        [
            "trace",
            "sql",
            str(KINETO / "triton_example_a100.json.gz"),
            "SELECT name, count(*) AS n, sum(dur_ns) / 1e3 AS us FROM events GROUP BY name",
            "--json",
        ],
        ["info", "--json"],
        ["exercises", "list", "--json"],
    ]
    + [
        ["machine", name, "--replay", str(RECORDED / "machine" / f"{name}.json"), "--json"]
        for name in ("latency", "bandwidth", "launch", "matmul", "h2d")
    ]
)


@pytest.mark.parametrize("argv", TRACE_RUNS, ids=lambda argv: " ".join(argv[:2]))
def test_each_registered_type_reads_the_commands_output(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _matches(_command(argv), _printed(argv, capsys))


def test_a_jobs_documents_are_the_job_types(
    job_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = _printed(["trace", "summary", str(job_dir), "--json"], capsys)
    assert _matches("trace summary", summary).startswith("a job")
    kernels = _printed(["trace", "kernels", str(job_dir), "--json"], capsys)
    assert _matches("trace kernels", kernels).startswith("a job")
    _matches("trace critical", _printed(["trace", "critical", str(job_dir), "--json"], capsys))


def test_a_compile_and_its_cache_entry_are_their_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path))
    source = ROOT / "tests" / "data" / "ptx" / "kernels.cu"
    doc = _printed(["compile", str(source), "--json"], capsys)
    assert _matches("compile", doc) == "one compiled file"
    (entry,) = tmp_path.glob("compile/*/*.json")
    _saved_as_its_kind(entry)


def test_a_notebooks_history_is_its_kind(tmp_path: Path) -> None:
    from perflab.labext import History
    from perflab.model.timing import TimingResult

    history = History(tmp_path / "nb.ipynb.history.json")
    for path in sorted((RECORDED / "01-timing").glob("sum-*.json"))[:2]:
        history.add(TimingResult.load(path))
    history.entries[0].result.replayed_from = "sum.json"
    history.set_baseline("r2")
    history.save()
    _saved_as_its_kind(history.path)


def _saved_as_its_kind(path: Path) -> None:
    doc = json.loads(path.read_text())
    kind = doc.pop("perflab")
    doc.pop("schema_version")
    msgspec.convert(doc, SAVED_FILES[kind])


def test_collectives_and_ceilings_are_their_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perflab.capture.env import current_device_name

    row = CollectiveRow("all_reduce", 1 << 20, 2, "nccl", 50.0, 20.0, 20.0, iters=10)
    fit = {"all_reduce": AlphaBetaFit(5e-6, 1e11, 0.01, 4)}
    saved = CollectiveResult("collectives", "2 x dev", "nccl", rows=[row], fits=fit)
    path = saved.save(tmp_path / "coll.json")
    argv = ["machine", "collectives", "--replay", str(path), "--json"]
    _matches("machine collectives", _printed(argv, capsys))

    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path))
    save_ceilings(Ceilings(current_device_name(), "cpu", {"fp32": 1e3}, {"DRAM": 20.0}))
    _matches("ceilings", _printed(["ceilings", "--show", "--json"], capsys))


def test_a_topology_is_its_type() -> None:
    topo = from_text("\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n")
    _matches("machine topology", topo.to_dict())


def test_a_type_refuses_a_key_it_does_not_declare(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _printed(["trace", "idle", str(KINETO / "triton_example_a100.json.gz"), "--json"], capsys)
    assert isinstance(doc, dict)
    with pytest.raises(AssertionError):
        _matches("trace idle", {**doc, "surprise": 1})


@pytest.mark.parametrize(
    "path",
    sorted(p for p in RECORDED.rglob("*.json") if p.name != "MANIFEST.json"),
    ids=lambda p: p.name,
)
def test_each_saved_file_reads_as_its_kind(path: Path) -> None:
    _saved_as_its_kind(path)


# -- the reference page ------------------------------------------------------------------


def _reference_extension() -> Any:
    """docs/_ext/perflab_json.py, imported as the docs build imports it."""
    import importlib
    import sys

    extensions = str(ROOT / "docs" / "_ext")
    if extensions not in sys.path:
        sys.path.insert(0, extensions)
    return importlib.import_module("perflab_json")


def test_the_reference_page_shows_every_json_command_and_saved_kind() -> None:
    page = "\n".join(_reference_extension().command_lines() + _reference_extension().saved_lines())
    for command in json_commands(build_parser()):
        assert f"``perflab {command} --json``" in page
    for kind in SAVED_FILES:
        assert f"Saved {kind} files" in page
    assert '"$ref": "#/$defs/IdleView"' in page


def test_the_reference_page_fails_on_a_command_without_a_document(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sphinx.errors import ExtensionError

    from perflab.commands import json_schemas

    outputs = dict(json_schemas.COMMAND_OUTPUTS)
    del outputs["trace idle"]
    monkeypatch.setattr(json_schemas, "COMMAND_OUTPUTS", outputs)
    with pytest.raises(ExtensionError, match="perflab trace idle takes --json"):
        _reference_extension().command_lines()


def test_a_memory_snapshot_is_its_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pickle

    from test_memory_snapshot import snapshot

    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps(snapshot()))
    doc = _printed(["trace", "memory", str(path), "--json"], capsys)
    assert _matches("trace memory", doc).startswith("a memory snapshot")
