"""Nsight Systems exports built to hang or exhaust the importer: values computed on reading
(generated columns, views, virtual tables), huge values, triggers. Each ends in a perflab
error naming the file, the table and the column to blame, at once, or in the trace the
stored rows give when the hostile part is something perflab does not read."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import pytest
from data_paths import ROOT
from nsys_hostile import EXPENSIVE, NSYS, generated, hostile_copy, view_instead

from perflab.errors import InputError
from perflab.io import load_trace
from perflab.io.nsys import ReadLimits, _Reader, load_nsys

HANG = 120  # s: only a hang takes this long; the refusals below take a fraction of a second


def _refused(path: Path, *words: str) -> InputError:
    with pytest.raises(InputError) as info:
        load_trace(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message, message
    return info.value


def test_an_expensive_generated_column_is_refused_by_name_not_computed(tmp_path: Path) -> None:
    # 400 kernels whose end is computed at ~0.3 s and 300 MB a row: `perflab trace summary`
    # was busy past 100 s. Run as a user would, in its own process, bounded only for a hang.
    end = f"start + 1000 + {EXPENSIVE} - 200000000"
    path = hostile_copy(tmp_path, *generated("CUPTI_ACTIVITY_KIND_KERNEL", "end", end, rows=400))
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "trace", "summary", str(path)],
        capture_output=True,
        text=True,
        timeout=HANG,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    error = done.stderr.strip()
    assert error.startswith(
        f"perflab: error: {path} (table CUPTI_ACTIVITY_KIND_KERNEL, column end)"
    )
    assert "generated column" in error and "Traceback" not in error


def test_huge_generated_names_are_refused_before_any_is_made(tmp_path: Path) -> None:
    # 8 names of 900 MB in all, computed on reading: was a raw MemoryError at 5.3 GB
    value = "hex(zeroblob(56000000 + id - id))"
    path = hostile_copy(tmp_path, *generated("StringIds", "value", value, rows=8))
    _refused(path, "(table StringIds, column value)", "generated column")


def test_a_stored_generated_column_is_refused_too(tmp_path: Path) -> None:
    # its values are stored, but no Nsight Systems export has one: it is someone's edit
    path = hostile_copy(
        tmp_path, *generated("CUPTI_ACTIVITY_KIND_KERNEL", "gridX", "blockX", stored=True)
    )
    _refused(path, "(table CUPTI_ACTIVITY_KIND_KERNEL, column gridX)", "generated column")


def test_generated_columns_perflab_does_not_read_are_left_alone(tmp_path: Path) -> None:
    # TARGET_INFO_GPU was read with SELECT *, which computed every column of the file's
    path = hostile_copy(
        tmp_path,
        "ALTER TABLE TARGET_INFO_GPU ADD COLUMN huge TEXT "
        "GENERATED ALWAYS AS (hex(zeroblob(50000000 + id - id))) VIRTUAL",
        "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN slow "
        f"GENERATED ALWAYS AS ({EXPENSIVE}) VIRTUAL",
    )
    trace, plain = load_trace(path), load_trace(NSYS)
    assert len(trace) == len(plain) and trace.strings == plain.strings
    assert trace.meta["devices"] == plain.meta["devices"]
    assert plain.meta["devices"] and "huge" not in trace.meta["devices"][0]


@pytest.mark.parametrize("spelt", ["CUPTI_ACTIVITY_KIND_KERNEL", "cupti_activity_kind_kernel"])
def test_a_view_in_place_of_a_table_is_refused(tmp_path: Path, spelt: str) -> None:
    # before, a view was not a table: the kernels went missing without a word
    path = hostile_copy(tmp_path, *view_instead("CUPTI_ACTIVITY_KIND_KERNEL", spelt))
    _refused(path, "(table CUPTI_ACTIVITY_KIND_KERNEL)", "a view, not a table")


def test_a_virtual_table_in_place_of_a_table_is_refused(tmp_path: Path) -> None:
    path = hostile_copy(
        tmp_path,
        "ALTER TABLE StringIds RENAME TO stored_strings",
        "CREATE VIRTUAL TABLE StringIds USING fts5(id, value)",
        "INSERT INTO StringIds SELECT id, value FROM stored_strings",
    )
    _refused(path, "(table StringIds)", "a virtual table, not a table")


def test_a_missing_column_is_named(tmp_path: Path) -> None:
    path = hostile_copy(tmp_path, "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN gridY")
    _refused(path, "(table CUPTI_ACTIVITY_KIND_KERNEL, column gridY)", "no such column")


def test_reading_writes_nothing_so_no_trigger_fires(tmp_path: Path) -> None:
    path = hostile_copy(
        tmp_path,
        "CREATE TABLE fired (at INTEGER)",
        "CREATE TRIGGER wipe AFTER INSERT ON StringIds BEGIN "
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL; INSERT INTO fired VALUES (1); END",
        "CREATE TRIGGER wipe_too AFTER UPDATE ON TARGET_INFO_GPU BEGIN "
        "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL; END",
    )
    before = path.read_bytes()
    assert len(load_trace(path)) == len(load_trace(NSYS))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.sqlite"]  # no journal


def test_a_value_longer_than_the_bound_is_refused(tmp_path: Path) -> None:
    if not hasattr(sqlite3.Connection, "setlimit"):
        pytest.skip("Python < 3.11 cannot bound SQLite's values")
    path = hostile_copy(
        tmp_path, "UPDATE StringIds SET value = hex(zeroblob(1100000)) WHERE id = 1"
    )
    _refused(path, "(table StringIds)", "a value longer than 1 MiB")


def test_text_read_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_nsys(NSYS, limits=ReadLimits(seconds=60, text_bytes=1000))
    assert str(info.value).startswith(f"{NSYS} (table StringIds, column value): more than")


def test_the_time_bound_stops_a_query_and_names_the_table() -> None:
    with pytest.raises(InputError) as info:
        load_nsys(NSYS, limits=ReadLimits(seconds=0, text_bytes=1 << 30))
    message = str(info.value)
    assert message.startswith(f"{NSYS} (table ") and "took longer than 0 s: stopped" in message


def test_the_time_bound_stops_a_query_that_never_ends() -> None:
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    with closing(sqlite3.connect(":memory:")) as db:
        reader = _Reader(db, "x.sqlite", ReadLimits(seconds=0.2, text_bytes=0))
        rescued: list[bool] = []

        def rescue_from_a_hang() -> None:  # only runs if the bound failed
            rescued.append(True)
            db.interrupt()

        rescue = threading.Timer(HANG, rescue_from_a_hang)
        rescue.start()
        try:
            with pytest.raises(InputError, match=r"^x.sqlite \(table n\): reading it took longer"):
                reader.rows("n", endless)
        finally:
            rescue.cancel()
        assert not rescued
