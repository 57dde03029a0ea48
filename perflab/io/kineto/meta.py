"""The trace's ``meta`` from the file's top level: source, devices, distributed info (rank,
world size, backend and, from pg_config, each process group's size)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from perflab.errors import InputError
from perflab.io.kineto.decode import Doc
from perflab.io.kineto.records import I64_MAX
from perflab.model.serialize import MAX_DEPTH, json_safe, nesting_depth

# deviceProperties that say the GPUs are AMD's (ROCm traces name them "AMD Instinct MI250X")
_AMD_NAME = re.compile(r"\b(?:AMD|Instinct|Radeon)\b|^gfx[0-9]")


def gpu_word(devices: Sequence[object]) -> str:
    """How the trace's GPUs are called in labels: "AMD GPU" where deviceProperties name an
    AMD device (a ROCm trace), else "GPU"."""
    for device in devices:
        if isinstance(device, dict) and any(
            isinstance(device.get(key), str) and _AMD_NAME.search(device[key])
            for key in ("name", "vendor", "gcnArchName")
        ):
            return "AMD GPU"
    return "GPU"


def trace_meta(doc: Doc, source: str, python: bool, events_read: int) -> dict[str, object]:
    meta: dict[str, object] = {
        "source": source,
        "format": "kineto",
        "events_read": events_read,
        "devices": [_plain(d, source) for d in doc.devices if isinstance(d, dict)],
        "python_functions": python,
        **doc.extra,
    }
    if gpu_word(doc.devices) != "GPU":
        meta["gpu"] = gpu_word(doc.devices)
    for key in ("rank", "world_size", "backend"):
        if key in doc.distributed:
            meta[key] = _plain(doc.distributed[key], source)
    groups = group_sizes(doc.distributed.get("pg_config"))
    if groups:
        meta["process_groups"] = groups
    for key, low, what in (("rank", 0, "a rank number"), ("world_size", 1, "a size")):
        value = meta.get(key, low)
        if isinstance(value, str) and value.isascii() and value.isdigit():
            value = meta[key] = int(value)  # some writers give the rank as text
        if type(value) is not int or not low <= value <= I64_MAX:  # analyses count with it
            raise InputError(f"distributedInfo.{key} {value!r} is not {what}", source=source)
    return meta


def group_sizes(config: object) -> dict[str, int]:
    """distributedInfo.pg_config's process groups as ``{pg_name: pg_size}`` (a job compares
    its ranks' groups); entries without a name and a size are left out."""
    if not isinstance(config, list):
        return {}
    return {
        str(group["pg_name"]): group["pg_size"]
        for group in config[:MAX_GROUPS]
        if isinstance(group, dict)
        and isinstance(group.get("pg_name"), (str, int))
        and type(group.get("pg_size")) is int
        and 0 < group["pg_size"] <= I64_MAX
    }


MAX_GROUPS = 4096  # process groups kept per trace: their sizes, not their member lists


def _plain(value: object, source: str) -> object:
    """Keep meta JSON-able and shallow (device properties are nested plain values)."""
    if nesting_depth(value) > MAX_DEPTH:
        raise InputError(f"trace metadata nested more than {MAX_DEPTH} deep", source=source)
    return json_safe(json.loads(json.dumps(value, default=str)))
