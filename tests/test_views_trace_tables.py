"""Trace analysis tables show times as the trace summary does (units, time since the trace
start), never raw floats or epoch nanoseconds; their data stay plain numbers."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from data_paths import TRACES
from test_timeline import PAYLOAD, small_trace

from perflab.analysis.trace_stats import idle_breakdown, idle_gaps, stream_utilisation
from perflab.io import load_trace
from perflab.model.units import format_ns

RAW_FLOAT = re.compile(r"\d+\.\d{5,}")  # e.g. 333033.64600000076


@pytest.fixture(scope="module")
def nccl():  # type: ignore[no-untyped-def]
    return load_trace(TRACES / "kineto" / "nccl_2ranks_a100.json.gz")


def test_idle_breakdown_prints_times_with_units(nccl) -> None:  # type: ignore[no-untyped-def]
    idle = idle_breakdown(nccl)
    printed = str(idle)
    assert not RAW_FLOAT.search(printed), printed
    device = nccl.summary().to_dict()["devices"]["0"]
    total = format_ns(device["idle_us"] * 1e3)
    assert f"idle {total}" in str(nccl.summary())  # the summary's own words...
    assert f"idle GPU time by cause: {total} in" in printed  # ...and the same figure here
    assert format_ns(idle["host-busy"] * 1e3) in printed
    assert sum(idle.values()) == pytest.approx(device["idle_us"], rel=1e-4)  # still us
    assert idle.to_dict() == dict(idle) and json.loads(json.dumps(idle)) == dict(idle)
    html = idle._repr_mimebundle_()["text/html"]
    assert format_ns(idle["launch-overhead"] * 1e3) in html and not RAW_FLOAT.search(html)


def test_gap_table_shows_time_since_trace_start(nccl) -> None:  # type: ignore[no-untyped-def]
    gaps = idle_gaps(nccl, min_ns=50_000)
    longest = gaps.sorted_by("dur_ns").head(8)
    assert len(longest) == 8
    assert longest.columns["dur_ns"] == sorted(gaps.columns["dur_ns"], reverse=True)[:8]
    origin = int(nccl.start_ns.min())
    start, dur = longest.columns["start_ns"][0], longest.columns["dur_ns"][0]
    for view in (str(longest), longest._repr_mimebundle_()["text/html"]):
        assert str(start) not in view and not re.search(r"\d{10,}", view)  # no epoch ns
        assert format_ns(start - origin) in view and format_ns(dur) in view
        assert "since trace start" in view and "longer than 50 us" in view
    assert gaps.to_pandas()["start_ns"].iloc[0] == gaps.columns["start_ns"][0]  # data intact
    assert f"{len(gaps) - 25} more rows" in str(gaps)


def test_stream_table_shows_busy_time_and_share(nccl) -> None:  # type: ignore[no-untyped-def]
    table = stream_utilisation(nccl)
    text = str(table)
    busy, share = table.columns["busy_us"][0], table.columns["share"][0]
    assert format_ns(busy * 1e3) in text and f"{100 * share:.1f}%" in text
    assert not RAW_FLOAT.search(text)


def test_gap_table_escapes_names() -> None:
    trace = small_trace([PAYLOAD, "k2", "k3"])
    gaps = idle_gaps(trace)
    assert len(gaps) == 2 and np.all(np.asarray(gaps.columns["dur_ns"]) == 400)
    html = gaps._repr_mimebundle_()["text/html"]
    assert PAYLOAD not in html and "&lt;img src=x onerror" in html
    assert "400 ns" in html


def test_top_kernels_are_shares_of_all_kernel_time(nccl) -> None:  # type: ignore[no-untyped-def]
    """A table cut to its longest rows keeps each row's share of the whole, and says so."""
    from perflab.analysis.trace_stats import kernel_table
    from perflab.render.tables import optable_html, optable_text

    full = kernel_table(nccl)
    top = full.top(3)
    assert np.allclose(top.share, full.share[:3])
    assert top.share[0] == pytest.approx(full.total_ns[0] / full.total_ns.sum())
    assert str(top).splitlines()[0] == (
        f"GPU kernels: the longest 3 of {len(full)} distinct, "
        f"{format_ns(float(full.total_ns.sum()))} in all "
        f"({format_ns(float(top.total_ns.sum()))} shown)"
    )
    first = f"{100 * full.share[0]:.1f}%"
    assert first in optable_text(full, limit=3).splitlines()[3]  # title, header, rule, row
    assert f"{first}</td>" in optable_html(full, limit=3)
