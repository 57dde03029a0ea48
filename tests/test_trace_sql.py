"""``Trace.sql``, ``Job.sql`` and ``perflab trace sql``: DuckDB over a trace's columns."""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_script
from data_paths import ROOT, TRACES
from test_trace_model import small_trace

from perflab.analysis import trace_sql
from perflab.analysis.trace_sql import run_sql
from perflab.cli import main
from perflab.errors import InputError, MissingExtraError
from perflab.io import load_trace
from perflab.io.job import load_job
from perflab.model.job import Job, RankTrace
from perflab.model.trace import EventKind, Trace
from perflab.render.views import to_bundle, to_text

pytest.importorskip("duckdb")

SAMPLED = TRACES / "kineto" / "sampled_4streams.json.gz"
NSYS = TRACES / "nsys" / "power_iteration.sqlite"
EVENT_COLUMNS = [
    "row",
    "rank",
    "kind",
    "name",
    "category",
    "device",
    "stream",
    "process",
    "thread",
    "track",
    "track_label",
    "start_ns",
    "end_ns",
    "dur_ns",
    "correlation",
    "external_id",
]
EXTRA_COLUMNS = {
    "events": [],
    "kernels": [
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers",
        "shared_mem",
        "occupancy",
    ],
    "memcpy": ["bytes", "direction"],
    "ops": ["sequence", "flops", "input_dims", "input_types"],
    "runtime": [],
    "ranges": [],
}
# the SQL guide's recipes: launch-to-start delays per stream, kernel time by category
SQL_GUIDE = ROOT / "docs" / "guides" / "diff-and-sql.md"
RECIPES = re.findall(r"```sql\n(.*?)```", SQL_GUIDE.read_text(), re.DOTALL)


@pytest.fixture(scope="module")
def trace() -> Trace:
    return load_trace(SAMPLED)


@pytest.mark.parametrize("table", list(EXTRA_COLUMNS))
def test_tables_have_the_documented_columns(trace: Trace, table: str) -> None:
    described = trace.sql(f"DESCRIBE {table}")
    assert described.columns["column_name"].tolist() == EVENT_COLUMNS + EXTRA_COLUMNS[table]


def test_counts_and_times_are_the_traces(trace: Trace) -> None:
    per_kind = trace.sql("SELECT kind, count(*) AS n, sum(dur_ns) AS ns FROM events GROUP BY kind")
    found = dict(zip(per_kind.columns["kind"], per_kind.columns["n"].tolist(), strict=True))
    counts = np.bincount(trace.kind, minlength=len(EventKind))
    assert found == {k.name.lower(): int(counts[k]) for k in EventKind if counts[k]}
    summary = trace.summary().to_dict()
    kernels = trace.sql("SELECT count(*) AS n, sum(dur_ns) AS ns FROM kernels").rows()[0]
    assert kernels[0] == summary["kernels"]["count"]
    assert kernels[1] / 1e3 == pytest.approx(summary["kernels"]["total_us"])
    memcpy = trace.sql("SELECT sum(bytes) FROM memcpy WHERE kind = 'memcpy'").rows()[0][0]
    assert memcpy == summary["memcpy"]["bytes"]
    # rows are the trace's own rows: names and times agree with the columns
    one = trace.sql("SELECT row, name, start_ns, dur_ns FROM events ORDER BY row LIMIT 5")
    rows = one.columns["row"]
    assert one.columns["name"].tolist() == trace.names_of(rows)
    assert one.columns["start_ns"].tolist() == trace.start_ns[rows].tolist()


def test_readme_recipes(trace: Trace) -> None:
    assert len(RECIPES) == 2
    delays = trace.sql(RECIPES[0])
    assert len(delays) and set(delays.columns) == {"stream", "name", "delay_ns"}
    assert (delays.columns["delay_ns"] >= 0).all()
    by_stream: dict[int, int] = {}
    for stream in delays.columns["stream"].tolist():
        by_stream[stream] = by_stream.get(stream, 0) + 1
    assert max(by_stream.values()) <= 3
    categories = trace.sql(RECIPES[1]).to_dict()
    summary = trace.summary().to_dict()["categories"]
    assert {r[0]: r[1] for r in categories["rows"]} == {k: v["count"] for k, v in summary.items()}


def test_nsys_trace_has_no_ops_but_kernels() -> None:
    nsys = load_trace(NSYS)
    result = nsys.sql("SELECT count(*) FROM kernels WHERE grid_x IS NOT NULL")
    assert result.rows()[0][0] == 3689


