"""One escaper for HTML, SVG and XML: markup escaped, characters XML 1.0 forbids replaced."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET

import pytest

from perflab.render.html import BIDI_CONTROLS, NOT_XML, esc, table

VALID = [
    "",
    "plain kernel_name",
    "a<b>&\"'c",
    "tab\tnewline\ncarriage\rreturn",
    "é ü ß 中文 😀 \x7f \x85 \ufffd \ufffc",
    "void at::native::vectorized_elementwise_kernel<4, (lambda #1)>",
]
FORBIDDEN = ["\x00", "\x01", "\x08", "\x0b", "\x0c", "\x0e", "\x1b", "\x1f", "\ud800", "\udfff"]
FORBIDDEN += ["\ufffe", "\uffff"]


@pytest.mark.parametrize("text", VALID)
def test_valid_text_is_escaped_as_html_escapes_it(text: str) -> None:
    assert esc(text) == html.escape(text, quote=True)


@pytest.mark.parametrize("char", FORBIDDEN)
def test_each_character_xml_forbids_becomes_the_replacement_character(char: str) -> None:
    assert NOT_XML.fullmatch(char)
    assert esc(f"a{char}<b>") == "a\ufffd&lt;b&gt;"


def test_any_text_escaped_is_well_formed_xml_in_text_and_attributes() -> None:
    every = "".join(chr(c) for c in range(0x80)) + "".join(FORBIDDEN) + "".join(VALID)
    doc = f'<a title="{esc(every)}">{esc(every)}</a>'
    root = ET.fromstring(doc.encode("utf-8"))  # lone surrogates would not even encode
    assert root.text is not None and "\x00" not in root.text and "<b>" in root.text
    assert root.text.count("\ufffd") >= len(FORBIDDEN)


def test_values_that_are_not_text_are_escaped_as_their_str() -> None:
    assert esc(3) == "3" and esc(None) == "None" and esc(b"\x00") == "b&#x27;\\x00&#x27;"


def test_an_html_table_cell_carries_no_forbidden_character() -> None:
    cell = table(["name"], [["k\x00<x>"]])
    assert "k\ufffd&lt;x&gt;" in cell and "\x00" not in cell


@pytest.mark.parametrize(
    "char", ["\u061c", "\u200e", "\u200f", "\u202a", "\u202e", "\u2066", "\u2069"]
)
def test_each_bidirectional_control_is_shown_as_its_escape_not_obeyed(char: str) -> None:
    assert BIDI_CONTROLS.fullmatch(char)
    escaped = esc(f"gemm{char}<evil>")
    assert char not in escaped and escaped == f"gemm\\u{ord(char):04x}&lt;evil&gt;"


def test_a_table_of_a_reversed_name_shows_the_name_as_the_file_holds_it() -> None:
    cell = table(["name"], [["\u202ekcatta_lenrek"]])
    assert "\\u202ekcatta_lenrek" in cell and "\u202e" not in cell
