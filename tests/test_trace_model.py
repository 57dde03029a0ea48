"""The columnar Trace model: construction, select, merge, save/load without pickle."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perflab.errors import SchemaError
from perflab.model.trace import (
    EVENT_COLUMNS,
    KERNEL_COLUMNS,
    TRACK_COLUMNS,
    EventKind,
    Table,
    Trace,
    TrackKind,
    distinct,
    kind_mask,
    unique_rows,
)


def small_trace(rank: int = 0, offset: int = 0) -> Trace:
    strings = [
        "GPU 0 stream 7",
        "process 1 thread 1",
        "gemm_kernel",
        "cudaLaunchKernel",
        "ncclKernel_AllReduce",
    ]
    tracks = Table(
        TRACK_COLUMNS,
        {
            "rank": [0, 0],
            "device": [0, 1],
            "stream": [7, 1],
            "kind": [TrackKind.GPU, TrackKind.CPU],
            "label": [0, 1],
        },
    )
    events = Table(
        EVENT_COLUMNS,
        {
            "start_ns": np.array([100, 0, 150, 400]) + offset,
            "dur_ns": [100, 20, 200, 50],
            "kind": [EventKind.KERNEL, EventKind.RUNTIME, EventKind.KERNEL, EventKind.KERNEL],
            "track": [0, 1, 0, 0],
            "name": [2, 3, 4, 2],
            "correlation": [5, 5, -1, -1],
            "external_id": [-1, -1, -1, -1],
        },
    )
    kernels = Table(KERNEL_COLUMNS, {"event": [0, 2], "grid_x": [4, 8], "registers": [32, 64]})
    return Trace(events, tracks, strings, kernels=kernels, meta={"rank": rank, "events_read": 4})


def test_columns_and_defaults() -> None:
    t = small_trace()
    assert t.start_ns.dtype == np.int64 and t.kind.dtype == np.int8
    assert t.end_ns.tolist() == [200, 20, 350, 450]
    assert t.kernels["grid_y"].tolist() == [-1, -1]  # unknown ints are -1
    assert np.isnan(t.kernels["occupancy"]).all()
    assert t.event_device().tolist() == [0, -1, 0, 0]
    df = t.to_pandas()
    assert df["name"].tolist() == [
        "gemm_kernel",
        "cudaLaunchKernel",
        "ncclKernel_AllReduce",
        "gemm_kernel",
    ]
    assert df["kind"].tolist()[1] == "runtime"
    assert list(t.kernels.to_pandas().columns) == list(KERNEL_COLUMNS)


def test_table_rejects_ragged_columns() -> None:
    with pytest.raises(ValueError, match="shape"):
        Table(EVENT_COLUMNS, {"start_ns": [1, 2], "dur_ns": [1]})


def test_select_keeps_side_tables_aligned() -> None:
    t = small_trace().select(t_mask := np.array([False, True, True, True]))
    assert len(t) == int(t_mask.sum())
    assert t.kernels["event"].tolist() == [1]
    assert t.kernels["grid_x"].tolist() == [8]


def test_merge_puts_rank_in_tracks_and_remaps_strings() -> None:
    a, b = small_trace(rank=0), small_trace(rank=3, offset=1000)
    b.strings = [*b.strings[:2], "other_kernel", *b.strings[3:]]  # a different string table
    m = Trace.merge([a, b])
    assert len(m) == 8 and len(m.tracks) == 4
    assert m.tracks["rank"].tolist() == [0, 0, 3, 3]
    names = m.names_of()
    assert names[:4] == a.names_of() and names[4:] == b.names_of()
    assert m.kernels["event"].tolist() == [0, 2, 4, 6]
    devices = m.summary().to_dict()["devices"]
    assert set(devices) == {"0:0", "3:0"}


def test_save_load_round_trip_without_pickle(tmp_path: Path) -> None:
    t = small_trace()
    path = t.save(tmp_path / "t.npz")
    with np.load(path, allow_pickle=False) as npz:  # loads with pickle disabled
        header = json.loads(npz["header"].tobytes())
    assert header["perflab"] == "trace" and header["schema_version"] >= 1
    back = Trace.load(path)
    for table in ("events", "tracks", "kernels", "memcpy", "ops"):
        for col, values in getattr(t, table).columns.items():
            np.testing.assert_array_equal(getattr(back, table)[col], values)
    assert back.strings == t.strings and back.meta == t.meta


def test_load_rejects_damaged_and_foreign_files(tmp_path: Path) -> None:
    not_zip = tmp_path / "a.npz"
    not_zip.write_bytes(b"hello")
    with pytest.raises(SchemaError):
        Trace.load(not_zip)
    other = tmp_path / "b.npz"
    np.savez(other, x=np.arange(3))
    with pytest.raises(SchemaError, match="no header"):
        Trace.load(other)
    # a header from the future
    t = small_trace()
    path = t.save(tmp_path / "c.npz")
    with zipfile.ZipFile(path) as z:
        arrays = {n[:-4]: np.load(z.open(n), allow_pickle=False) for n in z.namelist()}
    header = json.loads(arrays["header"].tobytes())
    header["schema_version"] = 999
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(SchemaError, match="schema_version"):
        Trace.load(tmp_path / "d.npz")
    # an index pointing outside the string table
    arrays["header"] = np.frombuffer(json.dumps({**header, "schema_version": 1}).encode(), np.uint8)
    arrays["events.name"] = np.array([0, 1, 2, 99], dtype=np.int32)
    np.savez(tmp_path / "e.npz", **arrays)
    with pytest.raises(SchemaError, match="out of range"):
        Trace.load(tmp_path / "e.npz")


def test_repr_is_escaped_html() -> None:
    t = small_trace()
    t.meta["source"] = "<script>x</script>.json"
    bundle = t._repr_mimebundle_()
    assert "<script>x" not in bundle["text/html"]
    assert "&lt;script&gt;" in bundle["text/html"]
    assert "4 events" in bundle["text/plain"]


@pytest.mark.parametrize("shape", [(0, 3), (1, 2), (500, 4), (2000, 12)])
def test_unique_rows_matches_numpy(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[0])
    matrix = rng.integers(-3, 4, size=shape).astype(np.int64)
    matrix[::7] = matrix[0] if len(matrix) else matrix[::7]  # repeated rows
    rows, inverse = unique_rows(matrix)
    want_rows, want_inverse = np.unique(matrix, axis=0, return_inverse=True)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(inverse, want_inverse.reshape(-1))
    np.testing.assert_array_equal(rows[inverse], matrix)


def test_optable_from_dict_round_trip_and_bad_rows() -> None:
    from perflab.model.optable import OpTable

    table = OpTable.from_rows([("a", 2, 30), ("b", 1, 50)])
    back = OpTable.from_dict(table.to_dict())
    assert back.names == ["b", "a"] and back.total_ns.tolist() == [50, 30]
    bad_rows: list[Any] = [
        {"name": "a", "calls": 1e400, "total_ns": 1},
        {"name": "a", "calls": 2**70, "total_ns": 1},
        {"name": "a", "calls": True, "total_ns": 1},
        {"name": "a", "calls": 1, "total_ns": -5},
        {"name": 3, "calls": 1, "total_ns": 1},
        "row",
    ]
    for row in bad_rows:
        with pytest.raises(ValueError, match="row 0"):
            OpTable.from_dict({"rows": [row]})


def test_distinct_is_np_unique_for_integer_columns() -> None:
    rng = np.random.default_rng(3)
    for values in (
        np.zeros(0, np.int64),
        np.array([5], np.int32),
        rng.integers(-50, 50, 1000),
        rng.integers(-(2**62), 2**62, 300, dtype=np.int64),
        np.full(7, -1, np.int8),
    ):
        got = distinct(values)
        np.testing.assert_array_equal(got, np.unique(values))
        assert got.dtype == values.dtype
    np.testing.assert_array_equal(distinct(np.array([[3, 1], [1, 2]])), [1, 2, 3])


def test_kind_mask_is_isin_for_every_kind_value() -> None:
    values = np.arange(-128, 128, dtype=np.int8)
    for kinds in ([], [0], [1, 2, 3, 7], [-1, 127, -128], list(EventKind)):
        expected = np.isin(values, np.array([int(k) for k in kinds], dtype=np.int8))
        np.testing.assert_array_equal(kind_mask(values, kinds), expected)
    wide = np.array([1, 2, 7], dtype=np.int64)  # any integer dtype holding kinds
    np.testing.assert_array_equal(kind_mask(wide, [7]), [False, False, True])


def test_describe_counts_tracks_in_words() -> None:
    trace = small_trace()
    assert ", 2 tracks, span 450 ns" in trace.describe()
    one = Table(TRACK_COLUMNS, {k: v[:1] for k, v in trace.tracks.columns.items()})
    events = Table(EVENT_COLUMNS, {k: v[:1] for k, v in trace.events.columns.items()})
    assert ", 1 track, span 100 ns" in Trace(events, one, trace.strings).describe()


def test_counted_nouns() -> None:
    from perflab.model.units import counted

    assert [counted(n, "lane") for n in (0, 1, 2)] == ["0 lanes", "1 lane", "2 lanes"]
