"""Helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from perflab.model.trace import Trace

# what ``parser.add_subparsers()`` returns (generic only to type checkers, hence a string)
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def print_json(doc: object) -> None:
    json.dump(doc, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def add_trace_file(parser: argparse.ArgumentParser, help: str = "trace file to read") -> None:
    """The trace file argument and how many helper processes may read it."""
    parser.add_argument("file", help=help)
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="helper processes that decode a large Kineto file at the same time (default: "
        "one per spare core for files of 64 MB of JSON or more; 0: none)",
    )


def load_trace_file(args: argparse.Namespace) -> Trace:
    """The trace named on the command line; a long load shows its progress on a terminal's
    stderr, except under --json (whose output is for programs)."""
    from perflab.io import load_trace

    quiet = bool(getattr(args, "json", False))
    return load_trace(args.file, workers=args.workers, progress=not quiet)
