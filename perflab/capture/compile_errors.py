"""Compiler messages as diagnostics at the user's lines: nvcc (EDG), host compiler,
ptxas and Triton errors, shown with the source line and a caret as a compiler does.

Every text a diagnostic shows (a file name, a message, an echoed source line) has the
characters a terminal acts on written as escapes (:func:`perflab.model.terminal.printable`):
the messages go to terminals, and a file name or a line of source is the user's to choose.
The compiler's own ``log`` is kept as it was.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from perflab.errors import InputError
from perflab.model.kernel import Diagnostic
from perflab.model.terminal import printable, printable_lines


class CompileError(InputError):
    """The compiler rejected the source; ``diagnostics`` point at the user's lines.

    ``source`` (the name diagnostics give the user's source, and its text) and
    ``columns`` (0-based, one per diagnostic, None where the tool gave none) let the
    message show each error's line with a caret under the column and
    the line before it, as a compiler does: EDG reports a missing ``;`` at the next token.
    """

    def __init__(
        self,
        tool: str,
        diagnostics: list[Diagnostic],
        log: str,
        *,
        source: tuple[str, str] | None = None,
        columns: Sequence[int | None] = (),
    ) -> None:
        self.diagnostics = diagnostics
        self.log = log
        name, text = source or ("", "")
        lines = text.splitlines()
        located = list(zip(diagnostics, [*columns, *[None] * len(diagnostics)], strict=False))
        # errors and the notes that go with them; everything when there is no error
        errors = [p for p in located if p[0].severity in ("error", "fatal")]
        if errors:
            errors = [p for p in located if p[0].severity in ("error", "fatal", "note")]
        errors = errors or located
        shown_name = printable(name)  # as diagnostics write it
        self.details = "\n".join(
            str(d) + (source_excerpt(lines, d.line, column) if d.file == shown_name else "")
            for d, column in errors[:MAX_SHOWN_ERRORS]
        )
        self.details = self.details or printable_lines(log.strip()[-4000:])
        super().__init__(f"{tool} failed:\n{self.details}")


MAX_SHOWN_ERRORS = 20


def source_excerpt(lines: Sequence[str], line: int | None, column: int | None) -> str:
    """The line before and ``line`` of ``lines`` (1-based), numbered, with a caret under
    ``column`` (0-based) when known: ``""`` when the line is not in ``lines``."""
    if line is None or not 1 <= line <= len(lines):
        return ""
    width = len(str(line))
    shown = [printable_lines(text) for text in lines[max(line - 2, 0) : line]]
    first = max(line - 1, 1)
    out = [f"{n:>{width + 2}} | {shown[n - first]}" for n in range(first, line + 1)]
    if column is not None and 0 <= column <= len(lines[line - 1]):
        # keep the line's tabs so that the caret lands under the same character, and
        # count an escaped character as the characters of its escape
        before = printable_lines(lines[line - 1][:column])
        lead = "".join("\t" if c == "\t" else " " for c in before)
        out.append(f"{'':>{width + 2}} | {lead}^")
    return "\n" + "\n".join(out)


_NVCC_DIAG_RE = re.compile(
    r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|"
    r"remark|note)[^:]*: (?P<msg>.*)$"
)
_GCC_DIAG_RE = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|"
    r"note): (?P<msg>.*)$"
)
_TOOL_DIAG_RE = re.compile(
    r"^(?P<file>ptxas|nvcc|nvlink|cicc|nvdisasm)\s+(?P<sev>error|fatal|warning)\s*: (?P<msg>.*)$"
)
# ptxas reports PTX errors per line: "ptxas /tmp/x/cell.ptx, line 33; error   : ..."
_PTXAS_LINE_RE = re.compile(
    r"^ptxas (?P<file>\S+?), line (?P<line>\d+); (?P<sev>error|fatal|warning)\s*: (?P<msg>.*)$"
)
# EDG (nvcc's front end) echoes the line indented by two spaces, then a caret line
_EDG_INDENT = 2
_EDG_CARET_RE = re.compile(r"^ *\^$")
_SEVERITY = {"catastrophic error": "error", "fatal error": "error", "fatal": "error"}
_MISSING_CCCL_RE = re.compile(r"(cub|thrust|cuda/std|cuda)/[\w/.]+: No such file")


def parse_diagnostics(log: str, paths: Mapping[str, str]) -> list[Diagnostic]:
    """Compiler messages, with the scratch file's path replaced by the user's name.

    ``paths`` maps a path the compiler saw (full or bare) to the name to show; a key
    ending in ``/`` maps a folder's files (``/tmp/x/include-0/`` -> ``/home/me/inc/``).
    """
    return [d for d, _ in located_diagnostics(log, paths)]


def located_diagnostics(log: str, paths: Mapping[str, str]) -> list[tuple[Diagnostic, int | None]]:
    """:func:`parse_diagnostics` with the 0-based column each message points at, from
    GCC's ``file:line:col:`` or EDG's caret line (None where the tool gave none)."""
    found: list[tuple[Diagnostic, int | None]] = []
    raw_lines = log.splitlines()
    for index, raw in enumerate(raw_lines):
        line = raw.rstrip()
        edg = _NVCC_DIAG_RE.match(line)
        m = edg or _GCC_DIAG_RE.match(line) or _PTXAS_LINE_RE.match(line)
        m = m or _TOOL_DIAG_RE.match(line)
        if m is None:
            continue
        fields = m.groupdict()
        sev = _SEVERITY.get(fields["sev"], fields["sev"])
        number = int(fields["line"]) if fields.get("line") else None
        message = fields["msg"].strip()
        if _MISSING_CCCL_RE.search(message):
            message += " (CUB/Thrust/libcu++ headers: pip install nvidia-cuda-cccl)"
        file = printable(shown_name(fields["file"], paths))
        diagnostic = Diagnostic(file, number, sev, printable(message))
        column = int(fields["col"]) - 1 if fields.get("col") else None
        if edg is not None:
            column = _edg_column(raw_lines[index + 1 : index + 3])
        found.append((diagnostic, column))
    return found


def shown_name(file: str, paths: Mapping[str, str]) -> str:
    """What diagnostics call ``file`` (see :func:`parse_diagnostics`); a file perflab
    does not know by its base name."""
    exact = paths.get(file) or paths.get(os.path.basename(file))
    if exact:
        return exact
    for folder, shown in paths.items():
        if folder.endswith("/") and file.startswith(folder):
            return shown + file[len(folder) :]
    return os.path.basename(file)


def _edg_column(after: Sequence[str]) -> int | None:
    if len(after) == 2 and _EDG_CARET_RE.match(after[1].rstrip()):
        return max(after[1].index("^") - _EDG_INDENT, 0)
    return None


# ---- Triton ---------------------------------------------------------------------------------


def triton_compile_error(exc: BaseException, source: str, source_name: str) -> CompileError:
    """Triton's error as compiler diagnostics at lines of the file defining the kernel.

    Triton counts a position from the ``def`` line of the function it was compiling
    ("at 4:31"); the error in a called ``@triton.jit`` function is the ``__cause__`` of
    the caller's. So the innermost error is reported with its message and each caller
    as a note, all at file (cell) lines with the column Triton gave.
    """
    lines = source.splitlines()
    chain = _compilation_chain(exc)
    file = printable(source_name)
    if not chain:  # not a positioned error
        message = str(exc).strip() or type(exc).__name__
        diagnostic = Diagnostic(file, None, "error", printable_lines(message))
        return CompileError("triton", [diagnostic], message)
    diagnostics: list[Diagnostic] = []
    columns: list[int | None] = []
    for depth, err in enumerate(reversed(chain)):
        line, column = _file_position(err, lines)
        if depth == 0:
            message = printable_lines(_triton_message(err))
            diagnostics.append(Diagnostic(file, line, "error", message))
        else:
            diagnostics.append(Diagnostic(file, line, "note", "called from here"))
        columns.append(column)
    return CompileError(
        "triton", diagnostics, str(exc), source=(source_name, source), columns=columns
    )


def _compilation_chain(exc: BaseException) -> list[BaseException]:
    """Triton's positioned errors (``src`` and ``node``), outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and hasattr(getattr(current, "node", None), "lineno"):
        chain.append(current)
        current = current.__cause__
    return chain


_EXCEPTION_REPR_RE = re.compile(r"^(\w+)\((['\"])(.*)\2\)$", re.DOTALL)


def _triton_message(err: BaseException) -> str:
    """The message of Triton's innermost error: ``AttributeError("no foo")`` (a repr,
    as Triton stores it) reads ``AttributeError: no foo``."""
    text = str(getattr(err, "error_message", "") or "").strip()
    if not text and err.__cause__ is not None:
        text = f"{type(err.__cause__).__name__}: {err.__cause__}".strip()
    m = _EXCEPTION_REPR_RE.match(text)
    return f"{m.group(1)}: {m.group(3)}" if m else text or type(err).__name__


def _file_position(err: BaseException, lines: Sequence[str]) -> tuple[int | None, int | None]:
    """``err``'s (line, 0-based column) in ``lines``: its function's ``def`` found there
    by text (Triton's ``src`` is the function from ``def`` on, dedented)."""
    src = str(getattr(err, "src", "") or "").splitlines()
    head = [text.strip() for text in src[:3]]
    for start in range(len(lines)):
        if [text.strip() for text in lines[start : start + len(head)]] == head and head:
            indent = len(lines[start]) - len(lines[start].lstrip())
            node = getattr(err, "node", None)  # the chain holds errors with a positioned node
            line, column = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
            return start + int(line), indent + int(column)
    return None, None
