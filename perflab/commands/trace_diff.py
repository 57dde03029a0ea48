"""``perflab trace diff CONTROL TEST``: two traces compared name by name, registered from
:mod:`perflab.commands.trace`."""

from __future__ import annotations

import argparse
import re

from perflab.commands._common import (
    Subcommands,
    add_trace_file,
    check_fits,
    part_request,
    print_json,
)

HELP = "compare two traces (before/after): per name counts, times, new/gone/changed, verdicts"
DESCRIPTION = (
    "Match the GPU work (kernels, memcpys, memsets) and the host events (CPU ops, runtime "
    "calls, annotations) of two traces by name, over the whole traces or one ProfilerStep of "
    "each (--step). Per name: counts and summed durations on each side, the difference, and "
    "new / gone / changed. With several ProfilerSteps on each side (whole traces), each "
    "name's time per step and a verdict from the step-to-step noise: per-step totals compared "
    "by a two-sided Mann-Whitney U test (normal approximation); 'slower'/'faster' when "
    "p < 0.05 and the per-step medians differ by at least 5% of the control's (and 1 us), "
    "'same' when they differ by less, 'unclear' otherwise. With one step a side there is no "
    "such verdict, and the output says so. Then the GPU change by kernel category and by "
    "stream, the GPUs' idle time by cause on each side (host-busy, after-sync, "
    "launch-overhead, launch-blocked, gpu-dependency, unknown: as 'perflab trace idle' finds "
    "them; per step "
    "the mean over the steps, with --step that step's gaps; in --json: idle_by_cause), and a "
    "headline of what explains most of it, an idle cause among them when its change is one "
    "of the largest. Either file may be any trace "
    "perflab reads (two ranks of one job are two files)."
)
_STEP = re.compile(r"(\d{1,18})(?::(\d{1,18}))?")


def add_diff_parser(tsub: Subcommands) -> None:
    d = tsub.add_parser("diff", help=HELP, description=DESCRIPTION)
    add_trace_file(d, help="the control trace (before)", step=False)
    d.add_argument("test", help="the test trace (after)")
    d.add_argument("--json", action="store_true", help="print machine-readable JSON")
    d.add_argument(
        "--step",
        default=None,
        metavar="N[:M]",
        help="compare ProfilerStep#N of each trace (N:M: step N of the control, M of the test)",
    )
    d.add_argument(
        "--top",
        type=int,
        default=25,
        metavar="K",
        help="rows of each table in the text view (default 25; --json has every row)",
    )
    d.add_argument(
        "--short-names",
        action="store_true",
        help="match names without template arguments, parameters and return types",
    )
    d.add_argument(
        "--rename",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="treat the name OLD as NEW in both traces (repeatable); re:PATTERN=REPLACEMENT "
        "replaces every match of the regular expression, as Python's re.sub does (\\1 or "
        "\\g<NAME> in REPLACEMENT is a group; split at the last '='). Patterns are RE2's, "
        "matched in time linear in the name: no backreferences and no lookaround",
    )
    d.set_defaults(handler=run_diff)


def parse_step(text: str | None) -> int | tuple[int, int] | None:
    """``N`` or ``N:M`` as given to ``--step``."""
    from perflab.errors import InputError

    if text is None:
        return None
    found = _STEP.fullmatch(text.strip())
    if not found:
        raise InputError(f"--step takes a step number N or N:M, not {text!r}")
    control, test = found.group(1), found.group(2)
    return int(control) if test is None else (int(control), int(test))


def run_diff(args: argparse.Namespace) -> int:
    from perflab.analysis.diff_names import Rename
    from perflab.analysis.trace_diff import diff_traces
    from perflab.errors import InputError
    from perflab.io import load_trace
    from perflab.render.trace_diff_view import diff_text

    if args.top < 1:
        raise InputError(f"--top must be at least 1, not {args.top}")
    step = parse_step(args.step)
    renames = [Rename.parse(text) for text in args.rename]  # refused before the traces load
    progress = not args.json
    part = part_request(args)  # the same window of each
    if part is None:
        check_fits(args, args.file, args.test)  # both are held at once
    control = load_trace(args.file, workers=args.workers, progress=progress, part=part)
    test = load_trace(args.test, workers=args.workers, progress=progress, part=part)
    result = diff_traces(control, test, step=step, short_names=args.short_names, renames=renames)
    if args.json:
        print_json(result.to_dict())  # every row: --top shortens the text's tables only
    else:
        print(diff_text(result, limit=args.top))
    return 0
