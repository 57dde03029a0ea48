"""Notebook 23's exercises judge the counted tiles and slots: waves round up once, the last
wave holds what the full ones left, split-K slices round down, and each known mistake (a
half-used edge tile dropped, one block per SM assumed, the partial sums counted once) hears
its own hint."""

from __future__ import annotations

from exercise_checks import predicted

MIB = 2**20


def test_waves_round_the_tiles_up_and_a_dropped_edge_tile_hears_why() -> None:
    assert predicted("wave-count", 5, tiles=561, slots=132)
    assert predicted("wave-count", "4 waves", tiles=528, slots=132)  # exactly four full
    dropped = predicted("wave-count", 4, tiles=561, slots=132)
    assert dropped.state == "wrong" and "half used" in dropped.reason
    assert not predicted("wave-count", 6, tiles=561, slots=132)


def test_the_last_wave_holds_what_the_full_waves_left() -> None:
    assert predicted("last-wave-share", 0.125, tiles=1089, slots=264)
    assert predicted("last-wave-share", "12.5%", tiles=1089, slots=264)
    one_per_sm = predicted("last-wave-share", 0.25, tiles=1089, slots=264)
    assert one_per_sm.state == "wrong" and "more than one block" in one_per_sm.reason
    whole_run = predicted("last-wave-share", 0.825, tiles=1089, slots=264)
    assert whole_run.state == "wrong" and "last wave only" in whole_run.reason
    assert predicted("last-wave-share", 0.88, tiles=1024, slots=264)  # 232 of 264


def test_the_next_wave_starts_one_past_the_last_row_that_fits() -> None:
    assert predicted("next-wave-m", 4225, m_fifth_wave=4225)
    assert predicted("next-wave-m", 4224, m_fifth_wave=4225)  # the boundary, within one
    early = predicted("next-wave-m", 4097, m_fifth_wave=4225)
    assert early.state == "wrong" and "still have room" in early.reason


def test_split_k_slices_round_down_to_one_wave() -> None:
    assert predicted("split-k-slices", 16, tiles=16, slots=264)
    one_per_sm = predicted("split-k-slices", 8, tiles=16, slots=264)
    assert one_per_sm.state == "wrong" and "more than one block" in one_per_sm.reason
    rounded_up = predicted("split-k-slices", 17, tiles=16, slots=264)
    assert rounded_up.state == "wrong" and "round down" in rounded_up.reason
    assert predicted("split-k-slices", 8, tiles=16, slots=132)  # one block per SM


def test_split_k_bytes_count_the_partial_sums_written_and_read() -> None:
    partial_bytes = 16 * 256 * 1024 * 4
    assert predicted("split-k-bytes", "32 MiB", partial_bytes=partial_bytes)
    assert predicted("split-k-bytes", "33554432 B", partial_bytes=partial_bytes)
    once = predicted("split-k-bytes", "16 MiB", partial_bytes=partial_bytes)
    assert once.state == "wrong" and "count both" in once.reason
    assert not predicted("split-k-bytes", "64 MiB", partial_bytes=partial_bytes)
