"""Analyses: interval maths (against brute force), categories, launch stats, tables."""

from __future__ import annotations

import numpy as np
import pytest
from data_paths import TRACES
from hypothesis import given, settings
from hypothesis import strategies as st
from test_trace_model import small_trace

from perflab.analysis.categories import DEFAULT_RULES, categorize, category_names
from perflab.analysis.idle_classify import CAUSES
from perflab.analysis.trace_intervals import intersection_length, merge, union_length
from perflab.analysis.trace_stats import (
    achieved_bandwidth,
    cpu_self_time,
    idle_breakdown,
    idle_gaps,
    kernel_table,
    launch_stats,
    mfu,
    stream_utilisation,
)
from perflab.io import load_trace
from perflab.model.trace import EventKind

intervals = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 100)), max_size=40)


def covered(iv: list[tuple[int, int]]) -> set[int]:
    return {t for s, d in iv for t in range(s, s + d)}


@settings(max_examples=200, deadline=None)
@given(intervals, intervals)
def test_union_and_intersection_match_brute_force(
    a: list[tuple[int, int]], b: list[tuple[int, int]]
) -> None:
    def arrays(iv: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        s = np.array([x for x, _ in iv], dtype=np.int64)
        return s, s + np.array([d for _, d in iv], dtype=np.int64)

    assert union_length(*arrays(a)) == len(covered(a))
    assert intersection_length(merge(*arrays(a)), merge(*arrays(b))) == len(covered(a) & covered(b))


def test_categories_first_rule_wins_and_users_extend() -> None:
    names = [
        "ncclKernel_AllReduce_RING",
        "flash_fwd_kernel",
        "ampere_sgemm_128x64_nn",
        "sm90_xmma_gemm_f16f16",
        "triton_poi_fused_add_0",
        "cutlass_80_wmma_tensorop",
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",  # cuBLAS on an H200
        "void at::native::vectorized_elementwise_kernel<4>",
        "reduce_kernel<512>",
        "foo",
    ]
    assert categorize(names) == [
        "communication",
        "attention",
        "gemm",
        "gemm",
        "triton",
        "gemm",
        "gemm",
        "elementwise",
        "reduction",
        "other",
    ]
    rules = [("mine", r"^foo$"), *DEFAULT_RULES]
    assert categorize(["foo"], rules) == ["mine"]
    assert category_names(rules)[0] == "mine" and category_names(rules)[-1] == "other"


def test_kernel_table_and_cpu_fallback() -> None:
    t = small_trace()
    table = kernel_table(t)
    assert table.kind == "kernel"
    assert table.names == ["ncclKernel_AllReduce", "gemm_kernel"]  # longest total first
    assert table.calls.tolist() == [1, 2] and table.total_ns.tolist() == [200, 150]


def test_cpu_self_time_subtracts_direct_children() -> None:
    from perflab.model.trace import EVENT_COLUMNS, TRACK_COLUMNS, Table, Trace

    # parent [0,100) with children [10,30) and [40,90) which has child [50,60)
    events = Table(
        EVENT_COLUMNS,
        {
            "start_ns": [0, 10, 40, 50],
            "dur_ns": [100, 20, 50, 10],
            "kind": [EventKind.CPU_OP] * 4,
            "track": [0] * 4,
            "name": [0, 1, 2, 3],
        },
    )
    tracks = Table(
        TRACK_COLUMNS, {"rank": [0], "device": [1], "stream": [1], "kind": [1], "label": [4]}
    )
    t = Trace(events, tracks, ["p", "a", "b", "c", "cpu"])
    assert cpu_self_time(t).tolist() == [30, 20, 40, 10]
    table = kernel_table(t)
    assert (
        table.kind == "cpu_op"
        and dict(zip(table.names, table.total_ns.tolist(), strict=True))["p"] == 30
    )


def test_mfu_and_bandwidth() -> None:
    assert mfu(1e12, 1.0, 4e12) == pytest.approx(0.25)
    bw = achieved_bandwidth(2e9, 0.5, 8e9)
    assert bw == {"bytes_per_s": 4e9, "fraction_of_peak": 0.5}
    with pytest.raises(ValueError):
        mfu(1.0, 0.0, 1.0)


NCCL = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"


def test_launch_stats_match_a_plain_python_join() -> None:
    import gzip
    import json

    trace = load_trace(NCCL)
    stats = launch_stats(trace)
    with gzip.open(NCCL, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    delays, shorter = [], 0
    for e in events:
        if e.get("cat") == "kernel" and e["args"].get("correlation") in launches:
            launch = launches[e["args"]["correlation"]]
            delays.append(e["ts"] - launch["ts"])
            shorter += e["dur"] < launch["dur"]
    assert stats["linked"] == len(delays)
    assert stats["shorter_than_launch"] == shorter
    assert stats["delay_us"]["p50"] == pytest.approx(float(np.percentile(delays, 50)), rel=1e-4)
    # reported to the nanosecond: no binary remainders such as 524.6070499999999
    assert all(round(v, 3) == v for v in stats["delay_us"].values())


def test_summary_tables_show_times_as_people_read_them() -> None:
    from perflab.model.units import format_us

    summary = load_trace(NCCL).summary()
    html = summary._repr_mimebundle_()["text/html"]
    dev = summary.devices["0"]
    busy_share = f"{dev.busy_us / dev.span_us:.1%}"
    assert f"<td>{format_us(dev.busy_us)}</td>" in html and f"<td>{busy_share}</td>" in html
    assert "<th>busy %</th>" in html and "busy us" not in html
    comm = summary.categories["communication"]
    assert f"<td>{format_us(comm.total_us)}</td>" in html
    # what the tables show is not repeated below them; what they do not show is
    assert "GPU 0: busy" not in html and "categories:" not in html
    assert "communication: 21 NCCL kernels" in html and "memcpy: 960 copies" in html
    assert "GPU 0: busy" in str(summary) and "categories: communication" in str(summary)


def test_idle_gaps_add_up_to_idle_time() -> None:
    trace = load_trace(NCCL)
    dev = trace.summary().to_dict()["devices"]["0"]
    gaps = idle_gaps(trace)
    assert sum(gaps.columns["dur_ns"]) / 1e3 == pytest.approx(dev["idle_us"], rel=1e-4)
    assert sum(idle_breakdown(trace).values()) == pytest.approx(dev["idle_us"], rel=1e-4)
    util = stream_utilisation(trace).to_pandas()
    assert len(util) == 2 and (util["share"] <= 1).all()
    assert gaps.to_pandas()["cause"].isin(CAUSES).all()
