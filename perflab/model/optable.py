"""A per-kernel (or per-op) table: name, calls, total time; sorted by total."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.model.display import Shown

if TYPE_CHECKING:
    import pandas as pd

    from perflab.model.saved import OpTableDoc


@dataclass
class OpTable(Shown):
    """Aggregated time per kernel or op name.

    ``kind`` says what the rows are: ``"kernel"`` (GPU) or ``"cpu_op"`` (no GPU).
    """

    names: list[str]
    calls: npt.NDArray[np.int64]
    total_ns: npt.NDArray[np.int64]
    kind: str = "kernel"
    meta: dict[str, object] = field(default_factory=dict)
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

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> OpTableDoc:
        from perflab.model.saved import OpRow, OpTableDoc

        rows = zip(self.names, self.calls.tolist(), self.total_ns.tolist(), strict=True)
        return OpTableDoc(kind=self.kind, rows=[OpRow(n, c, t) for n, c, t in rows])

    @classmethod
    def from_dict(cls, doc: object) -> OpTable:
        """The inverse of :meth:`to_dict`; a row that ``to_dict`` cannot have written (a
        name that is not text, counts that are not whole numbers >= 0 within int64) is a
        ValueError naming the row."""
        from perflab.model.saved import OpTableDoc
        from perflab.model.schema import FieldError, check

        try:
            return cls.from_document(check(doc, OpTableDoc))
        except FieldError as exc:
            row = re.match(r"rows\[(\d+)\]", exc.place)
            raise ValueError(f"row {row[1]}: {exc}" if row else str(exc)) from None

    @classmethod
    def from_document(cls, doc: OpTableDoc) -> OpTable:
        return cls.from_rows([(r.name, r.calls, r.total_ns) for r in doc.rows], kind=doc.kind)

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
