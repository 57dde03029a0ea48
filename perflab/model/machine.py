"""Results of microbenchmark sweeps: series of points, the plateaus found in them, and
collective-communication rows with their alpha-beta fits. Saved as versioned JSON.

A :class:`BenchResult` holds one or more :class:`Series` (for example ``copy`` and
``triad`` for the bandwidth benchmark); each series is columnar: ``x`` (working-set
bytes, matrix size...) against ``y`` (ns, GB/s, GFLOP/s...), with optional extra
columns of the same length (``cycles``) and the :class:`Level` plateaus detected in it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import numpy.typing as npt

from perflab.errors import SchemaError
from perflab.model.display import Shown
from perflab.model.serialize import dump_json, load_json
from perflab.model.timing import now_iso

if TYPE_CHECKING:
    import pandas as pd

    from perflab.model.saved import (
        AlphaBetaDoc,
        CollectiveRowDoc,
        LevelDoc,
        ProvenanceDoc,
        SeriesDoc,
    )

BENCH_KIND = "BenchResult"
COLLECTIVES_KIND = "CollectiveResult"


def _floats(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64).reshape(-1)


def _column(values: list[float | None]) -> npt.NDArray[np.float64]:
    """A saved column: null (not measured) read as NaN."""
    return np.array([math.nan if v is None else v for v in values], dtype=np.float64)


def _finite_list(values: npt.NDArray[np.float64]) -> list[float | None]:
    """JSON has no NaN: missing values are stored as null."""
    return [float(v) if math.isfinite(v) else None for v in values]


def _whole(value: float) -> float:
    """Sizes and counts print as integers in JSON (``4096``, not ``4096.0``)."""
    return int(value) if value.is_integer() else value


@dataclass
class Level:
    """A plateau of a sweep: ``x`` from ``x_min`` to ``x_max`` at about ``value``."""

    name: str
    x_min: float
    x_max: float
    value: float
    points: int

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> LevelDoc:
        from perflab.model.saved import LevelDoc

        return LevelDoc(self.name, self.x_min, self.x_max, self.value, self.points)

    @classmethod
    def from_dict(cls, doc: object, source: str = "<dict>", where: str = "") -> Level:
        from perflab.model.saved import LevelDoc
        from perflab.model.schema import decode

        return cls.from_document(decode(doc, LevelDoc, source, where))

    @classmethod
    def from_document(cls, doc: LevelDoc) -> Level:
        return cls(doc.name, doc.x_min, doc.x_max, doc.value, doc.points)


@dataclass
class Series:
    """One curve of a sweep: ``y`` (in ``y_unit``) against ``x`` (in ``x_unit``)."""

    name: str
    x: npt.NDArray[np.float64]
    y: npt.NDArray[np.float64]
    x_unit: str = "bytes"
    y_unit: str = "ns"
    extra: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    levels: list[Level] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.x = _floats(self.x)
        self.y = _floats(self.y)
        self.extra = {k: _floats(v) for k, v in self.extra.items()}
        for label, column in (("y", self.y), *self.extra.items()):
            if column.size != self.x.size:
                raise ValueError(
                    f"series {self.name!r}: column {label} has {column.size} values, x has "
                    f"{self.x.size}"
                )

    def __len__(self) -> int:
        return int(self.x.size)

    def points(self) -> list[dict[str, float | None]]:
        """Rows ``{x_unit: x, y_unit: y, **extra}`` (the CLI's ``points``)."""
        rows = []
        for i in range(len(self)):
            row: dict[str, float | None] = {
                self.x_unit: _whole(float(self.x[i])),
                self.y_unit: float(self.y[i]),
            }
            for key, column in self.extra.items():
                v = float(column[i])
                row[key] = v if math.isfinite(v) else None
            rows.append(row)
        return rows

    def level_rows(self) -> list[dict[str, Any]]:
        """Rows ``{"name", "<x_unit>_max", y_unit: value}`` in the order found."""
        return [
            {"name": lv.name, f"{self.x_unit}_max": _whole(lv.x_max), self.y_unit: lv.value}
            for lv in self.levels
        ]

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> SeriesDoc:
        from perflab.model.saved import SeriesDoc

        return SeriesDoc(
            name=self.name,
            x_unit=self.x_unit,
            y_unit=self.y_unit,
            x=_finite_list(self.x),
            y=_finite_list(self.y),
            extra={k: _finite_list(v) for k, v in self.extra.items()},
            levels=[lv.document() for lv in self.levels],
        )

    @classmethod
    def from_dict(cls, doc: object, source: str = "<dict>", where: str = "") -> Series:
        """Checked: x finite and >= 0, y and extra columns >= 0 or null (not measured),
        every column as long as x."""
        from perflab.model.saved import SeriesDoc
        from perflab.model.schema import decode

        return cls.from_document(decode(doc, SeriesDoc, source, where))

    @classmethod
    def from_document(cls, doc: SeriesDoc) -> Series:
        return cls(
            name=doc.name,
            x=_column(doc.x),
            y=_column(doc.y),
            x_unit=doc.x_unit,
            y_unit=doc.y_unit,
            extra={k: _column(v) for k, v in doc.extra.items()},
            levels=[Level.from_document(lv) for lv in doc.levels],
        )


@dataclass
class _Provenance:
    """Where and when a result was measured (shared by both result kinds)."""

    benchmark: str
    device: str
    backend: str
    created: str = field(default_factory=now_iso)
    versions: dict[str, str] = field(default_factory=dict)
    options: dict[str, object] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    replayed_from: str | None = None

    def provenance(self) -> Provenance:
        """The fields both saved kinds write first (``replayed_from`` is not saved)."""
        return provenance_of(self)

    def provenance_line(self) -> str:
        keep = ("torch", "triton", "cupy", "numpy", "driver")
        vers = ", ".join(f"{k} {v}" for k, v in self.versions.items() if k in keep)
        base = f"{self.device} [{self.backend}], {self.created}" + (f", {vers}" if vers else "")
        if self.replayed_from:
            return f"replayed from {self.replayed_from}: {base} (not measured now)"
        return base


class Provenance(TypedDict):
    benchmark: str
    device: str
    backend: str
    created: str
    versions: dict[str, str]
    options: dict[str, object]
    warnings: list[str]


def provenance_of(of: _Provenance | ProvenanceDoc) -> Provenance:
    return Provenance(
        benchmark=of.benchmark,
        device=of.device,
        backend=of.backend,
        created=of.created,
        versions=dict(of.versions),
        options=dict(of.options),
        warnings=list(of.warnings),
    )


@dataclass
class BenchResult(Shown, _Provenance):
    """A microbenchmark run: its series, on which device, when, with what."""

    series: list[Series] = field(default_factory=list)

    def get(self, name: str) -> Series:
        for s in self.series:
            if s.name == name:
                return s
        names = ", ".join(s.name for s in self.series)
        raise KeyError(f"no series {name!r} in {self.benchmark} (have: {names})")

    def to_dict(self) -> dict[str, object]:
        from perflab.model.saved import BenchDoc
        from perflab.model.schema import encode

        return encode(BenchDoc(**self.provenance(), series=[s.document() for s in self.series]))

    @classmethod
    def from_dict(cls, doc: object, source: str = "<dict>") -> BenchResult:
        from perflab.model.saved import BenchDoc
        from perflab.model.schema import decode

        saved = decode(doc, BenchDoc, source)
        return cls(**saved.provenance(), series=[Series.from_document(s) for s in saved.series])

    def to_pandas(self) -> pd.DataFrame:
        """One row per point: series, x, y and extra columns."""
        import pandas as pd

        rows = [{"series": s.name, **p} for s in self.series for p in s.points()]
        return pd.DataFrame(rows)

    def save(self, path: str | os.PathLike[str]) -> Path:
        return dump_json(BENCH_KIND, self.to_dict(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BenchResult:
        result = cls.from_dict(load_json(BENCH_KIND, path), str(path))
        result.replayed_from = str(path)
        return result


@dataclass
class AlphaBetaFit:
    """``time = alpha + bytes / beta``: a latency (s) and a bandwidth (bytes/s)."""

    alpha_s: float
    beta_Bps: float
    rel_rms: float  # RMS of (fit - measured) / measured over the points used
    points: int

    def predict_s(self, nbytes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        return self.alpha_s + _floats(nbytes) / self.beta_Bps

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> AlphaBetaDoc:
        from perflab.model.saved import AlphaBetaDoc

        beta = self.beta_Bps / 1e9 if math.isfinite(self.beta_Bps) else None  # flat: no slope
        return AlphaBetaDoc(self.alpha_s * 1e6, beta, self.rel_rms, self.points)

    @classmethod
    def from_dict(cls, doc: object, source: str = "<dict>", where: str = "") -> AlphaBetaFit:
        from perflab.model.saved import AlphaBetaDoc
        from perflab.model.schema import decode

        return cls.from_document(decode(doc, AlphaBetaDoc, source, where))

    @classmethod
    def from_document(cls, doc: AlphaBetaDoc) -> AlphaBetaFit:
        beta = math.inf if doc.beta_GBps is None else doc.beta_GBps * 1e9
        return cls(doc.alpha_us * 1e-6, beta, doc.rel_rms, doc.points)


@dataclass
class CollectiveRow:
    """One (op, size) point, with nccl-tests' definitions (see perflab.analysis.collectives)."""

    op: str
    bytes: int
    world_size: int
    backend: str
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    dtype: str = "float32"
    iters: int = 0
    verified: bool = False

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> CollectiveRowDoc:
        from perflab.model.saved import CollectiveRowDoc

        return CollectiveRowDoc(
            op=self.op,
            bytes=self.bytes,
            world_size=self.world_size,
            backend=self.backend,
            time_us=self.time_us,
            algbw_GBps=self.algbw_GBps,
            busbw_GBps=self.busbw_GBps,
            dtype=self.dtype,
            iters=self.iters,
            verified=self.verified,
        )

    @classmethod
    def from_dict(cls, doc: object, source: str = "<dict>", where: str = "") -> CollectiveRow:
        from perflab.model.saved import CollectiveRowDoc
        from perflab.model.schema import decode

        return cls.from_document(decode(doc, CollectiveRowDoc, source, where))

    @classmethod
    def from_document(cls, doc: CollectiveRowDoc) -> CollectiveRow:
        return cls(
            doc.op,
            doc.bytes,
            doc.world_size,
            doc.backend,
            doc.time_us,
            doc.algbw_GBps,
            doc.busbw_GBps,
            doc.dtype,
            doc.iters,
            doc.verified,
        )


@dataclass
class CollectiveResult(Shown, _Provenance):
    """A collectives sweep: rows per (op, size) and an alpha-beta fit per op."""

    rows: list[CollectiveRow] = field(default_factory=list)
    fits: dict[str, AlphaBetaFit] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        from perflab.model.saved import CollectiveResultDoc
        from perflab.model.schema import encode

        rows = [r.document() for r in self.rows]
        fits = {op: f.document() for op, f in self.fits.items()}
        return encode(CollectiveResultDoc(**self.provenance(), rows=rows, fits=fits))

    @classmethod
    def from_dict(cls, doc: object, source: str = "<dict>") -> CollectiveResult:
        from perflab.model.saved import CollectiveResultDoc
        from perflab.model.schema import decode

        saved = decode(doc, CollectiveResultDoc, source)
        rows = [CollectiveRow.from_document(r) for r in saved.rows]
        fits = {op: AlphaBetaFit.from_document(f) for op, f in saved.fits.items()}
        return cls(**saved.provenance(), rows=rows, fits=fits)

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.rows])

    def save(self, path: str | os.PathLike[str]) -> Path:
        return dump_json(COLLECTIVES_KIND, self.to_dict(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CollectiveResult:
        result = cls.from_dict(load_json(COLLECTIVES_KIND, path), str(path))
        result.replayed_from = str(path)
        return result


@dataclass
class Topology(Shown):
    """Link type between each pair of devices (``nvidia-smi topo -m`` codes: ``NV18``,
    ``PIX``, ``SYS``...), and the transports NCCL chose when its debug log was given."""

    devices: list[str] = field(default_factory=list)
    links: list[list[str]] = field(default_factory=list)
    nccl_transports: dict[str, int] = field(default_factory=dict)
    nccl_network: str | None = None
    source: str = ""

    def link(self, a: str, b: str) -> str:
        return self.links[self.devices.index(a)][self.devices.index(b)]

    def to_dict(self) -> dict[str, object]:
        """Its fields, in order: the document of ``perflab machine topology --json``."""
        from perflab.model.schema import encode

        return encode(self)


def load_result(path: str | os.PathLike[str]) -> BenchResult | CollectiveResult:
    """Load either kind of saved microbenchmark result, by its header."""
    try:
        return BenchResult.load(path)
    except SchemaError as first:
        try:
            return CollectiveResult.load(path)
        except SchemaError:
            raise first from None
