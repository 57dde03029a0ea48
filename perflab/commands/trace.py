"""``perflab trace``: summarise, list kernels of, explain the idle time of, and export trace
files."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from perflab.commands import job, trace_critical, trace_diff, trace_sql
from perflab.commands._common import (
    Subcommands,
    add_trace_file,
    load_trace_file,
    print_json,
)


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "trace",
        help="analyse torch.profiler, Nsight Systems or saved perflab traces",
        description="Read a trace (Kineto/torch.profiler JSON, plain or gzip; Nsight Systems "
        "SQLite export; saved perflab .npz) and say where the GPU time went.",
    )
    tsub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)

    s = tsub.add_parser("summary", help="busy/idle per device, kernels, comm overlap, memcpy")
    add_trace_file(s)
    job.add_more_files(s)  # several files or a directory: a job
    job.add_scheduler(s)
    s.add_argument("--json", action="store_true", help="print machine-readable JSON")
    s.set_defaults(handler=run_summary)

    k = tsub.add_parser("kernels", help="top kernels by total time")
    add_trace_file(k)
    job.add_more_files(k)
    k.add_argument("-n", "--top", type=int, default=25, help="rows to show (default 25)")
    k.add_argument("--json", action="store_true", help="print machine-readable JSON")
    k.set_defaults(handler=run_kernels)

    add_idle_parser(tsub)
    trace_critical.add_critical_parser(tsub)
    add_memory_parser(tsub)
    trace_diff.add_diff_parser(tsub)
    trace_sql.add_sql_parser(tsub)

    e = tsub.add_parser("export", help="write Chrome/Perfetto JSON (opens in ui.perfetto.dev)")
    add_trace_file(e)
    e.add_argument("-o", "--output", required=True, help="output .json file")
    e.set_defaults(handler=run_export)


def add_idle_parser(tsub: Subcommands) -> None:
    from perflab.analysis.idle_rules import rules_text

    i = tsub.add_parser(
        "idle",
        help="why the GPU was idle: each gap's cause, with the trace's evidence",
        description="Every gap in each GPU's busy time, followed to the host call that "
        "launched the work after it, and named from what the launching thread did "
        "(Python functions are read too). Prints the idle time by cause and the longest "
        "gaps with their evidence; --json gives every gap. The causes are below: heuristics "
        "over the trace's events, whose rules and thresholds perflab.analysis.idle_causes "
        "gives in full.",
        epilog=rules_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_file(i, step=False)
    i.add_argument("--json", action="store_true", help="print every gap as JSON")
    i.add_argument(
        "--min-us",
        type=float,
        default=0.0,
        metavar="N",
        help="only gaps longer than N microseconds (default 0: every gap)",
    )
    i.add_argument(
        "--step",
        type=int,
        default=None,
        metavar="N",
        help="only the gaps of ProfilerStep#N (those whose next work it launched)",
    )
    i.set_defaults(handler=run_idle)


def add_memory_parser(tsub: Subcommands) -> None:
    from perflab.analysis.memory import GROWTH_RULE, RULES

    m = tsub.add_parser(
        "memory",
        help="where the memory went: peak, what was live there, growth per step",
        description=textwrap.fill(
            "Read the allocator's memory events of a torch.profiler trace recorded "
            "with profile_memory=True: per device the allocated and reserved bytes over time, the "
            "peak of allocated memory (when, in which op), what was live at the peak by op and by "
            "category, fragmentation (reserved but not allocated at the peak), the final figures, "
            "and memory that an op leaves behind step after step. FILE may also be a CUDA memory "
            "snapshot (torch.cuda.memory._dump_snapshot), read without running pickle's code: "
            "its segments, blocks, largest allocations with their stacks and allocator trace.",
            HELP_WIDTH,
        ),
        epilog=_memory_rules(RULES, GROWTH_RULE),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_file(m, help="trace file, or a memory snapshot .pickle")
    m.add_argument("--json", action="store_true", help="print machine-readable JSON")
    m.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="a snapshot's largest allocations to list (default 10)",
    )
    m.set_defaults(handler=run_memory)


HELP_WIDTH = 90  # characters a line of the memory help holds (its text is laid out here)


def _memory_rules(rules: dict[str, str], growth: str) -> str:
    head = "categories (heuristics over the names of the ranges around each allocation):"
    items = [*rules.items(), ("growth", growth)]
    wrapped = (
        textwrap.fill(f"{name}: {rule}", HELP_WIDTH, initial_indent="  ", subsequent_indent="    ")
        for name, rule in items
    )
    return "\n".join([head, *wrapped])


def run_memory(args: argparse.Namespace) -> int:
    from perflab.errors import InputError
    from perflab.io.memory_snapshot import is_snapshot_file, load_memory_snapshot

    if args.top < 0:
        raise InputError(f"--top must be 0 or more, not {args.top}")
    if is_snapshot_file(args.file):
        result: Any = load_memory_snapshot(args.file).summary(top=args.top)
    else:
        result = load_trace_file(args).memory()
    if args.json:
        print_json(result.to_dict())
    else:
        print(result)
    return 0


def run_idle(args: argparse.Namespace) -> int:
    import math

    from perflab.errors import InputError

    if not math.isfinite(args.min_us) or not 0 <= args.min_us <= MAX_MIN_US:
        raise InputError(f"--min-us must be a number of microseconds from 0 to {MAX_MIN_US:g}")
    if args.step is not None and args.step < 0:
        raise InputError(f"--step must be a step number (0 or more), not {args.step}")
    trace = load_trace_file(args, python=True)
    result = trace.idle(min_ns=round(args.min_us * 1e3), step=args.step)
    if args.json:
        print_json(result.to_dict())
    else:
        print(result)
    return 0


MAX_MIN_US = 1e12  # about 11.6 days: longer than any trace; keeps the ns count an exact int


def run_summary(args: argparse.Namespace) -> int:
    if job.is_job(args):
        return job.run_summary(args)
    if args.scheduler is not None:
        from perflab.errors import InputError

        raise InputError(
            "--scheduler summarises a whole job: give a directory or several rank files",
            source=args.file,
        )
    summary = load_trace_file(args).summary()
    if args.json:
        print_json(summary.to_dict())
    else:
        print(summary)
    return 0


def run_kernels(args: argparse.Namespace) -> int:
    if job.is_job(args):
        return job.run_kernels(args)
    from perflab.analysis.trace_stats import kernel_table
    from perflab.errors import InputError
    from perflab.render.tables import optable_text

    if args.top < 1:
        raise InputError(f"--top must be at least 1, not {args.top}")
    table = kernel_table(load_trace_file(args))
    if args.json:
        print_json(table.top(args.top).to_dict())
    else:
        print(optable_text(table, limit=args.top))
    return 0


def run_export(args: argparse.Namespace) -> int:
    from perflab.io import export_chrome

    trace = load_trace_file(args)
    out = export_chrome(trace, args.output)
    print(f"wrote {out} ({len(trace)} events); open it in https://ui.perfetto.dev")
    return 0
