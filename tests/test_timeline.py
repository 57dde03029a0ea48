"""Timeline: level-of-detail maths, lanes, rendering on real traces and at a million events."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench_scripts import load_script
from data_paths import TRACES
from hypothesis import given, settings
from hypothesis import strategies as st

from perflab.analysis import lod
from perflab.cli import main as cli
from perflab.model.trace import EVENT_COLUMNS, TRACK_COLUMNS, EventKind, Table, Trace

PAYLOAD = '<img src=x onerror="window.__pwned=1">'


def bench_timeline() -> Any:
    """benchmarks/timeline.py as a module: its synthetic trace and Chromium flags."""
    return load_script("timeline")


def synthetic_trace(n: int):
    return bench_timeline().synthetic_trace(n)


def small_trace(names: list[str]) -> Trace:
    """Two lanes (a CPU thread and a GPU stream) with one event per name on each."""
    n = len(names)
    strings = [*names, "thread <b>1</b>", "GPU 0 stream 7"]
    events = Table(
        EVENT_COLUMNS,
        {
            "start_ns": np.tile(np.arange(n) * 1000, 2),
            "dur_ns": np.full(2 * n, 600),
            "kind": np.repeat([EventKind.CPU_OP, EventKind.KERNEL], n).astype(np.int8),
            "track": np.repeat([0, 1], n),
            "name": np.tile(np.arange(n), 2),
        },
    )
    tracks = Table(
        TRACK_COLUMNS,
        {"rank": [0, 0], "device": [99, 0], "stream": [1, 7], "kind": [1, 0], "label": [n, n + 1]},
    )
    return Trace(events, tracks, strings, meta={"source": "small"})


# --- level of detail ---------------------------------------------------------------------

intervals = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 300)), min_size=0, max_size=40)


@given(intervals)
@settings(max_examples=200, deadline=None)
def test_merge_intervals_is_the_union(items: list[tuple[int, int]]) -> None:
    s = np.array([a for a, _ in items], dtype=float)
    e = np.array([a + d for a, d in items], dtype=float)
    ms, me = lod.merge_intervals(s, e)
    assert np.all(ms[1:] > me[:-1])  # disjoint and sorted
    grid = np.arange(0, 1400) + 0.5
    covered = np.zeros(grid.size, bool)
    for a, b in zip(s, e, strict=True):
        covered |= (grid >= a) & (grid < b)
    merged = np.zeros(grid.size, bool)
    for a, b in zip(ms, me, strict=True):
        merged |= (grid >= a) & (grid < b)
    assert np.array_equal(covered, merged)


@given(intervals, st.integers(1, 50))
@settings(max_examples=200, deadline=None)
def test_coverage_matches_a_fine_sampling(items: list[tuple[int, int]], bins: int) -> None:
    s = np.array([a for a, _ in items], dtype=float)
    e = np.array([a + d for a, d in items], dtype=float)
    frac = lod.coverage(s, e, 0.0, 1300.0, bins)
    assert frac.shape == (bins,) and np.all((frac >= 0) & (frac <= 1))
    ms, me = lod.merge_intervals(s, e)
    busy = float(np.sum(np.clip(me, 0, 1300) - np.clip(ms, 0, 1300)))
    assert frac.sum() * 1300 / bins == pytest.approx(busy, abs=1e-6)


def test_largest_visible_keeps_the_longest_in_view() -> None:
    s = np.array([0, 10, 20, 30, 500.0])
    e = np.array([5, 40, 22, 90, 900.0])
    idx = lod.largest_visible(s, e, 15, 60, 2)
    assert idx.tolist() == [1, 3]  # visible parts 25 and 30 beat 2; 0 and 4 are outside


@pytest.mark.parametrize("layout", ["spread", "clustered"])
def test_pyramid_tiles_hold_their_longest_intervals(layout: str) -> None:
    """Every tile of every level against a brute-force selection; the clustered layout (dense
    short intervals in two bursts, a few long ones across the gap) makes most tiles either
    full from long intervals alone or sparse."""
    rng = np.random.default_rng(1)
    if layout == "spread":
        s = np.sort(rng.uniform(0, 1e6, 5000))
        e = s + rng.lognormal(5, 1, 5000)
    else:
        s = np.concatenate([rng.uniform(0, 1e5, 9000), rng.uniform(8e5, 1e6, 9000)])
        # and intervals about a fine tile wide, some crossing into a burst from the gap
        s = np.concatenate([s, rng.uniform(0, 1e6, 200), rng.uniform(7.9e5, 8e5, 300)])
        e = s + np.concatenate(
            [rng.uniform(0, 3, 18000), rng.uniform(1e3, 2e5, 200), rng.uniform(5, 3e3, 300)]
        )
    lane = rng.integers(0, 3, s.size)
    p = lod.build_pyramid(s, e, lane, 3, row_budget=4000, max_per_tile=100)
    assert p.total_rows <= 4000 + 100
    span = p.t1 - p.t0
    for level in p.levels:
        w = span / level.tiles
        for t in range(level.tiles):
            rows = level.rows[level.offsets[t] : level.offsets[t + 1]]
            lo, hi = p.t0 + t * w, p.t0 + (t + 1) * w
            touch = np.flatnonzero((e >= lo) & (s <= hi))
            assert set(rows.tolist()) <= set(touch.tolist())
            if rows.size < level.per_tile:  # room to spare: everything that touches
                assert rows.size == touch.size
            else:  # dropped some: the kept ones are the longest
                longest = np.sort(e[touch] - s[touch])[-level.per_tile :]
                assert np.allclose(np.sort(e[rows] - s[rows]), longest)
    assert p.levels[0].busy.shape[0] == 4  # 3 lanes + the summary row


@pytest.mark.parametrize("seed", range(30))
def test_level_selection_matches_brute_force(seed: int) -> None:
    """One tile filled by long intervals, short ones crossing from it into its neighbours
    (and back), and noise: the quick pass over the longest intervals fills that tile, and
    the crossing ones must still reach the tiles next to it."""
    rng = np.random.default_rng(seed)
    tiles, per_tile, width = 4, int(rng.integers(1, 3)), 100.0
    dense = int(rng.integers(1, tiles - 1))
    n_long = 4 * tiles * per_tile + 5  # more than the quick pass looks at
    starts = [
        [0.0, tiles * width - 0.5],  # fix the span
        dense * width + rng.uniform(0, 10, n_long),
        rng.choice([dense, dense + 1], 10) * width - rng.uniform(0, 1, 10),  # crossing
        rng.uniform(0, tiles * width - 1, 30),
    ]
    lengths = [[0.5, 0.5], rng.uniform(20, 89, n_long), rng.uniform(1.5, 3, 10)]
    lengths.append(rng.uniform(0, 0.5, 30))
    s, e = np.concatenate(starts), np.concatenate(starts) + np.concatenate(lengths)
    by_length = np.argsort(-(e - s))
    finder = lod._TileFinder(s, e, by_length, 0.0)
    offsets, rows, complete = lod._select_level(by_length, finder, tiles * width, tiles, per_tile)
    first, last = lod._TileFinder(s, e, np.arange(s.size), 0.0).tiles(width, tiles)
    touching = [[r for r in by_length.tolist() if first[r] <= t <= last[r]] for t in range(tiles)]
    for t in range(tiles):
        assert rows[offsets[t] : offsets[t + 1]].tolist() == touching[t][:per_tile]
    assert not complete and len(touching[dense]) > per_tile


def test_pyramid_stops_when_every_interval_is_drawn() -> None:
    s = np.arange(50.0)
    p = lod.build_pyramid(s, s + 0.5, np.zeros(50, int), 1, max_per_tile=100)
    assert len(p.levels) == 1 and p.levels[0].rows.size == 50


def test_pyramid_rejects_bad_lanes() -> None:
    with pytest.raises(ValueError, match="lane indices"):
        lod.build_pyramid([0.0], [1.0], [3], 2)


# --- rendering -----------------------------------------------------------------------------


def kineto(name: str) -> Path:
    path = TRACES / "kineto" / name
    return path


def test_lanes_of_a_real_trace_group_cpu_then_gpu() -> None:
    from perflab.io import load_trace
    from perflab.render.timeline import assign_lanes, timeline

    trace = load_trace(kineto("nccl_2ranks_a100.json.gz"))
    lanes = assign_lanes(trace)
    assert len(lanes.of_event) == len(trace) and lanes.of_event.min() >= 0
    assert lanes.gpu.tolist() == sorted(lanes.gpu.tolist())  # CPU lanes first
    assert any("stream 7" in label for label in lanes.labels)
    assert any("ranges" in label for label in lanes.labels)
    notes = trace.kind == EventKind.ANNOTATION
    assert not set(lanes.of_event[notes]) & set(lanes.of_event[~notes])
    view = timeline(trace)
    assert "stream 40" in view.text and "levels of detail" in view.text
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "image/svg+xml"}
    assert bundle["image/svg+xml"].startswith("<svg")
    assert "Bokeh" in bundle["text/html"]


def test_hover_details_come_from_the_kernel_table() -> None:
    from perflab.io import load_trace
    from perflab.render.timeline_data import DETAIL_COLUMNS, Labels
    from perflab.render.timeline_data import short_name as _short

    trace = load_trace(kineto("alexnet_a100.json.gz"))
    k = trace.kernels
    rows = k["event"][:5]
    found = Labels.of(trace, rows)
    label, table, names = found.of_row, found.table, found.names
    for j, row in enumerate(rows.tolist()):
        entry = table[label[j]]
        assert names[entry[0]] == _short(trace.strings[trace.name[row]])
        assert entry[2 + DETAIL_COLUMNS.index("grid_x")] == k["grid_x"][j]
        assert entry[2 + DETAIL_COLUMNS.index("registers")] == k["registers"][j]


def test_payload_names_are_escaped_in_the_html(tmp_path: Path) -> None:
    from perflab.render.timeline import timeline

    view = timeline(small_trace([PAYLOAD, "<script>window.__pwned=2</script>", "ok"]))
    for html in (
        view._repr_mimebundle_()["text/html"],
        view.save(tmp_path / "t.html").read_text(encoding="utf-8"),
    ):
        assert PAYLOAD not in html and "<script>window.__pwned" not in html
        assert "<b>1</b>" not in html
        assert "&lt;img src=x onerror" in html  # present, as escaped data


def test_million_events_fit_the_size_goal(tmp_path: Path) -> None:
    from perflab.render.timeline import timeline

    trace = synthetic_trace(1_000_000)
    out = timeline(trace).save(tmp_path / "m.html")
    size = out.stat().st_size
    assert size <= 4 * 1024 * 1024, f"{size / 1e6:.1f} MB"
    html = out.read_text(encoding="utf-8")
    doc = json.loads(
        re.search(
            r'<script type="application/json" id="[^"]+">\s*(.*?)\s*</script>', html, re.S
        ).group(1)
    )
    assert doc  # the document is inline: no server
    assert "cdn.bokeh.org" not in html and "https://" not in html.split("<body>")[1][:2000]


def test_cli_writes_a_standalone_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.html"
    assert cli(["timeline", str(kineto("sampled_4streams.json.gz")), "-o", str(out)]) == 0
    assert out.stat().st_size > 1_000_000  # bokeh runtime inlined
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"", b"{not json", b"\x1f\x8b\x08garbage", b"[1, 2]"])
def test_cli_bad_trace_is_a_clean_error(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert cli(["timeline", str(bad), "-o", str(tmp_path / "o.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and "Traceback" not in err


@pytest.mark.parametrize(
    "doc",
    [
        {"traceEvents": []},
        {"schemaVersion": 1, "traceEvents": [{"ph": "M", "name": "process_name", "pid": 1}]},
        {"schemaVersion": 1, "deviceProperties": []},  # no traceEvents at all
    ],
)
def test_an_empty_trace_is_the_same_clear_error_in_python_and_the_cli(
    tmp_path: Path, doc: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from perflab.errors import InputError
    from perflab.io import load_trace

    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as info:
        load_trace(path).timeline()
    assert cli(["timeline", str(path), "-o", str(tmp_path / "o.html")]) == 2
    assert capsys.readouterr().err == f"perflab: error: {info.value}\n"
    assert str(info.value).startswith(f"{path}: ")
    assert not (tmp_path / "o.html").exists()


# --- launch links and live refinement ------------------------------------------------------


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60)), min_size=1, max_size=60),
    st.sampled_from([0, 2**40]),
)
@settings(max_examples=100, deadline=None)
def test_link_keys_order_as_the_rank_and_id_pairs(pairs: list[tuple[int, int]], far: int) -> None:
    """The launch links' keys (a grid cell, or the pair's number when ids are sparse) group
    and order events exactly as their (rank, correlation id) pairs do."""
    from perflab.model.trace import distinct, unique_rows
    from perflab.render.timeline_data import _link_keys

    rank = np.array([r for r, _ in pairs], np.int64)
    correlation = np.array([c for _, c in pairs], np.int64) + np.where(rank == 3, far, 0)
    key, count = _link_keys(rank, correlation)
    _, inverse = unique_rows(np.stack([rank, correlation], axis=1))
    assert key.min() >= 0 and key.max() < count
    assert np.searchsorted(distinct(key), key).tolist() == inverse.tolist()


def test_launch_links_match_the_launch_analysis() -> None:
    from perflab.analysis.trace_stats import launch_start
    from perflab.io import load_trace
    from perflab.render.timeline import launch_groups

    trace = load_trace(kineto("alexnet_a100.json.gz"))
    groups = launch_groups(trace)
    launched = launch_start(trace)
    kernels = np.flatnonzero((trace.kind == EventKind.KERNEL) & (groups >= 0))
    is_kernel = trace.kind == EventKind.KERNEL
    assert kernels.size > 50
    assert np.array_equal(kernels, np.flatnonzero(is_kernel & (launched >= 0)))
    runtime = np.flatnonzero(trace.kind == EventKind.RUNTIME)
    launch_of_group = dict(zip(groups[runtime].tolist(), runtime.tolist(), strict=True))
    for row in kernels[:: max(1, kernels.size // 200)].tolist():
        launch = launch_of_group[int(groups[row])]
        assert trace.start_ns[launch] == launched[row]
        assert trace.correlation[launch] == trace.correlation[row]
    assert np.all(groups[trace.kind == EventKind.CPU_OP] == -1)


def test_every_drawable_linked_event_ships_with_its_partners() -> None:
    from perflab.render.timeline import assign_lanes, encode, launch_groups

    trace = synthetic_trace(30_000)
    lanes = assign_lanes(trace)
    start = (trace.start_ns - trace.start_ns.min()).astype(float)
    pyramid = lod.build_pyramid(
        start, start + trace.dur_ns, lanes.of_event, len(lanes.labels), row_budget=2000
    )
    groups = launch_groups(trace)
    enc = encode(pyramid, groups)
    drawn = enc.event_rows[enc.rows]
    assert set(drawn.tolist()) == set(np.concatenate([lv.rows for lv in pyramid.levels]).tolist())
    shipped = set(enc.event_rows.tolist())
    for g in np.unique(groups[drawn]):
        if g >= 0:
            assert set(np.flatnonzero(groups == g).tolist()) <= shipped
    # one launch and one kernel per link in this trace
    counts = np.bincount(groups[groups >= 0])
    assert counts.min() == counts.max() == 2


def test_levels_of_one_bin_count_share_their_busy_cells() -> None:
    from perflab.render.timeline import assign_lanes, busy_cells, encode, launch_groups

    trace = synthetic_trace(30_000)
    lanes = assign_lanes(trace)
    start = (trace.start_ns - trace.start_ns.min()).astype(float)
    pyramid = lod.build_pyramid(
        start,
        start + trace.dur_ns,
        lanes.of_event,
        len(lanes.labels),
        row_budget=20_000,
        max_per_tile=5,
    )
    bins = [level.bins for level in pyramid.levels]
    assert len(bins) > len(set(bins)) >= 2  # finer levels repeat the largest bin count
    enc = encode(pyramid, launch_groups(trace))
    # every level reads back its own busy fractions from where it points
    for i, level in enumerate(pyramid.levels):
        base, size = enc.levels["busy_base"][i], level.busy.size
        assert enc.busy[base : base + size].tolist() == busy_cells(level.busy).ravel().tolist()
    # each bin count stored once
    assert enc.busy.size == sum(pyramid.levels[bins.index(b)].busy.size for b in set(bins))


def test_live_refinement_sends_every_event_of_a_narrow_range() -> None:
    from perflab.render.timeline import timeline

    trace = synthetic_trace(30_000)
    view = timeline(trace, live=True, row_budget=1000)
    assert view.live is not None
    page = view.live.page
    rel = trace.start_ns - trace.start_ns.min()
    v0, v1 = 20.0, 20.4  # ms: far narrower than the finest pre-computed tile holds
    page.x_range.start, page.x_range.end = v0, v1  # as a range change from the page
    level = page.live_level.data
    assert (level["t0"], level["t1"]) == ([v0], [v1])
    touching = np.flatnonzero((rel + trace.dur_ns >= v0 * 1e6) & (rel <= v1 * 1e6))
    n = level["n"][0]
    assert n == touching.size > 20
    sent = page.live.data
    assert np.allclose(np.sort(sent["start"][:n]), np.sort(rel[touching] / 1e6))
    busy = page.live_busy.data["cells"].reshape(-1, 1500)
    stream0 = view.live.lanes.labels.index("GPU 0 stream 7")
    on = np.flatnonzero(view.live.lanes.of_event == stream0)
    expect = lod.coverage(rel[on], rel[on] + trace.dur_ns[on], v0 * 1e6, v1 * 1e6, 1500)
    assert np.abs(busy[stream0] / 255 - expect).max() <= 0.5 / 255 + 1e-9
    # labels for events the page had not seen arrive with them
    assert max(sent["label"]) < len(page.labels.data["kind"])
    assert max(page.labels.data["name"]) < len(page.names.data["text"])


def test_live_labels_extend_the_page_table() -> None:
    from perflab.render.timeline import timeline

    trace = small_trace([f"kernel {i}" for i in range(3000)])
    view = timeline(trace, live=True, row_budget=40)
    assert view.live is not None
    names_before = len(view.live.page.names.data["text"])
    view.live.refine(0.0, 0.41)
    texts = view.live.page.names.data["text"]
    assert len(texts) > names_before
    sent = view.live.page.live.data
    shown = {texts[view.live.page.labels.data["name"][lab]] for lab in sent["label"]}
    assert shown == {f"kernel {i}" for i in range(len(shown))}


def test_embedding_helpers_are_shared(tmp_path: Path) -> None:
    from perflab.render import bokeh_embed, roofline, timeline

    chart = roofline.roofline([("k", 1e9, 1e8, 1e-4)], device="H200")
    html = chart.save(tmp_path / "r.html").read_text(encoding="utf-8")
    assert "cdn.bokeh.org" not in html and "Bokeh" in html
    assert timeline.notebook_bundle is bokeh_embed.notebook_bundle
    assert timeline.standalone_html is bokeh_embed.standalone_html


# --- what the lanes and the strip say; hover boxes; page scripts as package files ----------


def cpu_only_trace() -> Trace:
    trace = small_trace(["matmul", "relu"])
    return trace.select(trace.kind == EventKind.CPU_OP)


def test_cpu_only_trace_strip_is_not_called_gpu() -> None:
    from perflab.render.timeline import timeline

    view = timeline(cpu_only_trace())
    html = view._repr_mimebundle_()["text/html"]
    assert "GPU busy fraction" not in html and "GPU busy fraction" not in view.text
    assert "CPU busy fraction: any thread busy (no GPU work in this trace)" in html
    assert "CPU busy fraction" in view.text
    gpu = timeline(small_trace(["k"]))
    assert "GPU busy fraction: any stream busy" in gpu._repr_mimebundle_()["text/html"]


def test_lanes_are_named_from_the_trace_thread_names() -> None:
    from perflab.render.timeline import assign_lanes, timeline

    trace = small_trace(["k"])
    trace.meta["thread_names"] = {"99:1": "thread 1 (pt_main_thread)"}
    trace.meta["process_names"] = {"99": "python3.12"}
    lanes = assign_lanes(trace)
    # groups (a process, a GPU) of one lane each: no headers, the group in the lane's name
    assert lanes.labels == ["thread 1 (pt_main_thread)", "GPU 0 stream 7"]
    assert lanes.short == ["python3.12 99 · thread 1 (pt_main_thread)", "GPU 0 · stream 7"]
    assert not lanes.header.any()
    trace.meta["thread_names"] = {"99:2": PAYLOAD, "99:1": 7}  # another thread; not text
    lanes = assign_lanes(trace)
    assert lanes.labels[0] == "python3.12 99 · thread 1 (no name in the trace)"
    assert lanes.short[0] == "python3.12 99 · thread 1"
    # a group of several lanes sits under a header lane, which holds no events
    two = synthetic_trace(3000)
    lanes = assign_lanes(two)
    assert lanes.header.any() and lanes.counts()[lanes.header].sum() == 0
    first = int(np.flatnonzero(lanes.header & lanes.gpu)[0])
    assert lanes.labels[first] == "GPU 0" and lanes.short[first + 1].startswith("stream")
    trace.meta["thread_names"] = {"99:1": PAYLOAD}
    html = timeline(trace)._repr_mimebundle_()["text/html"]
    assert PAYLOAD not in html and "&lt;img src=x onerror" in html


def test_each_lane_knows_the_header_of_its_group() -> None:
    """What the page collapses together: a header and the lanes under it; a lane alone in
    its group (no header) after another group's lanes belongs to none."""
    from perflab.render.timeline_data import Lanes, assign_lanes

    header = np.array([True, False, False, False, True, False, False])
    lanes = Lanes(
        np.zeros(0, np.int64),
        ["P", "t1", "t2", "GPU 0 stream 7", "GPU 1", "s1", "s2"],
        np.array([False, False, False, True, True, True, True]),
        np.zeros(7, bool),
        group=["P", "P", "P", "GPU 0", "GPU 1", "GPU 1", "GPU 1"],
        header=header,
    )
    assert lanes.group_heads() == [0, 0, 0, -1, 4, 4, 4]
    plain = Lanes(np.zeros(0, np.int64), ["a", "b"], np.zeros(2, bool), np.zeros(2, bool))
    assert plain.group_heads() == [-1, -1]
    trace = synthetic_trace(3000)
    lanes = assign_lanes(trace)
    heads = lanes.group_heads()
    assert [heads[k] == k for k in range(len(heads))] == lanes.header.tolist()


