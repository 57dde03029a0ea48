"""Helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from perflab.errors import InputError

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
        "now); a Kineto file estimated to need more is refused before it is read",
    )


def load_trace_file(args: argparse.Namespace, *, python: bool = False) -> Trace:
    """The trace named on the command line; a long load shows its progress on a terminal's
    stderr, except under --json (whose output is for programs). A Kineto file that cannot
    fit in memory is refused first (see :func:`check_fits`)."""
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
    from perflab.model.trace_part import Request, parse_window

    step, window = getattr(args, "part_step", None), getattr(args, "window", None)
    if step is not None and window is not None:
        raise InputError("give --step or --window, not both")
    if step is not None:
        if step < 0:
            raise InputError(f"--step must be a step number (0 or more), not {step}")
        return Request(step=step)
    return Request(window=parse_window(window)) if window is not None else None


def part_note(trace: Trace) -> str:
    """What a partial read kept, for the terminal."""
    part = trace.meta.get("part", {})
    return (
        f"perflab: read only {part.get('label')}: {len(trace):,} events "
        f"(times below count from the first of them)"
    )


# -- will the trace fit? ----------------------------------------------------------------------

# Peak memory per byte of Kineto JSON text, less BASE_BYTES, measured on generated traces of
# dense events (about 194 bytes of text each) at 1M, 10M and 20M events by
# benchmarks/big_traces.py, with a margin: the summary 0.39-0.42, the timeline 0.57-0.62
# (its levels of detail and page), the idle causes 1.0-1.4 (every gap with its evidence,
# and its JSON). Traces of larger events need less per byte. Other commands are taken to
# need what the summary does.
BYTES_PER_TEXT_BYTE = {"timeline": 0.75, "idle": 1.5}
BYTES_PER_TEXT_BYTE_ELSE = 0.55  # reading the trace and one analysis of it
BASE_BYTES = 150 << 20  # the interpreter, numpy, msgspec (and bokeh for a timeline)
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?)b?", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def memory_size(text: str) -> int:
    """Bytes of a size such as ``800M``, ``1.5G``, ``2GiB`` or ``1000000`` (K, M, G, T are
    powers of 1000; KiB, MiB, GiB, TiB of 1024)."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise InputError(f"--memory-budget must be a size such as 800M or 4G, not {text!r}")
    number, prefix, binary = found.groups()
    size = int(float(number) * (1024 if binary else 1000) ** _POWERS[prefix.lower()])
    if size <= 0:
        raise InputError(f"--memory-budget must be more than 0 bytes, not {text!r}")
    return size


def available_memory() -> int | None:
    """Bytes this process can still take: the system's available memory, less where a
    cgroup's limit is nearer; None when neither can be read."""
    found = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    cgroup = Path("/sys/fs/cgroup")
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int((cgroup / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return max(0, min(found)) if found else None


def needed_memory(path: str, command: str) -> tuple[int, int] | None:
    """The estimated peak memory of ``command`` on the Kineto file ``path`` and the size of
    its JSON text; None for other formats (or a file that reading will report on)."""
    from perflab.io import detect_format
    from perflab.io.kineto.fast import estimated_text_size

    try:
        if detect_format(path) != "kineto":
            return None
        text = estimated_text_size(path)
    except (OSError, InputError):
        return None
    per_byte = BYTES_PER_TEXT_BYTE.get(command, BYTES_PER_TEXT_BYTE_ELSE)
    return BASE_BYTES + int(text * per_byte), text


def check_fits(args: argparse.Namespace, *paths: str) -> None:
    """Refuse, before reading them, Kineto files (``paths``, default the command's file; held
    in memory together) that the command is estimated to need more memory for than
    ``--memory-budget`` (default: the memory available now), naming what works instead."""
    budget_text = getattr(args, "memory_budget", None)
    budget = memory_size(budget_text) if budget_text is not None else available_memory()
    if budget is None:
        return
    command = str(getattr(args, "trace_command", None) or getattr(args, "command", ""))
    needs = [n for p in paths or (args.file,) if (n := needed_memory(p, command)) is not None]
    need = sum(n[0] for n in needs) - BASE_BYTES * max(0, len(needs) - 1)
    if not needs or need <= budget:
        return
    limit = f"--memory-budget {budget_text}" if budget_text else "the memory available now"
    subject = "these traces need" if len(needs) > 1 else "this trace needs"
    raise InputError(
        f"{subject} about {need / 1e9:.1f} GB of memory for 'perflab "
        f"{_command_words(args)}' ({sum(n[1] for n in needs) / 1e9:.1f} GB of JSON), more "
        f"than {limit} ({budget / 1e9:.1f} GB). What works instead: record fewer steps per "
        "trace (torch.profiler's schedule(active=N)) or one trace per rank (then 'perflab "
        "trace summary DIR --scheduler ADDRESS' splits a job across Dask workers), or run on "
        "a machine with more memory; --memory-budget SIZE says how much this command may use",
        source=", ".join(paths or (args.file,)),
    )


def _command_words(args: argparse.Namespace) -> str:
    sub = getattr(args, "trace_command", None)
    return f"{args.command} {sub}" if sub else str(getattr(args, "command", ""))
