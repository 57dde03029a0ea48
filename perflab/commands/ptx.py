"""``perflab compile FILE`` (also ``perflab ptx``): compile CUDA C++ (``.cu``) or Triton
(``.py``) and show its resources, occupancy, instruction mix and insights, or ``--json``
(the results' ``to_dict`` with each kernel's report, and each SASS line's control bits,
live registers and barrier waits), and with ``--html OUT.html`` the three-pane view as a
page of its own.

The options and the compile steps are shared with ``%%ptx`` (:mod:`perflab.frontend`).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.commands._common import Subcommands, print_json
from perflab.errors import InputError
from perflab.frontend import (
    COMPILE_ARGUMENTS,
    TRITON_ARGUMENTS,
    accept_dash_values,
    add_arguments,
    compile_cuda_from_args,
    compile_triton_specs,
    join_dash_values,
    triton_specs,
    view_options,
)
from perflab.model.kernel import CompileResult

if TYPE_CHECKING:
    from perflab.analysis.json_views import KernelView, SassLineView
    from perflab.analysis.kernel_report import KernelReport
    from perflab.analysis.sass_control import BarrierLinks
    from perflab.model.kernel import KernelArtifacts, SassLine
    from perflab.render.ptx_view import ViewOptions

Shown = tuple[CompileResult, "ViewOptions", Sequence["KernelReport"]]

__all__ = ["join_dash_values", "register", "run"]


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "compile",
        aliases=["ptx"],
        help="compile CUDA C++ or Triton to PTX/SASS: resources, occupancy, instruction mix "
        "(no GPU)",
        description="Compile a .cu file with nvcc, or the @triton.jit kernels of a .py file "
        "with Triton, for a target GPU (no GPU needed) and show each kernel's registers, "
        "spills, shared memory, occupancy, instruction mix and plain-language insights; "
        "--json gives machine-readable output with SASS mapped to source lines, each "
        "instruction's scheduling controls, live registers and barrier waits; --html writes "
        "the Source | PTX | SASS view as a page of its own. A .cu file is only read, but a "
        ".py file is RUN as Python first (as 'python FILE' would, its folder first on the "
        "import path), so that its kernels exist: compile only a .py file you would run. "
        "Results are cached by source, options, tools and the contents of every header "
        "read (a Triton kernel: as loaded, with the constants of your own modules it "
        "reads); a result from the cache says 'cached' (--json: \"cached\": true). Compile "
        "errors print FILE:LINE: error: ... and exit 1. 'perflab ptx' is the same command.",
    )
    p.add_argument(
        "file",
        metavar="FILE",
        help="CUDA C++ source (.cu, read) or Triton source (.py, run as Python)",
    )
    add_arguments(p, COMPILE_ARGUMENTS)
    add_arguments(p, TRITON_ARGUMENTS)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument(
        "--html",
        metavar="OUT.html",
        help="also write the Source | PTX | SASS view to OUT.html (a standalone page)",
    )
    p.set_defaults(handler=run)
    accept_dash_values(p)


def compile_file(path: Path, args: argparse.Namespace) -> list[CompileResult]:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=str(path)) from None
    if path.suffix != ".py":
        include = [str(path.resolve().parent)]
        return [compile_cuda_from_args(source, args, source_name=str(path), include_dirs=include)]
    # a Triton source runs as `python FILE` would, so that its @triton.jit functions exist
    namespace = run_python_file(source, path)
    specs = triton_specs(list(namespace.values()), args)
    return compile_triton_specs(specs, args, source_name=str(path))


def run_python_file(source: str, path: Path) -> dict[str, object]:
    """Run a Triton source as ``python FILE`` would (so that its ``@triton.jit`` functions
    exist), its folder first on the import path so that its own modules import; its own
    errors become an InputError naming the file and line."""
    namespace: dict[str, object] = {"__name__": "__perflab_ptx__", "__file__": str(path)}
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        exec(compile(source, str(path), "exec"), namespace)  # noqa: S102  (the user's file)
    except Exception as exc:
        raise InputError(
            f"{type(exc).__name__}: {exc}", source=str(path), position=_line_of(exc, path)
        ) from None
    finally:
        sys.path.remove(folder)
    return namespace


def _line_of(exc: Exception, path: Path) -> str | None:
    if isinstance(exc, SyntaxError):
        return f"line {exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    lines = [f.lineno for f in frames if f.filename == str(path)]
    return f"line {lines[-1]}" if lines else None


def result_json(
    result: CompileResult, kernel: str | None, reports: Sequence[KernelReport] = ()
) -> dict[str, object]:
    """The result's saved form (:meth:`CompileResult.to_dict`), less other kernels, with
    ``cached`` (whether it came from the compile cache), each reported kernel's
    ``report`` and, per SASS instruction, ``waits_for`` and ``waited_by`` (byte offsets;
    see :func:`perflab.analysis.sass_control.barrier_links`; None where the control bits
    are not known): the document :class:`perflab.analysis.json_views.CompileJson` declares."""
    from msgspec.structs import asdict

    from perflab.analysis.json_views import CompileJson
    from perflab.model.schema import encode

    kernels = [result.kernel(kernel)] if kernel and result.lang == "cuda" else result.kernels
    by_name = {r.kernel.mangled: r for r in reports}
    shown = [_kernel_view(k, by_name.get(k.mangled)) for k in kernels]
    saved = {**asdict(result.document()), "kernels": shown}
    return encode(CompileJson(**saved, cached=result.cached))


def _kernel_view(kernel: KernelArtifacts, report: KernelReport | None) -> KernelView:
    """The kernel as printed: its saved form and, when it was reported, the report and
    each instruction's barrier links."""
    from msgspec.structs import asdict

    from perflab.analysis.json_views import KernelView

    saved = asdict(kernel.document())
    if report is None:
        return KernelView(**saved)
    links = report.schedule.links if report.schedule is not None else None
    lines = [_line_view(line, links) for line in kernel.sass_lines]
    return KernelView(**{**saved, "sass_lines": lines}, report=report.document())


