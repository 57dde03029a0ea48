"""``%%ptx``: compile a cell of CUDA C++ or Triton and show Source | PTX | SASS
(see ``%%ptx --help`` or ``%ptx --help``). Options and compile steps come from
:mod:`perflab.frontend`, shared with ``perflab ptx``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import magic_arguments
from IPython.display import display
from IPython.utils.process import arg_split  # type: ignore[attr-defined]  # (re-exported)

from perflab.errors import PerflabError
from perflab.frontend import (
    COMPILE_ARGUMENTS,
    TRITON_ARGUMENTS,
    ArgumentOptions,
    ArgumentSpecs,
    compile_cuda_from_args,
    compile_triton_specs,
    join_dash_values,
    magic_arguments_from,
    triton_specs,
    unquote,
    view_options,
)
from perflab.magics import help_requested, magic_help, shell_of
from perflab.model.kernel import CompileResult

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

# the options only a notebook cell has
CELL_ARGUMENTS: ArgumentSpecs = [
    (
        ("--lang",),
        ArgumentOptions(
            choices=("cuda", "triton"),
            default=None,
            help="language of the cell (default: triton if it uses @triton.jit, else cuda)",
        ),
    ),
    (
        ("--show",),
        ArgumentOptions(
            default="source,ptx,sass",
            metavar="PANES",
            help="panes to show: source,ptx,sass (Triton also ttir,ttgir,llir)",
        ),
    ),
    (
        ("--diff",),
        ArgumentOptions(metavar="NAME", help="compare with the CompileResult stored in NAME"),
    ),
    (
        ("--run",),
        ArgumentOptions(
            metavar="NAME",
            help="GPU only: launch the kernel with the launch dict "
            "in NAME ({'grid':..., 'block':..., 'args':...}) and time it",
        ),
    ),
    (
        ("-v",),
        ArgumentOptions(dest="variable", metavar="NAME", help="store the CompileResult in NAME"),
    ),
    (
        ("-o",),
        ArgumentOptions(
            dest="output", action="store_true", help="return the CompileResult as the cell's value"
        ),
    ),
]
# what the magic returns (-o) and stores (-v): one result, or one per Triton spec
CellValue = CompileResult | list[CompileResult]
QUOTED_OPTIONS = ("flags", "signature", "constexprs", "show", "kernel")


def guess_lang(cell: str) -> str:
    return "triton" if "@triton.jit" in cell or "import triton" in cell else "cuda"


@magics_class
class PtxMagics(Magics):
    @property
    def ip(self) -> InteractiveShell:
        """The shell (always set once the magics are registered)."""
        return shell_of(self)

    @magic_arguments()
    @magic_arguments_from(COMPILE_ARGUMENTS + TRITON_ARGUMENTS + CELL_ARGUMENTS)
    @line_cell_magic
    def ptx(self, line: str, cell: str | None = None) -> CellValue | None:
        """Compile the cell for a GPU target (no GPU needed) and show resources, occupancy,
        instruction mix, insights and Source | PTX | SASS side by side, lines linked by
        colour (hover or click a line).

        CUDA C++ cells are compiled with nvcc (CUB, Thrust and libcu++ headers work).
        Triton cells define @triton.jit functions and say how to compile them, either
        with --signature/--constexprs (for the one jit function, or --kernel NAME) or by
        creating specs in the cell::

            from perflab.capture.compile import TritonSpec
            spec = TritonSpec(add, signature=["*fp32", "*fp32", "i32"],
                              constexprs={"BLOCK": 1024}, num_warps=4)

        Compile errors are shown with the cell's line numbers. ``%ptx --help`` (or
        ``--help`` on a ``%%ptx`` line) prints this help.
        """
        __tracebackhide__ = True  # IPython hides this frame
        if help_requested(line):
            print(magic_help(self.ptx))
            return None
        if cell is None:
            raise UsageError(
                "%ptx compiles a cell: put %%ptx on the first line of a cell of CUDA C++ or "
                "Triton (%ptx --help lists the options)"
            )
        # `--flags -DX=1` and `--flags "-DX=1"` both work (argparse alone refuses the first)
        args = self.ptx.parser.parse_args(join_dash_values(arg_split(line)))
        for name in QUOTED_OPTIONS:
            setattr(args, name, unquote(getattr(args, name)))
        try:
            shown = self._show(self._compile(args, line, cell), args)
        except PerflabError as exc:
            raise UsageError(str(exc)) from None
        if args.variable:
            self.ip.user_ns[args.variable] = shown
        return shown if args.output else None

    def _compile(self, args: argparse.Namespace, line: str, cell: str) -> list[CompileResult]:
        if (args.lang or guess_lang(cell)) == "cuda":
            # line 1 is the magic's line, so diagnostics and panes number lines as the cell
            source = f"// %%ptx {line}".rstrip() + "\n" + cell
            return [compile_cuda_from_args(source, args, source_name="cell", include_dirs=[])]
        specs = triton_specs(self._run_cell(cell), args)
        return compile_triton_specs(specs, args, source_name="cell")

    def _run_cell(self, cell: str) -> list[object]:
        """Run the cell in the user's namespace; the values it added."""
        before = {id(v) for v in self.ip.user_ns.values()}
        source = cell_source(self.ip.transform_cell(cell), cell)
        filename = self.ip.compile.cache(source, self.ip.execution_count)
        exec(compile(source, filename, "exec"), self.ip.user_ns)  # noqa: S102  (the user's cell)
        return [v for v in list(self.ip.user_ns.values()) if id(v) not in before]

    def _show(self, results: list[CompileResult], args: argparse.Namespace) -> CellValue:
        from perflab.render.ptx_view import CompileView, parse_show

        baseline = self._baseline(args.diff)
        for result in results:
            show = parse_show(args.show, result.lang)
            opts = view_options(args, result, show=show, diff_with=baseline)
            if args.run:
                opts.notes.append(self._run(result, args))
            if not args.output:
                display(CompileView(result, opts))
        return results[0] if len(results) == 1 else results

    def _baseline(self, name: str | None) -> CompileResult | None:
        if name is None:
            return None
        value = self.ip.user_ns.get(name)
        if not isinstance(value, CompileResult):
            found = "nothing" if value is None else type(value).__name__
            raise UsageError(
                f"--diff {name}: expected a CompileResult in {name}, found {found}"
                " (store one with -v NAME)"
            )
        return value

    def _run(self, result: CompileResult, args: argparse.Namespace) -> str:
        from perflab.capture.compile import launch

        spec = self.ip.user_ns.get(args.run)
        if not isinstance(spec, dict):
            raise UsageError(f"--run {args.run}: expected a dict with grid, block and args")
        timing = launch(result, spec, kernel=args.kernel)
        display(timing)
        return f"ran {result.kernel(args.kernel).name}: {timing.summary_line()}"


def _leading_blank_lines(text: str) -> int:
    count = 0
    for line in text.splitlines():
        if line.strip():
            break
        count += 1
    return count


def cell_source(transformed: str, cell: str) -> str:
    """The transformed cell, padded so that line N is the cell's line N as shown (line 1
    is the magic's line; IPython's transform drops leading blank lines)."""
    dropped = max(_leading_blank_lines(cell) - _leading_blank_lines(transformed), 0)
    return "\n" * (1 + dropped) + transformed


MAGICS = PtxMagics
