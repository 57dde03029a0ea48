"""Nsight Compute views: every rule's advice in full, wrapped in text, escaped in HTML."""

from __future__ import annotations

import html
import re

from data_paths import TRACES

from perflab.io import load_ncu
from perflab.model.ncu import NcuReport, NcuRule
from perflab.render.tables import TEXT_WIDTH

CSV = TRACES / "ncu" / "copy_blocked.csv"


def _words(text: str) -> list[str]:
    return text.split()


def test_text_shows_each_advice_whole_and_wrapped() -> None:
    report = load_ncu(CSV)
    text = str(report)
    assert "Check memory replay (coalescing) metrics to" in text  # was cut: "...) met"
    lines = text.splitlines()
    assert max(len(line) for line in lines[1:]) <= TEXT_WIDTH
    flowing = " ".join(_words(text))
    for rule in report.rules:
        if rule.type in ("OPT", "WRN"):
            assert " ".join(_words(rule.description)) in flowing, rule.rule


def test_html_shows_each_advice_in_full() -> None:
    report = load_ncu(CSV)
    page = report._repr_mimebundle_()["text/html"]
    for rule in report.rules:
        if rule.type in ("OPT", "WRN"):
            assert html.escape(rule.description, quote=True) in page
    assert html.escape(report.kernels[0]["Kernel Name"], quote=True) in page  # whole name


def test_advice_from_the_file_is_escaped() -> None:
    payload = '<img src=x onerror="alert(1)"> ' + "long advice " * 40
    report = NcuReport(
        source="x.csv",
        kernels=[{"Kernel Name": "<b>k</b>", "Grid Size": "(1, 1, 1)", "Block Size": "(32, 1, 1)"}],
        rules=[NcuRule(0, "s", "<Rule>", "OPT", payload, "global", 12.5)],
    )
    page = report._repr_mimebundle_()["text/html"]
    assert "<img" not in page and "<b>k</b>" not in page and "<Rule>" not in page
    assert html.escape(payload, quote=True) in page
    assert re.search(r"\[OPT\] &lt;Rule&gt; \(est\. speedup 12\.5%\)", page)
    text = str(report)
    assert " ".join(text.split()).count("long advice") == 40 and "speedup 12.5%" in text
