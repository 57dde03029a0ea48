"""Column parts are held in the narrowest integer type that holds them and joined exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perflab.io import _parallel
from perflab.io.kineto.parts import ColumnParts, narrowed


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        ([-1, 0, 127], np.int8),
        ([-1, 128], np.int16),
        ([-(2**15) - 1, 5], np.int32),
        ([2**31 - 1, -(2**31)], np.int32),
        ([2**31, 0], np.int64),
        ([-(2**63), 2**63 - 1], np.int64),
    ],
)
def test_an_int64_part_is_held_in_the_narrowest_type_that_holds_it(
    values: list[int], dtype: type[np.generic]
) -> None:
    part = narrowed(np.array(values, dtype=np.int64))
    assert part.dtype == dtype
    assert part.tolist() == values


def test_other_parts_are_left_as_they_are() -> None:
    for part in (np.array([1.5]), np.array([1], np.int32), np.zeros(0, np.int64)):
        assert narrowed(part) is part


def test_parts_of_several_widths_join_into_the_column_exactly() -> None:
    parts = ColumnParts()
    pieces = [[-1, 3], [40_000, -70_000], [2**40, -(2**62)], [], [7]]
    for piece in pieces:
        parts.put(x=np.array(piece, dtype=np.int64))
    column = parts.take("x", np.int64)
    assert column.dtype == np.int64
    assert column.tolist() == [v for piece in pieces for v in piece]
    assert parts.take("x", np.int64).tolist() == []  # let go of once taken


def test_narrow_columns_travel_through_a_helper_result_file(tmp_path: Path) -> None:
    arrays = {f"c{i}": narrowed(np.array([v, -1], np.int64)) for i, v in enumerate((1, 300, 2**20))}
    path = tmp_path / "result.bin"
    _parallel.save_columns(path, arrays, {"meta": 1})
    loaded, meta = _parallel.load_columns(path)
    assert {k: (v.dtype, v.tolist()) for k, v in loaded.items()} == {
        k: (v.dtype, v.tolist()) for k, v in arrays.items()
    }
    assert meta == {"meta": 1}
