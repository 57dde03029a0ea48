"""Kineto / torch.profiler JSON importer: real traces, independent totals, bad input."""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import random
import re
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from data_paths import TRACES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_reference import assert_close, kineto_reference

from perflab.errors import InputError, PerflabError
from perflab.io import load_trace
from perflab.io.kineto import decode, fast, load, loads_kineto
from perflab.model.trace import EventKind, Trace

KINETO = sorted((TRACES / "kineto").glob("*.json.gz")) if (TRACES / "kineto").is_dir() else []


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_summary_matches_independent_computation(path: Path) -> None:
    ours = load_trace(path).summary().to_dict()
    keys = ("events", "kernels", "devices", "comm", "memcpy", "categories", "idle")
    assert tuple(ours) == keys
    ref = kineto_reference(path)
    categories = ours.pop("categories")
    # the idle time by cause (heuristics, tested in test_idle_causes) adds up to the idle time
    idle = ours.pop("idle")
    total = sum(d["idle_us"] for d in ref["devices"].values())
    assert sum(c["idle_us"] for c in idle.values()) == pytest.approx(float(total), abs=1e-3)
    assert_close(ours, ref)
    assert sum(c["count"] for c in categories.values()) == ref["kernels"]["count"]
    assert sum(c["total_us"] for c in categories.values()) == pytest.approx(
        float(ref["kernels"]["total_us"]), rel=1e-4
    )


def test_nccl_trace_has_comm_overlap_and_kernel_attributes() -> None:
    trace = load_trace(TRACES / "kineto" / "nccl_2ranks_a100.json.gz")
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


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_a_clear_input_error(tmp_path: Path, case: str) -> None:
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


@pytest.mark.parametrize("piece", [None, 256], ids=["whole", "sliced"])
def test_mutated_real_traces_only_raise_perflab_errors(
    tmp_path: Path, piece: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic mutation fuzzing: truncations and byte flips of a real trace (also
    streamed in small slices, so that damage lands in every part of the slicer)."""
    if piece:
        monkeypatch.setattr(fast, "PIECE_SIZE", piece)
        monkeypatch.setattr(fast, "READ_SIZE", 64)
    source = TRACES / "kineto" / "triton_example_a100.json.gz"
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


def test_save_load_round_trip_of_a_real_trace(tmp_path: Path) -> None:
    trace = load_trace(TRACES / "kineto" / "sampled_4streams.json.gz")
    out = trace.save(tmp_path / "t.npz")
    again = load_trace(out)
    assert again.summary().to_dict() == trace.summary().to_dict()
    assert again.strings == trace.strings


# -- streaming: a file is decoded a slice of traceEvents at a time -----------------------------

STRING_COLUMNS = {
    ("events", "name"),
    ("tracks", "label"),
    ("ops", "input_dims"),
    ("ops", "input_types"),
}


def _decoded(trace: Trace) -> dict[str, Any]:
    """Every column, with string ids replaced by their text (ids depend on slicing order)."""
    text = [*trace.strings, None]  # -1 -> None
    out: dict[str, Any] = {}
    for table in ("events", "tracks", "kernels", "memcpy", "ops"):
        for col, values in getattr(trace, table).columns.items():
            key = f"{table}.{col}"
            out[key] = (
                [text[i] for i in values.tolist()] if (table, col) in STRING_COLUMNS else values
            )
    out["meta"] = {k: v for k, v in trace.meta.items() if k != "source"}
    return out


def assert_same_trace(a: Trace, b: Trace) -> None:
    da, db = _decoded(a), _decoded(b)
    assert da.keys() == db.keys()
    for key in da:
        if isinstance(da[key], np.ndarray):
            np.testing.assert_array_equal(da[key], db[key], err_msg=key)
            assert da[key].dtype == db[key].dtype, key
        else:
            assert da[key] == db[key], key


def _counting(monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str) -> list[int]:
    """Counts calls of module.<name> (its callers look it up at call time)."""
    calls: list[int] = []
    original: Callable[..., Any] = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


@pytest.fixture
def small_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices of a few hundred bytes, so that small files are cut in many places."""
    monkeypatch.setattr(fast, "PIECE_SIZE", 300)
    monkeypatch.setattr(fast, "READ_SIZE", 64)


@pytest.mark.parametrize("path", KINETO, ids=lambda p: p.name)
def test_streamed_equals_whole_file_decode(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = gzip.decompress(path.read_bytes())
    monkeypatch.setattr(fast, "PIECE_SIZE", len(text) // 20)
    monkeypatch.setattr(fast, "READ_SIZE", 4096)
    slices = _counting(monkeypatch, decode, "decode_slice")
    whole = _counting(monkeypatch, load, "decode_file")
    streamed = load_trace(path)
    assert len(slices) > 3 and not whole  # really streamed, in many slices
    assert_same_trace(streamed, loads_kineto(text))


def _tricky_doc(n: int, *, correlations: bool = True) -> dict[str, Any]:
    """Events whose strings and nested args hold the separator the slicer cuts at."""
    events: list[dict[str, Any]] = []
    for i in range(n):
        corr = {"correlation": 100 + i} if correlations else {}
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": 'launch "},{" [1]},',
                "pid": 1,
                "tid": 2,
                "ts": 10.0 * i,
                "dur": 1.5,
                "args": {**corr, "nested": [{"a": "},"}, {"b": {"c": 1}}]},
            }
        )
        events.append(
            {
                "ph": "s",
                "cat": "ac2g",
                "name": "ac2g",
                "id": 100 + i,
                "pid": 1,
                "tid": 2,
                "ts": 10.0 * i,
            }
        )
        events.append(
            {
                "ph": "f",
                "cat": "ac2g",
                "name": "ac2g",
                "id": 100 + i,
                "pid": 0,
                "tid": 7,
                "ts": 10.0 * i + 3,
                "bp": "e",
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k\u00fc{i % 3}" + "},}",
                "pid": 0,
                "tid": 7,
                "ts": 10.0 * i + 3,
                "dur": 2.0,
                "args": {
                    **corr,
                    "device": 0,
                    "stream": 7,
                    "grid": [i % 4 + 1, 1, 1],
                    "block": [128, 1, 1],
                },
            }
        )
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "traceEvents: [ },"}],
        "traceEvents": events,
        "traceName": "x",
        "baseTimeNanoseconds": 1700000000000000000,
    }


