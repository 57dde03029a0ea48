"""Names as a trace diff matches them: shortened, renamed, and grouped into families.

Every function here works on distinct names (a trace has a few thousand), never on events.

- :func:`short_name` drops a kernel's or op's template arguments, parameters and return type
  (``void at::native::f<float, 4>(int)`` -> ``at::native::f``), as HTA's ``shorten_name``
  does; copies and memsets keep their names.
- :class:`Rename` maps names before matching, so a kernel renamed between the two runs is
  one row: ``OLD=NEW`` renames the name ``OLD`` (exactly) to ``NEW``; ``re:PATTERN=REPL``
  replaces every match of the regular expression (Python's ``re.sub``; ``\\1`` refers to a
  group). Both split at the last ``=``.
- :func:`family` is the group a headline names: Triton's generated kernels by their kind and
  ``fused`` (``triton_poi_fused_*``), other names with their digits as ``*``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from perflab.errors import InputError

_MEMORY = re.compile(r"^(memcpy|memset)", re.IGNORECASE)
_TRITON = re.compile(r"^(triton_[a-z]+_fused)_")
_DIGITS = re.compile(r"\d+")
REGEX_PREFIX = "re:"


def short_name(name: str) -> str:
    """``name`` without template arguments, parameters and return type (module docstring)."""
    if _MEMORY.match(name) or ("<" not in name and "(" not in name):
        return name
    kept: list[str] = []
    for c in name.replace("->", ""):
        if c in ">)":
            opening = "<" if c == ">" else "("
            while kept and kept[-1] != opening:
                kept.pop()
            if kept:
                kept.pop()
        else:
            kept.append(c)
    return "".join(kept).split(" ")[-1] or name


def family(name: str) -> str:
    """The family a headline groups ``name`` in (module docstring)."""
    short = short_name(name)
    triton = _TRITON.match(short)
    if triton:
        return f"{triton.group(1)}_*"
    return _DIGITS.sub("*", short)


@dataclass(frozen=True)
class Rename:
    """One ``--rename``: the name (or, with ``regex``, the pattern) and what it becomes."""

    old: str
    new: str
    regex: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, text: str) -> Rename:
        """``OLD=NEW`` or ``re:PATTERN=REPL`` (split at the last ``=``); InputError when the
        text has no ``=``, names nothing or holds a pattern Python cannot compile."""
        old, sep, new = text.rpartition("=")
        if not sep or not old:
            raise InputError(f"--rename needs OLD=NEW or re:PATTERN=REPLACEMENT, not {text!r}")
        if not old.startswith(REGEX_PREFIX):
            return cls(old, new)
        pattern = old[len(REGEX_PREFIX) :]
        try:
            compiled = re.compile(pattern)
            compiled.sub(new, "")  # a bad group reference in the replacement fails here
        except (re.error, IndexError) as exc:
            raise InputError(f"--rename {text!r}: not a usable regular expression: {exc}") from None
        return cls(pattern, new, compiled)

    def apply(self, name: str) -> str:
        if self.regex is None:
            return self.new if name == self.old else name
        try:
            return self.regex.sub(self.new, name)
        except (re.error, IndexError) as exc:
            raise InputError(f"--rename re:{self.old}={self.new}: {exc}") from None


def canonical(names: Sequence[str], short: bool, renames: Sequence[Rename]) -> list[str]:
    """The name each of ``names`` is matched by: shortened when ``short``, then renamed by
    each of ``renames`` in turn."""
    out = []
    for name in names:
        key = short_name(name) if short else name
        for rename in renames:
            key = rename.apply(key)
        out.append(key)
    return out
