"""Causes that hold: every gap of a generated trace gets its injected cause and evidence; the
vectorised lookups agree with brute force; the real traces get the causes their events show."""

from __future__ import annotations

import random

import numpy as np
import pytest
from data_paths import TRACES
from kineto_gen import SEGMENTS, injected_trace

from perflab.analysis.host_stacks import HostStacks, count_at_or_before, last_at_or_before
from perflab.analysis.idle_causes import CAUSES, RULES, idle_causes, step_window
from perflab.analysis.trace_summary import summarize
from perflab.errors import InputError
from perflab.io import load_trace
from perflab.io.kineto import loads_kineto
from perflab.model.trace import EVENT_COLUMNS, TRACK_COLUMNS, EventKind, Table, Trace

NCCL = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"
T4 = TRACES / "nsys" / "power_iteration.sqlite"


def _evidence_text(result, gap: int) -> str:  # type: ignore[no-untyped-def]
    return " | ".join(f"{e.role} {e.name} {e.text}" for e in result.evidence(gap))


def _by_start_us(result) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {int(s) // 1000: i for i, s in enumerate(result.gaps.start.tolist())}


@pytest.mark.parametrize("seed", range(6))
def test_every_injected_gap_gets_its_cause_and_evidence(seed: int) -> None:
    injected = injected_trace(seed)
    result = idle_causes(loads_kineto(injected.data(), python=True))
    assert len(result) == len(injected.gaps)  # no gap that was not injected
    found = _by_start_us(result)
    for gap in injected.gaps:
        i = found[gap.start_us]
        assert int(result.gaps.end[i]) // 1000 == gap.end_us, gap
        assert result.cause_of(i) == gap.cause, (gap, _evidence_text(result, i))
        text = _evidence_text(result, i)
        for name in gap.evidence:
            assert name in text, (gap, text)


def test_each_cause_is_injected_and_found() -> None:
    injected = injected_trace(1)
    result = idle_causes(loads_kineto(injected.data(), python=True))
    by_cause = result.by_cause()
    for cause in CAUSES:
        expected = sum(1 for g in injected.gaps if g.cause == cause)
        assert expected > 0 and by_cause[cause].gaps == expected, cause
    assert sum(t.share for t in by_cause.values()) == pytest.approx(1.0)
    summary = summarize(loads_kineto(injected.data()))
    assert result.total_ns / 1e3 == pytest.approx(summary.devices["0"].idle_us, abs=1e-3)


def test_readback_evidence_names_the_copy_its_direction_and_the_sync() -> None:
    injected = injected_trace(0, segments=["readback"])
    result = idle_causes(loads_kineto(injected.data()))
    (gap,) = [g for g in injected.gaps if g.cause == "after-sync"]
    i = _by_start_us(result)[gap.start_us]
    evidence = result.evidence(i)
    syncs = [e.name for e in evidence if e.role == "sync"]
    # pageable DtoH: the copy call itself blocks; the stream sync after it returns at once
    assert syncs == ["cudaMemcpyAsync", "cudaStreamSynchronize"]
    (copy,) = [e for e in evidence if e.role == "copy"]
    assert "Memcpy DtoH (Device -> Pageable)" in copy.text and "64 KiB" in copy.text
    assert next(e.name for e in evidence if e.role == "work") == "log_metrics"


def test_without_python_events_the_op_below_is_named() -> None:
    injected = injected_trace(0, segments=["host-busy"])
    result = idle_causes(loads_kineto(injected.data(), python=False))
    (gap,) = injected.gaps
    i = _by_start_us(result)[gap.start_us]
    assert result.cause_of(i) == "host-busy"
    assert "aten::to" in _evidence_text(result, i)


def test_min_ns_and_step_select_gaps() -> None:
    injected = injected_trace(2)
    trace = loads_kineto(injected.data(), python=True)
    everything = idle_causes(trace)
    longer = idle_causes(trace, min_ns=50_000)
    assert 0 < len(longer) < len(everything)
    assert (longer.gaps.end - longer.gaps.start > 50_000).all()
    step = injected.gaps[0].step
    in_step = idle_causes(trace, step=step)
    expected = sorted(g.start_us for g in injected.gaps if g.step == step)
    assert sorted(int(s) // 1000 for s in in_step.gaps.start.tolist()) == expected
    w0, w1 = step_window(trace, step)
    assert (in_step.gaps.start >= w0).all() and (in_step.gaps.end <= w1).all()


def test_bad_options_are_perflab_errors() -> None:
    trace = loads_kineto(injected_trace(0, segments=["dtod"]).data())
    with pytest.raises(InputError, match=r"ProfilerStep#99.*steps are 1"):
        idle_causes(trace, step=99)
    with pytest.raises(InputError, match="whole number of ns"):
        idle_causes(trace, min_ns=-1)
    with pytest.raises(InputError, match="whole number of ns"):
        idle_causes(trace, min_ns=2.5)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="a step is a ProfilerStep number"):
        idle_causes(trace, step="1")  # type: ignore[arg-type]


def test_traces_without_gpu_work_or_host_events() -> None:
    empty = Trace(Table(EVENT_COLUMNS), Table(TRACK_COLUMNS), [])
    result = idle_causes(empty)
    assert len(result) == 0 and result.to_dict()["gaps"] == []
    assert all(t.gaps == 0 for t in result.by_cause().values())
    # GPU work only (no host events, no correlation): every gap is "unknown", said so
    events = Table(
        EVENT_COLUMNS,
        {
            "start_ns": [0, 500, 2000],
            "dur_ns": [100, 100, 100],
            "kind": [EventKind.KERNEL] * 3,
            "track": [0, 0, 0],
            "name": [0, 0, 0],
        },
    )
    tracks = Table(TRACK_COLUMNS, {"rank": [0], "device": [0], "stream": [7], "kind": [0]})
    tracks.columns["label"] = np.array([1], dtype=np.int32)
    result = idle_causes(Trace(events, tracks, ["k", "GPU 0 stream 7"]))
    assert [result.cause_of(i) for i in range(len(result))] == ["unknown", "unknown"]
    assert "no runtime call in the trace links to k" in result.evidence(0)[0].text


def test_json_document_is_plain_and_complete() -> None:
    import json

    injected = injected_trace(3)
    result = idle_causes(loads_kineto(injected.data(), python=True))
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert set(doc) >= {"gaps", "by_cause", "rules"} and set(doc["rules"]) == set(RULES)
    first = doc["gaps"][0]
    assert set(first) >= {"device", "start_ns", "dur_ns", "cause", "evidence"}
    # start_ns is on the trace's own clock (Kineto microseconds since the epoch, as ns)
    assert first["start_ns"] == int(result.gaps.start[0]) and first["start_ns"] > 10**9
    assert all({"role", "text"} <= set(e) for g in doc["gaps"] for e in g["evidence"])


# -- the vectorised lookups against brute force ----------------------------------------------


def test_grouped_lookups_match_brute_force() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        n, m = int(rng.integers(0, 60)), int(rng.integers(0, 40))
        ig, it = rng.integers(0, 4, n), rng.integers(0, 30, n)
        qg, qt = rng.integers(0, 5, m), rng.integers(-2, 32, m)
        last = last_at_or_before(ig, it, qg, qt)
        inclusive = count_at_or_before(ig, it, qg, qt)
        strict = count_at_or_before(ig, it, qg, qt, inclusive=False)
        for j in range(m):
            ok = [i for i in range(n) if ig[i] == qg[j] and it[i] <= qt[j]]
            best = max(ok, key=lambda i: (it[i], i)) if ok else -1
            assert last[j] == best
            assert inclusive[j] == len(ok)
            assert strict[j] == sum(1 for i in ok if it[i] < qt[j])


def _nested_trace(rng: random.Random) -> Trace:
    """Random properly nested host events on two threads."""
    starts, durs, tracks = [], [], []

    def fill(track: int, lo: int, hi: int, depth: int) -> None:
        t = lo
        while t < hi - 2 and depth < 5:
            length = rng.randint(1, max(1, (hi - t) // 2))
            starts.append(t)
            durs.append(length)
            tracks.append(track)
            fill(track, t, t + length, depth + 1)
            t += length + rng.randint(0, 3)

    fill(0, 0, 200, 0)
    fill(1, 10, 150, 0)
    events = Table(
        EVENT_COLUMNS,
        {
            "start_ns": starts,
            "dur_ns": durs,
            "kind": [EventKind.CPU_OP] * len(starts),
            "track": tracks,
            "name": [0] * len(starts),
        },
    )
    tracks_t = Table(
        TRACK_COLUMNS,
        {"rank": [0, 0], "device": [1, 1], "stream": [1, 2], "kind": [1, 1], "label": [0, 0]},
    )
    return Trace(events, tracks_t, ["op"])


def test_host_stacks_find_the_events_containing_a_time() -> None:
    rng = random.Random(7)
    for _ in range(10):
        trace = _nested_trace(rng)
        stacks = HostStacks(trace)
        s, e = trace.start_ns, trace.end_ns
        queries = np.array([rng.randint(-2, 210) for _ in range(30)], dtype=np.int64)
        threads = np.array([rng.randint(0, 1) for _ in range(30)], dtype=np.int64)
        q, idx, _ = stacks.containing(threads, queries)
        for j in range(len(queries)):
            rows = sorted(stacks.rows[idx[q == j]].tolist())
            expected = [
                r
                for r in range(len(trace))
                if trace.track[r] == threads[j] and s[r] <= queries[j] < e[r]
            ]
            assert rows == expected
        b = queries + np.array([rng.randint(0, 40) for _ in range(30)])
        q, idx = stacks.starting_within(threads, queries, b)
        for j in range(len(queries)):
            rows = sorted(stacks.rows[idx[q == j]].tolist())
            expected = [
                r
                for r in range(len(trace))
                if trace.track[r] == threads[j] and queries[j] < s[r] < b[j]
            ]
            assert rows == expected


def test_mutated_traces_give_a_cause_to_every_gap() -> None:
    """Seeded damage (events dropped, times shifted, correlations lost): every gap still
    gets one of the causes, the gaps add up to the idle time, and evidence is built."""
    rng = random.Random(11)
    for seed in range(8):
        doc = injected_trace(seed).doc
        events = [dict(e) for e in doc["traceEvents"] if rng.random() > 0.15]
        for e in events:
            if rng.random() < 0.1:
                e["ts"] += rng.randint(-30, 30)
            if rng.random() < 0.05 and "args" in e:
                e["args"] = {k: v for k, v in e["args"].items() if k != "correlation"}
        import json

        trace = loads_kineto(json.dumps({**doc, "traceEvents": events}).encode(), python=True)
        result = idle_causes(trace)
        assert set(np.unique(result.gaps.cause).tolist()) <= set(range(len(CAUSES)))
        devices = summarize(trace).devices
        idle = sum(d.idle_us for d in devices.values())
        assert result.total_ns / 1e3 == pytest.approx(idle, abs=1e-3)
        for i in range(len(result)):
            assert result.evidence(i)


# -- the real traces ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nccl() -> Trace:
    return load_trace(NCCL)


def test_a100_ddp_idle_is_host_work_with_the_ops_named(nccl: Trace) -> None:
    result = idle_causes(nccl)
    by_cause = result.by_cause()
    assert by_cause["host-busy"].share > 0.95  # the host was busy, not launching
    assert by_cause["after-sync"].gaps == 0  # DtoD copies are not syncs
    longest = result.longest(3)
    for i in longest.tolist():
        assert result.cause_of(i) == "host-busy"
        work = [e for e in result.evidence(i) if e.role == "work"]
        assert work[0].name == "aten::unflatten_dense_tensors"
        assert "Memcpy DtoD" in _evidence_text(result, i)
    # gaps inside batch norm: the host's time in the op, down to cudnn_batch_norm
    named = [
        i
        for i in result.longest(400).tolist()
        if any(e.role == "work" and e.name == "aten::batch_norm" for e in result.evidence(i))
    ]
    assert named and "aten::cudnn_batch_norm" in _evidence_text(result, named[0])


def test_t4_readbacks_are_after_sync_with_the_copy_and_the_sync() -> None:
    trace = load_trace(T4)
    result = idle_causes(trace)
    after = np.flatnonzero(result.gaps.cause == CAUSES.index("after-sync"))
    copies_before = trace.kind[result.gaps.prev[after]] == EventKind.MEMCPY
    assert len(after) == 88 and copies_before.all()  # 89 readbacks; the last ends the trace
    assert result.by_cause()["after-sync"].share > 0.99
    for i in result.longest(5).tolist():
        roles = [(e.role, e.name) for e in result.evidence(i)]
        assert ("sync", "cudaMemcpyAsync_v3020") in roles
        assert ("sync", "cudaStreamSynchronize_v3020") in roles
        assert ("copy", "Memcpy DtoH") in [(r, n.split(" (")[0]) for r, n in roles]
        assert any(r == "work" and n.startswith("IO ") for r, n in roles)  # the NVTX range


def test_segments_are_all_exercised() -> None:
    injected = injected_trace(0)
    assert sorted(set(injected.segments)) == sorted(SEGMENTS)
    assert injected.dtod > 0


def test_each_step_splits_into_busy_and_idle_by_cause(nccl: Trace) -> None:
    result = idle_causes(nccl)
    steps = result.by_step
    assert steps is not None and steps.columns["step"] == [4, 5, 6]
    cols = steps.columns
    for i in range(len(steps)):
        by_cause = sum(cols[f"{c}_us"][i] for c in CAUSES)
        assert by_cause == pytest.approx(cols["idle_us"][i], abs=1e-3)
        assert cols["busy_us"][i] + cols["idle_us"][i] == pytest.approx(cols["span_us"][i])
    # the steps follow one another: together they are the device's span, busy and idle
    device = summarize(nccl).devices["0"]
    for key in ("span_us", "busy_us", "idle_us"):
        assert sum(cols[key]) == pytest.approx(getattr(device, key), rel=1e-9)
    assert result.to_dict()["steps"]["step"] == [4, 5, 6]


def test_generated_steps_hold_their_injected_idle() -> None:
    injected = injected_trace(5)
    result = idle_causes(loads_kineto(injected.data(), python=True))
    assert result.by_step is not None
    cols = result.by_step.columns
    for i, step in enumerate(cols["step"]):
        for cause in CAUSES:
            expected = sum(
                g.end_us - g.start_us for g in injected.gaps if g.step == step and g.cause == cause
            )
            assert cols[f"{cause}_us"][i] == pytest.approx(expected, abs=1e-3), (step, cause)


def test_strip_colours_what_held_each_bin() -> None:
    injected = injected_trace(0, segments=["sync", "collective"])
    result = idle_causes(loads_kineto(injected.data(), python=True))
    strip = result.strip
    assert strip is not None and strip.devices == ["0"]
    states = set(np.unique(strip.state).tolist())
    assert states == {0, 1 + CAUSES.index("after-sync"), 1 + CAUSES.index("gpu-dependency")}


def test_deep_nesting_costs_a_few_lookups_per_gap() -> None:
    """Host events nested 50,000 deep around 20,000 gaps: the evidence looks up a few levels
    per gap (enumerating every enclosing event would be a billion pairs)."""
    n, gaps = 50_000, 20_000
    host = np.arange(n, dtype=np.int64)
    # nested ops [i, 10**10 - i); kernels of 100 ns every 40 us from 10**6, each launched by
    # a runtime call 50 ns before it starts, deep inside the nest
    k0 = 1_000_000 + 40_000 * np.arange(gaps, dtype=np.int64)
    starts = np.concatenate([host, k0 - 50, k0])
    durs = np.concatenate([10**10 - 2 * host, np.full(gaps, 10), np.full(gaps, 100)])
    kinds = [EventKind.CPU_OP] * n + [EventKind.RUNTIME] * gaps + [EventKind.KERNEL] * gaps
    corr = np.concatenate([np.full(n, -1), np.arange(gaps), np.arange(gaps)])
    events = Table(
        EVENT_COLUMNS,
        {
            "start_ns": starts,
            "dur_ns": durs,
            "kind": kinds,
            "track": [1] * (n + gaps) + [0] * gaps,
            "name": [0] * n + [1] * gaps + [2] * gaps,
            "correlation": corr,
        },
    )
    tracks = Table(
        TRACK_COLUMNS,
        {"rank": [0, 0], "device": [0, 9], "stream": [7, 9], "kind": [0, 1], "label": [3, 3]},
    )
    trace = Trace(events, tracks, ["op", "cudaLaunchKernel", "k", "lane"])
    result = idle_causes(trace)
    assert len(result) == gaps - 1
    assert result.by_cause()["host-busy"].gaps == gaps - 1
    text = _evidence_text(result, 0)
    assert "inside op" in text and "within op (10 s)" in text


def test_ranks_of_a_merged_trace_keep_their_own_causes() -> None:
    """Two ranks reuse device numbers, thread ids and correlation ids: each gap is still
    followed to its own rank's launch and thread."""
    a, b = injected_trace(0), injected_trace(1)
    ta, tb = loads_kineto(a.data(), python=True), loads_kineto(b.data(), python=True)
    merged = idle_causes(Trace.merge([ta, tb], ranks=[0, 1]))
    assert len(merged) == len(a.gaps) + len(b.gaps)
    labels = [merged.device_labels[int(d)] for d in merged.gaps.device.tolist()]
    for label, injected in (("0", a), ("1:0", b)):
        mine = [i for i, lab in enumerate(labels) if lab == label]
        got = {int(merged.gaps.start[i]) // 1000: merged.cause_of(i) for i in mine}
        assert got == {g.start_us: g.cause for g in injected.gaps}


def test_a_sync_that_returned_at_once_while_kernels_ran_is_not_a_wait() -> None:
    """The H200 training recording: loss.item() every step blocks (after-sync), but the
    optimizer's 0.3 us aten::_local_scalar_dense calls, returned while kernels still ran,
    did not wait: the gaps after them are host work."""
    path = TRACES.parents[2] / "notebooks" / "recordings" / "h200" / "16-training"
    report = load_trace(path / "train-steps.json.gz").idle()
    counts = report.to_dict()["by_cause"]
    assert counts["after-sync"]["gaps"] == 3  # each a 4-byte DtoH readback of the loss
    assert counts["host-busy"]["gaps"] == 1260
