"""``perflab time``: time a Python statement from the shell, like ``python -m timeit``,
with the same options and engine as ``%%gpuprofile``."""

from __future__ import annotations

import argparse
import sys
import traceback

from perflab.commands._common import Subcommands, print_json
from perflab.frontend import TIMING_ARGUMENTS, add_arguments, timed_run, user_frames
from perflab.render.views import to_text


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "time",
        help="time a Python statement (the %%%%gpuprofile engine from the shell)",
        description="Time STATEMENT soundly: CUDA events on a GPU (host clock otherwise), "
        "warm-up, cache flush, every sample kept, median with a 95% CI.",
        epilog="example: perflab time -s 'import torch; a = torch.randn(1024, 1024)' 'a @ a'",
    )
    p.add_argument("statement", help="Python code to time")
    p.add_argument("-s", "--setup", default="", help="code run once before timing")
    p.add_argument("--json", action="store_true", help="print the TimingResult as JSON")
    add_arguments(p, TIMING_ARGUMENTS)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from perflab.errors import InputError, PerflabError

    namespace: dict[str, object] = {"__name__": "__perflab_time__"}
    try:
        setup = compile(args.setup, "<setup>", "exec")
        stmt = compile(args.statement, "<statement>", "exec")
    except SyntaxError as exc:
        raise InputError(
            f"syntax error: {exc.msg}", source=exc.filename, position=f"line {exc.lineno}"
        ) from None
    exec(setup, namespace)  # noqa: S102  (the user's own code, as timeit runs it)

    def statement() -> None:
        exec(stmt, namespace)  # noqa: S102

    try:
        outcome = timed_run(statement, args, default_name="statement")
    except PerflabError:
        raise
    except Exception as exc:  # the user's statement raised: show only its frames
        shown = exc.with_traceback(user_frames(exc.__traceback__, "<statement>"))
        traceback.print_exception(shown, file=sys.stderr)
        return 1
    if args.json:
        print_json(outcome.result.to_dict())
        return 0
    for note in outcome.notes:
        print(note)
    print(to_text(outcome.result))
    return 0
