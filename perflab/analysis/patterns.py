"""Regular expressions that users give perflab, matched in time linear in the text.

Every pattern a user writes (``perflab trace diff --rename re:PATTERN=REPL``, a kernel-category
rule of :mod:`perflab.analysis.categories`) is compiled here, by RE2 (the ``google-re2``
package). RE2 matches in time linear in the name, where Python's backtracking ``re`` can take
exponential time: ``(a+)+b`` against a name of 5,000 ``a`` is answered at once. RE2 has no
backreferences (``\\1`` inside a pattern) and no lookaround (``(?=``, ``(?!``, ``(?<=``,
``(?<!``), writes Python's ``\\Z`` as ``\\z``, and its ``\\w``, ``\\d`` and ``\\b`` are ASCII;
a pattern it refuses is an :class:`~perflab.errors.InputError` that names where the pattern
came from and says so.

google-re2 is a core dependency. Where it is missing all the same, a pattern of plain text
(none of ``\\.^$*+?{}[]|()``) is still matched, literally, by Python's ``re``; any other is
refused with an error that names the package.

A replacement (:meth:`UserPattern.template`) follows Python's ``re.sub``: ``\\1`` to ``\\99``
and ``\\g<N>`` are group N (``\\g<0>`` the whole match), ``\\g<NAME>`` a named group (empty
when the group took no part in the match), ``\\\\`` a backslash, ``\\n``, ``\\t``, ``\\r``,
``\\f``, ``\\v``, ``\\a`` and ``\\b`` the usual control characters. An escape of another ASCII
letter is refused, as Python does; octal escapes are refused too. A backslash before any other
character is kept.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, AnyStr, NoReturn

from perflab.errors import InputError, MissingExtraError

RE2_PACKAGE = "google-re2"
REGEX_SYNTAX = frozenset("\\.^$*+?{}[]|()")
RE2_LIMITS = (
    "perflab matches patterns with RE2, which has no backreferences (\\1) and no lookaround "
    "((?=, (?!, (?<=, (?<!), and writes \\Z as \\z"
)
_CONTROL = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "b": "\b"}
# one escape of a replacement: \g<...>, one or two digits, or any one character
_ESCAPE = re.compile(r"\\(?:g<([^<>]*)>|([0-9]{1,2})|(.))", re.DOTALL)
_OCTAL = frozenset("01234567")

Span = tuple[int, int]


def _re2() -> ModuleType | None:
    """The RE2 module, or None where google-re2 is not installed."""
    try:
        return importlib.import_module("re2")
    except ImportError:
        return None


def is_plain_text(pattern: str) -> bool:
    """Whether ``pattern`` matches only itself (it holds no regular-expression syntax)."""
    return not REGEX_SYNTAX.intersection(pattern)


def _has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (which is not text UTF-8 can carry)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _utf8(text: str) -> bytes:
    """``text`` as RE2 reads it; a lone surrogate passes as the bytes it would have been."""
    return text.encode("utf-8", "surrogatepass")


def _from_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a pattern that split a character (RE2's \C, one byte)
        return data.decode("utf-8", "replace")


def _char_size(subject: str | bytes, at: int) -> int:
    """The length of the character at ``at``: 1 in text, 1 to 4 bytes in UTF-8."""
    if isinstance(subject, str) or at >= len(subject):
        return 1
    lead = subject[at]
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def _re2_message(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)


def _compile_re2(re2: ModuleType, pattern: str, where: str, ignore_case: bool) -> Any:
    options = re2.Options()
    options.log_errors = False  # the refusal is ours to report, not RE2's to print on stderr
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise InputError(
            f"{where}: not a usable regular expression: {_re2_message(exc)} ({RE2_LIMITS})"
        ) from None


def _compile_plain(pattern: str, where: str, ignore_case: bool) -> re.Pattern[str]:
    """Python's ``re`` for a pattern of plain text (linear: it has nothing to backtrack)."""
    if not is_plain_text(pattern):
        raise MissingExtraError(
            f"{where}: the regular expression {pattern!r} needs {RE2_PACKAGE}, which is not "
            f"installed: pip install {RE2_PACKAGE} (without it only plain text, with none of "
            f"{''.join(sorted(REGEX_SYNTAX))}, is matched)"
        )
    return re.compile(pattern, re.IGNORECASE if ignore_case else 0)


@dataclass(frozen=True)
class Template:
    """A parsed replacement: literal text and group numbers, in order."""

    text: str
    pieces: tuple[str | int, ...]

    @property
    def utf8_pieces(self) -> tuple[bytes | int, ...]:
        return tuple(_utf8(p) if isinstance(p, str) else p for p in self.pieces)


