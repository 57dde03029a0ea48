"""perflab.model.units: times as every view shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perflab.model.units import format_ns

# the table the JupyterLab panel's formatNs is tested against too (its test/pure.test.ts)
CASES = json.loads((Path(__file__).parent / "data" / "format_ns_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[str(c["ns"]) for c in CASES])
def test_format_ns_writes_each_case_of_the_shared_table(case: dict[str, object]) -> None:
    assert format_ns(float(str(case["ns"]))) == case["text"]
