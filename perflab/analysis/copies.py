"""Copies by direction and memory kind.

The direction of every memcpy is in ``trace.memcpy["direction"]`` (HtoD, DtoH, DtoD, HtoH,
PtoP; from Kineto's names and nsys's ``copyKind``). The memory on each side is in the name
that both importers give a copy: ``"Memcpy HtoD (Pageable -> Device)"`` (Kineto, and nsys
from its ``srcKind``/``dstKind``), read here once per distinct name. A host side is
``pageable`` (the driver stages the copy through a pinned buffer, and the call blocks the
host), ``pinned`` (page-locked: the copy engine reads it directly, asynchronously), or
``unknown`` where the name does not say (older nsys exports, saved traces).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.trace_intervals import exact_sum
from perflab.model.trace import MEMCPY_DIRECTIONS, EventKind, Trace, unique_rows

#: memory kinds a copy's name can give for a side ("Pageable -> Device")
MEMORY_KINDS = ("unknown", "pageable", "pinned", "device", "array", "managed")
_MEMORY_CODE = {kind: i for i, kind in enumerate(MEMORY_KINDS)}
_SIDES = re.compile(r"\(\s*(\w[\w ]*?)\s*->\s*(\w[\w ]*?)\s*\)")
# directions whose host side is memory the user allocated (where pinning is a choice)
HOST_SIDE = {"HtoD": 0, "DtoH": 1}  # which side of "(src -> dst)" is the host's


@dataclass(frozen=True)
class CopyKind:
    """How many copies of one direction, their time and bytes, and of those with a host
    side, how many used pageable and pinned host memory (0 and 0 for device-side copies)."""

    count: int
    total_us: float
    bytes: int
    pageable: int = 0
    pinned: int = 0


def memory_sides(name: str) -> tuple[str, str]:
    """``"Memcpy DtoH (Device -> Pinned)"`` -> ``("device", "pinned")``; unknown sides are
    ``"unknown"``."""
    found = _SIDES.search(name)
    if found is None:
        return "unknown", "unknown"
    src, dst = (side.strip().lower() for side in found.groups())
    return _known(src), _known(dst)


def _known(kind: str) -> str:
    kind = kind.split()[0] if kind else kind  # "Device Static" -> "device"
    return kind if kind in _MEMORY_CODE else "unknown"


def host_memory(name: str, direction: str) -> str:
    """The host side's memory kind of a copy (``pageable``, ``pinned``, ...), ``""`` for a
    copy with no host side (DtoD, PtoP)."""
    side = HOST_SIDE.get(direction)
    return "" if side is None else memory_sides(name)[side]


def copy_rows(trace: Trace) -> npt.NDArray[np.int64]:
    """Rows of ``trace.memcpy`` that are copies (memsets share the table)."""
    events = trace.memcpy["event"]
    return np.flatnonzero(trace.kind[events] == EventKind.MEMCPY) if len(events) else events


def host_memory_codes(trace: Trace) -> npt.NDArray[np.int8]:
    """Per event: the code in :data:`MEMORY_KINDS` of the host memory a copy read or
    wrote (0, unknown, for everything else: device-side copies, kernels); one parse per
    distinct copy name."""
    out = np.zeros(len(trace), dtype=np.int8)
    rows = copy_rows(trace)
    events = trace.memcpy["event"][rows]
    direction = trace.memcpy["direction"][rows]
    pairs = np.stack([trace.name[events].astype(np.int64), direction.astype(np.int64)], axis=1)
    if len(pairs) == 0:
        return out
    distinct_pairs, inverse = unique_rows(pairs)
    codes = np.array(
        [
            _MEMORY_CODE.get(host_memory(trace.strings[n], MEMCPY_DIRECTIONS[d]) or "unknown", 0)
            for n, d in distinct_pairs.tolist()
        ],
        dtype=np.int8,
    )
    out[events] = codes[inverse]
    return out


def copies_by_kind(trace: Trace) -> dict[str, CopyKind]:
    """Copies per direction (``"HtoD"``, ``"DtoH"``, ``"DtoD"``, ...): count, time, bytes,
    and the host memory of those with a host side; directions with no copies are left out,
    in the order of :data:`perflab.model.trace.MEMCPY_DIRECTIONS`."""
    rows = copy_rows(trace)
    events = trace.memcpy["event"][rows]
    direction = trace.memcpy["direction"][rows].astype(np.int64)
    nbytes = np.maximum(trace.memcpy["bytes"][rows], 0)
    dur = trace.dur_ns[events]
    memory = host_memory_codes(trace)[events]
    out: dict[str, CopyKind] = {}
    for code in np.unique(direction).tolist():
        on = direction == code
        out[MEMCPY_DIRECTIONS[code]] = CopyKind(
            count=int(on.sum()),
            total_us=exact_sum(dur[on]) / 1e3,
            bytes=exact_sum(nbytes[on]),
            pageable=int((on & (memory == _MEMORY_CODE["pageable"])).sum()),
            pinned=int((on & (memory == _MEMORY_CODE["pinned"])).sum()),
        )
    return out


def copy_advice(by_kind: dict[str, CopyKind]) -> list[str]:
    """What the copies' evidence supports saying, one line each: pinned memory only where
    host copies used pageable memory; device-to-device and peer copies are device work."""
    lines = []
    for direction, kind in by_kind.items():
        if direction in HOST_SIDE and kind.pageable:
            lines.append(
                f"{kind.pageable} of {kind.count} {direction} copies used pageable host memory: "
                "pinned memory (pin_memory=True) lets them run asynchronously, without "
                "blocking the host"
            )
        elif direction in ("DtoD", "PtoP"):
            lines.append(
                f"{kind.count} {direction} copies are device work (no host memory involved): "
                "pinned memory does not apply to them"
            )
    return lines