def _replace(
    subject: AnyStr, pieces: Sequence[AnyStr | int], matches: Iterable[tuple[Span, ...]]
) -> AnyStr:
    """``subject`` with each match (the spans of its groups, 0 the whole) replaced by
    ``pieces``: literals, and groups by number (empty when a group took no part)."""
    out: list[AnyStr] = []
    done = 0
    for spans in matches:
        start, end = spans[0]
        out.append(subject[done:start])
        for piece in pieces:
            if not isinstance(piece, int):
                out.append(piece)
            elif spans[piece][0] >= 0:
                out.append(subject[spans[piece][0] : spans[piece][1]])
        done = end
    out.append(subject[done:])
    return subject[:0].join(out)


@dataclass(frozen=True)
class UserPattern:
    """A user's pattern, compiled by :func:`compile_pattern`. With RE2 (``utf8``) names are
    matched as UTF-8, encoded once per name so that each match starts at its own offset."""

    text: str
    where: str  # how messages name the pattern's origin, e.g. "--rename 're:a=b'"
    engine: Any = field(repr=False, compare=False)
    utf8: bool = True

    @property
    def groups(self) -> int:
        count: int = self.engine.groups
        return count

    def search(self, name: str) -> bool:
        """Whether the pattern matches anywhere in ``name``."""
        return self.engine.search(_utf8(name) if self.utf8 else name) is not None

    def _matches(self, subject: str | bytes) -> Iterator[tuple[Span, ...]]:
        """The spans of the groups (0: the whole match) of each match, left to right. As in
        Python's ``re``, an empty match may follow a match that ends where it is; after an
        empty match the next one starts a character later."""
        pos = 0
        while pos <= len(subject):
            match = self.engine.search(subject, pos)
            if match is None:
                return
            spans = tuple(match.span(group) for group in range(self.groups + 1))
            yield spans
            start, end = spans[0]
            pos = end if end > start else end + _char_size(subject, end)

    def sub(self, template: Template, name: str) -> str:
        """``name`` with every match replaced by ``template`` (Python's ``re.sub``)."""
        if not self.utf8:
            return _replace(name, template.pieces, self._matches(name))
        subject = _utf8(name)
        return _from_utf8(_replace(subject, template.utf8_pieces, self._matches(subject)))

    def template(self, replacement: str) -> Template:
        """``replacement`` parsed (module docstring); InputError naming a group this pattern
        lacks or an escape it cannot take."""
        pieces: list[str | int] = []
        done = 0
        for escape in _ESCAPE.finditer(replacement):
            pieces.append(replacement[done : escape.start()])
            pieces.append(self._escape_piece(escape, replacement))
            done = escape.end()
        tail = replacement[done:]
        if tail.endswith("\\"):  # a backslash before a character was an escape above
            self._refuse_replacement(replacement, "it ends in a lone backslash")
        pieces.append(tail)
        return Template(replacement, tuple(p for p in pieces if p != ""))

    def _escape_piece(self, escape: re.Match[str], replacement: str) -> str | int:
        named, digits, other = escape.groups()
        if named is not None:
            return self._group_named(named, replacement)
        if digits is not None:
            following = replacement[escape.end() : escape.end() + 1]
            if digits[0] == "0" or (len(digits) == 2 and {*digits, following} <= _OCTAL):
                self._refuse_replacement(replacement, "octal escapes are not taken")
            return self._group_number(digits, replacement)
        if other == "g":
            self._refuse_replacement(replacement, "\\g needs <NUMBER> or <NAME>")
        if other.isascii() and other.isalpha():
            if other not in _CONTROL:
                self._refuse_replacement(replacement, f"bad escape \\{other}")
            return _CONTROL[other]
        return other if other == "\\" else "\\" + other

    def _group_named(self, named: str, replacement: str) -> int:
        if named.isascii() and named.isdigit():
            return self._group_number(named, replacement)
        index = self.engine.groupindex.get(named)
        if index is None:
            self._refuse_replacement(replacement, f"the pattern has no group named {named!r}")
        return int(index)

    def _group_number(self, digits: str, replacement: str) -> int:
        number = int(digits)
        if number > self.groups:
            had = f"{self.groups or 'no'} group{'s' if self.groups != 1 else ''}"
            self._refuse_replacement(replacement, f"it has {had}, so no group {number}")
        return number

    def _refuse_replacement(self, replacement: str, why: str) -> NoReturn:
        raise InputError(
            f"{self.where}: not a usable replacement {replacement!r} for the regular "
            f"expression {self.text!r}: {why}"
        )


def compile_pattern(pattern: str, where: str, *, ignore_case: bool = False) -> UserPattern:
    """``pattern``, a user's regular expression, compiled to match in linear time (module
    docstring); ``where`` names its origin in errors (e.g. "--rename 're:a=b'")."""
    if not isinstance(pattern, str):
        raise InputError(f"{where}: a regular expression is text, not {type(pattern).__name__}")
    if _has_surrogate(pattern):
        raise InputError(f"{where}: {pattern!r} holds a lone surrogate, which is not text")
    re2 = _re2()
    if re2 is None:
        return UserPattern(pattern, where, _compile_plain(pattern, where, ignore_case), False)
    return UserPattern(pattern, where, _compile_re2(re2, pattern, where, ignore_case))
