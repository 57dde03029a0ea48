from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

import perflab
from perflab.capture.timer import Plan, TimingOptions, _plan, noise_warnings, time_function
from perflab.errors import InputError, NoGPUError, SchemaError
from perflab.model.listeners import add_listener, remove_listener
from perflab.model.timing import TimingResult
from perflab.render.timing import histogram_counts


def busy_wait(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


@pytest.mark.parametrize("target_ns", [2_000_000, 200_000])
def test_calibrated_busy_wait_within_one_percent(target_ns: int) -> None:
    r = time_function(
        lambda: busy_wait(target_ns), backend="cpu", budget_ms=80, warmup_ms=2, max_noise=0
    )
    assert r.backend == "cpu"
    assert abs(r.median_ns - target_ns) / target_ns < 0.01, r.summary_line()
    assert r.min_ns >= target_ns
    assert "no GPU" in " ".join(r.warnings)


def test_sleep_is_never_reported_shorter() -> None:
    r = time_function(lambda: time.sleep(0.002), backend="cpu", budget_ms=40, warmup_ms=1)
    assert r.min_ns >= 2_000_000
    assert r.n >= 3


def test_time_function_orders_cheap_and_expensive_work() -> None:
    small = time_function(lambda: sum(range(100)), backend="cpu", budget_ms=30)
    large = time_function(lambda: sum(range(100_000)), backend="cpu", budget_ms=30)
    assert large.median_ns > 10 * small.median_ns
    assert large.compare(small).significant
    assert large.compare(small).ratio > 10


def test_perflab_bench_times_and_tells_the_listeners() -> None:
    seen: list[object] = []
    add_listener(seen.append)
    try:
        r = perflab.bench(lambda: None, budget_ms=5, repeat=7, number=3)
    finally:
        remove_listener(seen.append)
    assert r.n == 7 and r.number == 3
    assert seen == [r]


def test_repeat_and_number_are_honoured() -> None:
    calls = []
    time_function(lambda: calls.append(1), backend="cpu", repeat=5, number=4, warmup_ms=0)
    # first call + estimate (5) + warm-up (>=1) + 5 samples x 4 calls
    assert len(calls) >= 1 + 5 + 1 + 20


def test_gc_is_disabled_while_timing_and_restored() -> None:
    import gc

    seen = []
    time_function(lambda: seen.append(gc.isenabled()), backend="cpu", repeat=3, warmup_ms=0)
    assert seen and not any(seen)
    assert gc.isenabled()


def test_exception_in_fn_propagates_and_cleans_up() -> None:
    def boom() -> None:
        raise RuntimeError("user error")

    with pytest.raises(RuntimeError, match="user error"):
        time_function(boom, backend="cpu")
    # the autouse fixture checks that no range/GC/profiler state leaked


def test_flush_spends_budget_and_is_reported() -> None:
    r = time_function(lambda: None, backend="cpu", flush_l2=True, budget_ms=30, warmup_ms=0)
    assert r.options["flush_l2"] is True
    assert r.n >= 3


@pytest.mark.parametrize(
    "bad",
    [
        dict(budget_ms=-1),
        dict(warmup_ms=float("nan")),
        dict(number=0),
        dict(repeat=0),
        dict(backend="tpu"),
    ],
)
def test_bad_options_are_perflab_errors(bad: dict[str, object]) -> None:
    with pytest.raises(InputError):
        time_function(lambda: None, **bad)  # type: ignore[arg-type]


def test_non_callable_is_rejected() -> None:
    with pytest.raises(InputError, match="callable"):
        time_function(42)  # type: ignore[arg-type]


def test_graph_without_gpu_says_no_gpu() -> None:
    from perflab.capture.env import cuda_available

    if cuda_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(
        NoGPUError, match=r"^no GPU: --graph \(CUDA-graph replay\) needs a CUDA GPU$"
    ):
        time_function(lambda: None, graph=True)
    with pytest.raises(NoGPUError, match=r"^no GPU: backend 'cuda' needs a CUDA GPU$"):
        time_function(lambda: None, backend="cuda")


def test_plan_derives_counts_from_budgets() -> None:
    opts = TimingOptions(budget_ms=100, warmup_ms=10)
    plan = _plan(opts, per_call_ns=1_000_000, clock_name="cuda")
    assert (plan.number, plan.warmup_calls, plan.max_count, plan.fixed) == (1, 10, 100, False)
    # the flush cost is part of the budget
    assert _plan(opts, 1_000_000, "cuda", flush_ns=1_000_000).max_count == 50
    # tiny CPU calls are batched so one sample lasts >= 20 us
    assert _plan(opts, 100, "cpu").number == 200
    # a call far beyond the budget keeps the run short
    assert _plan(opts, 5e9, "cuda").max_count == 3
    # -r fixes the count (the budget can still cut it: the plan keeps a sample's estimate)
    assert _plan(TimingOptions(repeat=7), 1e3, "cuda") == Plan(1, 25_000, 7, True, 1e3)


def test_noise_warnings() -> None:
    quiet = np.full(50, 100.0)
    assert noise_warnings(quiet, 10) == []
    noisy = np.r_[np.full(25, 100.0), np.full(25, 150.0)]
    assert any("IQR" in w for w in noise_warnings(noisy, 10))
    spiky = np.r_[np.full(49, 100.0), [500.0]]
    assert any("4x" in w for w in noise_warnings(spiky, 10))
    assert any("only 3 samples" in w for w in noise_warnings(quiet[:3], 10))


def test_save_load_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = time_function(lambda: sum(range(500)), backend="cpu", budget_ms=10)
    path = r.save(tmp_path / "r.json")
    doc = json.loads(path.read_text())
    assert doc["perflab"] == "TimingResult" and doc["schema_version"] == 1
    back = TimingResult.load(path)
    assert np.array_equal(back.samples_ns, r.samples_ns)
    assert back.median_ns == r.median_ns and back.device == r.device
    assert back.replayed_from == str(path)
    assert "replayed" in back._repr_mimebundle_()["text/plain"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"perflab": "Trace", "schema_version": 1}', "expected a perflab TimingResult"),
        ('{"perflab": "TimingResult", "schema_version": 99}', "schema_version"),
        ('{"perflab": "TimingResult", "schema_version": 1}', r"field samples_ns\): is missing"),
        (
            '{"perflab": "TimingResult", "schema_version": 1, "samples_ns": [], '
            '"backend": "cpu", "device": "x"}',
            "no samples",
        ),
    ],
)
def test_load_rejects_bad_files(tmp_path, content: str, message: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SchemaError, match=message):
        TimingResult.load(path)


