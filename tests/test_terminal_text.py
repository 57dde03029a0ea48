"""Names from files printed on a terminal: control characters, line separators and
bidirectional overrides are shown escaped (``\\x1b``), wherever a text view prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nsys_hostile import hostile_copy

from perflab.cli import main
from perflab.render import views
from perflab.render.html import printable, text_table

# clears the screen, retitles the window, rings the bell, then reverses what follows
HOSTILE = "gemm\x00\x1b[2J\x1b]0;owned\x07\x9b31m\u202eevil\u2028\x7f\ttail"


def _acted_on(text: str) -> list[str]:
    """What a terminal would act on in ``text``, newlines between lines aside."""
    return [c for c in text if c != "\n" and (not c.isprintable() or c in "\u202e\u2028")]


def test_printable_escapes_what_a_terminal_acts_on_and_nothing_else() -> None:
    shown = printable(HOSTILE)
    assert shown == r"gemm\x00\x1b[2J\x1b]0;owned\x07\x9b31m\u202eevil\u2028\x7f\x09tail"
    assert not _acted_on(shown)
    plain = "void at::native::elementwise_kernel<128, 4>(int, λ) → µs"
    assert printable(plain) is plain  # printable text, other scripts included, is left alone


def test_text_tables_escape_their_cells_and_keep_their_columns() -> None:
    table = text_table(("name", "calls"), [[HOSTILE, "3"], ["plain", "12"]])
    assert not _acted_on(table)
    widths = {len(line) for line in table.splitlines()[:2]}
    assert len(widths) == 1  # the header and the rule line up with the escaped name


def test_trace_kernels_escapes_a_kernel_name_from_an_nsys_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # name every kernel of the export with a hostile name
    path = hostile_copy(
        tmp_path,
        "INSERT INTO StringIds (id, value) VALUES (9999999, 'gemm' || char(0, 27) || '[2J' "
        "|| char(27) || ']0;owned' || char(7, 8238) || 'evil')",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 9999999",
    )
    assert main(["trace", "kernels", str(path)]) == 0
    printed = capsys.readouterr().out
    assert not _acted_on(printed), _acted_on(printed)
    assert r"gemm\x00\x1b[2J\x1b]0;owned\x07\u202eevil" in printed


class _Loud:
    """A result whose views forget to escape (registered below for the seam's test)."""


def loud_text(obj: _Loud) -> str:
    return f"title\n\tname {HOSTILE}"


def loud_bundle(obj: _Loud) -> dict[str, str]:
    return {"text/plain": loud_text(obj), "text/html": "<b>title</b>"}


def test_the_text_seam_escapes_what_a_view_forgot_and_keeps_its_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(views.VIEWS, views.type_name(_Loud), views.View(__name__, "loud_text"))
    shown = views.to_text(_Loud())
    assert shown.startswith("title\n\tname gemm\\x00\\x1b[2J")
    assert not _acted_on(shown.replace("\t", ""))
    plain = views.to_bundle(_Loud())["text/plain"]
    assert isinstance(plain, str) and not _acted_on(plain.replace("\t", ""))
    bundled = views.View(__name__, "loud_text", bundle="loud_bundle")
    monkeypatch.setitem(views.VIEWS, views.type_name(_Loud), bundled)
    text = views.to_bundle(_Loud())["text/plain"]
    assert isinstance(text, str) and text == shown


def test_trace_idle_escapes_names_in_its_evidence(tmp_path: Path) -> None:
    from kineto_gen import injected_trace

    from perflab.io import load_trace
    from perflab.render.idle_view import idle_text

    doc = injected_trace(seed=1).doc
    for event in doc["traceEvents"]:
        if event["cat"] == "kernel":
            event["name"] += HOSTILE
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    result = load_trace(path).idle()
    for shown in (idle_text(result), str(result)):
        assert not _acted_on(shown), _acted_on(shown)
        assert r"\x1b[2J\x1b]0;owned\x07\x9b31m\u202eevil\u2028\x7f\x09tail" in shown
