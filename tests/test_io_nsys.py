"""Nsight Systems SQLite importer: totals checked with SQL over the file itself."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from data_paths import TRACES

from perflab.errors import InputError, PerflabError
from perflab.io import load_trace
from perflab.model.trace import EventKind

NSYS = TRACES / "nsys" / "power_iteration.sqlite"


def _sql(query: str) -> list[tuple[int, ...]]:
    with sqlite3.connect(f"file:{NSYS}?mode=ro", uri=True) as db:
        return db.execute(query).fetchall()


def test_counts_and_totals_match_sql() -> None:
    trace = load_trace(NSYS)
    s = trace.summary().to_dict()
    ((count, total),) = _sql("SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert s["kernels"] == {"count": count, "total_us": pytest.approx(total / 1e3, rel=1e-4)}
    ((mcount, mtotal, mbytes),) = _sql(
        "SELECT count(*), sum(end - start), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    )
    assert s["memcpy"]["count"] == mcount
    assert s["memcpy"]["bytes"] == mbytes
    assert s["memcpy"]["total_us"] == pytest.approx(mtotal / 1e3, rel=1e-4)
    ((nruntime,),) = _sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    assert int((trace.kind == EventKind.RUNTIME).sum()) == nruntime
    ((nvtx,),) = _sql("SELECT count(*) FROM NVTX_EVENTS WHERE end IS NOT NULL")
    assert int((trace.kind == EventKind.ANNOTATION).sum()) == nvtx
    ((nsync,),) = _sql("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
    assert int((trace.kind == EventKind.SYNC).sum()) == nsync


def test_busy_time_matches_sql_union() -> None:
    """Busy = union of kernel and memcpy intervals, computed here by a plain sweep."""
    rows = sorted(
        _sql(
            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        )
    )
    busy, cur_s, cur_e = 0, rows[0][0], rows[0][1]
    for s, e in rows[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    span = max(e for _, e in rows) - min(s for s, _ in rows)
    dev = load_trace(NSYS).summary().to_dict()["devices"]["0"]
    assert dev["busy_us"] == pytest.approx(busy / 1e3, rel=1e-4)
    assert dev["span_us"] == pytest.approx(span / 1e3, rel=1e-4)


def test_names_gpu_info_and_kernel_attributes() -> None:
    trace = load_trace(NSYS)
    ((name,),) = _sql(
        "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
        "ON s.id = k.demangledName ORDER BY k.start LIMIT 1"
    )
    first_kernel = int(trace.kernels["event"][0])
    assert trace.strings[trace.name[first_kernel]] == name
    assert trace.meta["devices"][0]["name"] == _sql("SELECT name FROM TARGET_INFO_GPU")[0][0]
    ((regs,),) = _sql(
        "SELECT registersPerThread FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1"
    )
    assert int(trace.kernels["registers"][0]) == regs


def test_sqlite_that_is_not_an_nsys_export(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(InputError, match="not an Nsight Systems export") as info:
        load_trace(path)
    assert str(path) in str(info.value)


def test_corrupted_exports_only_raise_perflab_errors(tmp_path: Path) -> None:
    data = NSYS.read_bytes()
    rng = random.Random(7)
    errors = unnamed = 0
    for i in range(30):
        path = tmp_path / f"c{i}.sqlite"
        shutil.copyfile(NSYS, path)
        mutated = bytearray(data)
        if i % 3 == 0:
            mutated = mutated[: rng.randrange(100, len(mutated))]
        else:
            for _ in range(200):
                mutated[rng.randrange(100, len(mutated))] = rng.randrange(256)
        path.write_bytes(bytes(mutated))
        try:
            load_trace(path).summary()
        except PerflabError as exc:
            unnamed += str(path) not in str(exc)
            errors += 1
    assert unnamed == 0  # every error names the file
    assert errors > 0