def test_load_deeply_nested_json_is_a_schema_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SchemaError, match="nested too deeply"):
        TimingResult.load(path)


def test_load_non_utf8_and_missing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SchemaError, match="UTF-8"):
        TimingResult.load(path)
    with pytest.raises(SchemaError, match=r"cannot read|no such file"):
        TimingResult.load(tmp_path / "missing.json")


def test_reprs_escape_names_and_show_statistics() -> None:
    r = TimingResult(
        samples_ns=np.array([100.0, 110, 120, 130, 140, 150]),
        backend="cpu",
        device="<b>dev</b>",
        name="<script>alert(1)</script>",
    )
    bundle = r._repr_mimebundle_()
    assert "<script>alert" not in bundle["text/html"]
    assert "&lt;script&gt;" in bundle["text/html"]
    assert "median 125 ns" in bundle["text/plain"]
    d = r.to_dict()
    assert d["summary"]["median_ns"] == 125.0 and d["summary"]["n"] == 6


def test_views_say_why_sampling_stopped_and_what_was_checked() -> None:
    r = TimingResult(
        samples_ns=np.full(12, 100.0),
        backend="cuda",
        device="dev",
        stop_reason="noise",
        options={"relative_standard_error": 0.0031, "cold": "every call"},
        throttle={"checked": False, "why": "pynvml <missing>"},
    )
    text = r._repr_mimebundle_()["text/plain"]
    assert "stopped: noise, relative standard error 0.31%; cold: every call" in text
    assert "clocks not checked: pynvml <missing>" in text
    assert "pynvml &lt;missing&gt;" in r._repr_mimebundle_()["text/html"]