@pytest.mark.parametrize("indent", [None, 2])
def test_cuts_inside_strings_and_nested_objects_are_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_slices: None, indent: int | None
) -> None:
    text = json.dumps(_tricky_doc(60), indent=indent).encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text))
    slices = _counting(monkeypatch, decode, "decode_slice")
    whole = _counting(monkeypatch, load, "decode_file")
    trace = load_trace(path)
    assert len(slices) > 3 and not whole
    assert_same_trace(trace, loads_kineto(text))
    assert len(trace) == 120 and trace.meta["base_time_ns"] == 1700000000000000000
    assert trace.meta["devices"] == [{"id": 0, "name": "traceEvents: [ },"}]


def test_flows_in_other_slices_fill_missing_correlations(
    tmp_path: Path, small_slices: None
) -> None:
    doc = _tricky_doc(40, correlations=False)
    doc["traceEvents"].sort(key=lambda e: e["ph"])  # all flows after all complete events
    path = _write(tmp_path, doc)
    trace = load_trace(path)
    launches = trace.correlation[trace.kind == EventKind.RUNTIME]
    kernels = trace.correlation[trace.kind == EventKind.KERNEL]
    assert sorted(launches.tolist()) == sorted(kernels.tolist()) == list(range(100, 140))


def test_unusual_layouts_fall_back_to_whole_file_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _counting(monkeypatch, load, "decode_file")
    # the events key first appears in a nested object, so the head does not decode
    text = (
        b'{"meta": {"traceEvents": [1]}, "traceEvents": [' + json.dumps(_event()).encode() + b"]}"
    )
    trace = load_trace(_write_bytes(tmp_path, text))
    assert len(trace) == 1 and len(whole) == 1
    with pytest.raises(InputError, match="not a Kineto trace"):
        load_trace(_write_bytes(tmp_path, json.dumps([_event()]).encode()))


def _write_bytes(tmp_path: Path, data: bytes, name: str = "raw.json") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_multi_member_gzip_and_trailing_garbage(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [_event(), _event(ts=20.0)]}).encode()
    half = len(text) // 2
    two = _write_bytes(
        tmp_path, gzip.compress(text[:half]) + gzip.compress(text[half:]), "2.json.gz"
    )
    assert len(load_trace(two)) == 2
    padded = _write_bytes(tmp_path, gzip.compress(text) + b"\0" * 8, "p.json.gz")
    assert len(load_trace(padded)) == 2
    junk = _write_bytes(tmp_path, gzip.compress(text) + b"junk", "j.json.gz")
    with pytest.raises(InputError, match="gzip") as info:
        load_trace(junk)
    assert str(junk) in str(info.value)


def test_errors_in_late_slices_name_the_event(tmp_path: Path, small_slices: None) -> None:
    events = [_event(ts=float(i)) for i in range(400)]
    events[333]["dur"] = -1
    with pytest.raises(InputError, match=r"traceEvents\[333\].*negative duration"):
        load_trace(_write(tmp_path, {"traceEvents": events}))
    text = json.dumps({"traceEvents": [_event(ts=float(i)) for i in range(400)]}).encode()
    broken = text[:-3000] + b"}{" + text[-2998:]
    with pytest.raises(InputError, match="malformed JSON") as info:
        load_trace(_write_bytes(tmp_path, broken))
    assert "raw.json" in str(info.value)


