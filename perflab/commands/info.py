"""``perflab info``: backend, devices, versions, CUDA tools, and where perflab's GPU paths
last ran on a GPU (with the files changed since)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from perflab.commands._common import Subcommands, print_json

if TYPE_CHECKING:
    from perflab.machine.gpu_paths import ValidationStatus


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "info",
        help="show the backend, devices, library versions and CUDA tools found",
        description="Show what perflab sees on this machine: the timing backend (cuda or "
        "cpu), devices, versions of torch/triton/cupy/nvtx and the CUDA tools found; and on "
        "which GPU, at which commit, perflab's GPU paths were last validated, with the "
        "files changed since (not validated on a GPU).",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from perflab.capture.env import info

    doc = info()
    validation, problem = gpu_validation()
    if args.json:
        print_json({**doc, "gpu_validation": {"error": problem} if problem else validation})
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
    print(validation_text(validation, problem))
    return 0


def gpu_validation() -> tuple[ValidationStatus | None, str | None]:
    """The package's GPU validation record with the files changed since (None without a
    record), or why it cannot be read."""
    from perflab.machine.gpu_paths import validation_status

    try:
        return validation_status(), None
    except (OSError, ValueError) as exc:
        return None, str(exc)


def validation_text(status: ValidationStatus | None, problem: str | None) -> str:
    from perflab.machine.gpu_paths import status_line

    if problem is not None:
        return f"GPU paths: the validation record cannot be read ({problem})"
    return status_line(status)


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
