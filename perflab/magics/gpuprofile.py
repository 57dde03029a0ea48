"""``%%gpuprofile``: time a cell soundly (see ``%%gpuprofile --help``)."""

from __future__ import annotations

import keyword
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from perflab.errors import PerflabError
from perflab.frontend import TimedRun, timed_run, user_frames, with_timing_arguments
from perflab.magics import help_requested, magic_help, shell_of
from perflab.model.listeners import notify
from perflab.model.timing import TimingResult

if TYPE_CHECKING:
    import argparse

    from IPython.core.interactiveshell import InteractiveShell

    from perflab.model.trace import Trace


class PerflabUsageError(UsageError):
    """A perflab error in a profiled cell: shown as the CLI shows one, ``perflab: error: ...``,
    with no traceback (IPython's own ``UsageError`` shows as ``UsageError: ...``)."""

    def _render_traceback_(self) -> list[str]:
        return [f"perflab: error: {self}"]


@magics_class
class GpuProfileMagics(Magics):
    # Lines of the cell above the code it times: the %%gpuprofile line; 0 when the profile
    # button runs a cell that has none (perflab.labext.profile_cell). So a traceback's line
    # numbers are the cell's as shown.
    header_lines = 1

    @property
    def ip(self) -> InteractiveShell:
        """The shell (always set once the magics are registered)."""
        return shell_of(self)

    @magic_arguments()
    @with_timing_arguments
    @argument(
        "--roofline",
        action="store_true",
        help="show the roofline point (FLOPs/bytes from --flops/--bytes, else counted), judged "
        "against the ceiling of its precision (--dtype, else counted)",
    )
    @argument("--compare", metavar="NAME", help="A/B against the TimingResult stored in NAME")
    @argument("-v", dest="variable", metavar="NAME", help="store the TimingResult in NAME")
    @argument(
        "-o", dest="output", action="store_true", help="return the TimingResult as the cell's value"
    )
    @line_cell_magic
    def gpuprofile(self, line: str, cell: str | None = None) -> TimingResult | None:
        """Time the cell: CUDA events (host clock without a GPU), warm-up, L2 flush,
        every sample kept, median with a 95% CI, noise warnings, an NVTX range.

        The cell runs in your namespace (names it assigns persist). It runs once
        untimed, then as many times as the budget and the noise target allow.
        ``%gpuprofile --help`` (or ``--help`` on a ``%%gpuprofile`` line) prints the
        options.
        """
        __tracebackhide__ = True
        if help_requested(line):
            print(magic_help(self.gpuprofile))
            return None
        if cell is None:
            raise UsageError(
                "%gpuprofile times a cell: put %%gpuprofile [options] on the first line of "
                "a cell (%gpuprofile --help lists the options)"
            )
        args = parse_argstring(self.gpuprofile, line)
        for flag, name in (("-v", args.variable), ("--compare", args.compare)):
            _check_name(flag, name)
        baseline = self._baseline(args.compare)
        prompt = self._prompt_number()
        fn, filename = self._cell_function(cell, prompt)
        try:
            run = timed_run(fn, args, default_name=f"In[{prompt}]")
        except PerflabError as exc:
            raise PerflabUsageError(str(exc)) from None
        except Exception as exc:  # the user's own error: show it at the user's lines
            raise shown_from_user_code(self.ip, exc, filename)  # noqa: B904  (its own cause)
        notify(run.result)  # e.g. the lab's history panel
        if args.variable:
            self.ip.user_ns[args.variable] = run.result
        self._show(run, args, baseline)
        return run.result if args.output else None

    def _prompt_number(self) -> int:
        """The number of the prompt the user sees for this cell (``In [2]``). While a cell
        runs with history on, IPython's ``execution_count`` is already the next one; the
        running cell's own number is on its execution result."""
        running = getattr(self.ip.displayhook, "exec_result", None)
        count = getattr(running, "execution_count", None)
        return count if isinstance(count, int) else int(self.ip.execution_count)

    def _cell_function(self, cell: str, prompt: int) -> tuple[Callable[[], None], str]:
        # Leading newlines make line numbers match the cell as shown (line 1 = the magic).
        source = "\n" * self.header_lines + self.ip.transform_cell(cell)
        filename = self.ip.compile.cache(source, prompt)
        code = compile(source, filename, "exec")
        user_ns = self.ip.user_ns

        def run_cell() -> None:
            exec(code, user_ns)  # noqa: S102  (the user's own cell, as IPython runs it)

        return run_cell, filename

    def _baseline(self, name: str | None) -> TimingResult | None:
        if name is None:
            return None
        value = self.ip.user_ns.get(name)
        if not isinstance(value, TimingResult):
            found = "nothing" if value is None else type(value).__name__
            raise UsageError(
                f"--compare {name}: expected a TimingResult in {name}, found {found}"
                " (store one with -v NAME)"
            )
        return value

    def _show(self, run: TimedRun, args: argparse.Namespace, baseline: TimingResult | None) -> None:
        for note in run.notes:
            print(note, file=sys.stderr if note.startswith("no GPU") else sys.stdout)
        if not args.output:
            display(run.result)
        if baseline is not None:
            label = args.compare
            if baseline.name != args.compare:
                label = f"{args.compare} ({baseline.name})"
            print(run.result.compare(baseline, baseline_label=label))
        if run.trace is not None:
            _show_timeline(run.trace)
        if args.roofline:
            _show_roofline(run.result, args.dtype)


def _check_name(flag: str, name: str | None) -> None:
    if name is not None and (not name.isidentifier() or keyword.iskeyword(name)):
        raise UsageError(
            f"{flag} {name!r}: not a Python variable name (letters, digits and _, not "
            "starting with a digit)"
        )


def shown_from_user_code(ip: InteractiveShell, exc: Exception, filename: str) -> Exception:
    """``exc``, raised by the user's cell in ``filename``, with a traceback that starts at the
    user's code. Raised on, it also passes through the frame that called the magic (IPython's
    ``get_ipython().run_cell_magic(...)``, or the profile button's call): IPython shows an
    exception's ``_render_traceback_`` instead of its whole traceback, so the user sees
    "Cell In[3], line 2" first, as for a cell run without perflab."""
    user_tb = user_frames(exc.__traceback__, filename)
    exc = exc.with_traceback(user_tb)
    if hasattr(type(exc), "_render_traceback_"):  # a kind of exception that renders itself
        return exc

    def render() -> list[str]:
        return ip.InteractiveTB.structured_traceback(type(exc), exc, user_tb, tb_offset=0)

    vars(exc)["_render_traceback_"] = render
    return exc


def _show_timeline(trace: Trace) -> None:
    try:
        from perflab.render.timeline import timeline
    except ImportError:
        return
    display(timeline(trace))


def _show_roofline(result: TimingResult, dtype: str | None) -> None:
    from perflab.render.roofline import roofline

    try:  # --dtype is the ceiling to judge by, and one the device must have
        display(roofline([result], device=result.device, dtype=dtype, dtype_why="--dtype"))
    except PerflabError as exc:  # e.g. a CPU whose ceilings were never measured
        print(f"roofline: {exc}", file=sys.stderr)


MAGICS = GpuProfileMagics