def test_text_is_checked_as_utf8_across_block_borders(tmp_path: Path, small_slices: None) -> None:
    events = [_event(ts=float(i), name=f"k\u00fc\u20ac{i % 5}") for i in range(300)]
    text = json.dumps({"traceEvents": events}, ensure_ascii=False).encode()
    trace = load_trace(_write_bytes(tmp_path, text))  # characters split between blocks
    assert sorted({trace.strings[i] for i in trace.name.tolist()}) == [
        f"k\u00fc\u20ac{i}" for i in range(5)
    ]
    late = text.rindex("\u20ac".encode())
    broken = text[:late] + b"\xff\xfe\xfd" + text[late + 3 :]  # never in UTF-8
    with pytest.raises(InputError, match="UTF-8"):
        load_trace(_write_bytes(tmp_path, broken))


@pytest.mark.parametrize(
    ("blocks", "valid"),
    [
        ([b"a\xc3", b"\xbcb", b"c"], True),  # "\u00fc" split between two blocks
        ([b"a\xe2\x82", b"\xac"], True),  # "\u20ac" split after two of three bytes
        ([b"a\xc3", b"bc"], False),  # the split character never completes
        ([b"ab", b"c\xc3"], False),  # the text ends inside a character
        ([b"a\xff", b"bc"], False),
    ],
)
def test_the_text_cursor_checks_utf8(blocks: list[bytes], valid: bool) -> None:
    cursor = fast._Cursor(iter(blocks))
    if valid:
        assert not cursor.fill(10**6, 0) and bytes(cursor.text(0, cursor.end)) == b"".join(blocks)
    else:
        with pytest.raises(fast.Unusual, match="not UTF-8"):
            cursor.fill(10**6, 0)


def test_loading_leaves_no_thread_or_open_file_and_restores_gc(
    tmp_path: Path, small_slices: None
) -> None:
    good = _write(tmp_path, _tricky_doc(30), "good.json")
    bad = _write(
        tmp_path,
        {"traceEvents": [_event(ts=float(i)) for i in range(50)] + [_event(dur=-1)]},
        "bad.json",
    )
    threads, files = threading.active_count(), _open_files()
    for path in (good, bad, good):
        with pytest.raises(InputError) if path == bad else contextlib.nullcontext():
            load_trace(path)
        assert threading.active_count() == threads
        assert _open_files() == files
        assert gc.isenabled()
    gc.disable()
    try:
        load_trace(good)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()


def _open_files() -> int:
    fds = Path("/proc/self/fd")
    return len(list(fds.iterdir())) if fds.is_dir() else 0


# Strings the slicer must not be fooled by, in names, pids and args.
TRICKY_TEXT = st.text(alphabet=st.sampled_from(list('ab},{[]":\\ \n\tü€')), max_size=10)
JSON_LEAF = st.one_of(st.none(), st.integers(-5, 5), TRICKY_TEXT)
JSON_NESTED = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(TRICKY_TEXT, inner, max_size=3)
    ),
    max_leaves=6,
)
EVENT = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "X", "X", "i", "s", "f"]),
        "cat": st.sampled_from(
            ["kernel", "gpu_memcpy", "cpu_op", "cuda_runtime", "python_function", "ac2g", "odd"]
        ),
        "name": TRICKY_TEXT,
        "pid": st.one_of(st.integers(0, 3), st.sampled_from(["Spans", "", "7"])),
        "tid": st.integers(0, 3),
        "ts": st.floats(0, 1e6, allow_nan=False).map(lambda t: round(t, 3)),
        "dur": st.floats(0, 1e3, allow_nan=False).map(lambda t: round(t, 3)),
        "id": st.integers(0, 5),
        "args": st.fixed_dictionaries(
            {},
            optional={
                "correlation": st.integers(0, 5),
                "External id": st.integers(0, 5),
                "device": st.integers(0, 1),
                "stream": st.integers(0, 3),
                "grid": st.lists(st.integers(1, 4), min_size=1, max_size=3),
                "bytes": st.integers(0, 1 << 40),
                "Input Dims": JSON_NESTED,
                "Sequence number": st.integers(0, 9),
                "junk": JSON_NESTED,
            },
        ),
    }
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=st.lists(EVENT, max_size=40),
    head=st.dictionaries(st.sampled_from(["schemaVersion", "deviceProperties"]), JSON_NESTED),
    tail=st.dictionaries(st.sampled_from(["traceName", "baseTimeNanoseconds"]), st.integers(0, 9)),
    indent=st.sampled_from([None, 1]),
    ascii_only=st.booleans(),
)
def test_streaming_property_same_trace_as_whole_decode(
    tmp_path: Path,
    small_slices: None,
    events: list[dict[str, Any]],
    head: dict[str, Any],
    tail: dict[str, Any],
    indent: int | None,
    ascii_only: bool,
) -> None:
    doc = {**head, "traceEvents": events, **tail}
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only).encode()
    path = _write_bytes(tmp_path, gzip.compress(text), "p.json.gz")
    try:
        whole: Trace | InputError = loads_kineto(text)
    except InputError as exc:
        whole = exc
    try:
        streamed: Trace | InputError = load_trace(path)
    except InputError as exc:
        streamed = exc
    if isinstance(whole, InputError):
        assert isinstance(streamed, InputError)
        assert str(whole).replace("<bytes>", str(path)) == str(streamed)
    else:
        assert isinstance(streamed, Trace)
        assert_same_trace(streamed, whole)