def test_nulls_and_views(trace: Trace) -> None:
    result = trace.sql("SELECT name, stream, thread FROM events WHERE kind = 'cpu_op' LIMIT 3")
    assert result.rows()[0][1] is None and isinstance(result.rows()[0][2], int)
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["columns"] == ["name", "stream", "thread"] and len(doc["rows"]) == 3
    assert result.to_pandas().shape == (3, 3)
    same = trace.sql("SELECT 1 AS x, 2 AS x, CAST('nan' AS DOUBLE) AS f")
    assert list(same.columns) == ["x", "x_1", "f"] and same.rows() == [[1, 2, None]]


def test_views_escape_names() -> None:
    names = ["<script>alert(1)</script>", "\x1b]0;title\x07"]
    result = run_sql(_tiny_trace(names), "SELECT name FROM events ORDER BY row")
    bundle = to_bundle(result)
    assert "<script>" not in bundle["text/html"] and "&lt;script&gt;" in bundle["text/html"]
    text = to_text(result)
    assert "\x1b" not in text and "\\x1b" in text and "(2 rows)" in text


def test_long_text_is_cut_in_the_terminal_and_kept_whole_elsewhere() -> None:
    names = ["void kernel<" + "float, " * 40 + "int>(float*)", "short"]
    result = run_sql(_tiny_trace(names), "SELECT name, dur_ns FROM events ORDER BY row")
    lines = to_text(result).splitlines()
    assert lines[2].startswith(names[0][:99] + "…  ") and lines[2].endswith(" 5")
    assert len(lines[0]) == len(lines[2]) == 100 + 2 + len("dur_ns")  # the column is 100 wide
    assert lines[3].startswith("short ") and lines[3].endswith("5")
    assert lines[-1] == "(text cut to 100 characters: to_pandas() or --json has it whole)"
    assert result.to_dict()["rows"][0][0] == names[0]
    assert html.escape(names[0]) in to_bundle(result)["text/html"]
    short = run_sql(_tiny_trace(["short"]), "SELECT name FROM events")
    assert "cut" not in to_text(short)


def _tiny_trace(names: list[str]) -> Trace:
    """Kernels named ``names`` on test_trace_model's GPU track (its label: string 0)."""
    from perflab.model.trace import EVENT_COLUMNS as SCHEMA
    from perflab.model.trace import Table

    n = len(names)
    columns = {"start_ns": np.arange(n) * 10, "dur_ns": np.full(n, 5), "name": np.arange(n) + 2}
    events = Table(SCHEMA, {**columns, "kind": np.full(n, EventKind.KERNEL), "track": np.zeros(n)})
    return Trace(events, small_trace().tracks, ["GPU 0 stream 7", "process 1 thread 1", *names])


def test_job_is_one_table_with_ranks(tmp_path: Path) -> None:
    load_script("job").generate_job(tmp_path, 2, 3, seed=3)
    job = load_job(tmp_path)
    result = job.sql("SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank")
    assert result.columns["rank"].tolist() == [0, 1]
    expected = [int((r.trace.kind == EventKind.KERNEL).sum()) for r in job]
    assert result.columns["n"].tolist() == expected


