"""Nsight Systems exports made hostile: copies of the stored export whose schema computes
values on reading (generated columns, views, virtual tables), lacks or adds columns, holds
values of the wrong type or huge ones, or carries triggers. Shared by the hostile-export tests
and the fuzz tests."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Sequence
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
    edit(path, [statements])
    return path


def edit(path: Path, groups: Sequence[Sequence[str]], *, strict: bool = True) -> int:
    """Run each group of statements on ``path`` as one unit; unless ``strict``, a group
    SQLite refuses (a column a previous group dropped...) is undone and skipped. Returns the
    number of groups made."""
    made = 0
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        for group in groups:
            db.execute("SAVEPOINT edit")
            try:
                for sql in group:
                    db.execute(sql)
                made += 1
            except sqlite3.Error:
                if strict:
                    raise
                db.execute("ROLLBACK TO edit")
            db.execute("RELEASE edit")
    return made


def columns(table: str) -> list[tuple[str, str]]:
    """``table``'s columns in the stored export: (name, declared type)."""
    with closing(sqlite3.connect(f"file:{NSYS}?mode=ro", uri=True)) as db:
        return [(name, kind) for _, name, kind, *_ in db.execute(f"PRAGMA table_info({table})")]


def rebuilt(
    table: str, column: str, definition: str | None, value: str | None, rows: int | None = None
) -> list[str]:
    """Statements that rebuild ``table`` with ``column`` moved last and defined by
    ``definition`` (None: left out), filled with the SQL ``value`` of each row (None: not
    filled, as a generated column is not), keeping the first ``rows`` rows (all when None)."""
    every = columns(table)
    others = [(name, kind) for name, kind in every if name != column]
    assert len(others) == len(every) - 1, f"no column {column} in {table}"
    kept = [name for name, _ in others]
    defined = [f"{name} {kind}" for name, kind in others] + ([definition] if definition else [])
    into, values = (kept, kept) if value is None else ([*kept, column], [*kept, value])
    limit = "" if rows is None else f" LIMIT {rows}"
    return [
        f"CREATE TABLE rebuilt ({', '.join(defined)})",
        f"INSERT INTO rebuilt ({', '.join(into)}) SELECT {', '.join(values)} FROM {table}{limit}",
        f"DROP TABLE {table}",
        f"ALTER TABLE rebuilt RENAME TO {table}",
    ]


def generated(
    table: str, column: str, expression: str, *, stored: bool = False, rows: int | None = None
) -> list[str]:
    """Statements that rebuild ``table`` with ``column`` computed by ``expression`` (a
    generated column, last), keeping the first ``rows`` rows (all when None) of the others.
    A virtual one is added once the rows are in: inserting rows computes it for each."""
    made = f"{column} GENERATED ALWAYS AS ({expression})"
    if stored:
        return rebuilt(table, column, f"{made} STORED", None, rows)
    return [
        *rebuilt(table, column, None, None, rows),
        f"ALTER TABLE {table} ADD COLUMN {made} VIRTUAL",
    ]


def view_instead(table: str, spelt: str | None = None) -> list[str]:
    """Statements that move ``table``'s rows elsewhere and put a view named ``spelt``
    (``table`` by default) in its place."""
    return [
        f"ALTER TABLE {table} RENAME TO stored_rows",
        f"CREATE VIEW {spelt or table} AS SELECT * FROM stored_rows",
    ]
