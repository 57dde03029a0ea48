"""Nsight Compute views: every rule's advice in full, wrapped in text, escaped in HTML; text
from the report printed with its control characters escaped."""

from __future__ import annotations

import csv
import html
import io
import re
from pathlib import Path

import pytest
from data_paths import TRACES

from perflab.cli import main
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


HOSTILE_NAME = "copy\x00_kernel\x1b[2J\x1b]0;owned\x07\u202eevil"
SHOWN_NAME = r"copy\x00_kernel\x1b[2J\x1b]0;owned\x07\u202eevil"


def _unsafe(text: str) -> list[str]:
    """The characters of ``text`` that a terminal would act on (newlines aside)."""
    return [c for c in text if c != "\n" and (not c.isprintable() or c == "\u202e")]


def _hostile_report() -> NcuReport:
    report = load_ncu(CSV)
    report.kernels[0]["Kernel Name"] = HOSTILE_NAME
    report.kernels[0]["Grid Size"] = "(1, 1, 1)\x1b[31m"
    report.rules[0].type = "OPT"
    report.rules[0].description = "advice\x1b[1A\x00 with control characters"
    return report


def test_text_shows_control_characters_escaped() -> None:
    text = str(_hostile_report())
    assert not _unsafe(text), _unsafe(text)
    assert SHOWN_NAME in text and r"(1, 1, 1)\x1b[31m" in text
    assert r"advice\x1b[1A\x00 with control characters" in text


def test_html_still_escapes_markup_beside_control_characters() -> None:
    report = _hostile_report()
    report.kernels[0]["Kernel Name"] = "<b>k</b>\x1b[2J"
    page = report._repr_mimebundle_()["text/html"]
    assert "<b>k</b>" not in page and "&lt;b&gt;k&lt;/b&gt;" in page


def test_cli_roofline_text_escapes_a_kernel_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a NUL and escape sequences in the name reached the terminal raw through --text
    rows = list(csv.reader(io.StringIO(CSV.read_text(encoding="utf-8"))))
    at = rows[0].index("Kernel Name")
    for row in rows[1:]:
        row[at] = HOSTILE_NAME
    path = tmp_path / "hostile.csv"
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    assert (
        main(
            [
                "roofline",
                "--device",
                "H200",
                "--ncu",
                str(path),
                "--text",
                "-o",
                str(tmp_path / "r.html"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert not _unsafe(printed), _unsafe(printed)
    assert SHOWN_NAME[:40] in printed