def test_a_lane_of_short_events_says_what_it_holds() -> None:
    """In the stored NCCL trace one CPU thread holds 42 runtime calls of a few microseconds
    each: the whole-trace view draws none of them, so the lane name says so."""
    from perflab.io import load_trace
    from perflab.render.timeline import assign_lanes, lane_details, lane_ticks, timeline
    from perflab.render.timeline_data import lane_notes

    trace = load_trace(kineto("nccl_2ranks_a100.json.gz"))
    lanes = assign_lanes(trace)
    start = (trace.start_ns - trace.start_ns.min()).astype(float)
    pyramid = lod.build_pyramid(
        start, start + trace.dur_ns, lanes.of_event, len(lanes.labels), row_budget=150_000
    )
    ticks = lane_ticks(lanes, pyramid)
    # the trace names the process (python3.10) but not this thread
    label = "python3.10 2910249 · thread -549452224 (no name in the trace)"
    quiet = lanes.labels.index(label)
    assert ticks[quiet] == "thread -549452224 · 42 events (shaded)"  # not "42 short"
    assert ticks[lanes.labels.index("GPU 0 stream 7")] == "stream 7"
    assert ticks[lanes.labels.index("GPU 0")] == "GPU 0:"  # the group's header
    tip = lane_details(lanes, pyramid)[quiet]
    assert tip.startswith(label) and "42 events" in tip and "zoom in" in tip
    assert "draws none of them" in tip and "shaded busy time" in tip
    assert "CPU thread of python3.10 2910249" in tip
    assert f"{label}  (42 events)" in timeline(trace).text
    # a long name is cut with an ellipsis and keeps its note whole
    cut = lane_ticks(lanes, pyramid, chars=20)[quiet]
    assert cut.endswith("… · 42 events (shaded)") and len(cut) <= 8 + len(" · 42 events (shaded)")
    # the page gets the names and the notes apart, and keeps the note whole as it fits names
    assert lane_ticks(lanes, pyramid, notes=False)[quiet] == "thread -549452224"
    assert lane_notes(lanes, pyramid)[quiet] == "42 events (shaded)"
    assert lane_notes(lanes, pyramid)[lanes.labels.index("GPU 0 stream 7")] == ""


