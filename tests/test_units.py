"""perflab.model.units: times as every view shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perflab.model.units import format_bytes, format_ns

# the table the JupyterLab panel's formatNs is tested against too (its test/pure.test.ts)
CASES = json.loads((Path(__file__).parent / "data" / "format_ns_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[str(c["ns"]) for c in CASES])
def test_format_ns_writes_each_case_of_the_shared_table(case: dict[str, object]) -> None:
    assert format_ns(float(str(case["ns"]))) == case["text"]


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1000, "1000 B"),
        (1536, "1.5 KiB"),
        (512 * 1024, "512 KiB"),
        (1000 * 1024, "0.977 MiB"),  # 1000 KiB: '.3g' would write "1e+03 KiB"
        (1023.9 * 1024, "1 MiB"),
        (1.5 * 2**30, "1.5 GiB"),
        (1010 * 2**40, "1.01e+03 TiB"),  # no larger unit
    ],
)
def test_format_bytes_never_writes_an_exponent_below_its_largest_unit(n: float, text: str) -> None:
    assert format_bytes(n) == text
