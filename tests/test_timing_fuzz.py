"""Seeded fuzz test of saved timing and benchmark results: tamper one field at a time
(wrong types, NaN/Infinity/null, huge and negative numbers, removed keys) and load. The
only acceptable outcomes: a result that loads and displays with sane numbers, or a
perflab SchemaError naming the file and the field. PERFLAB_FUZZ_ROUNDS sets the rounds
per kind (default 150: about a second each)."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perflab.errors import SchemaError
from perflab.model.machine import (
    AlphaBetaFit,
    BenchResult,
    CollectiveResult,
    CollectiveRow,
    Level,
    Series,
)
from perflab.model.timing import MAX_SAMPLE_NS, TimingResult

# a field, or the generic loader's JSON error (perflab.model.serialize refuses NaN/Infinity)
PLACES = ("field ", "malformed", "not valid JSON")
# a tampered value that loads must also show: an overflow while rendering it fails the test
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

ROUNDS = int(os.environ.get("PERFLAB_FUZZ_ROUNDS", "150"))
RAW = "\x00raw:"  # a string standing for JSON text that json.dumps cannot write
TAMPERS: list[Any] = [
    None,
    [],
    {},
    "x",
    "",
    True,
    -1,
    -1e-3,
    0,
    0.0,
    1.5,
    1e300,
    2**70,
    [None],
    ["x"],
    [-5.0],
    {"a": 1},
    RAW + "NaN",
    RAW + "Infinity",
    RAW + "-Infinity",
    RAW + "1e400",
    RAW + "-1e400",
    RAW + str(10**400),
    RAW + "[NaN, 1.0]",
    RAW + "[1e400]",
]


def _timing_doc() -> dict[str, Any]:
    r = TimingResult(
        samples_ns=np.linspace(1e3, 2e3, 12),
        backend="cuda",
        device="NVIDIA H200",
        name="In[2]",
        number=3,
        warnings=["noisy"],
        versions={"torch": "2.11.0"},
        options={"budget_ms": 100.0},
        flops=1e9,
        bytes=4e6,
        host_ns=np.full(12, 5e3),
        stop_reason="noise",
        throttle={"checked": False, "why": "pynvml is not installed"},
        empty_window_ns=1.5e3,
        tick_ns=512.0,
        sm_clock_min_mhz=np.full(12, 1980.0),
        sm_clock_median_mhz=np.full(12, 1980.0),
    )
    return {"perflab": "TimingResult", "schema_version": 1, **r.to_dict()}


def _bench_doc() -> dict[str, Any]:
    s = Series(
        "copy", np.array([1024.0, 2048, 4096]), np.array([10.0, 20, np.nan]), "bytes", "GBps"
    )
    s.extra = {"cycles": np.array([1.0, 2.0, 3.0])}
    s.levels = [Level("L2", 1024, 2048, 15.0, 2)]
    r = BenchResult("bandwidth", "NVIDIA H200", "cuda", versions={"torch": "2.11"}, series=[s])
    return {"perflab": "BenchResult", "schema_version": 1, **r.to_dict()}


def _collectives_doc() -> dict[str, Any]:
    row = CollectiveRow("all_reduce", 1 << 20, 2, "nccl", 50.0, 20.0, 20.0, iters=10)
    r = CollectiveResult(
        "collectives",
        "2 x NVIDIA H200",
        "nccl",
        rows=[row],
        fits={"all_reduce": AlphaBetaFit(5e-6, 1e11, 0.01, 4)},
    )
    return {"perflab": "CollectiveResult", "schema_version": 1, **r.to_dict()}


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key/index path below the header."""
    out = []
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for key, value in items:
        if not prefix and key in ("perflab", "schema_version"):
            continue  # the header is the generic loader's (perflab.model.serialize)
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def _tamper(doc: Any, rng: random.Random) -> tuple[Any, str]:
    doc = json.loads(json.dumps(doc))
    path = rng.choice(_paths(doc))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and rng.random() < 0.15:
        del parent[path[-1]]
        return doc, f"del {path}"
    value = rng.choice(TAMPERS)
    parent[path[-1]] = value
    return doc, f"{path} = {value!r}"


def _write(doc: Any, path: Path) -> None:
    text = json.dumps(doc)
    for tamper in TAMPERS:
        if isinstance(tamper, str) and tamper.startswith(RAW):
            text = text.replace(json.dumps(tamper), tamper[len(RAW) :])
    path.write_text(text, encoding="utf-8")


