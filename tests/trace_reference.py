"""Independent, straightforward pure-Python computations of the summary numbers, used by the
importer tests to check perflab's vectorised results (no perflab code is used here)."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def union(intervals: list[tuple[Decimal, Decimal]]) -> list[tuple[Decimal, Decimal]]:
    merged: list[list[Decimal]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def length(intervals: list[tuple[Decimal, Decimal]]) -> Decimal:
    return sum((e - s for s, e in intervals), Decimal(0))


def intersect(a: list[tuple[Decimal, Decimal]], b: list[tuple[Decimal, Decimal]]) -> Decimal:
    total = Decimal(0)
    for s1, e1 in a:
        for s2, e2 in b:
            total += max(Decimal(0), min(e1, e2) - max(s1, s2))
    return total


def kineto_reference(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=Decimal)  # exact decimal arithmetic on timestamps
    events = doc["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    kernels = [e for e in gpu if e["cat"] == "kernel"]
    devices: dict[str, Any] = {}
    comm_overlap = Decimal(0)
    for dev in sorted({str(e["args"].get("device", e["pid"])) for e in gpu}):
        on = [e for e in gpu if str(e["args"].get("device", e["pid"])) == dev]
        iv = union([(e["ts"], e["ts"] + e["dur"]) for e in on])
        span = max(e["ts"] + e["dur"] for e in on) - min(e["ts"] for e in on)
        dev_k = [e for e in on if e["cat"] == "kernel"]
        devices[dev] = {
            "busy_us": length(iv),
            "span_us": span,
            "idle_us": span - length(iv),
            "kernels": len(dev_k),
        }
        comm = union(
            [(e["ts"], e["ts"] + e["dur"]) for e in dev_k if e["name"].lower().startswith("nccl")]
        )
        other = union(
            [
                (e["ts"], e["ts"] + e["dur"])
                for e in dev_k
                if not e["name"].lower().startswith("nccl")
            ]
        )
        comm_overlap += intersect(comm, other)
    comm_k = [e for e in kernels if e["name"].lower().startswith("nccl")]
    copies = [e for e in gpu if e["cat"] == "gpu_memcpy"]
    return {
        "events": len(events),
        "kernels": {"count": len(kernels), "total_us": sum(e["dur"] for e in kernels)},
        "devices": devices,
        "comm": {
            "count": len(comm_k),
            "total_us": sum(e["dur"] for e in comm_k),
            "overlapped_us": comm_overlap,
        },
        "memcpy": {
            "count": len(copies),
            "total_us": sum(e["dur"] for e in copies),
            "bytes": sum(e["args"].get("bytes", 0) for e in copies),
            "by_kind": copies_by_direction(copies),
        },
    }


def copies_by_direction(copies: list[dict[str, Any]]) -> dict[str, Any]:
    """Per direction named in "Memcpy HtoD (Pageable -> Device)": count, time, bytes, and
    how many used pageable or pinned host memory (the source of HtoD, the target of DtoH)."""
    out: dict[str, Any] = {}
    for e in copies:
        words = e["name"].split()
        direction = words[1] if len(words) > 1 and words[0] == "Memcpy" else "unknown"
        sides = e["name"].partition("(")[2].rstrip(")").split(" -> ")
        host = {"HtoD": 0, "DtoH": 1}.get(direction)
        memory = sides[host].strip().lower() if host is not None and len(sides) == 2 else ""
        row = out.setdefault(
            direction, {"count": 0, "total_us": 0, "bytes": 0, "pageable": 0, "pinned": 0}
        )
        row["count"] += 1
        row["total_us"] += e["dur"]
        row["bytes"] += e["args"].get("bytes", 0)
        row["pageable"] += memory == "pageable"
        row["pinned"] += memory == "pinned"
    return out


def assert_close(ours: Any, ref: Any, where: str = "") -> None:
    """Recursive comparison: numbers within 0.01% (or 1e-6 absolute), same keys."""
    if isinstance(ref, dict):
        assert set(ours) == set(ref), f"{where}: keys {sorted(ours)} != {sorted(ref)}"
        for k in ref:
            assert_close(ours[k], ref[k], f"{where}.{k}")
    else:
        ref = float(ref)
        tol = max(1e-4 * abs(ref), 1e-6)
        assert abs(ours - ref) <= tol, f"{where}: {ours} != {ref}"