def _line_view(line: SassLine, links: BarrierLinks | None) -> SassLineView:
    from msgspec.structs import asdict

    from perflab.analysis.json_views import SassLineView

    saved = asdict(line.document())
    if line.offset is None:  # a label
        return SassLineView(**saved)
    waits_for = None if links is None else list(links.waits_for.get(line.offset, ()))
    waited_by = None if links is None else list(links.waited_by.get(line.offset, ()))
    return SassLineView(**saved, waits_for=waits_for, waited_by=waited_by)


def run(args: argparse.Namespace) -> int:
    from perflab.capture.compile import CompileError
    from perflab.render.ptx_view import format_text, reports

    try:
        results = compile_file(Path(args.file), args)
    except CompileError as exc:
        print(exc.details, file=sys.stderr)  # FILE:LINE: error: ... and the source excerpt
        return 1
    analysed = [(r, view_options(args, r)) for r in results]
    shown: list[Shown] = [(r, opts, reports(r, opts)) for r, opts in analysed]
    if args.html:
        write_page(args.html, shown)
    if args.json:
        docs = [result_json(r, args.kernel, found) for r, _, found in shown]
        print_json(docs[0] if len(docs) == 1 else docs)
    else:
        for result, opts, found in shown:
            print(format_text(result, found, opts))
    return 0


def write_page(path: str, shown: Sequence[Shown]) -> None:
    """The HTML view of every result, as one standalone page at ``path``."""
    from perflab.model.serialize import write_text
    from perflab.render.ptx_view import format_html, standalone_page

    body = "".join(format_html(result, found, opts) for result, opts, found in shown)
    title = f"perflab compile: {Path(shown[0][0].source_name).name}" if shown else "perflab"
    write_text(path, standalone_page(body, title))
    print(f"wrote {path}", file=sys.stderr)
