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

Memory levels are spelled one way, as the sweeps name them: ``"L1"``, ``"L2"``, ``"L3"``,
``"HBM"``, ``"DRAM"`` (``"HBM far"``: a second plateau of the same level). A file that
spells one otherwise (``"l2"``, ``"hbm"``, ``"L1d"``) loads under that spelling.
"""

from __future__ import annotations

import os
import re
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
_CACHE_LEVEL = re.compile(r"l(\d)d?", re.IGNORECASE)  # "l2", "L1d": a CPU's data cache
_MEMORY = ("hbm", "dram", "gddr")


def level_name(name: str) -> str:
    """The one spelling of a memory level: ``"l3"`` -> ``"L3"``, ``"hbm far"`` ->
    ``"HBM far"``, ``"L1d"`` -> ``"L1"``; a name that is no cache level or device memory
    (``"level 2"``, ``"cache"``) stays as it is, spaces trimmed."""
    first, _, rest = " ".join(name.split()).partition(" ")
    cache = _CACHE_LEVEL.fullmatch(first)
    if cache is not None:
        first = f"L{cache.group(1)}"
    elif first.lower() in _MEMORY:
        first = first.upper()
    return f"{first} {rest}" if rest else first


def level_names(bandwidth: dict[str, float]) -> dict[str, float]:
    """``bandwidth`` keyed by :func:`level_name`; ValueError when two keys name one level."""
    named: dict[str, float] = {}
    spelled: dict[str, str] = {}
    for key, value in bandwidth.items():
        name = level_name(key)
        if name in named:
            raise ValueError(f"{spelled[name]!r} and {key!r} name one memory level, {name}")
        named[name], spelled[name] = value, key
    return named


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

    def __post_init__(self) -> None:
        self.bandwidth = level_names(self.bandwidth)

    def summary(self) -> dict[str, object]:
        """What ``perflab ceilings --json`` prints: device, backend, flops, bandwidth (the
        document :class:`perflab.model.json_outputs.CeilingsView` declares)."""
        from perflab.model.json_outputs import CeilingsView
        from perflab.model.schema import encode, view

        return encode(view(self, CeilingsView))

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