def test_busy_cells_keep_any_work_visible() -> None:
    from perflab.render.timeline import busy_cells

    cells = busy_cells(np.array([0.0, 1e-6, 0.5, 1.0]))
    assert cells.tolist() == [0, 1, 128, 255]


def test_hover_box_wraps_and_escapes() -> None:
    from perflab.render.timeline import tooltip_template

    html = tooltip_template([("name", "name"), ("<b>", "lane")])
    assert "@{name}" in html and "@{lane}" in html and "&lt;b&gt;" in html
    assert "overflow-wrap: anywhere" in html and "max-width" in html


def test_page_scripts_come_from_package_files() -> None:
    from importlib import resources

    from perflab.render import timeline as module
    from perflab.render.html import static_text

    static = resources.files("perflab.render") / "static"
    shipped = {p.name for p in static.iterdir()}
    assert {"timeline-helpers.js", "timeline-refresh.js", "timeline-tap.js"} <= shipped
    assert {"timeline.css", "perflab.css"} <= shipped
    view = module.timeline(small_trace(["k"]))
    codes = {m.code for m in view.layout.document.models if type(m).__name__ == "CustomJS"}
    helpers = static_text("timeline-helpers.js")
    assert codes == {
        helpers + "\n" + static_text("timeline-refresh.js"),
        helpers + "\n" + static_text("timeline-tap.js"),
        helpers + "\n" + static_text("timeline-ui.js"),
    }
    source = Path(module.__file__).read_text(encoding="utf-8")
    assert "function " not in source and ".setv(" not in source  # no JavaScript in Python


