"""Kineto / torch.profiler JSON importer: real traces, independent totals, bad input."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from test_trace_reference import DATA, assert_close, kineto_reference

from perflab.errors import InputError, PerflabError
from perflab.io import kineto, load_trace
from perflab.model.trace import EventKind

KINETO = sorted((DATA / "kineto").glob("*.json.gz")) if (DATA / "kineto").is_dir() else []
needs_data = pytest.mark.skipif(not KINETO, reason=f"shared traces missing: {DATA / 'kineto'}")


@needs_data
@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_summary_matches_independent_computation(path: Path) -> None:
    ours = load_trace(path).summary().to_dict()
    assert tuple(ours) == ("events", "kernels", "devices", "comm", "memcpy", "categories")
    ref = kineto_reference(path)
    categories = ours.pop("categories")
    assert_close(ours, ref)
    assert sum(c["count"] for c in categories.values()) == ref["kernels"]["count"]
    assert sum(c["total_us"] for c in categories.values()) == pytest.approx(
        float(ref["kernels"]["total_us"]), rel=1e-4
    )


@needs_data
def test_nccl_trace_has_comm_overlap_and_kernel_attributes() -> None:
    trace = load_trace(DATA / "kineto" / "nccl_2ranks_a100.json.gz")
    s = trace.summary().to_dict()
    assert s["comm"]["count"] == 21
    assert 0 < s["comm"]["overlapped_us"] < s["comm"]["total_us"]
    k = trace.kernels
    assert len(k) == 2700
    assert (k["block_x"] > 0).all() and (k["registers"] > 0).all()
    assert trace.kind[k["event"]].tolist() == [EventKind.KERNEL] * 2700
    # every kernel links to its launch through the correlation id
    launch = set(trace.correlation[trace.kind == EventKind.RUNTIME].tolist())
    assert set(trace.correlation[k["event"]].tolist()) <= launch


@needs_data
@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_stdlib_fallback_gives_the_same_trace(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = load_trace(path)
    monkeypatch.setattr(kineto, "msgspec", None)
    slow = load_trace(path)
    for table in ("events", "tracks", "kernels", "memcpy", "ops"):
        a, b = getattr(fast, table), getattr(slow, table)
        for col in a.columns:
            np.testing.assert_array_equal(a[col], b[col], err_msg=f"{table}.{col}")
    assert fast.strings == slow.strings


def _write(tmp_path: Path, doc: object, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _event(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 10.5,
        "dur": 2.25,
        "args": {"device": 0, "stream": 7, "correlation": 5},
    }
    base.update(kw)
    return base


def test_nanoseconds_exact_for_large_timestamps(tmp_path: Path) -> None:
    ev = _event(ts=1695835542514261, dur=3)
    ev2 = _event(ts=4458676522690.655, dur=156.777, name="k2")
    trace = load_trace(_write(tmp_path, {"traceEvents": [ev, ev2]}))
    assert sorted(trace.start_ns.tolist()) == [4458676522690655, 1695835542514261000]
    assert sorted(trace.dur_ns.tolist()) == [3000, 156777]


def test_flows_fill_missing_correlation_then_are_dropped(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 5.0,
            "dur": 1.0,
            "args": {},
        },
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 42, "pid": 1, "tid": 1, "ts": 5.0},
        {
            "ph": "f",
            "cat": "ac2g",
            "name": "ac2g",
            "id": 42,
            "pid": 0,
            "tid": 7,
            "ts": 9.0,
            "bp": "e",
        },
        _event(ts=9.0, args={"device": 0, "stream": 7}),
    ]
    trace = load_trace(_write(tmp_path, {"traceEvents": events}))
    assert len(trace) == 2
    assert trace.correlation.tolist() == [42, 42]


def test_python_functions_skipped_unless_asked(tmp_path: Path) -> None:
    events = [_event(), _event(cat="python_function", name="f", pid=1, tid=1, args={})]
    path = _write(tmp_path, {"traceEvents": events})
    assert len(load_trace(path)) == 1
    with_py = load_trace(path, python=True)
    assert sorted(with_py.kind.tolist()) == [EventKind.KERNEL, EventKind.PYTHON]


def test_gzip_and_plain_are_the_same(tmp_path: Path) -> None:
    doc = {
        "traceEvents": [
            _event(),
            _event(
                ts=20.0,
                cat="gpu_memcpy",
                name="Memcpy HtoD",
                args={"device": 0, "stream": 7, "bytes": 64},
            ),
        ]
    }
    plain = _write(tmp_path, doc)
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = load_trace(plain), load_trace(packed)
    assert a.summary().to_dict()["memcpy"] == b.summary().to_dict()["memcpy"]
    assert a.summary().to_dict()["memcpy"]["bytes"] == 64


BAD = {
    "malformed": (b'{"traceEvents": [{"ph": "X",,}]}', "malformed JSON"),
    "not utf-8": (
        b'{"traceEvents": [{"ph": "X", "name": "\xff\xfe", "ts": 1, "dur": 1}]}',
        "UTF-8",
    ),
    "missing ts": (
        json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "dur": 1}]}).encode(),
        "ts",
    ),
    "missing dur": (
        json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1}]}).encode(),
        "dur",
    ),
    "negative dur": (json.dumps({"traceEvents": [_event(dur=-3)]}).encode(), "negative"),
    "huge int": (
        json.dumps({"traceEvents": [_event(args={"correlation": 2**70})]}).encode(),
        "correlation|64 bits",
    ),
    "huge ts": (json.dumps({"traceEvents": [_event(ts=1e300)]}).encode(), "ts"),
    "no traceEvents": (b'{"foo": 1}', "traceEvents"),
    "events not a list": (b'{"traceEvents": 3}', ""),
    "empty": (b"", ""),
}


@pytest.mark.parametrize("fallback", [False, True], ids=["msgspec", "stdlib"])
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_a_clear_input_error(
    tmp_path: Path, case: str, fallback: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if fallback:
        monkeypatch.setattr(kineto, "msgspec", None)
    data, expected = BAD[case]
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        load_trace(path)
    message = str(info.value)
    assert str(path) in message
    assert re.search(expected, message), message


def test_truncated_gzip(tmp_path: Path) -> None:
    raw = gzip.compress(json.dumps({"traceEvents": [_event()] * 200}).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(InputError, match="truncated gzip"):
        load_trace(path)


def test_error_names_the_event_position(tmp_path: Path) -> None:
    events = [_event(), _event(), _event(dur=-1)]
    with pytest.raises(InputError, match=r"traceEvents\[2\]"):
        load_trace(_write(tmp_path, {"traceEvents": events}))


@needs_data
def test_mutated_real_traces_only_raise_perflab_errors(tmp_path: Path) -> None:
    """Deterministic mutation fuzzing: truncations and byte flips of a real trace."""
    source = DATA / "kineto" / "triton_example_a100.json.gz"
    text = gzip.decompress(source.read_bytes())
    rng = random.Random(1234)
    path = tmp_path / "m.json"
    outcomes = {"ok": 0, "error": 0}
    unnamed = 0
    for i in range(300):
        data = bytearray(text)
        if i % 3 == 0:
            data = data[: rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        if i % 5 == 0:
            path = tmp_path / "m.json.gz"
            data = bytearray(gzip.compress(bytes(data)))
            if i % 10 == 0:
                data = data[: rng.randrange(1, len(data))]
        else:
            path = tmp_path / "m.json"
        path.write_bytes(bytes(data))
        try:
            trace = load_trace(path)
            trace.summary()
            outcomes["ok"] += 1
        except PerflabError as exc:
            unnamed += str(path) not in str(exc)
            outcomes["error"] += 1
    assert unnamed == 0  # every error names the file
    assert outcomes["error"] > 50  # the mutations really did break files


@needs_data
def test_save_load_round_trip_of_a_real_trace(tmp_path: Path) -> None:
    trace = load_trace(DATA / "kineto" / "sampled_4streams.json.gz")
    out = trace.save(tmp_path / "t.npz")
    again = load_trace(out)
    assert again.summary().to_dict() == trace.summary().to_dict()
    assert again.strings == trace.strings
