"""The declared schema of saved results (perflab.model.schema, perflab.model.saved): bounds
declared once per field, msgspec's errors in perflab's words (file, field path, value),
cross-field checks at their place, the same JSON written as read, and models that import
without msgspec."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perflab.errors import SchemaError
from perflab.model.ceilings import Ceilings, all_ceilings
from perflab.model.kernel import (
    CompileResult,
    Control,
    Diagnostic,
    KernelArtifacts,
    LiveRegisters,
    Resources,
    SassLine,
)
from perflab.model.machine import (
    AlphaBetaFit,
    BenchResult,
    CollectiveResult,
    CollectiveRow,
    Level,
    Series,
)
from perflab.model.optable import OpTable
from perflab.model.saved import BenchDoc, TimingDoc
from perflab.model.schema import Amount, FieldError, check, decode
from perflab.model.timing import TimingResult, current_words

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("TimingResult", "BenchResult", "Ceilings")


def _kind(path: Path) -> object:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc.get("perflab") if isinstance(doc, dict) else None


COMMITTED = [
    path
    for pattern in (
        "notebooks/recordings/**/*.json",
        "benchmarks/results/**/*.json",
        "tests/data/**/*.json",
    )
    for path in sorted(ROOT.glob(pattern))
    if _kind(path) in KINDS
]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1.0, True, 10**400, "1"])
def test_a_bounded_number_refuses_what_is_not_a_finite_amount(value: object) -> None:
    with pytest.raises(FieldError):
        check(value, Amount)


@pytest.mark.parametrize("value", [0, 0.0, 1e300, 2**70])
def test_a_bounded_number_takes_finite_amounts(value: float) -> None:
    assert check(value, Amount) == value


def _timing() -> dict[str, object]:
    table = OpTable.from_rows([("gemm", 3, 3000), ("copy", 1, 50)])
    result = TimingResult(
        np.array([100.0, 120, 110]), "cuda", "dev", kernels=table, host_ns=np.ones(3)
    )
    return result.to_dict()


def _refusal(doc: object, kind: type, source: str = "r.json") -> str:
    with pytest.raises(SchemaError) as info:
        decode(doc, kind, source)
    return str(info.value)


def test_a_refused_value_names_the_file_the_field_and_the_value() -> None:
    doc = _timing()
    doc["samples_ns"] = [100.0, -2.0, 5.0]
    message = _refusal(doc, TimingDoc)
    assert message == "r.json (field samples_ns[1]): must be a finite number >= 0.0, not -2.0"
    doc = _timing()
    doc["kernels"] = {"rows": [{"name": "a", "calls": 1.5, "total_ns": 1}]}
    message = _refusal(doc, TimingDoc)
    assert "(field kernels.rows[0].calls): must be a whole number, not a finite number" in message


def test_missing_and_unknown_fields_are_named() -> None:
    doc = _timing()
    del doc["device"]
    assert _refusal(doc, TimingDoc).endswith("(field device): is missing")
    del doc["samples_ns"]  # the samples are reported first, whatever the order
    assert _refusal(doc, TimingDoc).endswith("(field samples_ns): is missing")
    with pytest.raises(FieldError, match=r"^field spare: is not known$"):
        LiveRegisters.from_dict({"gpr": 3, "spare": 1})


def _bench() -> BenchResult:
    series = Series("copy", np.array([1024.0, 2048.0]), np.array([5.0, math.nan]), "bytes", "ns")
    series.extra = {"passes": np.array([1.0, 2.0]), "hot": np.array([0.0, 1.0])}
    series.levels = [Level("L1", 1024.0, 2048.0, 5.0, 2)]
    return BenchResult("bandwidth", "dev", "cpu", series=[series])


def test_a_key_msgspec_leaves_unnamed_is_found() -> None:
    doc = json.loads(json.dumps(_bench().to_dict()))
    doc["series"][0]["extra"]["hot"][1] = -1.0
    message = _refusal(doc, BenchDoc)
    assert "(field series[0].extra.hot[1]): must be a finite number >= 0.0, not -1.0" in message


def test_cross_field_checks_name_their_place() -> None:
    doc = json.loads(json.dumps(_bench().to_dict()))
    doc["series"][0]["extra"]["passes"] = [1.0]
    message = _refusal(doc, BenchDoc)
    assert message.endswith("(field series[0].extra.passes): has 1 values where 2 are expected")
    doc = _timing()
    doc["samples_ns"] = [5.0, 0.0]
    assert "(field samples_ns[1]): must be a per-call time" in _refusal(doc, TimingDoc)
    doc["samples_ns"] = []
    assert _refusal(doc, TimingDoc).endswith("(field samples_ns): has no samples")


def _compiled() -> CompileResult:
    control = Control(4, True, 2, None, 0b101, 1)
    lines = [
        SassLine(None, ".L_x_0:"),
        SassLine(0, "LDG.E R2, [R4]", "LDG.E", 3, 10, control, LiveRegisters(12, 1, 2, 0)),
    ]
    kernel = KernelArtifacts(
        "k(int)", "_Z1ki", "sm_90a", ".entry k\n{\n}", (1, 3), [None, 3, 3], Resources(32)
    )
    kernel._sass_lines = lines
    return CompileResult(
        "cuda",
        "sm_90a",
        "src",
        "k.cu",
        [kernel],
        kernel.module_ptx,
        cubin=b"\x7fELF\x00\xff",
        warnings=[Diagnostic("k.cu", 3, "warning", "unused")],
        compile_s=0.5,
    )


def _collectives() -> CollectiveResult:
    row = CollectiveRow("all_reduce", 1 << 20, 2, "nccl", 50.0, 20.0, 20.0, iters=10)
    fits = {
        "all_reduce": AlphaBetaFit(5e-6, 1e11, 0.01, 4),
        "flat": AlphaBetaFit(1e-6, math.inf, 0.0, 2),
    }
    return CollectiveResult("collectives", "2 x dev", "nccl", rows=[row], fits=fits)


@pytest.mark.parametrize(
    "make",
    [
        lambda: TimingResult.from_dict(_timing()),
        _bench,
        _collectives,
        lambda: Ceilings("dev", "cuda", {"bf16": 9.9e5}, {"HBM": 4.8e3}, "2026-01-01"),
        _compiled,
    ],
    ids=["timing", "bench", "collectives", "ceilings", "compile"],
)
def test_every_kind_reads_back_what_it_wrote(make) -> None:  # type: ignore[no-untyped-def]
    result = make()
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    again = type(result).from_dict(doc)
    assert json.dumps(again.to_dict()) == json.dumps(doc)


def test_compile_results_keep_their_cubin_and_can_leave_sass_out() -> None:
    result = _compiled()
    doc = result.to_dict(sass=False)
    assert doc["cubin_b64"] == "f0VMRgD/" and "sass_lines" not in doc["kernels"][0]
    loaded = CompileResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert loaded.cubin == result.cubin
    assert loaded.kernel().sass_lines == result.kernel().sass_lines
    bad = result.to_dict()
    bad["cubin_b64"] = "not base64!"
    with pytest.raises(
        SchemaError, match=r"malformed compile result: .*\(field cubin_b64\)|cubin_b64"
    ):
        CompileResult.from_dict(bad, "c.json")


def _header_less(path: Path) -> tuple[str, dict[str, object]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    kind = doc.pop("perflab", None) if isinstance(doc, dict) else None
    doc.pop("schema_version", None)
    return str(kind), doc


def _in_current_names(doc: dict[str, object]) -> dict[str, object]:
    """A timing saved with the former names of its timer steps (``floor_ns``,
    ``resolution_ns``) as it is written now: renamed in place, with the per-sample clocks
    it did not record after them, and its timer warnings in today's words."""
    renamed = {"floor_ns": "empty_window_ns", "resolution_ns": "tick_ns"}
    if "floor_ns" not in doc:
        return doc
    out: dict[str, object] = {}
    for key, value in doc.items():
        out[renamed.get(key, key)] = value
        if key == "resolution_ns":
            out.update(sm_clock_min_mhz=None, sm_clock_median_mhz=None)
    out["warnings"] = [current_words(str(w)) for w in doc["warnings"]]  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.relative_to(ROOT)) for p in COMMITTED])
def test_committed_results_load_to_the_json_they_hold(path: Path) -> None:
    kind, doc = _header_less(path)
    if kind == "TimingResult":
        doc = _in_current_names(doc)
        loaded: dict[str, object] = TimingResult.load(path).to_dict()
    elif kind == "BenchResult":
        loaded = BenchResult.load(path).to_dict()
    elif kind == "Ceilings":
        loaded = {"devices": {k: c.to_dict() for k, c in all_ceilings(path).items()}}
    else:
        raise AssertionError(f"{path}: {kind}")
    assert json.dumps(loaded) == json.dumps(doc)


def test_the_models_import_without_msgspec() -> None:
    """A GPU machine installs msgspec in gpu-check's first section: the models (and the
    microbenchmarks that build on them) must import before that."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'msgspec': raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import perflab.model.timing, perflab.model.machine, perflab.model.kernel\n"
        "import perflab.model.ceilings, perflab.model.optable\n"
        "print('msgspec' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "False"


def test_a_refused_long_value_is_described_not_repeated() -> None:
    doc = _timing()
    doc["name"] = "x" * 100_001
    message = _refusal(doc, TimingDoc)
    assert message.endswith(
        "(field name): must be text of length <= 100000, not text of 100,001 characters"
    )