def test_a_static_picture_of_the_timeline_shows_no_key_hints() -> None:
    """The SVG (and PNG) fallback answers no keys: its time axis is titled plainly, and only
    the interactive page (timeline-ui.js) adds the keys' hint under it."""
    from perflab.render.bokeh_embed import static_svg
    from perflab.render.html import static_text
    from perflab.render.timeline import timeline

    view = timeline(small_trace(["k", "m"]))
    svg = static_svg(view.layout, view.text)
    assert "ms since trace start" in svg
    for hint in ("W/S", "A/D", "Shift+drag", "?: keys"):
        assert hint not in svg
        assert hint not in view._repr_mimebundle_()["image/svg+xml"]
    assert "W/S zoom, A/D pan" in static_text("timeline-ui.js")  # the page's own


def test_the_page_names_the_row_budget_of_where_it_was_made(tmp_path: Path) -> None:
    """A page that holds only some events says what holds more: the CLI's --rows in a page
    `perflab timeline` wrote, row_budget in one Python made; another value is refused."""
    from perflab.errors import InputError
    from perflab.render.timeline import timeline

    def meta(layout: Any) -> dict[str, Any]:
        for m in layout.document.models:
            if type(m).__name__ == "CustomJS" and "meta" in m.args:
                found: dict[str, Any] = m.args["meta"]
                return found
        raise AssertionError("no page meta")

    trace = synthetic_trace(20_000)
    page = meta(timeline(trace, row_budget=1000).layout)
    assert not page["complete"] and page["total_events"] == len(trace) > 1000
    assert "row_budget" in page["budget_hint"] and "--rows" not in page["budget_hint"]
    page = meta(timeline(trace, row_budget=1000, made_by="cli").layout)
    assert page["budget_hint"] == "a larger --rows holds more"
    with pytest.raises(InputError, match="made_by is 'python' or 'cli', not 'lab'"):
        timeline(trace, made_by="lab")  # type: ignore[arg-type]
    out = tmp_path / "t.html"
    nccl = str(kineto("nccl_2ranks_a100.json.gz"))
    assert cli(["timeline", nccl, "-o", str(out), "--rows", "1000"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "a larger --rows holds more" in html and "row_budget (timeline" not in html


def test_the_gpu_busy_strip_counts_kernels_not_the_ranges_annotated_on_the_gpu() -> None:
    """A GPU-side annotation (gpu_user_annotation) spans 0-100 us over one 10 us kernel: the
    strip says the GPU was busy 10% of the time, not all of it."""
    from perflab.render.timeline import assign_lanes, strip_lanes

    kinds = [EventKind.KERNEL, EventKind.ANNOTATION, EventKind.CPU_OP]
    events = Table(
        EVENT_COLUMNS,
        {
            "start_ns": np.array([0, 0, 0]),
            "dur_ns": np.array([10_000, 100_000, 100_000]),
            "kind": np.array(kinds, dtype=np.int8),
            "track": np.array([1, 1, 0]),
            "name": np.array([0, 1, 2]),
        },
    )
    tracks = Table(
        TRACK_COLUMNS,
        {"rank": [0, 0], "device": [99, 0], "stream": [1, 7], "kind": [1, 0], "label": [3, 4]},
    )
    names = ["gemm", "forward (annotation)", "aten::mm", "thread 1", "GPU 0 stream 7"]
    trace = Trace(events, tracks, names, meta={"source": "annotated"})
    lanes = assign_lanes(trace)
    strip = strip_lanes(lanes)
    assert [lanes.labels[k] for k in strip] == ["GPU 0 stream 7"]
    start = trace.start_ns.astype(float)
    pyramid = lod.build_pyramid(
        start, start + trace.dur_ns, lanes.of_event, len(lanes.labels), summary_lanes=strip
    )
    summary = pyramid.levels[0].busy[-1]  # the strip's row follows the lanes' rows
    assert summary.mean() == pytest.approx(0.1, abs=0.01)
