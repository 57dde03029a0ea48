"""Names as a trace diff matches them: shortened, renamed, and grouped into families.

Every function here works on distinct names (a trace has a few thousand), never on events.

- :func:`short_name` drops a kernel's or op's template arguments, parameters and return type
  (``void at::native::f<float, 4>(int)`` -> ``at::native::f``), as HTA's ``shorten_name``
  does; copies and memsets keep their names.
- :class:`Rename` maps names before matching, so a kernel renamed between the two runs is
  one row: ``OLD=NEW`` renames the name ``OLD`` (exactly) to ``NEW``; ``re:PATTERN=REPL``
  replaces every match of the regular expression as Python's ``re.sub`` does (``\\1`` or
  ``\\g<1>`` in ``REPL`` is a group), matched in linear time by RE2
  (:mod:`perflab.analysis.patterns`, which says what RE2 does not take). Both split at the
  last ``=``.
- :func:`family` is the group a headline names: Triton's generated kernels by their kind and
  ``fused`` (``triton_poi_fused_*``), other names with their digits as ``*``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from perflab.analysis.patterns import Template, UserPattern, compile_pattern
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
    """One ``--rename``: the name (or, with ``pattern``, the regular expression) and what it
    becomes (with ``pattern``, the parsed ``template`` of ``new``)."""

    old: str
    new: str
    pattern: UserPattern | None = None
    template: Template | None = None

    @classmethod
    def parse(cls, text: str) -> Rename:
        """``OLD=NEW`` or ``re:PATTERN=REPL`` (split at the last ``=``); InputError when the
        text has no ``=``, names nothing, or holds a pattern or replacement that cannot be
        used (:mod:`perflab.analysis.patterns`)."""
        if not isinstance(text, str):
            raise InputError(f"--rename takes text OLD=NEW, not {type(text).__name__}")
        old, sep, new = text.rpartition("=")
        if not sep or not old:
            raise InputError(f"--rename needs OLD=NEW or re:PATTERN=REPLACEMENT, not {text!r}")
        if not old.startswith(REGEX_PREFIX):
            return cls(old, new)
        pattern = compile_pattern(old[len(REGEX_PREFIX) :], f"--rename {text!r}")
        return cls(pattern.text, new, pattern, pattern.template(new))

    def apply(self, name: str) -> str:
        if self.pattern is None or self.template is None:
            return self.new if name == self.old else name
        return self.pattern.sub(self.template, name)


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
