"""What-if changes for a replayed dependency graph (:mod:`perflab.analysis.critical_path`).

A change is terms joined by commas, each a factor on some durations:

- ``host=F``: every host node (host events' own time, untraced host time between them, the
  calls themselves); the time a sync spends blocked is not a duration but follows from the
  rest;
- ``kernels=F``: GPU work that is not communication (kernels, copies, memsets);
- ``kernel:REGEX=F``: GPU work whose name REGEX matches (anywhere in it; RE2 syntax, matched in
  linear time by :mod:`perflab.analysis.patterns`), collectives' transfers included;
- ``comm=F``: collectives' transfer time, not their waiting for peers (a collective whose peers
  are not in the trace is scaled whole: its waiting cannot be told apart).

Factors multiply where terms overlap (``kernels=0.5,kernel:gemm=0.5`` makes a GEMM a quarter);
F is a number from 0 to 1000.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from perflab.analysis import critical_gpu as gpu
from perflab.analysis.critical_graph import Graph
from perflab.analysis.critical_host import HOST, START, SYNC
from perflab.analysis.patterns import UserPattern, compile_pattern
from perflab.errors import InputError

I64 = npt.NDArray[np.int64]
MAX_FACTOR = 1000.0
KEYS = ("host", "kernels", "comm")
_TERM_START = re.compile(r",(?=\s*(?:(?:host|kernels|comm)\s*=|kernel:))")


@dataclass(frozen=True)
class Change:
    """A parsed what-if: its text and its factors."""

    text: str
    factors: dict[str, float] = field(default_factory=dict)
    patterns: tuple[tuple[UserPattern, float], ...] = ()

    def factor(self, key: str) -> float:
        return self.factors.get(key, 1.0)


def parse_change(text: str) -> Change:
    """``text`` (module docstring) as a :class:`Change`; InputError saying what is wrong."""
    where = f"--what-if {text!r}"
    if not isinstance(text, str) or not text.strip():
        raise InputError(
            f"{where}: give terms such as host=0.5, kernels=0.5, comm=0.5 or kernel:REGEX=0.5"
        )
    factors: dict[str, float] = {}
    patterns: list[tuple[UserPattern, float]] = []
    for term in _TERM_START.split(text):
        term = term.strip()
        if term.startswith("kernel:"):
            regex, equals, value = term[len("kernel:") :].rpartition("=")
            if not equals or not regex:
                raise InputError(f"{where}: {term!r} is not kernel:REGEX=F")
            patterns.append((compile_pattern(regex, where), _factor(value, where)))
            continue
        key, equals, value = term.partition("=")
        key = key.strip()
        if not equals or key not in KEYS:
            raise InputError(
                f"{where}: {term!r} is not a change; the terms are host=F, kernels=F, comm=F "
                "and kernel:REGEX=F, joined by commas"
            )
        if key in factors:
            raise InputError(f"{where}: {key} is given twice")
        factors[key] = _factor(value, where)
    return Change(text, factors, tuple(patterns))


def _factor(value: str, where: str) -> float:
    try:
        number = float(value.strip())
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or not 0 <= number <= MAX_FACTOR:
        raise InputError(
            f"{where}: the factor {value.strip()!r} is not a number from 0 to {MAX_FACTOR:g}"
        )
    return number


def durations(g: Graph, change: Change, names: list[str], name_of_node: I64) -> I64:
    """Every node's duration under ``change``; ``names[name_of_node[i]]`` is node i's
    name (-1: a node without one)."""
    factor = np.ones(len(g), np.float64)
    host = np.isin(g.kind, (START, HOST, SYNC))
    compute = np.isin(g.kind, (gpu.KERNEL, gpu.COPY))
    comm = np.isin(g.kind, (gpu.COLLECTIVE, gpu.TRANSFER))
    factor[host] *= change.factor("host")
    factor[compute] *= change.factor("kernels")
    factor[comm] *= change.factor("comm")
    for pattern, f in change.patterns:
        hit = np.array([pattern.search(n) for n in names] + [False], dtype=bool)
        factor[(compute | comm) & hit[name_of_node]] *= f
    return np.asarray(np.rint(g.dur * factor), dtype=np.int64)
