"""``perflab timeline FILE -o OUT.html``: a standalone interactive timeline of a trace."""

from __future__ import annotations

import argparse
import sys

from perflab.commands import job
from perflab.commands._common import Subcommands, add_trace_file, load_trace_file
from perflab.errors import InputError, import_extra

GROUPS, BINS = 64, 4096  # the overview's lanes and time bins unless told
# Above this many events the critical path is drawn only when asked: finding every step's
# path then takes several times as long as the page itself (a million events: ~20 s more).
CRITICAL_AUTO_EVENTS = 500_000


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "timeline",
        help="write an interactive timeline of a trace as a standalone HTML file",
        description="Read a trace (Kineto/torch.profiler JSON, Nsight Systems SQLite export "
        "or a saved perflab trace) and write a self-contained HTML timeline: zoom, pan and "
        "hover work offline, with levels of detail so millions of events stay interactive.",
    )
    add_trace_file(p)
    job.add_more_files(p)  # several files or a directory: a job, ranks as lane groups
    p.add_argument("-o", "--output", required=True, help="HTML file to write")
    p.add_argument(
        "--rows",
        type=int,
        default=150_000,
        help="events kept for drawing across all levels of detail (default "
        "150000; more shows more detail when zoomed in, and a bigger file)",
    )
    path = p.add_mutually_exclusive_group()
    path.add_argument(
        "--critical",
        action="store_true",
        default=None,
        help="add the critical path toggle whatever the trace's size (by default it is added "
        f"to traces of up to {CRITICAL_AUTO_EVENTS:,} events: on larger ones finding every "
        "step's path takes several times as long as drawing the page)",
    )
    path.add_argument(
        "--no-critical",
        dest="critical",
        action="store_false",
        help="leave out the critical path toggle",
    )
    job.add_scheduler(p, "draw a job's overview on a Dask cluster (a lane per group of ranks)")
    p.add_argument(
        "--groups",
        type=int,
        default=GROUPS,
        help="with --scheduler: at most this many lanes of ranks (default 64)",
    )
    p.add_argument(
        "--bins",
        type=int,
        default=BINS,
        help="with --scheduler: time bins over the job's span, the finest zoom (default 4096)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import_extra("bokeh", "perflab timeline")
    from perflab.render.timeline import save_timeline

    if args.rows < 1000:
        raise InputError(f"--rows must be at least 1000, not {args.rows}")
    if args.scheduler is None and (args.groups, args.bins) != (GROUPS, BINS):
        raise InputError("--groups and --bins draw a job's overview: give them with --scheduler")
    try:
        if args.scheduler is not None:  # too many ranks for their events: the overview
            out, ranks = job.run_overview(args)
            print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {ranks} ranks)")
            return 0
        if job.is_job(args):  # ranks as groups of lanes, collectives linked across them
            out, events = job.run_timeline(args)
        else:
            trace = load_trace_file(args)
            if len(trace) == 0:
                raise InputError("the trace has no events to draw", source=args.file)
            saved = save_timeline(
                trace,
                args.output,
                row_budget=args.rows,
                made_by="cli",
                critical=_draws_critical_path(args.critical, len(trace)),
            )
            out, events = saved, len(trace)
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", source=args.output) from None
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {events} events)")
    return 0


def _draws_critical_path(asked: bool | None, events: int) -> bool:
    """Whether the page gets the critical path toggle: as asked, else by the trace's size
    (saying so when a large trace goes without it)."""
    if asked is not None:
        return asked
    if events <= CRITICAL_AUTO_EVENTS:
        return True
    print(
        f"critical path left out: {events:,} events is over {CRITICAL_AUTO_EVENTS:,}, where "
        "finding every step's path takes longer than the page (--critical adds it)",
        file=sys.stderr,
    )
    return False
