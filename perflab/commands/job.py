"""``perflab trace summary|kernels DIR`` or ``FILE FILE...``: a whole distributed job (one trace
per rank), dispatched here from :mod:`perflab.commands.trace`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.commands._common import check_fits, print_json
from perflab.errors import InputError

if TYPE_CHECKING:
    from perflab.analysis.job import JobSummary
    from perflab.model.job import Job


def add_more_files(parser: argparse.ArgumentParser) -> None:
    """More trace files after the first: one per rank of a job."""
    parser.add_argument(
        "more",
        nargs="*",
        metavar="FILE",
        help="more rank files of the same job (FILE may also be a directory of rank files)",
    )


def add_scheduler(
    parser: argparse.ArgumentParser, what: str = "summarise a job's ranks on a Dask cluster"
) -> None:
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS|local:N",
        default=None,
        help=f"{what}: a scheduler's address (tcp://HOST:8786), or local:N for N local "
        "worker processes (needs perflab[dask])",
    )


def is_job(args: argparse.Namespace) -> bool:
    """Whether the command names a job (several files, or a directory) rather than a file;
    a job cannot be read in part (--step/--window: one trace file)."""
    several = bool(getattr(args, "more", None)) or Path(args.file).is_dir()
    if several and (getattr(args, "part_step", None) is not None or getattr(args, "window", None)):
        raise InputError(
            "--step and --window read part of one trace file, not of a job: give one rank's "
            "file, or split the job across Dask workers with --scheduler",
            source=args.file,
        )
    return several


def load(args: argparse.Namespace) -> Job:
    """Every rank of the job, held here at once (refused first when they cannot fit)."""
    from perflab.io.job import load_job

    check_fits(args)
    return load_job([args.file, *args.more], workers=args.workers)


def run_summary(args: argparse.Namespace) -> int:
    from perflab.analysis.job import summarize_job
    from perflab.render.job import summary_text

    if args.scheduler is not None:
        summary = summarize_on_scheduler(args)
    else:
        summary = summarize_job(load(args))
    if args.json:
        print_json(summary.to_dict())
    else:
        print(summary_text(summary))
    return 0


def summarize_on_scheduler(args: argparse.Namespace) -> JobSummary:
    from perflab.io.job import list_job
    from perflab.job_dask import cluster_client, summarize_on_cluster

    listing = list_job([args.file, *args.more])
    check_fits(args)  # local:N reads a rank at a time in each of N processes here
    with cluster_client(args.scheduler) as client:
        return summarize_on_cluster(listing.files, client, unreadable=listing.unreadable)


def run_overview(args: argparse.Namespace) -> tuple[Path, int]:
    """The overview of the job named by ``args`` (a lane per group of ranks), worked out on
    ``args.scheduler``'s cluster and written to ``args.output``: the file and the ranks."""
    from perflab.errors import InputError
    from perflab.io.job import list_job
    from perflab.job_dask import activity_on_cluster, cluster_client
    from perflab.render.job_overview import job_overview

    if not 1 <= args.groups <= 4096:
        raise InputError(f"--groups must be from 1 to 4096, not {args.groups}")
    if not 16 <= args.bins <= 65536:
        raise InputError(f"--bins must be from 16 to 65536, not {args.bins}")
    listing = list_job([args.file, *args.more])
    check_fits(args)
    with cluster_client(args.scheduler) as client:
        activity = activity_on_cluster(
            listing.files,
            client,
            groups=args.groups,
            bins=args.bins,
            unreadable=listing.unreadable,
        )
    out = job_overview(activity).save(args.output, title="perflab timeline: job overview")
    return out, sum(len(g) for g in activity.groups)


def run_kernels(args: argparse.Namespace) -> int:
    from perflab.analysis.job import kernel_rows
    from perflab.errors import InputError
    from perflab.render.job import kernel_text

    if args.top < 1:
        raise InputError(f"--top must be at least 1, not {args.top}")
    rows = kernel_rows(load(args))[: args.top]
    if args.json:
        from perflab.analysis.json_views import JobKernelsView
        from perflab.model.schema import encode

        print_json(encode(JobKernelsView(kind="kernel", rows=rows)))
    else:
        print(kernel_text(rows))
    return 0


def run_timeline(args: argparse.Namespace) -> tuple[Path, int]:
    """The job's timeline, collectives linked across ranks, written to ``args.output``: the
    file and the number of events."""
    from perflab.errors import InputError
    from perflab.render.job import save_job_timeline

    job = load(args)
    events = sum(len(r.trace) for r in job)
    if events == 0:
        raise InputError("the traces have no events to draw", source=args.file)
    return save_job_timeline(job, args.output, row_budget=args.rows, made_by="cli"), events
