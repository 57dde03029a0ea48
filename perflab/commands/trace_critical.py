"""``perflab trace critical PATH``: what bounds each training step (its critical path, by kind
and by rank) and what a change would buy, replayed over the step's dependency graph."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from perflab.commands import job
from perflab.commands._common import Subcommands, add_trace_file, load_trace_file

if TYPE_CHECKING:
    from perflab.analysis.critical_path import CriticalPaths

WHAT_IF_HELP = """\
what-if changes (--what-if, repeatable; terms joined by commas, factors multiply):
  host=F          every host event's own time, untraced host time and the calls themselves x F
                  (time blocked in syncs follows from the rest)
  kernels=F       GPU work that is not communication (kernels, copies, memsets) x F
  kernel:REGEX=F  GPU work whose name REGEX matches (RE2 syntax, linear time) x F
  comm=F          collectives' transfer time x F, not their waiting for peers
  e.g. --what-if host=0.5 --what-if kernels=0.5,comm=0.5
F is a number from 0 to 1000. Each change is estimated by replaying the dependency graph: it
ignores contention, queue limits and dependencies the trace does not record."""


def add_critical_parser(tsub: Subcommands) -> None:
    c = tsub.add_parser(
        "critical",
        help="what bounds each step: its critical path, and what-ifs replayed",
        description="Build each ProfilerStep#N's dependency graph (host threads, launches, "
        "GPU streams, syncs, waits between streams, collectives matched across the ranks of "
        "a job), walk the chain that sets the step's duration, and say what it was made of "
        "(host, launch, kernel, copy, collective transfer, unexplained) and on which rank. "
        "--what-if replays the graph with changed durations and gives the predicted mean "
        "step.",
        epilog=WHAT_IF_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_file(c, help="trace file, or a directory of a job's rank files", step=False)
    job.add_more_files(c)
    job.add_scheduler(
        c,
        "read a job's ranks and build their graphs on a Dask cluster (the paths are "
        "walked and the what-ifs replayed here)",
    )
    c.add_argument(
        "--step", type=int, default=None, metavar="N", help="only ProfilerStep#N (default: all)"
    )
    c.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="SPEC",
        dest="what_if",
        help="a change to replay, e.g. host=0.5 or kernels=0.5,comm=0.5 (see below)",
    )
    c.add_argument("--json", action="store_true", help="print machine-readable JSON")
    c.set_defaults(handler=run_critical)


def run_critical(args: argparse.Namespace) -> int:
    from perflab.analysis.critical_whatif import parse_change
    from perflab.errors import InputError

    if args.step is not None and args.step < 0:
        raise InputError(f"--step must be a step number (0 or more), not {args.step}")
    for text in args.what_if:  # refused before a large trace is read
        parse_change(text)
    options = {"step": args.step, "what_if": args.what_if}
    if args.scheduler is not None:
        result = _on_scheduler(args)
    elif job.is_job(args):
        result = job.load(args).critical(**options)
    else:
        result = load_trace_file(args).critical(**options)
    if args.json:
        _print_json(result.to_dict())
    else:
        print(result)
    return 0


def _on_scheduler(args: argparse.Namespace) -> CriticalPaths:
    """The job's critical paths, its ranks read and their graphs built on
    ``args.scheduler``'s cluster."""
    from perflab.errors import InputError
    from perflab.io.job import list_job
    from perflab.job_dask import cluster_client, critical_on_cluster

    if not job.is_job(args):
        raise InputError(
            "--scheduler works out a whole job's critical path: give a directory or several "
            "rank files",
            source=args.file,
        )
    listing = list_job([args.file, *args.more])
    with cluster_client(args.scheduler) as client:
        return critical_on_cluster(
            listing.files,
            client,
            step=args.step,
            what_if=args.what_if,
            unreadable=listing.unreadable,
        )


def _print_json(doc: object) -> None:
    """``doc`` as JSON, one line: a job's paths run to a hundred thousand stretches, which
    the standard library encodes in C only when it does not indent (all ASCII, as
    ``--json`` is everywhere)."""
    import json
    import sys

    json.dump(doc, sys.stdout, allow_nan=False)
    sys.stdout.write("\n")
