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
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.errors import SchemaError
from perflab.model.display import Shown
from perflab.model.fields import MAX_INT, Fields
from perflab.model.serialize import dump_json, load_json
from perflab.model.timing import now_iso

if TYPE_CHECKING:
    import pandas as pd

BENCH_KIND = "BenchResult"
COLLECTIVES_KIND = "CollectiveResult"


def _floats(values: Any) -> npt.NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64).reshape(-1)


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "x_min": self.x_min,
            "x_max": self.x_max,
            "value": self.value,
            "points": self.points,
        }

    @classmethod
    def from_dict(cls, doc: Any, source: str = "<dict>", where: str = "") -> Level:
        f = Fields(doc, source, where)
        return cls(
            f.text("name"),
            _num(f, "x_min"),
            _num(f, "x_max"),
            _num(f, "value"),
            f.integer("points"),
        )


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "x_unit": self.x_unit,
            "y_unit": self.y_unit,
            "x": _finite_list(self.x),
            "y": _finite_list(self.y),
            "extra": {k: _finite_list(v) for k, v in self.extra.items()},
            "levels": [lv.to_dict() for lv in self.levels],
        }

    @classmethod
    def from_dict(cls, doc: Any, source: str = "<dict>", where: str = "") -> Series:
        """Checked: x finite and >= 0, y and extra columns >= 0 or null (not measured),
        every column as long as x."""
        f = Fields(doc, source, where)
        x = f.numbers("x")
        extra = f.child("extra", f.mapping("extra"))
        levels = f.objects("levels") if "levels" in f.doc else []
        return cls(
            name=f.text("name"),
            x=x,
            y=f.numbers("y", nullable=True, size=x.size),
            x_unit=f.text("x_unit", "bytes"),
            y_unit=f.text("y_unit", "ns"),
            extra={str(k): extra.numbers(k, nullable=True, size=x.size) for k in extra.doc},
            levels=[
                Level.from_dict(lv, source, f"{f.where}.levels[{i}]".lstrip("."))
                for i, lv in enumerate(levels)
            ],
        )


@dataclass
class _Provenance:
    """Where and when a result was measured (shared by both result kinds)."""

    benchmark: str
    device: str
    backend: str
    created: str = field(default_factory=now_iso)
    versions: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    replayed_from: str | None = None

    def provenance_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "device": self.device,
            "backend": self.backend,
            "created": self.created,
            "versions": dict(self.versions),
            "options": dict(self.options),
            "warnings": list(self.warnings),
        }

    @staticmethod
    def provenance_kwargs(f: Fields) -> dict[str, Any]:
        return {
            "benchmark": f.text("benchmark"),
            "device": f.text("device"),
            "backend": f.text("backend"),
            "created": f.text("created", ""),
            "versions": f.text_map("versions"),
            "options": f.mapping("options"),
            "warnings": f.texts("warnings"),
        }

    def provenance_line(self) -> str:
        keep = ("torch", "triton", "cupy", "numpy", "driver")
        vers = ", ".join(f"{k} {v}" for k, v in self.versions.items() if k in keep)
        base = f"{self.device} [{self.backend}], {self.created}" + (f", {vers}" if vers else "")
        if self.replayed_from:
            return f"replayed from {self.replayed_from}: {base} (not measured now)"
        return base


def _malformed(kind: str, path: str | os.PathLike[str], exc: Exception) -> SchemaError:
    return SchemaError(f"malformed {kind}: {type(exc).__name__}: {exc}", source=str(path))


def _num(f: Fields, key: str, low: float = 0.0) -> float:
    value = f.number(key, low=low)
    assert value is not None  # required: Fields raises when it is missing
    return value


