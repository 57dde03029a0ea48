"""``perflab ptx FILE.cu`` (also ``perflab compile``): compile CUDA C++ and show its
resources, occupancy, instruction mix and insights, or ``--json``.

The option definitions and the options-to-call code here are shared with ``%%ptx``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perflab.capture.toolchain import DEFAULT_TIMEOUT_S
from perflab.commands._common import print_json
from perflab.errors import InputError
from perflab.frontend import add_arguments
from perflab.model.kernel import CompileResult
from perflab.model.units import parse_size

# (flags, argparse keyword arguments), shared by the CLI and the magic
COMPILE_ARGUMENTS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (
        ("--arch",),
        dict(
            default=None,
            metavar="SM",
            help="target, e.g. sm_80, sm_90a, sm_100a (default: the current GPU, else sm_90a)",
        ),
    ),
    (
        ("--flags",),
        dict(
            default="",
            metavar="FLAGS",
            help='extra nvcc flags, e.g. "-maxrregcount=32 -DN=4 -O3 -Xptxas -v": '
            "-D, -U, -I, -O, -maxrregcount, -Xptxas and the math, warning and "
            "lambda switches, with checked values; anything else is refused with the list",
        ),
    ),
    (("--std",), dict(default="c++17", help="C++ standard (default c++17)")),
    (
        ("--kernel",),
        dict(default=None, metavar="NAME", help="show only this kernel (name or unique prefix)"),
    ),
    (
        ("--block",),
        dict(
            type=int,
            default=None,
            metavar="N",
            help="threads per block for the occupancy estimate (default 256; "
            "Triton: num_warps x 32)",
        ),
    ),
    (
        ("--smem",),
        dict(
            default=None,
            metavar="BYTES",
            help="dynamic shared memory per block for occupancy, e.g. 48K",
        ),
    ),
    (
        ("--timeout",),
        dict(
            type=float,
            default=DEFAULT_TIMEOUT_S,
            metavar="S",
            help=f"seconds a compiler run may take (default {DEFAULT_TIMEOUT_S:g})",
        ),
    ),
]


# options whose value may itself start with "-": argparse reads `--flags "-DX=1"` as two
# options ("expected one argument"), so such a pair is joined into `--flags=-DX=1` first
DASH_VALUE_OPTIONS = ("--flags",)


def join_dash_values(argv: Sequence[str], options: Sequence[str] = DASH_VALUE_OPTIONS) -> list[str]:
    """``[..., "--flags", "-DX=1", ...]`` -> ``[..., "--flags=-DX=1", ...]``."""
    joined: list[str] = []
    position = 0
    while position < len(argv):
        token = argv[position]
        following = argv[position + 1] if position + 1 < len(argv) else None
        if token in options and following is not None and following.startswith("-"):
            joined.append(f"{token}={following}")
            position += 2
        else:
            joined.append(token)
            position += 1
    return joined


def accept_dash_values(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` (a subcommand's) join :data:`DASH_VALUE_OPTIONS` values first;
    argparse hands a subcommand its arguments through ``parse_known_args``."""
    parse = parser.parse_known_args

    def parse_joined(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return parse(join_dash_values(sys.argv[1:] if args is None else args), namespace)

    setattr(parser, "parse_known_args", parse_joined)  # noqa: B010  (an instance override)


def default_arch() -> str:
    """The current GPU's target (``sm_90a`` on a Hopper GPU), else sm_90a."""
    from perflab.analysis.arch import Arch, parse_arch
    from perflab.capture.env import gpu_devices

    for dev in gpu_devices():
        try:
            return Arch.preferred(parse_arch(str(dev.get("compute_capability", ""))).cc).name
        except InputError:
            continue
    return "sm_90a"


def dynamic_smem(args: argparse.Namespace) -> int | None:
    if args.smem is None:
        return None
    try:
        return parse_size(str(args.smem))
    except ValueError as exc:
        raise InputError(f"--smem: {exc}") from None


def view_options(args: argparse.Namespace, **extra: Any) -> Any:
    from perflab.render.ptx_view import ViewOptions

    return ViewOptions(
        kernel=args.kernel, block_size=args.block, dynamic_shared=dynamic_smem(args), **extra
    )


def compile_cuda_from_args(
    source: str, args: argparse.Namespace, *, source_name: str, include_dirs: list[str]
) -> CompileResult:
    from perflab.capture.compile import compile_cuda

    result = compile_cuda(
        source,
        arch=args.arch or default_arch(),
        flags=args.flags,
        std=args.std,
        timeout=args.timeout,
        source_name=source_name,
        include_dirs=include_dirs,
    )
    if args.kernel:
        result.kernel(args.kernel)  # fail early, naming the kernels there are
    return result


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ptx",
        aliases=["compile"],
        help="compile CUDA C++ to PTX/SASS: resources, occupancy, instruction mix (no GPU)",
        description="Compile a .cu file with nvcc for a target GPU (no GPU needed) and show "
        "each kernel's registers, spills, shared memory, occupancy, instruction mix and "
        "plain-language insights; --json gives machine-readable output with SASS mapped "
        "to source lines. Compile errors print FILE:LINE: error: ... and exit 1.",
    )
    p.add_argument("file", metavar="FILE.cu", help="CUDA C++ source file")
    add_arguments(p, COMPILE_ARGUMENTS)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=run)
    accept_dash_values(p)


def kernel_json(result: CompileResult, name: str | None) -> dict[str, Any]:
    kernels = [result.kernel(name)] if name else result.kernels
    return {
        "arch": result.arch,
        "kernels": [
            {
                "name": k.name,
                "mangled": k.mangled,
                "registers": k.resources.registers,
                "spill_stores": k.resources.spill_stores,
                "spill_loads": k.resources.spill_loads,
                "shared_bytes": k.resources.shared_bytes,
                "stack": k.resources.stack,
                "opcodes": k.opcodes,
                "instruction_mix": k.instruction_mix,
                "sass": [
                    {"offset": s.offset, "text": s.text, "line": s.line}
                    for s in k.sass_lines
                    if not s.is_label
                ],
            }
            for k in kernels
        ],
    }


def run(args: argparse.Namespace) -> int:
    from perflab.capture.compile import CompileError
    from perflab.render.ptx_view import compile_text

    path = Path(args.file)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=str(path)) from None
    try:
        result = compile_cuda_from_args(
            source, args, source_name=str(path), include_dirs=[str(path.resolve().parent)]
        )
    except CompileError as exc:
        print(exc.details, file=sys.stderr)  # FILE:LINE: error: ... and the source excerpt
        return 1
    if args.json:
        print_json(kernel_json(result, args.kernel))
    else:
        print(compile_text(result, view_options(args)))
    return 0
