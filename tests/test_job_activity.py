"""A job's overview: busy and NCCL fractions per group of ranks in time bins, checked against
hand-worked intervals and against the job summary's busy time; and its page."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_script
from bokeh.models.renderers import GlyphRenderer

from perflab.analysis.job import summarize_job
from perflab.analysis.job_activity import (
    Grid,
    RankActivity,
    busy_fractions,
    group_activity,
    job_activity,
    rank_groups,
)
from perflab.errors import InputError
from perflab.io.job import load_job
from perflab.render.job_overview import COARSEST_BINS, LEVEL_STEP, job_overview, levels


def _activity(work: list[tuple[int, int]], comm: list[tuple[int, int]]) -> RankActivity:
    def cols(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        a = np.array(pairs, np.int64).reshape(-1, 2)
        return a[:, 0].copy(), a[:, 1].copy()

    return RankActivity(*cols(work), *cols(comm))


def test_fractions_are_the_covered_share_of_each_bin() -> None:
    grid = Grid(0, 40, 4)
    starts, ends = np.array([0, 25], np.int64), np.array([10, 30], np.int64)
    np.testing.assert_allclose(busy_fractions(starts, ends, 0, grid), [1.0, 0.0, 0.5, 0.0])
    # the same rank 10 ns late on the job's clock: everything moves one bin right
    np.testing.assert_allclose(busy_fractions(starts, ends, 10, grid), [0.0, 1.0, 0.0, 0.5])
    assert busy_fractions(starts[:0], ends[:0], 0, grid).tolist() == [0.0] * 4


def test_a_group_is_the_mean_of_its_ranks() -> None:
    grid = Grid(0, 20, 2)
    idle_then_busy = _activity([(10, 20)], [(10, 15)])
    busy_then_idle = _activity([(0, 10)], [])
    rows = group_activity([idle_then_busy, busy_then_idle], [0, 0], grid)
    np.testing.assert_allclose(rows, [[0.5, 0.5], [0.0, 0.25]])
    assert idle_then_busy.span == (10, 20) and _activity([], []).span is None


def test_ranks_are_cut_into_at_most_the_groups_asked() -> None:
    assert rank_groups(list(range(10)), 4) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert rank_groups([0, 1], 64) == [[0], [1]]
    with pytest.raises(ValueError):
        rank_groups([0], 0)
    with pytest.raises(ValueError):
        Grid(0, 0, 4)


def test_a_rank_alone_in_its_group_is_busy_as_long_as_its_summary_says(tmp_path: Path) -> None:
    load_script("job").generate_job(tmp_path, 4, 20, straggler=2, seed=3)
    job = load_job(tmp_path, workers=0)
    activity = job_activity(job, groups=4, bins=512)
    assert activity.groups == [[0], [1], [2], [3]]
    width_us = (activity.grid.t1_ns - activity.grid.t0_ns) / activity.grid.bins / 1000
    summary = summarize_job(job).to_dict()
    for g, (rank,) in enumerate(activity.groups):
        busy_us = activity.fractions[g, 0].sum() * width_us
        assert busy_us == pytest.approx(summary["ranks"][str(rank)]["busy_us"], rel=1e-9)
        comm_us = activity.fractions[g, 1].sum() * width_us
        assert comm_us == pytest.approx(summary["ranks"][str(rank)]["comm"]["total_us"], rel=1e-9)
    # the straggler computes longer, so it spends the least of the span in NCCL
    assert int(np.argmin(activity.means()[:, 1])) == 2


def test_the_levels_are_exact_means_of_the_finest() -> None:
    fractions = np.random.default_rng(1).random((3, 1000))
    steps = levels(fractions)
    assert [s.bins for s in steps] == [1000, 250]  # 62 would be under COARSEST_BINS
    second = steps[1]
    np.testing.assert_allclose(
        second.values, fractions.reshape(3, 250, LEVEL_STEP).mean(axis=2), rtol=1e-6
    )
    assert second.covers == 1000 and steps[-1].bins // LEVEL_STEP < COARSEST_BINS
    odd = levels(np.ones((1, 1030)))  # 1030 = 4 x 257 + 2: the coarser level covers 1028
    assert (odd[1].bins, odd[1].covers) == (257, 1028)


def test_the_overview_page_draws_every_level_and_a_static_picture(tmp_path: Path) -> None:
    load_script("job").generate_job(tmp_path, 6, 10, straggler=1, seed=2)
    activity = job_activity(load_job(tmp_path, workers=0), groups=3, bins=1024)
    page = job_overview(activity)
    images = [
        r for r in page.layout.select({"type": GlyphRenderer}) if type(r.glyph).__name__ == "Image"
    ]
    assert len(images) == 2 * len(levels(activity.fractions[:, 0, :]))
    assert sum(r.visible for r in images) == 2  # one level per panel at a time
    bundle = page._repr_mimebundle_()
    assert "ranks 0-1" in bundle["text/plain"] and "GPU busy" in bundle["text/plain"]
    # the coarse level as shapes, in the palettes' darkest shades (busy, NCCL)
    assert 'fill="#08306b"' in bundle["image/svg+xml"]
    assert 'fill="#7f2704"' in bundle["image/svg+xml"]
    saved = page.save(tmp_path / "overview.html", title="job")
    assert "inner_width" in saved.read_text()  # the level picker is in the page


def test_a_job_with_no_gpu_work_is_a_clear_error(tmp_path: Path) -> None:
    from perflab.analysis.job_activity import activity_of

    with pytest.raises(InputError, match="no rank has GPU work"):
        activity_of({0: _activity([], [])}, {0: 0}, 4, 16, [])
