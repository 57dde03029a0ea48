"""Measured ceilings of a device: compute per dtype and memory bandwidth per level.

``perflab ceilings`` measures them and stores them, one entry per device name, in a small
JSON cache file: ``$PERFLAB_CACHE_DIR/ceilings.json``, or ``~/.cache/perflab/ceilings.json``
when that variable is unset. Readers (the roofline) call::

    from perflab.model.ceilings import load_ceilings
    c = load_ceilings("NVIDIA H200")        # None when that device was never measured
    c.flops["bf16"]                        # GFLOP/s, measured
    c.bandwidth["HBM"]                     # GB/s, measured

Device names are those of :func:`perflab.capture.env.current_device_name` (``"NVIDIA
H200"``, ``"CPU: AMD EPYC"``). Every number in the file was measured on that device at
``date``; nothing here is a datasheet value.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perflab.errors import SchemaError
from perflab.model.display import Shown
from perflab.model.fields import Fields
from perflab.model.serialize import CACHE_ENV as CACHE_ENV
from perflab.model.serialize import cache_dir, dump_json, load_json
from perflab.model.timing import now_iso

KIND = "Ceilings"
FILE_NAME = "ceilings.json"


@dataclass
class Ceilings(Shown):
    """Measured peaks of one device: ``flops`` in GFLOP/s per dtype, ``bandwidth`` in GB/s
    per memory level (``"L2"``, ``"HBM"``, ``"DRAM"``...)."""

    device: str
    backend: str
    flops: dict[str, float] = field(default_factory=dict)
    bandwidth: dict[str, float] = field(default_factory=dict)
    date: str = field(default_factory=now_iso)
    versions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """What ``perflab ceilings --json`` prints: device, backend, flops, bandwidth."""
        return {
            "device": self.device,
            "backend": self.backend,
            "flops": dict(self.flops),
            "bandwidth": dict(self.bandwidth),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "date": self.date,
            "versions": dict(self.versions),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, doc: Any, source: str = "ceilings") -> Ceilings:
        """Checked field by field: a bad one is a SchemaError naming the file and field."""
        f = Fields(doc, source)
        return cls(
            device=f.text("device"),
            backend=f.text("backend"),
            flops=_rates(f.mapping("flops"), "flops", source),
            bandwidth=_rates(f.mapping("bandwidth"), "bandwidth", source),
            date=f.text("date", ""),
            versions=f.text_map("versions"),
            notes=f.texts("notes"),
        )


def _rates(values: Any, what: str, source: str) -> dict[str, float]:
    if not isinstance(values, dict):
        raise SchemaError(f"{what} must be an object of name: number", source=source)
    out = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(f"{what}[{key!r}] is not a number: {value!r}", source=source)
        if not (math.isfinite(value) and value > 0):
            raise SchemaError(f"{what}[{key!r}] must be positive, not {value!r}", source=source)
        out[str(key)] = float(value)
    return out


def cache_path() -> Path:
    """``$PERFLAB_CACHE_DIR/ceilings.json`` or ``~/.cache/perflab/ceilings.json``."""
    return cache_dir() / FILE_NAME


def all_ceilings(path: str | os.PathLike[str] | None = None) -> dict[str, Ceilings]:
    """Every device's ceilings in the cache file (empty when there is no file yet)."""
    target = Path(path) if path is not None else cache_path()
    if not target.exists():
        return {}
    doc = load_json(KIND, target)
    devices = doc.get("devices")
    if not isinstance(devices, dict):
        raise SchemaError("no 'devices' object", source=str(target))
    return {
        str(name): Ceilings.from_dict(entry, f"{target} [{name}]")
        for name, entry in devices.items()
    }


def load_ceilings(device_name: str, path: str | os.PathLike[str] | None = None) -> Ceilings | None:
    """The measured ceilings of ``device_name``, or ``None`` if it was never measured.

    Raises :class:`perflab.errors.SchemaError` (saying which file) when the cache file
    exists but is damaged.
    """
    return all_ceilings(path).get(device_name)


def save_ceilings(ceilings: Ceilings, path: str | os.PathLike[str] | None = None) -> Path:
    """Store ``ceilings`` under its device name, keeping other devices' entries."""
    target = Path(path) if path is not None else cache_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    devices = {name: c.to_dict() for name, c in all_ceilings(target).items()}
    devices[ceilings.device] = ceilings.to_dict()
    return dump_json(KIND, {"devices": devices}, target)
