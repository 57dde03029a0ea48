"""Bandwidth points repeated inside their timed window, timed hot or cold by cache size,
and never a ceiling while bound by call overhead; the saved form of those columns."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perflab.errors import InputError, SchemaError
from perflab.machine import _common, bandwidth
from perflab.machine.ceilings import bandwidth_by_level, bandwidth_ceilings
from perflab.model.machine import BenchResult, Level, Series

KIB, MIB = 1 << 10, 1 << 20
SMALL_CACHES = {"L1": 32 * KIB, "L2": 256 * KIB}

# --- the repeat count -----------------------------------------------------------------


def test_repeats_fill_the_window_at_the_fastest_rate():
    # 32 KiB moved per call at 400 bytes/ns takes 81.92 ns: 611 calls make 50 us
    assert bandwidth.repeats_for(32 * KIB, 400.0) == 611
    assert bandwidth.repeats_for(32 * KIB, 400.0, window_ns=81.92 * 3) == 3
    assert bandwidth.repeats_for(1 << 30, 400.0) == 1  # one call is long enough
    assert bandwidth.repeats_for(64, 20_000.0) == bandwidth.MAX_REPEATS  # capped
    assert bandwidth.repeats_for(64, 400.0, cap=7) == 7


def test_repeats_over_a_seeded_range_of_sizes_and_rates():
    rng = np.random.default_rng(3)
    for moved, rate in zip(rng.integers(1, 1 << 34, 500), rng.uniform(1.0, 5e4, 500), strict=True):
        k = bandwidth.repeats_for(int(moved), float(rate))
        assert 1 <= k <= bandwidth.MAX_REPEATS
        window = k * int(moved) / float(rate)
        # the window holds the target, unless capped or one call is already longer
        assert window >= bandwidth.WINDOW_NS or k in (1, bandwidth.MAX_REPEATS)
        if k > 1:  # and one call fewer would not
            assert (k - 1) * int(moved) / float(rate) < bandwidth.WINDOW_NS
        assert bandwidth.repeats_for(2 * int(moved), float(rate)) <= k


@pytest.mark.parametrize(
    "args",
    [
        {"bytes_moved": 0, "fastest_GBps": 400.0},
        {"bytes_moved": -5, "fastest_GBps": 400.0},
        {"bytes_moved": 64, "fastest_GBps": math.nan},
        {"bytes_moved": 64, "fastest_GBps": math.inf},
        {"bytes_moved": True, "fastest_GBps": 400.0},
        {"bytes_moved": "64", "fastest_GBps": 400.0},
        {"bytes_moved": 64, "fastest_GBps": 400.0, "window_ns": 0.0},
        {"bytes_moved": 64, "fastest_GBps": 400.0, "cap": 0},
        {"bytes_moved": 64, "fastest_GBps": 400.0, "cap": 2.5},
    ],
)
def test_bad_repeat_inputs_are_input_errors(args: dict[str, Any]):
    with pytest.raises(InputError):
        bandwidth.repeats_for(**args)


def test_overhead_bound_is_a_call_under_ten_empty_calls():
    share = np.array([0.05, 0.1, 0.11, 0.9, np.nan])
    assert bandwidth.overhead_bound(share).tolist() == [False, False, True, True, False]


# --- the sweep, with a fake timer: what each point asks of the timing engine ----------


class FakeTimer:
    """Stands in for median_call_ns: a call costs EMPTY_NS plus its working set at
    RATE bytes per ns, so the points under BOUND_BELOW bytes are overhead-bound."""

    EMPTY_NS = 300.0
    RATE = 100.0
    BOUND_BELOW = EMPTY_NS * (bandwidth.OVERHEAD_BOUND_RATIO - 1) * RATE  # 270 KB

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, fn: Any, backend: str, **kw: Any) -> float:
        self.calls.append({"backend": backend, **kw})
        words = kw["name"].split()
        moved = 0 if words[1] == "empty" else int(words[1])
        return self.EMPTY_NS + moved / self.RATE


@pytest.fixture
def fake_timer(monkeypatch: pytest.MonkeyPatch) -> FakeTimer:
    timer = FakeTimer()
    monkeypatch.setattr(bandwidth, "median_call_ns", timer)
    # the call engines (numpy, torch): one pass per call, the repeats are calls
    monkeypatch.setattr(
        bandwidth, "choose_engines", lambda backend: bandwidth.Engines(backend, None, "no loop")
    )
    monkeypatch.setattr(bandwidth, "cache_capacities", lambda on_gpu: dict(SMALL_CACHES))
    monkeypatch.setattr(_common, "cache_capacities", lambda on_gpu: dict(SMALL_CACHES))
    return timer


def test_points_repeat_in_the_window_hot_in_cache_and_cold_past_it(fake_timer: FakeTimer):
    result = bandwidth.run(
        backend="cpu", kernels=("copy",), min_bytes=8 * KIB, max_bytes=2 * MIB, per_octave=1
    )
    copy = result.get("copy")
    empty, *points, empty_after = fake_timer.calls
    assert empty["name"] == empty_after["name"] == "copy empty call" and not empty["flush"]
    assert empty["number"] == bandwidth.repeats_for(
        2 * bandwidth.EMPTY_CALL_ELEMENTS * 8, bandwidth.FASTEST_GBPS["cpu"]
    )
    assert [c["number"] for c in points] == copy.extra["repeats"].tolist()
    for size, call in zip(copy.x, points, strict=True):
        assert call["number"] == bandwidth.repeats_for(size, bandwidth.FASTEST_GBPS["cpu"])
        assert call["flush"] == (size > SMALL_CACHES["L2"])  # cold only past the last cache
        assert call["graph"] is False  # no CUDA graph on the host
    assert copy.extra["hot"].tolist() == [float(x <= 256 * KIB) for x in copy.x]
    assert result.options["empty_call_ns"] == {"copy": FakeTimer.EMPTY_NS}
    assert "cold (flushed before each sample) past it" in result.options["cache_state"]


def test_overhead_bound_points_name_no_level_and_are_flagged(fake_timer: FakeTimer):
    result = bandwidth.run(
        backend="cpu", kernels=("copy",), min_bytes=4 * KIB, max_bytes=4 * MIB, per_octave=2
    )
    copy = result.get("copy")
    share = copy.extra["overhead_share"]
    expected = FakeTimer.EMPTY_NS / (FakeTimer.EMPTY_NS + copy.x / FakeTimer.RATE)
    assert np.allclose(share, expected)
    bound = bandwidth.overhead_bound(share)
    assert bound.any() and not bound.all()
    assert np.all(copy.x[bound] < FakeTimer.BOUND_BELOW)
    assert np.all(copy.x[~bound] >= FakeTimer.BOUND_BELOW)
    for level in copy.levels:
        assert level.x_min >= copy.x[~bound].min()  # no level reaches into the ramp
    (warning,) = [w for w in result.warnings if w.startswith("copy: ")]
    assert warning.startswith(f"copy: {int(bound.sum())} of {len(copy)} points (4 KiB - ")
    assert "300 ns" in warning
    assert "no GPU" in result.warnings[-1]
    # and the ceilings say why those sizes gave none
    levels, notes = bandwidth_ceilings(result, on_gpu=False)
    assert "L1" not in levels
    assert notes == [
        f"bandwidth: no ceiling from {int(bound.sum())} copy points (4 KiB - 256 KiB): each "
        "took under 10x an empty call's time, bound by call overhead, not by memory"
    ]


def test_a_burst_during_one_empty_call_does_not_set_the_floor(
    fake_timer: FakeTimer, monkeypatch: pytest.MonkeyPatch
):
    empties: list[float] = []

    def burst_first(fn: Any, backend: str, **kw: Any) -> float:
        ns = fake_timer(fn, backend, **kw)
        if kw["name"] == "copy empty call":
            empties.append(ns)
            return ns * (20.0 if len(empties) == 1 else 1.0)
        return ns

    monkeypatch.setattr(bandwidth, "median_call_ns", burst_first)
    result = bandwidth.run(  # under the burst's floor, 512 KiB would read overhead-bound
        backend="cpu", kernels=("copy",), min_bytes=512 * KIB, max_bytes=4 * MIB, per_octave=1
    )
    assert len(empties) == 2
    assert result.options["empty_call_ns"] == {"copy": FakeTimer.EMPTY_NS}
    assert not bandwidth.overhead_bound(result.get("copy").extra["overhead_share"]).any()


def test_repeats_the_engine_finds_over_budget_fall_back_to_one_call(
    fake_timer: FakeTimer, monkeypatch: pytest.MonkeyPatch
):
    def refuses_64_kib(fn: Any, backend: str, **kw: Any) -> float:
        if kw["name"] == "copy 65536 B" and kw["number"] > 1:
            raise InputError("-n 306: one sample of 306 calls would take about 9 ms")
        return fake_timer(fn, backend, **kw)

    monkeypatch.setattr(bandwidth, "median_call_ns", refuses_64_kib)
    result = bandwidth.run(
        backend="cpu", kernels=("copy",), min_bytes=32 * KIB, max_bytes=128 * KIB, per_octave=1
    )
    copy = result.get("copy")
    assert copy.extra["repeats"].tolist() == [611.0, 1.0, 153.0]
    assert [c["number"] for c in fake_timer.calls[1:-1]] == [611, 1, 153]
    assert (
        "copy: 1 point (64 KiB) timed one call per window: the engine estimated their "
        "repeats to outlast the 40 ms budget per point (a slow or disturbed call; raise "
        "budget_ms)"
    ) in result.warnings


def test_other_timing_errors_are_not_swallowed(fake_timer: FakeTimer, monkeypatch):
    def refuses(fn: Any, backend: str, **kw: Any) -> float:
        raise InputError("budget (--budget) must be a number of ms")

    monkeypatch.setattr(bandwidth, "median_call_ns", refuses)
    with pytest.raises(InputError, match="budget"):
        bandwidth.run(backend="cpu", kernels=("copy",), min_bytes=32 * KIB, max_bytes=64 * KIB)


def test_cuda_points_replay_their_repeats_as_one_graph(
    fake_timer: FakeTimer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(bandwidth, "resolve_backend", lambda backend: "cuda")
    monkeypatch.setattr(bandwidth, "_torch_kernel", lambda kind, n: lambda: None)
    result = bandwidth.run(
        backend="cuda", kernels=("copy",), min_bytes=MIB, max_bytes=64 * MIB, per_octave=1
    )
    copy = result.get("copy")
    for size, call in zip(copy.x, fake_timer.calls[1:-1], strict=True):
        assert call["number"] == bandwidth.repeats_for(size, bandwidth.FASTEST_GBPS["cuda"])
        assert call["graph"] == (call["number"] > 1)
    # past the last cache: flushed once per sample, repeated, and explained as such
    assert np.any((copy.extra["hot"] == 0) & (copy.extra["repeats"] > 1))
    assert any("every repeat streams from memory" in w for w in result.warnings)
    assert "one CUDA graph" in result.options["repeats"]


# --- ceilings -------------------------------------------------------------------------


def swept(share: list[float] | None) -> BenchResult:
    """A copy sweep of 8 points: two L1, three L2, three memory, with the plateaus the
    old code named (L1 as a plateau of its ramp)."""
    x = np.array([8, 16, 64, 128, 256, 1024, 2048, 4096]) * KIB
    y = np.array([20.0, 30.0, 80.0, 90.0, 100.0, 20.0, 21.0, 22.0])
    extra = {} if share is None else {"overhead_share": np.array(share)}
    levels = [
        Level("L1", 8 * KIB, 16 * KIB, 25.0, 2),
        Level("L2", 64 * KIB, 256 * KIB, 90.0, 3),
        Level("DRAM", MIB, 4 * MIB, 21.0, 3),
    ]
    copy = Series("copy", x, y, "bytes", "GBps", extra=extra, levels=levels)
    return BenchResult("bandwidth", "d", "cpu", series=[copy])


@pytest.fixture
def small_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    from perflab.machine import ceilings

    monkeypatch.setattr(ceilings, "cache_capacities", lambda on_gpu: dict(SMALL_CACHES))


def test_a_level_of_overhead_bound_points_is_no_ceiling(small_caches: None):
    result = swept([0.7, 0.5, 0.05, 0.02, 0.01, 0.0, 0.0, 0.0])
    levels, notes = bandwidth_ceilings(result, on_gpu=False)
    assert levels == {"DRAM": 21.0, "L2": 90.0}
    assert bandwidth_by_level(result, on_gpu=False) == levels
    (note,) = notes
    assert note.startswith("bandwidth: no L1 ceiling: all 2 of its points take under 10x")
    assert "25 GB/s" in note


def test_a_partly_overhead_bound_level_keeps_its_other_points(small_caches: None):
    result = swept([0.7, 0.5, 0.5, 0.02, 0.01, 0.0, 0.0, 0.0])
    levels, notes = bandwidth_ceilings(result, on_gpu=False)
    assert levels == {"DRAM": 21.0, "L2": 95.0}  # median of 90 and 100, not 90
    assert notes[1] == (
        "bandwidth: L2 from 2 of its 3 points, leaving out 1 point that took under 10x an "
        "empty call's time"
    )


def test_memory_past_the_caches_leaves_out_overhead_bound_points(small_caches: None):
    result = swept([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.9, 0.0])
    result.series[0].levels = []  # no plateau: memory from the points past 2x the L2
    levels, _ = bandwidth_ceilings(result, on_gpu=False)
    assert levels == {"DRAM": 21.0}  # median of 20 and 22; 21 GB/s at 2 MiB left out


def test_a_sweep_that_recorded_no_overhead_is_taken_as_measured_and_says_so(small_caches: None):
    levels, notes = bandwidth_ceilings(swept(None), on_gpu=False)
    assert levels == {"DRAM": 21.0, "L2": 90.0, "L1": 25.0}
    assert notes == [
        "bandwidth: the copy sweep records no call overhead (older result): its cache levels "
        "are taken as measured, and the smallest may be bound by call overhead"
    ]


# --- the saved form -------------------------------------------------------------------


def test_repeats_and_overhead_round_trip_and_older_files_load(tmp_path: Path, fake_timer):
    result = bandwidth.run(
        backend="cpu", kernels=("copy",), min_bytes=8 * KIB, max_bytes=MIB, per_octave=1
    )
    saved = BenchResult.load(result.save(tmp_path / "bw.json"))
    got, want = saved.get("copy"), result.get("copy")
    assert list(got.extra) == ["repeats", "passes", "overhead_share", "hot"]
    for key in got.extra:
        assert np.array_equal(got.extra[key], want.extra[key])
    assert [lv.to_dict() for lv in got.levels] == [lv.to_dict() for lv in want.levels]
    assert saved.options["empty_call_ns"] == result.options["empty_call_ns"]
    # an older file: no extra columns at all
    doc = json.loads((tmp_path / "bw.json").read_text())
    del doc["series"][0]["extra"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = BenchResult.load(tmp_path / "old.json")
    assert old.get("copy").extra == {}
    assert bandwidth_ceilings(old, on_gpu=False)[0] == bandwidth_ceilings(saved, False)[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [("overhead_share", -0.5), ("repeats", "many"), ("hot", [1]), ("passes", "x")],
)
def test_tampered_columns_are_refused(tmp_path: Path, fake_timer, key: str, value: Any):
    result = bandwidth.run(
        backend="cpu", kernels=("copy",), min_bytes=8 * KIB, max_bytes=64 * KIB, per_octave=1
    )
    doc = json.loads(result.save(tmp_path / "bw.json").read_text())
    doc["series"][0]["extra"][key][0] = value
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match=key):
        BenchResult.load(tmp_path / "bad.json")


# --- a real sweep on this CPU: structure, never speed ---------------------------------


def test_cpu_sweep_records_repeats_overhead_and_cache_state():
    result = bandwidth.run(
        backend="cpu",
        kernels=("copy", "triad"),
        min_bytes=8 * KIB,
        max_bytes=2 * MIB,
        per_octave=1,
        budget_ms=10,
        show_progress=False,
    )
    assert set(result.options["empty_call_ns"]) == {"copy", "triad"}
    assert all(ns > 0 for ns in result.options["empty_call_ns"].values())
    for s in result.series:
        assert list(s.extra) == ["repeats", "passes", "overhead_share", "hot"]
        repeats = s.extra["repeats"]
        assert np.all(repeats >= 1) and np.all(repeats == np.round(repeats))
        assert np.all(np.diff(repeats) <= 0)  # larger working sets need fewer repeats
        assert np.all(np.isfinite(s.extra["overhead_share"]) & (s.extra["overhead_share"] > 0))
        assert set(s.extra["hot"].tolist()) <= {0.0, 1.0}
        bound = bandwidth.overhead_bound(s.extra["overhead_share"])
        for level in s.levels:
            inside = (s.x >= level.x_min) & (s.x <= level.x_max)
            assert not np.any(bound & inside)
