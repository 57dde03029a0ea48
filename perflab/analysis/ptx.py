"""PTX text -> lines with kinds and source lines, and the span of each ``.entry``.

Source lines come from ``.file``/``.loc`` directives (nvcc ``-lineinfo``, Triton by
default): a ``.loc F L C`` applies to the instructions after it. For code inlined from
another file (a CUDA header), ``.loc ... inlined_at F2 L2 C2`` names the user's line it
was inlined at, which is the line we keep (through the frames between, see
:class:`_LocResolver`). Parsing never raises on odd input: unknown
lines are instructions without a source line.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import PurePath

from perflab.errors import InputError

_FILE_RE = re.compile(r'^\s*\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"(?:\s*,?\s*"((?:[^"\\]|\\.)*)")?')
_LOC_RE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_INLINED_RE = re.compile(r"inlined_at\s+(\d+)\s+(\d+)\s+(\d+)")
_ENTRY_RE = re.compile(r"\.entry\s+([\w$.]+)")
_LABEL_RE = re.compile(r"^\s*[\w$.]+:\s*(//.*)?$")
_STRUCTURAL = frozenset("{}()")

KINDS = ("instruction", "directive", "label", "comment", "blank")


@dataclass(frozen=True)
class PtxLine:
    number: int  # 1-based line in the module
    text: str
    kind: str  # one of KINDS
    source_line: int | None = None


@dataclass
class PtxModule:
    files: dict[int, str]
    lines: list[PtxLine]
    entries: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (first, last)

    def entry_lines(self, name: str) -> list[PtxLine]:
        first, last = self.entries[name]
        return self.lines[first - 1 : last]


def line_kind(text: str) -> str:
    stripped = text.strip()
    if not stripped:
        return "blank"
    if stripped.startswith("//"):
        return "comment"
    if stripped.startswith(".") or stripped.rstrip(";,") in _STRUCTURAL:
        return "directive"
    if _LABEL_RE.match(stripped):
        return "label"
    return "instruction"


def parse_files(text: str) -> dict[int, str]:
    """``.file`` table: index -> path (``.file 1 "dir" "name"`` joined)."""
    files: dict[int, str] = {}
    for line in text.splitlines():
        m = _FILE_RE.match(line)
        if m:
            path = m.group(2)
            if m.group(3):
                path = str(PurePath(path) / m.group(3))
            files[int(m.group(1))] = path
    return files


def is_user_file(path: str, user_files: Collection[str] | None) -> bool:
    """Whether ``path`` is one of the user's files (all files when none are named);
    compared by full path, else by name when the user gave a bare name."""
    if user_files is None:
        return True
    if path in user_files:
        return True
    name = PurePath(path).name
    return any(PurePath(u).name == name and "/" not in u for u in user_files)


class _LocResolver:
    """The user's source line each ``.loc`` stands for.

    ``inlined_at`` names only the next frame out: code inlined twice (Triton's ``tl.sum``
    calling ``reduce`` in ``standard.py``) says ``inlined_at`` a line of ``standard.py``.
    That frame's own ``.loc``, seen just before, said where it was inlined in the user's
    file, so the resolver keeps the user line each frame last resolved to and follows it.
    """

    def __init__(self, files: dict[int, str], user_files: Collection[str] | None) -> None:
        self.files = files
        self.user_files = user_files
        self.frames: dict[tuple[int, int, int], int] = {}  # (file, line, col) -> user line

    def _user_line(self, file_id: int, number: int) -> int | None:
        if number > 0 and is_user_file(self.files.get(file_id, ""), self.user_files):
            return number
        return None

    def resolve(self, line: str) -> int | None:
        m = _LOC_RE.match(line)
        if m is None:
            return None
        frame = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        found = self._user_line(frame[0], frame[1])
        inlined = _INLINED_RE.search(line)
        if found is None and inlined:
            outer = (int(inlined.group(1)), int(inlined.group(2)), int(inlined.group(3)))
            found = self._user_line(outer[0], outer[1]) or self.frames.get(outer)
        if found is not None:
            self.frames[frame] = found
        return found


def _entries(lines: list[PtxLine]) -> dict[str, tuple[int, int]]:
    """``.entry`` name -> (first, last) line, by brace depth (operand braces balance on
    their own line, so counting per line is exact for compiler output)."""
    found: dict[str, tuple[int, int]] = {}
    current: str | None = None
    start = depth = 0
    opened = False
    for pl in lines:
        code = pl.text.split("//", 1)[0]
        if current is None:
            m = _ENTRY_RE.search(code)
            if m is None:
                continue
            current, start, depth, opened = m.group(1), pl.number, 0, False
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if opened and depth <= 0:
            found[current] = (start, pl.number)
            current = None
    if current is not None:  # truncated text: the entry runs to the end
        found[current] = (start, lines[-1].number)
    return found


def parse_ptx(text: str, *, user_files: Collection[str] | None = None) -> PtxModule:
    """Parse a PTX module. ``user_files`` names the user's source files, so that lines
    from headers map to the user's line they were inlined at (None: every file)."""
    if not isinstance(text, str):
        raise InputError(f"PTX must be text, not {type(text).__name__}")
    files = parse_files(text)
    lines: list[PtxLine] = []
    current: int | None = None
    locations = _LocResolver(files, user_files)
    for number, raw in enumerate(text.splitlines(), start=1):
        kind = line_kind(raw)
        if kind == "directive" and _LOC_RE.match(raw):
            current = locations.resolve(raw)
        elif kind == "directive" and _ENTRY_RE.search(raw):
            current = None  # a new function starts with no location
        lines.append(PtxLine(number, raw, kind, current if kind == "instruction" else None))
    return PtxModule(files, lines, _entries(lines))
