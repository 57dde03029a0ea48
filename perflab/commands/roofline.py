"""``perflab roofline --device NAME [--ncu FILE] [--point ...] -o OUT.html``."""

from __future__ import annotations

import argparse

from perflab.analysis.precision import PRECISIONS
from perflab.commands._common import Subcommands
from perflab.errors import InputError


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "roofline",
        help="write a roofline chart (device ceilings, kernels from ncu or given points)",
        description="Draw the roofline of a device: measured ceilings when `perflab "
        "ceilings` has measured it, spec-sheet values otherwise (the chart says which). "
        "Points come from an Nsight Compute report (one per memory level) and/or --point.",
    )
    p.add_argument("--device", required=True, help="device name, e.g. H200, 'NVIDIA H100 PCIe'")
    p.add_argument("--ncu", metavar="FILE", help="Nsight Compute report (--csv output or .ncu-rep)")
    p.add_argument(
        "--point",
        action="append",
        default=[],
        metavar="NAME,FLOPS,BYTES,SECONDS",
        help="a kernel given by hand (repeatable)",
    )
    p.add_argument(
        "--dtype",
        choices=PRECISIONS,
        default=None,
        help="the precision the kernels ran in: whose compute ceiling judges them "
        "(default: the highest ceiling, and the chart says their precision is unknown)",
    )
    p.add_argument("-o", "--output", required=True, help="HTML file to write")
    p.add_argument("--text", action="store_true", help="also print the table")
    p.set_defaults(handler=run)


def parse_point(text: str) -> tuple[str, float, float, float]:
    parts = text.rsplit(",", 3)
    if len(parts) != 4:
        raise InputError(f"--point needs NAME,FLOPS,BYTES,SECONDS, got {text!r}")
    try:
        return parts[0], float(parts[1]), float(parts[2]), float(parts[3])
    except ValueError:
        raise InputError(f"--point {text!r}: FLOPS, BYTES and SECONDS must be numbers") from None


def run(args: argparse.Namespace) -> int:
    from perflab.render.roofline import points_from_ncu, roofline

    points: list[object] = [parse_point(t) for t in args.point]
    if args.ncu:
        from perflab.io import load_ncu

        found = points_from_ncu(load_ncu(args.ncu))
        if not found:
            raise InputError("no kernel with a duration and bytes or FLOPs", source=args.ncu)
        points += found
    chart = roofline(points, device=args.device, dtype=args.dtype, dtype_why="--dtype")
    try:
        out = chart.save(args.output)
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", source=args.output) from None
    if args.text:
        print(chart.text())
    print(f"wrote {out} ({len(chart.verdicts)} points on {chart.roof.device}; {chart.roof.source})")
    return 0