def _check_timing(r: TimingResult) -> None:
    from perflab.render.timing import timing_bundle

    assert r.n > 0 and np.isfinite(r.samples_ns).all() and (r.samples_ns > 0).all()
    assert r.median_ns > 0 and math.isfinite(r.median_ns)
    assert r.max_ns <= MAX_SAMPLE_NS
    bundle = timing_bundle(r)
    assert "median" in bundle["text/plain"] and "-" not in r.summary_line().split("median")[1][:2]
    assert "<svg" in bundle["text/html"] or "data:image/svg" in bundle["text/html"]
    text = str(r.compare(r))
    assert "inf" not in text and "nan" not in text, text


def _check_bench(r: BenchResult | CollectiveResult) -> None:
    str(r)
    r._repr_mimebundle_()
    json.dumps(r.to_dict(), allow_nan=False)


def _load(load: Any, path: Path) -> tuple[str | None, Any]:
    """(the SchemaError's message, None) or (None, the loaded result); any other
    exception fails the test."""
    try:
        return None, load(path)
    except SchemaError as exc:
        return str(exc), None


KINDS = [
    ("timing", _timing_doc, TimingResult.load, _check_timing),
    ("bench", _bench_doc, BenchResult.load, _check_bench),
    ("collectives", _collectives_doc, CollectiveResult.load, _check_bench),
]


@pytest.mark.parametrize(("kind", "make", "load", "check"), KINDS, ids=[k[0] for k in KINDS])
def test_tampered_results_load_correctly_or_name_the_field(
    kind: str, make: Any, load: Any, check: Any, tmp_path: Path
) -> None:
    rng = random.Random(f"perflab-{kind}")
    base = make()
    path = tmp_path / f"{kind}.json"
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(ROUNDS):
        doc, what = _tamper(base, rng)
        _write(doc, path)
        message, result = _load(load, path)
        if message is not None:
            assert str(path) in message, (what, message)
            assert any(word in message for word in PLACES), (what, message)
            outcomes["refused"] += 1
            continue
        check(result)
        outcomes["loaded"] += 1
    assert outcomes["refused"] > ROUNDS // 3, outcomes
    assert outcomes["loaded"] > 0, outcomes


@pytest.mark.parametrize(
    ("field", "raw", "message"),
    [
        ("versions", "[]", "field versions"),
        ("number", "1e400", "field number"),
        ("number", str(2**70), "field number"),
        ("samples_ns", "[1.0, NaN]", r"field samples_ns\[1\]|NaN is not a JSON number"),
        ("samples_ns", "[1.0, Infinity]", r"field samples_ns\[1\]|not a JSON number"),
        ("samples_ns", "[null]", r"field samples_ns\[0\]"),
        ("samples_ns", "[-1000000.0, 5.0]", r"field samples_ns\[0\]"),
        ("host_ns", "[1.0]", "field host_ns"),
        ("flops", "-3", "field flops"),
        ("options", "7", "field options"),
        ("samples_ns", "[0.0, 0.0, 0.0]", r"field samples_ns\[0\]\): .*nothing was timed"),
        ("samples_ns", "[5.0, 0]", r"field samples_ns\[1\]\): must be a per-call time"),
        ("samples_ns", "[1e300, 1e300]", r"field samples_ns\[0\]\): .*one day"),
        ("samples_ns", "[5.0, 86400000000001.0]", r"field samples_ns\[1\]"),
        ("empty_window_ns", "0", r"field empty_window_ns\): .*nothing was timed"),
        ("tick_ns", "1e300", r"field tick_ns\): .*one day"),
        ("tick_ns", "-1", "field tick_ns"),
        # the names files written before use are checked alike
        ("floor_ns", "0", r"field floor_ns\): .*nothing was timed"),
        ("resolution_ns", "1e300", r"field resolution_ns\): .*one day"),
        ("resolution_ns", "-1", "field resolution_ns"),
        ("sm_clock_min_mhz", "[1980.0]", r"field sm_clock_min_mhz\): has 1 values where 12"),
        ("sm_clock_median_mhz", "[-1.0]", r"field sm_clock_median_mhz\[0\]"),
    ],
)
def test_reported_tampers_are_refused(field: str, raw: str, message: str, tmp_path: Path) -> None:
    doc = _timing_doc()
    doc[field] = RAW + raw
    path = tmp_path / "r.json"
    text = json.dumps(doc).replace(json.dumps(RAW + raw), raw)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SchemaError, match=message) as info:
        TimingResult.load(path)
    assert str(path) in str(info.value)


def test_bench_versions_list_is_refused(tmp_path: Path) -> None:
    doc = _bench_doc()
    doc["versions"] = []
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(SchemaError, match="field versions"):
        BenchResult.load(path)
    doc = _bench_doc()
    doc["series"][0]["y"] = [1.0, 2.0]
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(SchemaError, match=r"field series\[0\]\.y"):
        BenchResult.load(path)
