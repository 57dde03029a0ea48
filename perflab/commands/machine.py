"""``perflab machine NAME``: measure this machine with a microbenchmark (or replay a saved
result)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.commands._common import Subcommands, print_json
from perflab.errors import InputError
from perflab.model.units import parse_size

if TYPE_CHECKING:
    from perflab.model.machine import BenchResult, CollectiveResult

SWEEPS = ("latency", "bandwidth", "launch", "matmul", "h2d")
HELP = {
    "latency": "pointer-chase latency over working sets (L1/L2/L3 or HBM plateaus)",
    "bandwidth": "copy and triad GB/s over working sets",
    "launch": "per-kernel launch cost: stream, sync after each, CUDA graph",
    "matmul": "matmul GFLOP/s per dtype over sizes (tensor cores: TF32, BF16, FP16, FP8)",
    "h2d": "host<->device copies, pinned vs pageable (GPU only)",
    "collectives": "torch.distributed collectives with nccl-tests' algbw/busbw",
    "topology": "what links the GPUs (nvidia-smi topo -m, NCCL transports)",
}


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "machine",
        help="measure this machine: memory hierarchy, launch latency, tensor cores, collectives",
        description="Measure this machine with a microbenchmark and print its sweep and the "
        "plateaus found in it: the memory hierarchy (latency and bandwidth of each cache level "
        "and of memory), kernel launch latency, tensor-core and matmul throughput, host-device "
        "copies, collectives between GPUs and the links that carry them. Without a GPU the "
        "CPU analogs run (and say so). The sweeps and collectives --save a result and "
        "--replay a saved one.",
        epilog="Run 'perflab machine NAME --help' for a microbenchmark's options.",
    )
    names = p.add_subparsers(dest="microbenchmark", metavar="NAME", required=True)
    for name in (*SWEEPS, "collectives", "topology"):
        q = names.add_parser(name, help=HELP[name], description=HELP[name])
        q.add_argument("--json", action="store_true", help="print machine-readable JSON")
        if name == "topology":
            q.add_argument(
                "--nccl-log",
                type=Path,
                metavar="FILE",
                help="NCCL_DEBUG=INFO output to read NCCL's transports from",
            )
            q.set_defaults(handler=run_topology)
            continue
        q.add_argument("--save", type=Path, metavar="FILE", help="save the result as JSON")
        q.add_argument(
            "--replay", type=Path, metavar="FILE", help="show a saved result instead of measuring"
        )
        q.add_argument("--no-progress", action="store_true", help="no progress bar")
        if name == "collectives":
            _collective_options(q)
            q.set_defaults(handler=run_collectives)
        else:
            q.add_argument(
                "--backend",
                default="auto",
                choices=("auto", "cpu", "cuda"),
                help="where to run (default: cuda when a GPU is there)",
            )
            q.add_argument("--quick", action="store_true", help="fewer, smaller points")
            q.set_defaults(handler=run_sweep)


def _collective_options(q: argparse.ArgumentParser) -> None:
    q.add_argument(
        "--backend",
        default="gloo",
        choices=("gloo", "nccl"),
        help="torch.distributed backend (default gloo, on CPU processes)",
    )
    q.add_argument("--world-size", type=int, default=2, help="ranks to spawn (default 2)")
    q.add_argument(
        "--ops",
        default="all_reduce,all_gather",
        help="comma-separated: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast",
    )
    q.add_argument("--sizes", default="1K,64K,1M", help="message sizes S, e.g. 1K,1M")
    q.add_argument("--timeout", type=float, default=120.0, help="seconds per collective")


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [parse_size(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise InputError(str(exc), source="--sizes") from None
    if not sizes or min(sizes) < 1:
        raise InputError(f"need positive sizes, got {text!r}", source="--sizes")
    return sizes


def _finish(
    args: argparse.Namespace, result: BenchResult | CollectiveResult, as_json: object
) -> int:
    if args.save and result.replayed_from is None:
        result.save(args.save)
    if args.json:
        print_json(as_json)
    else:
        print(result)
    return 0


def run_sweep(args: argparse.Namespace) -> int:
    import importlib

    from perflab.machine._common import result_json
    from perflab.model.machine import BenchResult

    if args.replay:
        result = BenchResult.load(args.replay)
    else:
        module = importlib.import_module(f"perflab.machine.{args.microbenchmark}")
        result = module.run(
            backend=args.backend,
            quick=args.quick,
            show_progress=False if args.json or args.no_progress else None,
        )
    return _finish(args, result, result_json(result))


def run_collectives(args: argparse.Namespace) -> int:
    from perflab.machine import collectives
    from perflab.model.machine import CollectiveResult

    if args.replay:
        result = CollectiveResult.load(args.replay)
    else:
        ops = [op.strip() for op in args.ops.split(",") if op.strip()]
        result = collectives.run(
            backend=args.backend,
            world_size=args.world_size,
            ops=ops,
            sizes=parse_sizes(args.sizes),
            timeout_s=args.timeout,
            show_progress=False if args.json or args.no_progress else None,
        )
    from perflab.model.json_outputs import CollectiveRowView
    from perflab.model.schema import encode, view

    rows = [encode(view(row, CollectiveRowView)) for row in result.rows]
    return _finish(args, result, rows)


def run_topology(args: argparse.Namespace) -> int:
    from perflab.machine import topology

    log = None
    if args.nccl_log:
        try:
            log = args.nccl_log.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", source=str(args.nccl_log)) from None
    result = topology.run(nccl_log=log)
    if args.json:
        print_json(result.to_dict())
    else:
        print(result)
    return 0
