"""``perflab info``: backend, devices, versions and CUDA tools."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from perflab.commands._common import Subcommands, print_json


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "info",
        help="show the backend, devices, library versions and CUDA tools found",
        description="Show what perflab sees on this machine: the timing backend (cuda or "
        "cpu), devices, versions of torch/triton/cupy/nvtx and the CUDA tools found.",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from perflab.capture.env import info

    doc = info()
    if args.json:
        print_json(doc)
        return 0
    print(f"backend: {doc['backend']}" + ("" if doc["backend"] == "cuda" else " (no GPU)"))
    for dev in doc["devices"]:
        print("device:  " + device_text(dev))
    print("versions: " + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()))
    for tool, found in doc["cuda_tools"].items():
        where = (
            "not found"
            if found is None
            else (f"{found['version'] or '?'} ({found['origin']}: {found['path']})")
        )
        print(f"{tool:10s} {where}")
    return 0


def device_text(dev: Mapping[str, object]) -> str:
    """A device as one line: "AMD EPYC (cpu), cores 2, cache L1d 32 KiB / L2 1 MiB / L3 32 MiB";
    sizes in bytes read as sizes (``--json`` keeps the numbers)."""
    from perflab.model.units import format_bytes

    def one(value: object) -> str:
        return format_bytes(value) if isinstance(value, (int, float)) else str(value)

    def size(value: object) -> str:
        if isinstance(value, dict):
            return " / ".join(f"{k} {one(v)}" for k, v in value.items())
        return one(value)

    head = f"{dev.get('name', '?')} ({dev.get('kind', '?')})"
    rest = [
        f"{key.removesuffix('_bytes')} {size(value) if key.endswith('_bytes') else value}"
        for key, value in dev.items()
        if key not in ("name", "kind") and value is not None
    ]
    return ", ".join([head, *rest])
