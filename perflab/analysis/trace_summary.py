"""``Trace.summary()``: where the GPU time went, as a small JSON-able result.

Definitions (times in microseconds, floats; the CLI's ``--json`` prints exactly these keys):

- ``events``: entries in ``traceEvents`` (Kineto) or rows read (other formats)
- ``kernels``: ``{count, total_us}``, total = sum of kernel durations
- ``devices``: ``{"<device id>": {busy_us, span_us, idle_us, kernels}}``; busy = length of the
  union of kernel, memcpy and memset intervals on the device; span = last end minus first
  start of those; idle = span - busy; kernels = kernels on the device. With several ranks the
  key is ``"<rank>:<device>"``.
- ``comm``: ``{count, total_us, overlapped_us}`` over kernels whose name starts with "nccl"
  (any case); overlapped = length of (union of comm kernels) ∩ (union of the other kernels),
  per device, summed
- ``memcpy``: ``{count, total_us, bytes}`` over memcpy events (memsets not included)
- ``categories``: ``{"<category>": {count, total_us}}`` of kernels (see ``categories.py``)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import DEFAULT_RULES, Rules, is_comm_name, kernel_categories
from perflab.analysis.trace_intervals import exact_sum, intersection_length, merge, union_length
from perflab.model.trace import GPU_WORK_KINDS, EventKind, Trace, TrackKind

# device_pairs is public here too (analyses that key devices by (rank, device) import it)
from perflab.model.trace_keys import device_pairs as device_pairs
from perflab.model.trace_keys import event_device_pairs

KEYS = ("events", "kernels", "devices", "comm", "memcpy", "categories")


def _us(ns: float | int | np.integer[Any]) -> float:
    return float(ns) / 1000.0


@dataclass
class TraceSummary:
    """The summary document (``to_dict()``) plus text/HTML views."""

    doc: dict[str, Any]
    source: str = ""
    gpu: str = "GPU"  # "AMD GPU" where the trace says so

    def to_dict(self) -> dict[str, Any]:
        return self.doc

    def to_pandas(self) -> Any:
        """One row per device: busy/span/idle (us), utilisation, kernels."""
        import pandas as pd

        rows = [{"device": k, **v} for k, v in self.doc["devices"].items()]
        df = pd.DataFrame(rows, columns=["device", "busy_us", "span_us", "idle_us", "kernels"])
        df["utilisation"] = df["busy_us"] / df["span_us"].where(df["span_us"] > 0)
        return df

    def text(self) -> str:
        from perflab.model.units import format_bytes, format_ns

        d = self.doc
        lines = [
            f"{d['events']} events read; {d['kernels']['count']} kernels, "
            f"{format_ns(d['kernels']['total_us'] * 1e3)} of kernel time"
        ]
        for dev, v in d["devices"].items():
            util = 100 * v["busy_us"] / v["span_us"] if v["span_us"] else 0.0
            lines.append(
                f"{self.gpu} {dev}: busy {format_ns(v['busy_us'] * 1e3)} of "
                f"{format_ns(v['span_us'] * 1e3)} ({util:.1f}%), idle "
                f"{format_ns(v['idle_us'] * 1e3)}, {v['kernels']} kernels"
            )
        c = d["comm"]
        if c["count"]:
            share = 100 * c["overlapped_us"] / c["total_us"] if c["total_us"] else 0.0
            lines.append(
                f"communication: {c['count']} NCCL kernels, {format_ns(c['total_us'] * 1e3)}, "
                f"{share:.1f}% overlapped with compute"
            )
        m = d["memcpy"]
        if m["count"]:
            lines.append(
                f"memcpy: {m['count']} copies, {format_ns(m['total_us'] * 1e3)}, "
                f"{format_bytes(m['bytes'])}"
            )
        total = d["kernels"]["total_us"] or 1.0
        cats = sorted(d["categories"].items(), key=lambda kv: -kv[1]["total_us"])
        lines.append(
            "categories: " + ", ".join(f"{k} {100 * v['total_us'] / total:.1f}%" for k, v in cats)
        )
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from perflab.render.html import esc, table, wrap

        d = self.doc
        rows = [
            [
                dev,
                f"{v['busy_us']:.1f}",
                f"{v['span_us']:.1f}",
                f"{v['idle_us']:.1f}",
                str(v["kernels"]),
            ]
            for dev, v in d["devices"].items()
        ]
        cats = [
            [k, str(v["count"]), f"{v['total_us']:.1f}"]
            for k, v in sorted(d["categories"].items(), key=lambda kv: -kv[1]["total_us"])
        ]
        head = "".join(f"<div>{esc(line)}</div>" for line in self.text().splitlines()[:1])
        body = (
            head
            + table(["device", "busy us", "span us", "idle us", "kernels"], rows)
            + table(["category", "kernels", "total us"], cats)
            + "".join(f"<div>{esc(line)}</div>" for line in self.text().splitlines()[1:])
        )
        return {"text/plain": self.text(), "text/html": wrap(body)}


def summarize(trace: Trace, rules: Rules = DEFAULT_RULES) -> TraceSummary:
    kind = trace.kind
    start, end = trace.start_ns, trace.end_ns
    is_kernel = kind == EventKind.KERNEL
    device_key = event_device_pairs(trace)
    gpu_work = trace.mask(*GPU_WORK_KINDS) & (device_key >= 0)
    comm = is_kernel & _comm_mask(trace)

    devices: dict[str, Any] = {}
    comm_overlap = 0
    labels = _device_labels(trace)
    for key in np.unique(device_key[gpu_work]).tolist():
        on_dev = device_key == key
        work = gpu_work & on_dev
        busy = union_length(start[work], end[work])
        span = int(end[work].max()) - int(start[work].min())  # Python ints: no wrap
        devices[labels[key]] = {
            "busy_us": _us(busy),
            "span_us": _us(span),
            "idle_us": _us(span - busy),
            "kernels": int((is_kernel & on_dev).sum()),
        }
        dev_comm, dev_compute = comm & on_dev, is_kernel & ~comm & on_dev
        comm_overlap += intersection_length(
            merge(start[dev_comm], end[dev_comm]), merge(start[dev_compute], end[dev_compute])
        )

    is_memcpy = kind == EventKind.MEMCPY
    memcpy_rows = trace.memcpy["event"]
    copy_bytes = trace.memcpy["bytes"][kind[memcpy_rows] == EventKind.MEMCPY]
    dur = trace.dur_ns
    doc = {
        "events": int(trace.meta.get("events_read", len(trace))),
        "kernels": {"count": int(is_kernel.sum()), "total_us": _us(exact_sum(dur[is_kernel]))},
        "devices": devices,
        "comm": {
            "count": int(comm.sum()),
            "total_us": _us(exact_sum(dur[comm])),
            "overlapped_us": _us(comm_overlap),
        },
        "memcpy": {
            "count": int(is_memcpy.sum()),
            "total_us": _us(exact_sum(dur[is_memcpy])),
            "bytes": exact_sum(np.maximum(copy_bytes, 0)),
        },
        "categories": _categories(trace, rules),
    }
    gpu = trace.meta.get("gpu")
    return TraceSummary(doc, str(trace.meta.get("source", "")), gpu if gpu == "AMD GPU" else "GPU")


def _device_labels(trace: Trace) -> dict[int, str]:
    """``"<device>"``, or ``"<rank>:<device>"`` when GPUs of several ranks are present."""
    pairs, pair_of_track = device_pairs(trace)
    gpu = trace.tracks["kind"] == TrackKind.GPU
    used = np.unique(pair_of_track[gpu]).tolist()
    ranks = {int(pairs[k, 0]) for k in used}
    return {k: f"{pairs[k, 0]}:{pairs[k, 1]}" if len(ranks) > 1 else str(pairs[k, 1]) for k in used}


def _comm_mask(trace: Trace) -> npt.NDArray[np.bool_]:
    """Per event: its name starts with "nccl" (decided once per distinct name)."""
    return is_comm_name(trace.strings)[trace.name] if trace.strings else np.zeros(0, bool)


def _categories(trace: Trace, rules: Rules) -> dict[str, Any]:
    codes, labels = kernel_categories(trace, rules)
    dur = trace.dur_ns[trace.kind == EventKind.KERNEL]
    counts = np.bincount(codes, minlength=len(labels))
    totals = np.bincount(codes, weights=dur, minlength=len(labels))
    return {
        label: {"count": int(counts[i]), "total_us": _us(totals[i])}
        for i, label in enumerate(labels)
        if counts[i]
    }
