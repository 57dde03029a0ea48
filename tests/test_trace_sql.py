"""``Trace.sql``, ``Job.sql`` and ``perflab trace sql``: DuckDB over a trace's columns."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_script
from data_paths import ROOT, TRACES
from test_trace_model import small_trace

from perflab.analysis.trace_sql import run_sql
from perflab.cli import main
from perflab.errors import InputError, MissingExtraError
from perflab.io import load_trace
from perflab.io.job import load_job
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
# the README's recipes: launch-to-start delays per stream, kernel time by category
RECIPES = re.findall(r"```sql\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)


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
