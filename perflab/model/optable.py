"""A per-kernel (or per-op) table: name, calls, total time; sorted by total."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.model.display import Shown

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class OpTable(Shown):
    """Aggregated time per kernel or op name.

    ``kind`` says what the rows are: ``"kernel"`` (GPU) or ``"cpu_op"`` (no GPU).
    """

    names: list[str]
    calls: npt.NDArray[np.int64]
    total_ns: npt.NDArray[np.int64]
    kind: str = "kernel"
    meta: dict[str, Any] = field(default_factory=dict)
    # a table cut by top(): (rows, total ns) of the table it was cut from, so that its shares
    # stay shares of all the time and its title can say what it leaves out
    whole: tuple[int, int] | None = None

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, int, int]], kind: str = "kernel") -> OpTable:
        """Build from ``(name, calls, total_ns)`` rows; sorted by total time, descending."""
        ordered = sorted(rows, key=lambda r: (-r[2], r[0]))
        return cls(
            names=[r[0] for r in ordered],
            calls=np.array([r[1] for r in ordered], dtype=np.int64),
            total_ns=np.array([r[2] for r in ordered], dtype=np.int64),
            kind=kind,
        )

    def __len__(self) -> int:
        return len(self.names)

    @property
    def mean_ns(self) -> npt.NDArray[np.float64]:
        return self.total_ns / np.maximum(self.calls, 1)

    @property
    def all_rows(self) -> int:
        """Rows of the whole table (more than len() for a table cut by top())."""
        return self.whole[0] if self.whole else len(self)

    @property
    def all_ns(self) -> int:
        """Total time of the whole table, which shares are shares of."""
        return self.whole[1] if self.whole else int(self.total_ns.sum())

    @property
    def share(self) -> npt.NDArray[np.float64]:
        grand = float(self.all_ns)
        if grand <= 0:
            return np.zeros(len(self.names))
        return np.asarray(self.total_ns / grand, dtype=np.float64)

    def top(self, k: int) -> OpTable:
        """The ``k`` longest rows; their shares stay shares of the whole table."""
        whole = (self.all_rows, self.all_ns)
        return OpTable(
            self.names[:k], self.calls[:k], self.total_ns[:k], self.kind, self.meta, whole
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rows": [
                {"name": n, "calls": int(c), "total_ns": int(t)}
                for n, c, t in zip(self.names, self.calls, self.total_ns, strict=True)
            ],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> OpTable:
        """The inverse of :meth:`to_dict`; a row that ``to_dict`` cannot have written (a
        name that is not text, counts that are not whole numbers >= 0 within int64) is a
        ValueError naming the row."""
        rows = doc["rows"]
        if not isinstance(rows, list):
            raise ValueError("rows is not a list")
        return cls.from_rows(
            [_row(r, i) for i, r in enumerate(rows)], kind=str(doc.get("kind", "kernel"))
        )

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            {
                "name": self.names,
                "calls": self.calls,
                "total_ns": self.total_ns,
                "mean_ns": self.mean_ns,
                "share": self.share,
            }
        )


def _row(row: Any, i: int) -> tuple[str, int, int]:
    if not isinstance(row, dict) or not isinstance(row.get("name"), str):
        raise ValueError(f"row {i}: not an object with a text name")
    counts = (row.get("calls"), row.get("total_ns"))
    for value in counts:
        # bool is an int in Python; 1e400 and 2**70 cannot be counts of int64 columns
        if type(value) is not int or not 0 <= value < 2**63:
            raise ValueError(f"row {i}: {value!r} is not a count")
    return row["name"], int(row["calls"]), int(row["total_ns"])
