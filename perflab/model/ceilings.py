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

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.model.display import Shown
from perflab.model.serialize import CACHE_ENV as CACHE_ENV
from perflab.model.serialize import cache_dir, dump_json, load_json
from perflab.model.timing import now_iso

if TYPE_CHECKING:
    from perflab.model.saved import CeilingsDoc

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

    def summary(self) -> dict[str, object]:
        """What ``perflab ceilings --json`` prints: device, backend, flops, bandwidth."""
        return {
            "device": self.device,
            "backend": self.backend,
            "flops": dict(self.flops),
            "bandwidth": dict(self.bandwidth),
        }

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> CeilingsDoc:
        from perflab.model.saved import CeilingsDoc

        return CeilingsDoc(
            device=self.device,
            backend=self.backend,
            flops=dict(self.flops),
            bandwidth=dict(self.bandwidth),
            date=self.date,
            versions=dict(self.versions),
            notes=list(self.notes),
        )

    @classmethod
    def from_dict(cls, doc: object, source: str = "ceilings") -> Ceilings:
        """Checked field by field: a bad one is a SchemaError naming the file and field."""
        from perflab.model.saved import CeilingsDoc
        from perflab.model.schema import decode

        return cls.from_document(decode(doc, CeilingsDoc, source))

    @classmethod
    def from_document(cls, doc: CeilingsDoc) -> Ceilings:
        return cls(
            doc.device, doc.backend, doc.flops, doc.bandwidth, doc.date, doc.versions, doc.notes
        )


def cache_path() -> Path:
    """``$PERFLAB_CACHE_DIR/ceilings.json`` or ``~/.cache/perflab/ceilings.json``."""
    return cache_dir() / FILE_NAME


def all_ceilings(path: str | os.PathLike[str] | None = None) -> dict[str, Ceilings]:
    """Every device's ceilings in the cache file (empty when there is no file yet)."""
    target = Path(path) if path is not None else cache_path()
    if not target.exists():
        return {}
    from perflab.model.saved import CeilingsFile
    from perflab.model.schema import decode

    saved = decode(load_json(KIND, target), CeilingsFile, str(target))
    return {name: Ceilings.from_document(entry) for name, entry in saved.devices.items()}


def load_ceilings(device_name: str, path: str | os.PathLike[str] | None = None) -> Ceilings | None:
    """The measured ceilings of ``device_name``, or ``None`` if it was never measured.

    Raises :class:`perflab.errors.SchemaError` (saying which file) when the cache file
    exists but is damaged.
    """
    return all_ceilings(path).get(device_name)


def save_ceilings(ceilings: Ceilings, path: str | os.PathLike[str] | None = None) -> Path:
    """Store ``ceilings`` under its device name, keeping other devices' entries."""
    from perflab.model.saved import CeilingsFile
    from perflab.model.schema import encode

    target = Path(path) if path is not None else cache_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    devices = {name: c.document() for name, c in all_ceilings(target).items()}
    devices[ceilings.device] = ceilings.document()
    return dump_json(KIND, encode(CeilingsFile(devices)), target)
