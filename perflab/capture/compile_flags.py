"""The nvcc and ptxas flags a cell may pass, and the check that refuses the rest.

nvcc runs its sub-tools through ``sh -c`` with these flags inside, so a flag is accepted
only when its name is in :data:`NVCC_FLAGS` exactly and its value matches a strict pattern
(no shell metacharacters, no commas where nvcc would split a list). Outputs, modes, host
compilers and option files are not in the table, so they cannot be passed; a refusal
lists the table itself (:func:`allowed_flags_text`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from perflab.errors import InputError


@dataclass(frozen=True)
class ValueRule:
    pattern: re.Pattern[str]  # the whole value must match
    shown: str  # how the refusal message names it


def _rule(pattern: str, shown: str) -> ValueRule:
    return ValueRule(re.compile(pattern), shown)


_MACRO = r"[A-Za-z_][A-Za-z0-9_]*"
_V_DEFINE = _rule(rf"{_MACRO}(=[A-Za-z0-9_.:+-]*)?", "NAME[=VALUE]")
_V_MACRO = _rule(_MACRO, "NAME")
_V_DIR = _rule(r"[A-Za-z0-9_./+][A-Za-z0-9_./+-]*", "DIR")
_V_LEVEL = _rule(r"[0-3]", "0-3")
_V_REGISTERS = _rule(r"[1-9][0-9]{0,2}", "N")
_V_THREADS = _rule(r"[0-9]{1,2}", "N")
_V_BOOL = _rule(r"true|false", "true|false")
_V_STREAM = _rule(r"legacy|null|per-thread", "legacy|null|per-thread")
_V_DIAG = _rule(r"[0-9]{1,5}(,[0-9]{1,5})*", "NUMBER[,NUMBER]")
_WERROR_KINDS = (
    "all-warnings|cross-execution-space-call|reorder|default-stream-launch|"
    "missing-launch-bounds|ext-lambda-captures-this|deprecated-declarations"
)
_V_WERROR = _rule(rf"({_WERROR_KINDS})(,({_WERROR_KINDS}))*", "KIND[,KIND]")
_V_LOAD_CACHE = _rule(r"ca|cg|cs|lu|cv", "ca|cg|cs|lu|cv")
_V_STORE_CACHE = _rule(r"wb|cg|cs|wt", "wb|cg|cs|wt")
# the value of -Xptxas: ptxas options (checked one by one against _PTXAS_FLAGS)
_V_PTXAS = ValueRule(re.compile(r".*"), "OPT[,OPT]")


@dataclass(frozen=True)
class FlagRule:
    """One flag: its spellings, its value (None: takes none) and whether the value may
    follow a one-letter name directly (``-DN=4``, ``-O3``)."""

    names: tuple[str, ...]
    value: ValueRule | None = None
    attached: bool = False

    def shown(self) -> str:
        return "/".join(self.names) + (f" {self.value.shown}" if self.value else "")


NVCC_FLAGS: tuple[FlagRule, ...] = (
    FlagRule(("-D", "--define-macro"), _V_DEFINE, attached=True),
    FlagRule(("-U", "--undefine-macro"), _V_MACRO, attached=True),
    FlagRule(("-I", "--include-path"), _V_DIR, attached=True),
    FlagRule(("-isystem", "--system-include"), _V_DIR),
    FlagRule(("-O", "--optimize"), _V_LEVEL, attached=True),
    FlagRule(("-maxrregcount", "--maxrregcount"), _V_REGISTERS),
    FlagRule(("-Xptxas", "--ptxas-options"), _V_PTXAS),
    FlagRule(("-use_fast_math", "--use_fast_math")),
    FlagRule(("-ftz", "--ftz"), _V_BOOL),
    FlagRule(("-prec-div", "--prec-div"), _V_BOOL),
    FlagRule(("-prec-sqrt", "--prec-sqrt"), _V_BOOL),
    FlagRule(("-fmad", "--fmad"), _V_BOOL),
    FlagRule(("-rdc", "--relocatable-device-code"), _V_BOOL),
    FlagRule(("-extended-lambda", "--extended-lambda")),
    FlagRule(("-expt-extended-lambda", "--expt-extended-lambda")),
    FlagRule(("-expt-relaxed-constexpr", "--expt-relaxed-constexpr")),
    FlagRule(("-extra-device-vectorization", "--extra-device-vectorization")),
    FlagRule(("-restrict", "--restrict")),
    FlagRule(("-lineinfo", "--generate-line-info")),
    FlagRule(("-G", "--device-debug")),
    FlagRule(("-w", "--disable-warnings")),
    FlagRule(("-Wreorder", "--Wreorder")),
    FlagRule(("-Wno-deprecated-gpu-targets", "--Wno-deprecated-gpu-targets")),
    FlagRule(("-Wno-deprecated-declarations", "--Wno-deprecated-declarations")),
    FlagRule(("-Werror", "--Werror"), _V_WERROR),
    FlagRule(("-diag-suppress", "--diag-suppress"), _V_DIAG),
    FlagRule(("-diag-warn", "--diag-warn"), _V_DIAG),
    FlagRule(("-diag-error", "--diag-error"), _V_DIAG),
    FlagRule(("-default-stream", "--default-stream"), _V_STREAM),
    FlagRule(("-t", "--threads"), _V_THREADS),
)
# ptxas options inside -Xptxas (NAME or NAME=VALUE, one per comma-separated part)
PTXAS_FLAGS: tuple[FlagRule, ...] = (
    FlagRule(("-v", "--verbose")),
    FlagRule(("-warn-spills", "--warn-on-spills")),
    FlagRule(("-warn-lmem-usage", "--warn-on-local-memory-usage")),
    FlagRule(("-warn-double-usage", "--warn-on-double-precision-use")),
    FlagRule(("-suppress-stack-size-warning", "--suppress-stack-size-warning")),
    FlagRule(("-Werror", "--warning-as-error")),
    FlagRule(("-w", "--disable-warnings")),
    FlagRule(("-O", "--opt-level"), _V_LEVEL, attached=True),
    FlagRule(("-maxrregcount", "--maxrregcount"), _V_REGISTERS),
    FlagRule(("-dlcm", "--def-load-cache"), _V_LOAD_CACHE),
    FlagRule(("-dscm", "--def-store-cache"), _V_STORE_CACHE),
    FlagRule(("-fmad", "--fmad"), _V_BOOL),
    FlagRule(("-allow-expensive-optimizations", "--allow-expensive-optimizations"), _V_BOOL),
)


def allowed_flags_text() -> str:
    """What a refusal lists: every flag in the tables above."""
    nvcc = ", ".join(rule.shown() for rule in NVCC_FLAGS)
    ptxas = ", ".join(rule.shown() for rule in PTXAS_FLAGS)
    return f"allowed: {nvcc}; -Xptxas OPT is one of: {ptxas}"


def _by_name(rules: Sequence[FlagRule]) -> dict[str, FlagRule]:
    return {name: rule for rule in rules for name in rule.names}


_NVCC_BY_NAME = _by_name(NVCC_FLAGS)
_PTXAS_BY_NAME = _by_name(PTXAS_FLAGS)


def _match_flag(token: str, by_name: Mapping[str, FlagRule]) -> tuple[FlagRule, str | None] | None:
    """The rule ``token`` names and its value in the token (None: none given), or None
    when no rule fits. ``NAME``, ``NAME=VALUE`` and, for one-letter names, ``-XVALUE``."""
    if token in by_name:
        return by_name[token], None
    name, sep, value = token.partition("=")
    rule = by_name.get(name)
    if sep and rule is not None and rule.value is not None and len(name) > 2:
        return rule, value
    rule = by_name.get(token[:2])
    if rule is not None and rule.attached and len(token) > 2:
        return rule, token[2:]
    return None


def _refuse(what: str) -> InputError:
    return InputError(f"--flags: {what} is not allowed; {allowed_flags_text()}")


def _check_value(rule: FlagRule, value: str) -> None:
    if rule.value is _V_PTXAS:
        for part in value.split(","):
            _check_ptxas_option(part)
    elif rule.value is not None and not rule.value.pattern.fullmatch(value):
        raise _refuse(f"{rule.names[0]} {value!r} (the value must be {rule.value.shown})")


def _check_ptxas_option(part: str) -> None:
    found = _match_flag(part, _PTXAS_BY_NAME)
    if found is None:
        raise _refuse(f"ptxas option {part!r}")
    rule, value = found
    if (rule.value is None) != (value is None) or (
        rule.value is not None and value is not None and not rule.value.pattern.fullmatch(value)
    ):
        raise _refuse(f"ptxas option {part!r}")


def _split(flags: str | Sequence[str]) -> list[str]:
    try:
        return shlex.split(flags) if isinstance(flags, str) else [str(f) for f in flags]
    except ValueError as exc:
        raise InputError(f"--flags: cannot split {flags!r}: {exc}") from None


def _parsed(tokens: Sequence[str]) -> Iterator[tuple[FlagRule, str | None, list[str]]]:
    """Each flag of ``tokens``: its rule, its value (None: it takes none) and the tokens
    it spans (one, or the name and its value). Raises InputError on an unknown flag or a
    missing or unexpected value; the value itself is not checked here."""
    position = 0
    while position < len(tokens):
        token = tokens[position]
        found = _match_flag(token, _NVCC_BY_NAME)
        if found is None:
            raise _refuse(repr(token))
        rule, value = found
        if rule.value is None and value is not None:
            raise _refuse(repr(token))
        spanned = [token]
        if rule.value is not None and value is None:  # the value is the next token
            position += 1
            if position == len(tokens):
                raise InputError(f"--flags: {token} needs a value ({rule.value.shown})")
            value = tokens[position]
            spanned.append(value)
        yield rule, value, spanned
        position += 1


def check_flags(flags: str | Sequence[str]) -> list[str]:
    """Split and vet extra nvcc flags (a string is split like a shell would, but no
    shell ever runs here). Every flag must be in :data:`NVCC_FLAGS` exactly, with a
    value matching its pattern; raises InputError naming the first flag refused and
    listing what is allowed. Returns the tokens as given."""
    tokens = _split(flags)
    for rule, value, _ in _parsed(tokens):
        if value is not None:
            _check_value(rule, value)
    return tokens


# the include options, each as the one spelling perflab passes on
_INCLUDE_OPTIONS = {"-I": "-I", "-isystem": "-isystem"}


def split_include_flags(tokens: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Checked flags (:func:`check_flags`' result) as the flags other than ``-I`` and
    ``-isystem`` (any spelling), and those as ``("-I" or "-isystem", DIR)`` in order:
    the compiler is handed each directory under a name of perflab's, never as given."""
    rest: list[str] = []
    dirs: list[tuple[str, str]] = []
    for rule, value, spanned in _parsed(tokens):
        option = _INCLUDE_OPTIONS.get(rule.names[0])
        if option is not None and value is not None:
            dirs.append((option, value))
        else:
            rest += spanned
    return rest, dirs
