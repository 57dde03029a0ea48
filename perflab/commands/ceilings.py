"""``perflab ceilings``: measure this device's compute and bandwidth ceilings and store
them in the cache file the roofline reads (see perflab.model.ceilings)."""

from __future__ import annotations

import argparse

from perflab.commands._common import Subcommands, print_json


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "ceilings",
        help="measure compute (GFLOP/s per dtype) and bandwidth (GB/s per level) ceilings",
        description="Run the matmul and copy-bandwidth sweeps, keep the best compute per "
        "dtype and the bandwidth of each memory level, and store them per device in "
        "$PERFLAB_CACHE_DIR/ceilings.json (default ~/.cache/perflab) for the roofline. "
        "Without a GPU this measures the CPU.",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"device", "backend", "flops", "bandwidth"} as JSON',
    )
    p.add_argument("--quick", action="store_true", help="fewer, smaller points")
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--no-save", action="store_true", help="do not update the cache file")
    p.add_argument(
        "--show",
        action="store_true",
        help="print the stored ceilings of this device instead of measuring",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from perflab.capture.env import current_device_name
    from perflab.errors import InputError
    from perflab.model.ceilings import cache_path, load_ceilings, save_ceilings

    if args.show:
        stored = load_ceilings(current_device_name())
        if stored is None:
            raise InputError(
                f"no ceilings stored for {current_device_name()!r}; run 'perflab ceilings' first",
                source=str(cache_path()),
            )
        ceilings = stored
    else:
        from perflab.machine.ceilings import measure

        ceilings, _, _ = measure(
            backend=args.backend, quick=args.quick, show_progress=False if args.json else None
        )
        if not args.no_save:
            save_ceilings(ceilings)
    if args.json:
        print_json(ceilings.summary())
    else:
        print(ceilings)
        if not args.show and not args.no_save:
            print(f"stored in {cache_path()}")
    return 0
