"""``perflab trace sql FILE [FILE...] QUERY [--json|--csv]``: a DuckDB SQL query over a
trace (or a job's rank files as one set of tables), registered from
:mod:`perflab.commands.trace`."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.analysis.trace_sql import DEFAULT_TIMEOUT_S
from perflab.commands._common import Subcommands, print_json

if TYPE_CHECKING:
    from perflab.model.job import Job
    from perflab.model.trace import Trace

DESCRIPTION = (
    "Run a DuckDB SQL query over a trace's tables: events, kernels, memcpy, ops, runtime, "
    "ranges (columns: row, rank, kind, name, category, device, stream, process, thread, "
    "track, track_label, start_ns, end_ns, dur_ns, correlation, external_id; kernels add "
    "grid/block sizes, registers, shared_mem, occupancy; memcpy adds bytes and direction; "
    "ops add sequence, flops, input_dims, input_types). Several files, or a directory, are "
    "the ranks of one job: one set of tables with a rank column, on the job's clock. Needs "
    "perflab[sql]. The query reads the trace only: DuckDB's file and network access are off. "
    "It is stopped after --timeout seconds, and DuckDB may use half of the machine's memory."
)
INTERRUPTED = 130  # the shell's code for a command stopped by Ctrl-C (128 + SIGINT)
EXAMPLE = (
    'example: perflab trace sql trace.json "SELECT name, count(*) AS n, sum(dur_ns) / 1e3 AS '
    'us FROM kernels GROUP BY name ORDER BY us DESC LIMIT 10"'
)


def add_sql_parser(tsub: Subcommands) -> None:
    q = tsub.add_parser(
        "sql",
        help="run a SQL query (DuckDB) over a trace's events",
        description=DESCRIPTION,
        epilog=EXAMPLE,
    )
    q.add_argument("files", nargs="+", metavar="FILE", help="trace file(s), or a directory")
    q.add_argument("query", help="the SQL query")
    out = q.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print columns, types and rows as JSON")
    out.add_argument("--csv", action="store_true", help="print the rows as CSV")
    q.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"stop the query after this long (default: {DEFAULT_TIMEOUT_S:g})",
    )
    q.add_argument("--workers", type=int, default=None, metavar="N", help=argparse.SUPPRESS)
    q.set_defaults(handler=run_sql_command)


def _load(files: list[str], workers: int | None, progress: bool) -> Trace | Job:
    """One trace, or a job (several files or a directory)."""
    if len(files) == 1 and not Path(files[0]).is_dir():
        from perflab.io import load_trace

        return load_trace(files[0], workers=workers, progress=progress)
    from perflab.io.job import load_job

    return load_job(files, workers=workers)


def run_sql_command(args: argparse.Namespace) -> int:
    from perflab.analysis.trace_sql import check_timeout, run_sql
    from perflab.render.sql_view import sql_text

    quiet = args.json or args.csv
    check_timeout(args.timeout)  # before a long load
    source = _load(args.files, args.workers, not quiet)
    try:
        result = run_sql(source, args.query, timeout=args.timeout)
    except KeyboardInterrupt:  # the query was stopped: no traceback
        print("perflab: query interrupted", file=sys.stderr)
        return INTERRUPTED
    if args.json:
        print_json(result.to_dict())
    elif args.csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(list(result.columns))
        writer.writerows(result.rows())
    else:
        print(sql_text(result))
    return 0
