"""Names from files printed on a terminal: control characters, line separators and
bidirectional overrides are shown escaped (``\\x1b``), wherever a text view prints them."""

from __future__ import annotations

from pathlib import Path

import pytest
from nsys_hostile import hostile_copy

from perflab.cli import main
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
