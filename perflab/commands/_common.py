"""Helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, TypeAlias

# the fit check lives in its own module; commands import it from here
from perflab.commands._fit import available_memory as available_memory
from perflab.commands._fit import check_fits as check_fits
from perflab.commands._fit import memory_size as memory_size
from perflab.commands._fit import needed_memory as needed_memory

if TYPE_CHECKING:
    from perflab.model.trace import Trace
    from perflab.model.trace_part import Request as TracePart

# what ``parser.add_subparsers()`` returns (generic only to type checkers, hence a string)
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def print_json(doc: object) -> None:
    json.dump(doc, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def add_trace_file(
    parser: argparse.ArgumentParser, help: str = "trace file to read", *, step: bool = True
) -> None:
    """The trace file argument, how many helper processes may read it, the memory it may
    take and the part of it to read (``step``: offer ``--step N``, for commands that do not
    give ``--step`` a meaning of their own)."""
    parser.add_argument("file", help=help)
    part = "read only part of a trace too large to hold whole (the file is read twice): "
    if step:
        parser.add_argument(
            "--step",
            dest="part_step",
            type=int,
            default=None,
            metavar="N",
            help=part + "ProfilerStep#N's host events and the GPU work from its start until "
            "the next step begins",
        )
    parser.add_argument(
        "--window",
        default=None,
        metavar="A:B",
        help=part + "the events that overlap the time from A to B since the trace's first "
        "event, e.g. 30s:32.5s or 120ms:180ms",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="helper processes that decode a large Kineto file at the same time (default: "
        "one per spare core for files of 64 MB of JSON or more; 0: none)",
    )
    parser.add_argument(
        "--memory-budget",
        default=None,
        metavar="SIZE",
        help="memory the command may use, e.g. 800M or 4G (default: the memory available "
        "now); a trace (or a job's rank files) estimated to need more is refused before it "
        "is read",
    )


def load_trace_file(args: argparse.Namespace, *, python: bool = False) -> Trace:
    """The trace named on the command line; a long load shows its progress on a terminal's
    stderr, except under --json (whose output is for programs). A trace that cannot fit in
    memory is refused first (see :func:`check_fits`)."""
    from perflab.io import load_trace

    part = part_request(args)
    if part is None:
        check_fits(args)
    quiet = bool(getattr(args, "json", False))
    trace = load_trace(
        args.file, python=python, workers=args.workers, progress=not quiet, part=part
    )
    if part is not None and not quiet:
        print(part_note(trace), file=sys.stderr)
    return trace


def part_request(args: argparse.Namespace) -> TracePart | None:
    """The part of the trace that ``--step N`` or ``--window A:B`` asks for (None: all)."""
    from perflab.model.trace_part import request_of

    return request_of(getattr(args, "part_step", None), getattr(args, "window", None))


def part_note(trace: Trace) -> str:
    """What a partial read kept, for the terminal."""
    part = trace.meta.get("part", {})
    return (
        f"perflab: read only {part.get('label')}: {len(trace):,} events "
        f"(times below count from the first of them)"
    )