# --- samples a timer cannot report --------------------------------------------------------


def _saved(tmp_path, samples: list[float], **fields: object):  # type: ignore[no-untyped-def]
    doc = TimingResult(np.linspace(1e3, 2e3, 12), "cpu", "x", name="saved").to_dict()
    doc.update(samples_ns=samples, host_ns=None, **fields)
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"perflab": "TimingResult", "schema_version": 1, **doc}))
    return path


def test_saved_zero_samples_are_refused_naming_the_file_and_field(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A result whose samples were all 0 ns used to load, and compare then printed
    'ratio inf (95% CI nan-nan)' or raised ZeroDivisionError."""
    path = _saved(tmp_path, [0.0] * 12)
    with pytest.raises(
        SchemaError, match=r"field samples_ns\[0\]\): .*, not 0\.0 \(nothing was timed"
    ) as info:
        TimingResult.load(path)
    assert str(path) in str(info.value)


def test_saved_samples_beyond_a_day_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SchemaError, match=r"field samples_ns\[0\]\): .*one day"):
        TimingResult.load(_saved(tmp_path, [1e300] * 12))
    longest = TimingResult.load(_saved(tmp_path, [86_400e9] * 12))  # one day exactly loads
    assert "median 8.64e+04 s" in longest._repr_mimebundle_()["text/plain"]


@pytest.mark.parametrize(
    "samples", [[0.0] * 12, [0.0, 0.0, 5.0], [math.nan] * 3, [1e300] * 12, [math.inf, 1.0]]
)
def test_compare_refuses_unmeasurable_samples_clearly(samples: list[float]) -> None:
    """compare never prints inf or nan nor raises ZeroDivisionError: a result built in
    Python with such samples is an InputError naming it and the sample."""
    good = TimingResult(np.linspace(1e3, 2e3, 12), "cpu", "x", name="good")
    bad = TimingResult(np.asarray(samples), "cpu", "x", name="bad")
    for a, b in ((good, bad), (bad, good), (bad, bad)):
        with pytest.raises(InputError, match=r"cannot compare .*: bad: samples_ns\[\d+\] must"):
            a.compare(b)


def test_html_histogram_draws_any_loadable_result() -> None:
    """Samples of 1e300 (loadable before) broke the HTML view: 'Too many bins'."""
    for samples in ([1e300] * 12, [86_400e9] * 5 + [86_400e9 - 0.01], [1e-7] * 3, [5.0]):
        bundle = TimingResult(np.asarray(samples), "cpu", "x")._repr_mimebundle_()
        assert "histogram of samples" in bundle["text/html"]
    assert histogram_counts([1e300] * 12).tolist() == [0] * 12 + [12] + [0] * 11
    assert histogram_counts([1.0, 2.0]).tolist() == [1] + [0] * 22 + [1]
    assert histogram_counts([math.nan, math.inf]).sum() == 0


def test_older_files_without_timer_steps_load_as_unknown(tmp_path) -> None:  # type: ignore[no-untyped-def]
    old = TimingResult.load(_saved(tmp_path, [100.0, 110.0, 120.0]))
    assert old.empty_window_ns is None and old.tick_ns is None
    assert old.ci95_ns == (100.0, 120.0)  # no tick: the interval is not widened
    known = TimingResult.load(
        _saved(tmp_path, [100.0, 110.0, 120.0], empty_window_ns=30.0, tick_ns=20.0)
    )
    assert (known.empty_window_ns, known.tick_ns) == (30.0, 20.0)
    assert known.ci95_ns == (80.0, 140.0)  # +-20 ns: one tick of the clock per sample
    assert known.to_dict()["empty_window_ns"] == 30.0 and known.to_dict()["tick_ns"] == 20.0


def test_files_with_the_former_names_load_under_the_new_ones(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Results saved before call an empty sample's window ``floor_ns`` and the clock's
    tick ``resolution_ns``: they load under today's names (and keep answering to the old
    ones), and save under today's names only; where a file has both, today's name wins."""
    old = TimingResult.load(
        _saved(tmp_path, [100.0, 110.0, 120.0], floor_ns=30.0, resolution_ns=20.0)
    )
    assert (old.empty_window_ns, old.tick_ns) == (30.0, 20.0)
    assert (old.floor_ns, old.resolution_ns) == (30.0, 20.0)
    assert old.ci95_ns == (80.0, 140.0)
    doc = old.to_dict()
    assert (doc["empty_window_ns"], doc["tick_ns"]) == (30.0, 20.0)
    assert "floor_ns" not in doc and "resolution_ns" not in doc
    both = TimingResult.load(
        _saved(tmp_path, [100.0], floor_ns=30.0, empty_window_ns=40.0, tick_ns=8.0)
    )
    assert (both.empty_window_ns, both.tick_ns) == (40.0, 8.0)


RECORDINGS = Path(__file__).resolve().parents[1] / "notebooks" / "recordings"


def _timing_recordings() -> list[Path]:
    found = []
    for path in sorted(RECORDINGS.rglob("*.json")):
        with path.open(encoding="utf-8") as fh:
            head = fh.read(64)
        if '"TimingResult"' in head:
            found.append(path)
    return found


def test_every_recorded_timing_loads_with_its_timer_steps() -> None:
    recorded = _timing_recordings()
    assert len(recorded) >= 40
    for path in recorded:
        r = TimingResult.load(path)
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert r.empty_window_ns == doc["floor_ns"] and r.tick_ns == doc["resolution_ns"], path


def test_a_recorded_kernel_below_the_empty_window_is_not_shown_below_a_floor() -> None:
    """On the H200 an add kernel read 3.17 us, under the 3.39 us an empty kernel's window
    reads: that is a warning threshold, and no view calls it a floor (nor the 32 ns tick
    a resolution), the saved warnings included."""
    (path,) = [p for p in _timing_recordings() if p.name == "add-2-0.json"]
    r = TimingResult.load(path)
    assert r.empty_window_ns is not None and r.median_ns < r.empty_window_ns
    bundle = r._repr_mimebundle_()
    for view in (bundle["text/plain"], bundle["text/html"]):
        assert "floor" not in view and "resolution" not in view
        assert "empty window 3.39 us" in view and "tick 32 ns" in view
    assert r.warnings[0].startswith("the median is within 5x an empty sample's window (3.39 us")
    assert r.warnings[1].startswith("the timer's tick (32 ns per sample")


def test_warnings_saved_by_older_rules_say_so_when_loaded() -> None:
    """The H200 recordings' host-bound flags came from host time alone, and their dropped
    samples from the filler's clock: loaded today, each says it is the older rule's."""
    from perflab.recordings import recorded

    root = Path(__file__).resolve().parents[1] / "notebooks" / "recordings" / "h200"
    warm = recorded("12-inference/batch1-warm.json", root)
    graph = recorded("12-inference/batch1-graph.json", root)
    assert isinstance(warm, TimingResult) and isinstance(graph, TimingResult)
    (bound,) = [w for w in warm.warnings if w.startswith("host-bound")]
    assert bound.startswith("host-bound by an older rule, host time alone: 723 of 2000 samples")
    assert "not evidence that the GPU waited" in bound
    (dropped,) = [w for w in graph.warnings if w.startswith("dropped")]
    assert dropped.startswith("dropped 2 of 2000 samples by an older rule")
    assert "1404 MHz" in dropped and "no throttle reason" in dropped
