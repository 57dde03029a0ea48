"""``Trace.summary()``: where the GPU time went, as a small typed result.

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
- ``memcpy``: ``{count, total_us, bytes, by_kind}`` over memcpy events (memsets not
  included); ``by_kind``: ``{"<direction>": {count, total_us, bytes, pageable, pinned}}`` per
  direction present (HtoD, DtoH, DtoD, HtoH, PtoP, unknown), ``pageable``/``pinned`` counting
  the copies of a host-side direction by their host memory (``copies.py``)
- ``categories``: ``{"<category>": {count, total_us}}`` of kernels (see ``categories.py``)
- ``idle``: ``{"<cause>": {idle_us, gaps, share}}``: the devices' idle time split by the
  cause that held the next work back (host-busy, after-sync, launch-overhead,
  launch-blocked, gpu-dependency, unknown: heuristics over the trace's events, see
  ``idle_causes.py``; ``perflab trace idle`` shows each gap's evidence); share = of all
  idle time
- ``host`` (only in the summary of a trace with no GPU work: no kernels, copies or
  memsets): what the host did instead (:class:`perflab.analysis.trace_stats.HostActivity`):
  ``{note, ops: {count, distinct, self_us, top: [{name, calls, self_us, total_us}]},
  threads: [{thread, ops, in_ops_us, span_us}], ranges: {count, distinct, top: [{name,
  count, total_us}]}}``; ``note`` says that the trace has no GPU work; ops are CPU ops by
  self time (an op's duration less its direct child ops' on the same thread), the
  longest :data:`~perflab.analysis.trace_stats.TOP_OPS`; ranges are user ranges
  (record_function, perflab.range, NVTX) by total time
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import DEFAULT_RULES, Rules, is_comm_name, kernel_categories
from perflab.analysis.copies import CopyKind, copies_by_kind
from perflab.analysis.idle_causes import CauseTotal, cause_totals
from perflab.analysis.trace_intervals import exact_sum, intersection_length, merge, union_length
from perflab.analysis.trace_stats import HostActivity, host_activity
from perflab.model.display import Shown
from perflab.model.trace import GPU_WORK_KINDS, EventKind, Trace, TrackKind, distinct

# device_pairs is public here too (analyses that key devices by (rank, device) import it)
from perflab.model.trace_keys import device_pairs as device_pairs
from perflab.model.trace_keys import event_device_pairs

if TYPE_CHECKING:
    import pandas as pd


def _us(ns: float | int | np.integer) -> float:
    return float(ns) / 1000.0


@dataclass(frozen=True)
class Totals:
    """A count of events and their summed duration."""

    count: int
    total_us: float


@dataclass(frozen=True)
class DeviceTime:
    """One GPU: busy (union of its kernel, memcpy and memset intervals), span (first start to
    last end of those), idle = span - busy, and its kernel count."""

    busy_us: float
    span_us: float
    idle_us: float
    kernels: int

    @property
    def utilisation(self) -> float:
        """busy / span; 0 on a device with no span."""
        return self.busy_us / self.span_us if self.span_us else 0.0


@dataclass(frozen=True)
class CommTotals(Totals):
    """NCCL kernels, and how much of their time overlapped other kernels on the device."""

    overlapped_us: float


@dataclass(frozen=True)
class CopyTotals(Totals):
    """Memcpy events (memsets not included), the bytes they moved, and the same per
    direction with the host memory of each (:class:`perflab.analysis.copies.CopyKind`)."""

    bytes: int
    by_kind: dict[str, CopyKind] = field(default_factory=dict)


# what a format's entries that are not kept as events are
NOT_KEPT = {
    "kineto": "metadata, flow arrows, instant markers, the profiler's own span and, unless "
    "loaded with python=True, python_function events",
}


def _not_kept(trace: Trace) -> str:
    """What the entries read but not kept as events were (a partial read also leaves out
    those outside its part)."""
    said = NOT_KEPT.get(str(trace.meta.get("format")), "")
    part = trace.meta.get("part")
    if not isinstance(part, dict):
        return said
    outside = f"events outside {part.get('label')}"
    return f"{outside}, {said}" if said else outside


@dataclass(frozen=True)
class TraceSummary(Shown):
    """Where the GPU time went (definitions in the module docstring). ``to_dict()`` is the
    JSON document the CLI prints; :mod:`perflab.render.views` shows it."""

    events: int
    kernels: Totals
    devices: dict[str, DeviceTime]
    comm: CommTotals
    memcpy: CopyTotals
    categories: dict[str, Totals]
    idle: dict[str, CauseTotal] = field(default_factory=dict)
    source: str = ""
    gpu: str = "GPU"  # "AMD GPU" where the trace says so
    kept: int = 0  # of the entries read, those kept as events (not in the JSON document)
    not_kept: str = ""  # what the others were, where the format says
    host: HostActivity | None = None  # a trace without GPU work: what the host did
    origin: RankOrigin | None = None  # where the trace came from (a job checks its ranks')

    def to_dict(self) -> dict[str, object]:
        """The document :class:`perflab.analysis.json_views.SummaryView` declares."""
        from perflab.analysis.json_views import SummaryView
        from perflab.model.schema import encode, view

        return encode(view(self, SummaryView))

    def to_pandas(self) -> pd.DataFrame:
        """One row per device: busy/span/idle (us), utilisation, kernels."""
        import pandas as pd

        rows = [{"device": k, **asdict(v)} for k, v in self.devices.items()]
        df = pd.DataFrame(rows, columns=["device", "busy_us", "span_us", "idle_us", "kernels"])
        df["utilisation"] = df["busy_us"] / df["span_us"].where(df["span_us"] > 0)
        return df


@dataclass(frozen=True)
class RankOrigin:
    """Where a trace came from, as much as a job needs to tell whether its ranks are one run
    on one clock: the first start and last end of its events on its own clock (None
    without events), its file's name, and what its distributedInfo says: rank, world size
    and the size of each process group it names (pg_config)."""

    span_ns: tuple[int, int] | None
    file: str
    rank: int | None
    world_size: int | None
    group_sizes: dict[str, int] = field(default_factory=dict)


def rank_origin(trace: Trace) -> RankOrigin:
    meta = trace.meta
    span = (int(trace.start_ns.min()), int(trace.end_ns.max())) if len(trace) else None
    groups = meta.get("process_groups")
    sizes = {
        str(name): size
        for name, size in (groups.items() if isinstance(groups, dict) else ())
        if type(size) is int
    }
    return RankOrigin(
        span,
        PurePath(str(meta.get("source", ""))).name,
        _count(meta.get("rank")),
        _count(meta.get("world_size")),
        sizes,
    )


def _count(value: object) -> int | None:
    return value if type(value) is int else None


def summarize(trace: Trace, rules: Rules = DEFAULT_RULES) -> TraceSummary:
    # the idle causes first, the largest pass: its columns come and go before this one's
    idle = cause_totals(trace)
    kind = trace.kind
    start, end = trace.start_ns, trace.end_ns
    is_kernel = kind == EventKind.KERNEL
    device_key = event_device_pairs(trace)
    gpu_work = trace.mask(*GPU_WORK_KINDS) & (device_key >= 0)
    comm = is_kernel & _comm_mask(trace)

    devices: dict[str, DeviceTime] = {}
    comm_overlap = 0
    labels = _device_labels(trace)
    for key in distinct(device_key[gpu_work]).tolist():
        on_dev = device_key == key
        work = gpu_work & on_dev
        busy = union_length(start[work], end[work])
        span = int(end[work].max()) - int(start[work].min())  # Python ints: no wrap
        kernels = int((is_kernel & on_dev).sum())
        devices[labels[key]] = DeviceTime(_us(busy), _us(span), _us(span - busy), kernels)
        dev_comm, dev_compute = comm & on_dev, is_kernel & ~comm & on_dev
        comm_overlap += intersection_length(
            merge(start[dev_comm], end[dev_comm]), merge(start[dev_compute], end[dev_compute])
        )

    is_memcpy = kind == EventKind.MEMCPY
    memcpy_rows = trace.memcpy["event"]
    copy_bytes = trace.memcpy["bytes"][kind[memcpy_rows] == EventKind.MEMCPY]
    dur = trace.dur_ns
    gpu = trace.meta.get("gpu")
    # a trace without GPU work: say so, and what the host did instead
    host = host_activity(trace) if not devices else None
    return TraceSummary(
        events=int(trace.meta.get("events_read", len(trace))),
        kept=len(trace),
        not_kept=_not_kept(trace),
        kernels=Totals(int(is_kernel.sum()), _us(exact_sum(dur[is_kernel]))),
        devices=devices,
        comm=CommTotals(int(comm.sum()), _us(exact_sum(dur[comm])), _us(comm_overlap)),
        memcpy=CopyTotals(
            int(is_memcpy.sum()),
            _us(exact_sum(dur[is_memcpy])),
            exact_sum(np.maximum(copy_bytes, 0)),
            copies_by_kind(trace),
        ),
        categories=_categories(trace, rules),
        idle=idle,
        source=str(trace.meta.get("source", "")),
        gpu=gpu if gpu == "AMD GPU" else "GPU",
        host=host,
        origin=rank_origin(trace),
    )


def _device_labels(trace: Trace) -> dict[int, str]:
    """``"<device>"``, or ``"<rank>:<device>"`` when GPUs of several ranks are present."""
    pairs, pair_of_track = device_pairs(trace)
    gpu = trace.tracks["kind"] == TrackKind.GPU
    used = distinct(pair_of_track[gpu]).tolist()
    ranks = {int(pairs[k, 0]) for k in used}
    return {k: f"{pairs[k, 0]}:{pairs[k, 1]}" if len(ranks) > 1 else str(pairs[k, 1]) for k in used}


def _comm_mask(trace: Trace) -> npt.NDArray[np.bool_]:
    """Per event: its name starts with "nccl" (decided once per distinct name)."""
    return is_comm_name(trace.strings)[trace.name] if trace.strings else np.zeros(0, bool)


def _categories(trace: Trace, rules: Rules) -> dict[str, Totals]:
    codes, labels = kernel_categories(trace, rules)
    dur = trace.dur_ns[trace.kind == EventKind.KERNEL]
    counts = np.bincount(codes, minlength=len(labels))
    totals = np.bincount(codes, weights=dur, minlength=len(labels))
    return {
        label: Totals(int(counts[i]), _us(totals[i])) for i, label in enumerate(labels) if counts[i]
    }
