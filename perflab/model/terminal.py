"""Text for a terminal: each character a terminal would act on, written as its escape.

Shared by every text view (:mod:`perflab.render.html` re-exports it) and by the compile
diagnostics of :mod:`perflab.capture`, which echo file names and source lines.
"""

from __future__ import annotations

import re
from typing import Final

# What a terminal acts on: C0 controls, DEL and C1 controls (0x9b acts as ESC [ on some
# terminals), the line and paragraph separators, and the bidirectional marks, embeddings,
# overrides and isolates. Printed raw, a name from a file could move the cursor, clear the
# screen, set the window's title, or show text other than what the file holds.
UNSAFE_TEXT: Final = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` for a terminal: each character of :data:`UNSAFE_TEXT` written as its Python
    escape (``\\x00``, ``\\x1b``, ``\\u202e``). Tabs and newlines are among them: pass a
    name or a field, not a whole view (:func:`printable_lines` keeps them)."""
    if UNSAFE_TEXT.search(text) is None:
        return text
    return UNSAFE_TEXT.sub(escaped_char, text)


def printable_lines(text: str) -> str:
    """:func:`printable`, its lines and tabs kept: for a message or a source excerpt, so
    that a name in it cannot move the cursor, recolour the terminal or hide text."""
    return "\n".join(
        "\t".join(printable(part) for part in line.split("\t")) for line in text.split("\n")
    )


def escaped_char(match: re.Match[str]) -> str:
    """The matched character as its Python escape: ``\\x1b``, ``\\u202e``."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
