"""Rates in every table and plot label: SI prefixes (GB/s -> TB/s, GFLOP/s -> TFLOP/s),
never exponent notation such as "1.005e+04 GB/s"."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from perflab.model.ceilings import Ceilings
from perflab.model.machine import BenchResult, CollectiveResult, CollectiveRow, Level, Series
from perflab.model.units import format_rate, plain_number
from perflab.render.views import to_text

EXPONENT = re.compile(r"\d[eE][+-]?\d")


@pytest.mark.parametrize(
    ("per_s", "unit", "text"),
    [
        (1.005e13, "B/s", "10.1 TB/s"),  # the "1.005e+04 GB/s" of a 10 TB/s L2
        (4.8e12, "B/s", "4.8 TB/s"),
        (999.7e9, "B/s", "1 TB/s"),  # rounds to 1000 GB/s: the next prefix
        (999.4e9, "B/s", "999 GB/s"),
        (9.89e14, "FLOP/s", "989 TFLOP/s"),
        (1.979e15, "FLOP/s", "1.98 PFLOP/s"),
        (2.5e3, "B/s", "2.5 kB/s"),
        (12.0, "B/s", "12 B/s"),
        (0.0, "B/s", "0 B/s"),
        (1.2e-5, "FLOP/s", "0.000012 FLOP/s"),  # '.3g' would write 1.2e-05
        (1.23e21, "B/s", "1230 EB/s"),  # past the largest prefix: plain digits
        (-3e9, "B/s", "-3 GB/s"),
        (float("nan"), "B/s", "n/a"),
        (float("inf"), "B/s", "n/a"),
    ],
)
def test_format_rate_scales_by_si_prefix_without_exponents(
    per_s: float, unit: str, text: str
) -> None:
    assert format_rate(per_s, unit) == text


@pytest.mark.parametrize(
    ("value", "text"), [(123456.0, "123456"), (1.2e-5, "0.000012"), (1e6, "1000000"), (0.5, "0.5")]
)
def test_plain_number_never_writes_an_exponent(value: float, text: str) -> None:
    assert plain_number(value) == text


def test_ceilings_table_shows_terabytes_not_exponents() -> None:
    c = Ceilings("NVIDIA H200", "cuda", {"bf16": 7.5e5}, {"L2": 10050.0, "HBM": 4100.0})
    text = to_text(c)
    assert "10.1 TB/s" in text and "4.1 TB/s" in text and "750 TFLOP/s" in text
    assert not EXPONENT.search(text), text


def _collectives(busbw: float) -> CollectiveResult:
    row = CollectiveRow("all_reduce", 1 << 30, 8, "nccl", 1000.0, busbw * 8 / 14, busbw)
    return CollectiveResult(
        benchmark="collectives", device="NVIDIA H200", backend="nccl", rows=[row]
    )


def test_collectives_table_shows_rates_with_their_prefix() -> None:
    text = to_text(_collectives(12345.0))
    assert "12.3 TB/s" in text
    assert not EXPONENT.search(text), text


def test_bandwidth_sweep_labels_and_tables_carry_no_exponent() -> None:
    pytest.importorskip("bokeh")
    x = 2.0 ** np.arange(20, 31)
    y = np.where(x < 1 << 25, 10050.0, 4100.0)
    levels = [Level("L2", 1 << 20, 1 << 24, 10050.0, 5), Level("HBM", 1 << 26, 1 << 30, 4100.0, 5)]
    series = Series("copy", x, y, "bytes", "GBps", levels=levels)
    result = BenchResult(
        benchmark="bandwidth", device="NVIDIA H200", backend="cuda", series=[series]
    )
    bundle = result._repr_mimebundle_()
    words = [t.text or "" for t in ET.fromstring(bundle["image/svg+xml"]).iter()]
    labels = " | ".join(w for w in words if "B/s" in w)
    assert "TB/s" in labels, labels  # the tick at 10,000 GB/s and the L2 plateau
    cells = " | ".join(re.findall(r"<td[^>]*>([^<]*)</td>", bundle["text/html"]))
    assert "10.1 TB/s" in cells and "10.1 TB/s" in bundle["text/plain"]
    for shown in (labels, bundle["text/plain"], cells):
        assert not EXPONENT.search(shown), shown


def test_roofline_tables_and_labels_carry_no_exponent() -> None:
    """A point at 999.7 TFLOP/s ('.3g' wrote '1e+03 TFLOP/s') and one of a tiny intensity."""
    from perflab.render.roofline import roofline

    chart = roofline(
        [("matmul", 999.7e12 * 1e-3, 1e9, 1e-3), ("copy", 1e3, 1e11, 1e-3)], device="H200"
    )
    text = chart.text()
    assert "1 PFLOP/s" in text and "100 TB/s" in text, text
    assert "0.00000001" in text  # 1e-08 FLOP/B, in plain digits
    assert not EXPONENT.search(text), text
    pytest.importorskip("bokeh")
    bundle = chart._repr_mimebundle_()
    words = [t.text or "" for t in ET.fromstring(bundle["image/svg+xml"]).iter()]
    assert not [w for w in words if EXPONENT.search(w)]
