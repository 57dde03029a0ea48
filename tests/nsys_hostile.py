"""Nsight Systems exports made hostile: copies of the stored export whose schema computes
values on reading (generated columns, views, virtual tables), lacks or adds columns, or holds
huge values. Shared by the hostile-export tests and the fuzz tests."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from data_paths import TRACES

NSYS = TRACES / "nsys" / "power_iteration.sqlite"
# ~0.3 s and 300 MB of work each time it is computed; "+ start - start" ties it to the row, so
# SQLite cannot compute it once for all rows
EXPENSIVE = "length(hex(zeroblob(100000000 + start - start)))"


def hostile_copy(directory: Path, *statements: str, name: str = "hostile.sqlite") -> Path:
    """A copy of the stored export in ``directory`` with ``statements`` run on it."""
    path = directory / name
    shutil.copyfile(NSYS, path)
    with closing(sqlite3.connect(path)) as db:
        for sql in statements:
            db.execute(sql)
        db.commit()
    return path


def generated(
    table: str, column: str, expression: str, *, stored: bool = False, rows: int | None = None
) -> list[str]:
    """Statements that rebuild ``table`` with ``column`` computed by ``expression`` (a
    generated column, last), keeping the first ``rows`` rows (all when None) of the others.
    A virtual one is added once the rows are in: inserting rows computes it for each."""
    with closing(sqlite3.connect(f"file:{NSYS}?mode=ro", uri=True)) as db:
        info = db.execute(f"PRAGMA table_info({table})").fetchall()
    others = [(name, kind) for _, name, kind, *_ in info if name != column]
    assert len(others) == len(info) - 1, f"no column {column} in {table}"
    listed = ", ".join(name for name, _ in others)
    made = f"{column} GENERATED ALWAYS AS ({expression})"
    defined = ", ".join([f"{name} {kind}" for name, kind in others] + [f"{made} STORED"] * stored)
    limit = "" if rows is None else f" LIMIT {rows}"
    return [
        f"CREATE TABLE rebuilt ({defined})",
        f"INSERT INTO rebuilt ({listed}) SELECT {listed} FROM {table}{limit}",
        f"DROP TABLE {table}",
        f"ALTER TABLE rebuilt RENAME TO {table}",
        *([] if stored else [f"ALTER TABLE {table} ADD COLUMN {made} VIRTUAL"]),
    ]


def view_instead(table: str, spelt: str | None = None) -> list[str]:
    """Statements that move ``table``'s rows elsewhere and put a view named ``spelt``
    (``table`` by default) in its place."""
    return [
        f"ALTER TABLE {table} RENAME TO stored_rows",
        f"CREATE VIEW {spelt or table} AS SELECT * FROM stored_rows",
    ]
