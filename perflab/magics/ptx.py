"""``%%ptx``: compile a cell of CUDA C++ or Triton and show Source | PTX | SASS
(see ``%%ptx --help`` or ``%ptx --help``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display
from IPython.utils.process import arg_split  # type: ignore[attr-defined]  # (re-exported)

from perflab.commands.ptx import (
    COMPILE_ARGUMENTS,
    compile_cuda_from_args,
    default_arch,
    join_dash_values,
    view_options,
)
from perflab.errors import PerflabError
from perflab.frontend import magic_arguments_from
from perflab.magics import help_requested, magic_help
from perflab.model.kernel import CompileResult

F = TypeVar("F", bound=Callable[..., Any])


_with_compile_arguments = magic_arguments_from(COMPILE_ARGUMENTS)


def guess_lang(cell: str) -> str:
    return "triton" if "@triton.jit" in cell or "import triton" in cell else "cuda"


@magics_class
class PtxMagics(Magics):
    @property
    def ip(self) -> Any:
        """The shell (always set once the magics are registered)."""
        return self.shell

    @magic_arguments()
    @_with_compile_arguments
    @argument(
        "--lang",
        choices=("cuda", "triton"),
        default=None,
        help="language of the cell (default: triton if it uses @triton.jit, else cuda)",
    )
    @argument(
        "--show",
        default="source,ptx,sass",
        metavar="PANES",
        help="panes to show: source,ptx,sass (Triton also ttir,ttgir,llir)",
    )
    @argument(
        "--signature",
        default=None,
        metavar="TYPES",
        help="Triton: types of the non-constexpr parameters in order, e.g. "
        '"*fp32,*fp32,i32" (or create a TritonSpec in the cell)',
    )
    @argument(
        "--constexprs",
        default=None,
        metavar="K=V,...",
        help="Triton: values of the tl.constexpr parameters, e.g. BLOCK=1024",
    )
    @argument("--num-warps", type=int, default=4, help="Triton: warps per program (default 4)")
    @argument("--num-stages", type=int, default=3, help="Triton: pipeline stages (default 3)")
    @argument("--diff", metavar="NAME", help="compare with the CompileResult stored in NAME")
    @argument(
        "--run",
        metavar="NAME",
        help="GPU only: launch the kernel with the launch dict "
        "in NAME ({'grid':..., 'block':..., 'args':...}) and time it",
    )
    @argument("-v", dest="variable", metavar="NAME", help="store the CompileResult in NAME")
    @argument(
        "-o",
        dest="output",
        action="store_true",
        help="return the CompileResult as the cell's value",
    )
    @line_cell_magic
    def ptx(self, line: str, cell: str | None = None) -> Any:
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
        for name in ("flags", "signature", "constexprs", "show"):
            setattr(args, name, unquote(getattr(args, name)))
        try:
            results = self._compile(args, line, cell)
            shown = self._show(results, args)
        except PerflabError as exc:
            raise UsageError(str(exc)) from None
        if args.variable:
            self.ip.user_ns[args.variable] = shown
        return shown if args.output else None

    def _compile(self, args: Any, line: str, cell: str) -> list[CompileResult]:
        lang = args.lang or guess_lang(cell)
        if lang == "cuda":
            # line 1 is the magic's line, so diagnostics and panes number lines as the cell
            source = f"// %%ptx {line}".rstrip() + "\n" + cell
            return [compile_cuda_from_args(source, args, source_name="cell", include_dirs=[])]
        return [
            spec.compile(args.arch or default_arch(), args.timeout, source_name="cell")
            for spec in self._triton_specs(args, cell)
        ]

    def _triton_specs(self, args: Any, cell: str) -> list[Any]:
        from perflab.capture.compile import TritonSpec

        before = {id(v) for v in self.ip.user_ns.values()}
        source = cell_source(self.ip.transform_cell(cell), cell)
        filename = self.ip.compile.cache(source, self.ip.execution_count)
        exec(compile(source, filename, "exec"), self.ip.user_ns)  # noqa: S102  (the user's cell)
        new = [v for v in list(self.ip.user_ns.values()) if id(v) not in before]
        specs = [v for v in new if isinstance(v, TritonSpec)]
        if args.signature is None:
            if not specs:
                raise UsageError(
                    "no Triton compile spec: pass --signature (and --constexprs) "
                    "or create a perflab.capture.compile.TritonSpec in the cell"
                )
            return specs
        jitted = [v for v in new if hasattr(v, "arg_names") and hasattr(v, "fn")]
        if args.kernel:
            jitted = [f for f in jitted if f.__name__ == args.kernel]
        if len(jitted) != 1:
            names = ", ".join(f.__name__ for f in jitted) or "none"
            raise UsageError(
                f"--signature needs exactly one @triton.jit function (found {names});"
                " choose one with --kernel NAME"
            )
        return [
            TritonSpec(
                jitted[0],
                signature=args.signature,
                constexprs=parse_constexprs(args.constexprs or ""),
                num_warps=args.num_warps,
                num_stages=args.num_stages,
            )
        ]

    def _show(self, results: list[CompileResult], args: Any) -> Any:
        from perflab.render.ptx_view import CompileView, parse_show

        baseline = self._baseline(args.diff)
        for result in results:
            opts = view_options(args, show=parse_show(args.show, result.lang), diff_with=baseline)
            if args.lang == "triton" or result.lang == "triton":
                opts.kernel = None  # Triton results hold one kernel each
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

    def _run(self, result: CompileResult, args: Any) -> str:
        from perflab.capture.compile import launch

        spec = self.ip.user_ns.get(args.run)
        if not isinstance(spec, dict):
            raise UsageError(f"--run {args.run}: expected a dict with grid, block and args")
        timing = launch(result, spec, kernel=args.kernel)
        display(timing)
        return f"ran {result.kernel(args.kernel).name}: {timing.summary_line()}"


def unquote(value: str | None) -> str | None:
    """IPython keeps the quotes around ``--flags "-O3 -DN=4"``: drop one matching pair."""
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


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


def parse_constexprs(text: str) -> dict[str, Any]:
    """``"BLOCK=1024,EVEN=True"`` -> ``{"BLOCK": 1024, "EVEN": True}``."""
    import ast

    found: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if not sep or not name.strip().isidentifier():
            raise UsageError(f"--constexprs: expected NAME=VALUE, not {part!r}")
        try:
            found[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            found[name.strip()] = value.strip()
    return found


MAGICS = PtxMagics
