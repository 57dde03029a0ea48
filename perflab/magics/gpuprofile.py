"""``%%gpuprofile``: time a cell soundly (see ``%%gpuprofile --help``)."""

from __future__ import annotations

import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from perflab.errors import PerflabError
from perflab.frontend import TimedRun, timed_run, user_frames, with_timing_arguments
from perflab.model.timing import TimingResult


@magics_class
class GpuProfileMagics(Magics):
    @property
    def ip(self) -> Any:
        """The shell (always set once the magics are registered)."""
        return self.shell

    @magic_arguments()
    @with_timing_arguments
    @argument(
        "--roofline",
        action="store_true",
        help="show the roofline point (FLOPs/bytes from --flops/--bytes, else counted)",
    )
    @argument("--compare", metavar="NAME", help="A/B against the TimingResult stored in NAME")
    @argument("-v", dest="variable", metavar="NAME", help="store the TimingResult in NAME")
    @argument(
        "-o", dest="output", action="store_true", help="return the TimingResult as the cell's value"
    )
    @cell_magic
    def gpuprofile(self, line: str, cell: str) -> TimingResult | None:
        """Time the cell: CUDA events (host clock without a GPU), warm-up, L2 flush,
        every sample kept, median with a 95% CI, noise warnings, an NVTX range.

        The cell runs in your namespace (names it assigns persist). It runs once
        untimed, then as many times as the budget allows.
        """
        __tracebackhide__ = True
        args = parse_argstring(self.gpuprofile, line)
        baseline = self._baseline(args.compare)
        fn, filename = self._cell_function(cell)
        try:
            run = timed_run(fn, args, default_name=f"In[{self.ip.execution_count}]")
        except PerflabError as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:  # the user's own error: show it at the user's lines
            raise exc.with_traceback(user_frames(exc.__traceback__, filename)) from None
        if args.variable:
            self.ip.user_ns[args.variable] = run.result
        self._show(run, args, baseline)
        return run.result if args.output else None

    def _cell_function(self, cell: str) -> tuple[Any, str]:
        # A leading newline makes line numbers match the cell as shown (line 1 = the magic).
        source = "\n" + self.ip.transform_cell(cell)
        filename = self.ip.compile.cache(source, self.ip.execution_count)
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

    def _show(self, run: TimedRun, args: Any, baseline: TimingResult | None) -> None:
        for note in run.notes:
            print(note, file=sys.stderr if note.startswith("no GPU") else sys.stdout)
        if not args.output:
            display(run.result)
        if baseline is not None:
            print(run.result.compare(baseline))
        if run.trace is not None:
            _show_timeline(run.trace)
        if args.roofline:
            _show_roofline(run.result)


def _show_timeline(trace: Any) -> None:
    try:
        from perflab.render.timeline import timeline
    except ImportError:
        return
    display(timeline(trace))


def _show_roofline(result: TimingResult) -> None:
    from perflab.render.roofline import roofline

    try:
        display(roofline([result], device=result.device))
    except PerflabError as exc:  # e.g. a CPU whose ceilings were never measured
        print(f"roofline: {exc}", file=sys.stderr)


MAGICS = GpuProfileMagics