def _items(f: Fields, key: str) -> list[tuple[str, Any]]:
    """``(place, item)`` for each item of the list ``key`` (``rows[3]``...)."""
    return [(f"{key}[{i}]", item) for i, item in enumerate(f.objects(key))]


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

    def to_dict(self) -> dict[str, Any]:
        return {**self.provenance_dict(), "series": [s.to_dict() for s in self.series]}

    @classmethod
    def from_dict(cls, doc: Any, source: str = "<dict>") -> BenchResult:
        f = Fields(doc, source)
        return cls(
            **cls.provenance_kwargs(f),
            series=[Series.from_dict(s, source, place) for place, s in _items(f, "series")],
        )

    def to_pandas(self) -> pd.DataFrame:
        """One row per point: series, x, y and extra columns."""
        import pandas as pd

        rows = [{"series": s.name, **p} for s in self.series for p in s.points()]
        return pd.DataFrame(rows)

    def save(self, path: str | os.PathLike[str]) -> Path:
        return dump_json(BENCH_KIND, self.to_dict(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BenchResult:
        doc = load_json(BENCH_KIND, path)
        try:
            result = cls.from_dict(doc, str(path))
        except ValueError as exc:  # e.g. a Series whose columns disagree
            raise _malformed(BENCH_KIND, path, exc) from None
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

    def to_dict(self) -> dict[str, Any]:
        beta = self.beta_Bps / 1e9 if math.isfinite(self.beta_Bps) else None  # flat: no slope
        return {
            "alpha_us": self.alpha_s * 1e6,
            "beta_GBps": beta,
            "rel_rms": self.rel_rms,
            "points": self.points,
        }

    @classmethod
    def from_dict(cls, doc: Any, source: str = "<dict>", where: str = "") -> AlphaBetaFit:
        f = Fields(doc, source, where)
        beta = f.number("beta_GBps", optional=True, low=0.0)
        return cls(
            _num(f, "alpha_us", low=-1e300) * 1e-6,
            math.inf if beta is None else beta * 1e9,
            _num(f, "rel_rms"),
            f.integer("points"),
        )


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "bytes": self.bytes,
            "world_size": self.world_size,
            "backend": self.backend,
            "time_us": self.time_us,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "dtype": self.dtype,
            "iters": self.iters,
            "verified": self.verified,
        }

    @classmethod
    def from_dict(cls, doc: Any, source: str = "<dict>", where: str = "") -> CollectiveRow:
        f = Fields(doc, source, where)
        return cls(
            f.text("op"),
            f.integer("bytes", high=MAX_INT),
            f.integer("world_size", low=1, high=1 << 20),
            f.text("backend"),
            _num(f, "time_us"),
            _num(f, "algbw_GBps"),
            _num(f, "busbw_GBps"),
            f.text("dtype", "float32"),
            f.integer("iters", 0),
            f.flag("verified", False),
        )


@dataclass
class CollectiveResult(Shown, _Provenance):
    """A collectives sweep: rows per (op, size) and an alpha-beta fit per op."""

    rows: list[CollectiveRow] = field(default_factory=list)
    fits: dict[str, AlphaBetaFit] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.provenance_dict(),
            "rows": [r.to_dict() for r in self.rows],
            "fits": {op: f.to_dict() for op, f in self.fits.items()},
        }

    @classmethod
    def from_dict(cls, doc: Any, source: str = "<dict>") -> CollectiveResult:
        f = Fields(doc, source)
        fits = f.mapping("fits")
        return cls(
            **cls.provenance_kwargs(f),
            rows=[CollectiveRow.from_dict(r, source, place) for place, r in _items(f, "rows")],
            fits={str(k): AlphaBetaFit.from_dict(v, source, f"fits.{k}") for k, v in fits.items()},
        )

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.rows])

    def save(self, path: str | os.PathLike[str]) -> Path:
        return dump_json(COLLECTIVES_KIND, self.to_dict(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CollectiveResult:
        doc = load_json(COLLECTIVES_KIND, path)
        try:
            result = cls.from_dict(doc, str(path))
        except ValueError as exc:
            raise _malformed(COLLECTIVES_KIND, path, exc) from None
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": list(self.devices),
            "links": [list(r) for r in self.links],
            "nccl_transports": dict(self.nccl_transports),
            "nccl_network": self.nccl_network,
            "source": self.source,
        }


def load_result(path: str | os.PathLike[str]) -> BenchResult | CollectiveResult:
    """Load either kind of saved microbenchmark result, by its header."""
    try:
        return BenchResult.load(path)
    except SchemaError as first:
        try:
            return CollectiveResult.load(path)
        except SchemaError:
            raise first from None