def test_zlib_inflates_like_isal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the isal wheel is missing, zlib inflates the stream: same trace, and corrupt
    data still ends in a perflab error."""
    path = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"
    with_isal = load_trace(path)
    monkeypatch.setattr(fast, "_zlib", zlib)
    monkeypatch.setattr(fast, "_INFLATE_ERROR", zlib.error)
    monkeypatch.setattr(fast, "PIECE_SIZE", 64 << 10)
    slices = _counting(monkeypatch, decode, "decode_slice")
    assert_same_trace(load_trace(path), with_isal)
    assert len(slices) > 10
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(bytes(data))
    with pytest.raises(InputError, match=re.escape("broken.json.gz")):
        load_trace(broken)


def test_one_kernel_key_on_several_streams_gets_a_track_each(tmp_path: Path) -> None:
    """Events that share (ph, cat, name, pid, tid) but name different streams in their args
    (a process-wide tid, as some exporters write) go on separate stream tracks."""
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 1,
            "ts": 10.0 * i,
            "dur": 5.0,
            "args": {"device": 0, "stream": stream, "correlation": i},
        }
        for i, stream in enumerate([7, 8, 7, 9, 8])
    ]
    trace = load_trace(_write(tmp_path, {"traceEvents": events}))
    labels = [trace.track_label(int(t)) for t in trace.track]
    assert labels == [f"GPU 0 stream {s}" for s in (7, 8, 7, 9, 8)]
    assert len(trace.tracks) == 3


@pytest.mark.parametrize("odd", [{"ph": "Z"}, {}], ids=["unknown", "none"])
def test_events_outside_the_phase_list_load_through_the_whole_file(
    tmp_path: Path, odd: dict[str, object], monkeypatch: pytest.MonkeyPatch, small_slices: None
) -> None:
    """Streamed slices type events by phase; a phase the Chrome trace format does not have (or
    none) sends the file to the whole-file decode, which drops such events like any non-"X"."""
    whole = _counting(monkeypatch, load, "decode_file")
    slices = _counting(monkeypatch, decode, "decode_slice")
    strange = {k: v for k, v in _event(ts=20.0).items() if k != "ph"} | odd
    events = [_event(ts=float(t)) for t in range(10)]
    events[3:3] = [{"ph": "M", "name": "process_name", "pid": 0, "args": {}}, strange]
    trace = load_trace(_write(tmp_path, {"traceEvents": events}))
    assert slices and len(whole) == 1
    assert trace.start_ns.tolist() == [t * 1000 for t in range(10)]


def test_a_phase_that_is_not_text_is_a_clean_error(tmp_path: Path, small_slices: None) -> None:
    events = [_event(ts=float(t)) for t in range(10)]
    events[4]["ph"] = 5
    with pytest.raises(InputError, match=re.escape("traceEvents[4].ph")):
        load_trace(_write(tmp_path, {"traceEvents": events}))


def test_the_text_cursor_writes_over_its_buffers_only_when_nothing_views_them() -> None:
    """Two buffers take turns; one that a decoded value still views (msgspec.Raw) is left
    alone, and the window always reads as the text."""
    blocks = [bytes([65 + i % 26]) * 1000 for i in range(40)]
    cursor = fast._Cursor(iter(blocks))
    assert cursor.fill(3000, 0)
    first = cursor.buf
    view = memoryview(first)  # a value decoded from the first window still refers to it
    assert cursor.fill(6000, 2500) and cursor.buf is not first
    assert cursor.fill(9000, 5500) and cursor.buf is not first  # viewed: not written over
    assert bytes(view[:3]) == b"AAA"
    view.release()
    buffers = {id(cursor.buf), id(cursor.spare)}
    for upto in range(12000, 40001, 3000):
        assert cursor.fill(upto, upto - 3500)
        assert bytes(cursor.text(upto - 3500, upto)) == b"".join(blocks)[upto - 3500 : upto]
    assert {id(cursor.buf), id(cursor.spare)} == buffers  # the same two, written over