def test_cli_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    query = "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY n DESC"
    assert main(["trace", "sql", str(SAMPLED), query]) == 0
    assert "cpu_op" in capsys.readouterr().out
    assert main(["trace", "sql", str(SAMPLED), query, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["columns"] == ["kind", "n"] and doc["rows"][0] == ["cpu_op", 2329]
    assert main(["trace", "sql", str(SAMPLED), query, "--csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["kind", "n"] and rows[1] == ["cpu_op", "2329"]
    load_script("job").generate_job(tmp_path, 2, 3, seed=3)
    assert main(["trace", "sql", str(tmp_path), "SELECT DISTINCT rank FROM events", "--csv"]) == 0
    assert sorted(capsys.readouterr().out.split()) == ["0", "1", "rank"]


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELEC 1", "Parser Error"),
        ("SELECT nope FROM kernels", "nope"),
        ("SELECT * FROM no_table", "no_table"),
        ("   ", "the SQL query is empty"),
        ("SELECT * FROM read_csv('/etc/passwd')", "Permission"),
        ("COPY (SELECT 1) TO '/tmp/perflab-sql-test.csv'", "Permission"),
        ("SET enable_external_access = true", "locked"),
    ],
)
def test_sql_errors_are_perflab_errors(trace: Trace, query: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        trace.sql(query)
    assert not Path("/tmp/perflab-sql-test.csv").exists()


def test_cli_sql_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "sql", str(SAMPLED), "SELECT * FROM kernel"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error: SQL error:") and "kernel" in err
    assert "Traceback" not in err


def test_missing_duckdb_names_the_extra(
    trace: Trace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # import duckdb now fails
    with pytest.raises(MissingExtraError, match=r"pip install 'perflab\[sql\]'"):
        trace.sql("SELECT 1")
    assert main(["trace", "sql", str(SAMPLED), "SELECT 1"]) != 0
    err = capsys.readouterr().err
    assert "perflab[sql]" in err and "Traceback" not in err


# -- bounds: time, memory, Ctrl-C -----------------------------------------------------------------

UNITS = {"MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
ENDLESS = "SELECT count(*) FROM events a, events b, events c, events d"  # 5e14 rows of 5000 events


def _endless_trace() -> Trace:
    return _tiny_trace([f"k{i}" for i in range(5000)])


def test_a_query_past_its_time_limit_is_stopped_with_a_perflab_error() -> None:
    trace = _endless_trace()
    with pytest.raises(InputError, match=r"the query ran longer than 0\.5 s \(--timeout"):
        trace.sql(ENDLESS, timeout=0.5)
    job = Job({0: RankTrace(0, trace, "rank-0", 0, "timestamps")}, "one clock")
    with pytest.raises(InputError, match=r"the query ran longer than 0\.5 s"):
        job.sql(ENDLESS, timeout=0.5)
    assert not [t for t in threading.enumerate() if t.name == "perflab-sql"]  # none left running
    assert trace.sql("SELECT count(*) FROM events", timeout=5).rows() == [[5000]]


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "5", 1e9])
def test_time_limits_that_are_not_one_are_refused(timeout: object) -> None:
    with pytest.raises(InputError, match="the SQL time limit must be"):
        run_sql(_tiny_trace(["a"]), "SELECT 1", timeout=timeout)  # type: ignore[arg-type]


def test_cli_timeout_ends_an_endless_query(tmp_path: Path) -> None:
    saved = _endless_trace().save(tmp_path / "endless.npz")
    cli = [sys.executable, "-m", "perflab", "trace", "sql", str(saved), ENDLESS]
    done = subprocess.run([*cli, "--timeout", "1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("perflab: error: the query ran longer than 1 s (--timeout")
    assert "Traceback" not in done.stderr


def test_duckdb_gets_a_memory_limit_its_threads_and_no_spill_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = "SELECT current_setting('memory_limit'), current_setting('threads'), "
    settings += "current_setting('temp_directory')"
    memory, threads, spill = run_sql(_tiny_trace(["a"]), settings).rows()[0]
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    expected = trace_sql.memory_limit_bytes()
    assert expected is not None and 0 < expected <= physical // 2
    number, unit = memory.split()
    assert float(number) * UNITS[unit] == pytest.approx(expected, rel=0.01)
    assert threads == len(os.sched_getaffinity(0)) and spill == ""
    # a query that needs more than the limit is refused, saying why
    monkeypatch.setattr(trace_sql, "memory_limit_bytes", lambda: 64 << 20)
    big = "SELECT count(DISTINCT a.row * 100000 + b.row) FROM events a, events b"
    with pytest.raises(InputError, match=r"needs more memory than DuckDB may use here \(64 MiB"):
        run_sql(_tiny_trace([f"k{i}" for i in range(4000)]), big)
    # and a result too big to fetch into this process is refused (a million rows at most here)
    rows = "SELECT a.row, b.name FROM events a, events b"
    with pytest.raises(InputError, match=r"the result has more than 1,000,000 rows of 2 columns"):
        run_sql(_endless_trace(), rows)
    assert len(run_sql(_endless_trace(), f"{rows} LIMIT 1000000")) == 1_000_000


CTRL_C = """
import os, signal, sys, threading, time
from perflab.cli import main

def press_ctrl_c():  # once the query runs (or after 20 s, when no query thread shows)
    for _ in range(400):
        if any(t.name == "perflab-sql" for t in threading.enumerate()):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=press_ctrl_c, daemon=True).start()
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_stops_the_query_without_a_traceback(tmp_path: Path) -> None:
    saved = _endless_trace().save(tmp_path / "endless.npz")
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C, "trace", "sql", str(saved), ENDLESS],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "perflab: query interrupted\n")
