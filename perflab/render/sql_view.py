"""Views of :class:`perflab.analysis.trace_sql.SqlResult`: a table in text and in HTML, every
value escaped (names come from trace files)."""

from __future__ import annotations

import math

from perflab.analysis.trace_sql import SqlResult
from perflab.model.units import shorten
from perflab.render.html import esc, table, text_table, wrap

ROWS = 50  # rows shown; to_pandas() / to_dict() have them all
TEXT_CHARS = 100  # a text cell's width in the terminal (C++ kernel names run to 500)


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.10g}" if math.isfinite(value) else "NULL"
    return str(value)


def _shown(result: SqlResult, limit: int) -> tuple[list[str], list[list[str]], str]:
    rows = [[_cell(v) for v in row] for row in result.rows(limit)]
    n = len(result)
    more = f"({n - limit} more rows: to_pandas() or --json has them all)" if n > limit else ""
    return list(result.columns), rows, more


def _numeric(result: SqlResult) -> set[int]:
    return {i for i, v in enumerate(result.columns.values()) if v.dtype.kind in "iuf"}


def sql_text(result: SqlResult, limit: int = ROWS) -> str:
    headers, rows, more = _shown(result, limit)
    if not headers:
        return "(no columns)"
    left = set(range(len(headers))) - _numeric(result)
    cut = [[shorten(c, TEXT_CHARS) if i in left else c for i, c in enumerate(r)] for r in rows]
    lines = [text_table(headers, cut, left=left), f"({len(result)} rows)"]
    if cut != rows:
        lines.append(f"(text cut to {TEXT_CHARS} characters: to_pandas() or --json has it whole)")
    return "\n".join([*lines, more] if more else lines)


def sql_html(result: SqlResult, limit: int = ROWS) -> str:
    headers, rows, more = _shown(result, limit)
    left = set(range(len(headers))) - _numeric(result)
    note = f"{len(result)} rows" + (f" {more}" if more else "")
    return wrap(table(headers, rows, left=left) + f'<div class="note">{esc(note)}</div>')
