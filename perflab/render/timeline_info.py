"""What the timeline page says about its events and lanes besides their times: the colour
class of each event (with the legend that names them), the short lane names with the group
header each lane sits under, the CPU op behind each launch call and the idle gap (with its
cause) before GPU work. Plain numpy; the figure lives in :mod:`perflab.render.timeline`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.analysis.categories import category_names, kernel_categories
from perflab.analysis.idle_classify import CAUSES, classify, find_gaps
from perflab.model.trace import MEMCPY_DIRECTIONS, EventKind, Trace, TrackKind
from perflab.model.trace_keys import launch_links

# colour classes: one per EventKind value, then kernel categories, then copy directions
KIND_CLASSES = (
    ("kernel", "#4c78a8"),
    ("copy", "#54a24b"),
    ("memset", "#c7a76c"),
    ("CPU op", "#f58518"),
    ("CUDA runtime", "#9d9d9d"),
    ("range (annotation)", "#b279a2"),
    ("sync", "#e45756"),
    ("other", "#bab0ac"),
    ("python", "#eeca3b"),
)
KERNEL_COLORS = {
    "communication": ("kernel: NCCL / communication", "#c2185b"),
    "attention": ("kernel: attention", "#6a3d9a"),
    "convolution": ("kernel: convolution", "#1f4e8c"),
    "gemm": ("kernel: GEMM", "#4c78a8"),
    "triton": ("kernel: Triton", "#17a2b8"),
    "memory": ("kernel: memory", "#8fb3d9"),
    "normalization": ("kernel: normalization", "#2a9d8f"),
    "reduction": ("kernel: reduction", "#9c755f"),
    "elementwise": ("kernel: elementwise", "#5fa2ce"),
    "other": ("kernel: other", "#7f8fa6"),
}
COPY_COLORS = {
    "unknown": "#54a24b",
    "HtoD": "#2ca02c",
    "DtoH": "#b5bd3a",
    "DtoD": "#8cd17d",
    "HtoH": "#6b8e23",
    "PtoP": "#17becf",
    "memset": "#c7a76c",
}
KERNEL_BASE = len(KIND_CLASSES)
CATEGORIES = category_names()
COPY_BASE = KERNEL_BASE + len(CATEGORIES)


def color_classes() -> list[tuple[str, str]]:
    """(name, colour) of every colour class, indexed by the codes :func:`event_classes`
    gives."""
    kernels = [KERNEL_COLORS.get(c, (f"kernel: {c}", "#7f8fa6")) for c in CATEGORIES]
    copies = [(f"copy {d}", COPY_COLORS[d]) for d in MEMCPY_DIRECTIONS]
    return [*KIND_CLASSES, *kernels, *copies]


def event_classes(trace: Trace) -> npt.NDArray[np.int16]:
    """Per event, its colour class: kernels by category (NCCL apart), copies by direction,
    everything else by kind."""
    out = trace.kind.astype(np.int16)
    is_kernel = np.flatnonzero(trace.kind == EventKind.KERNEL)
    if is_kernel.size:
        codes, labels = kernel_categories(trace)
        index = np.array([CATEGORIES.index(c) for c in labels], np.int16)
        out[is_kernel] = KERNEL_BASE + index[codes]
    copies = trace.memcpy
    is_copy = trace.kind[copies["event"]] == EventKind.MEMCPY
    out[copies["event"][is_copy]] = COPY_BASE + copies["direction"][is_copy].astype(np.int16)
    return out


def launch_ops(trace: Trace) -> npt.NDArray[np.int32]:
    """Per event: for a CUDA runtime call, the name (string id) of the CPU op it ran in
    (same rank and external id, as Kineto links them); -1 elsewhere or when unknown."""
    out = np.full(len(trace), -1, np.int32)
    ext = trace.external_id
    ops = np.flatnonzero((trace.kind == EventKind.CPU_OP) & (ext >= 0))
    calls = np.flatnonzero((trace.kind == EventKind.RUNTIME) & (ext >= 0))
    if ops.size == 0 or calls.size == 0:
        return out
    ranks = trace.tracks["rank"].astype(np.int64)  # read per op and call, not per event
    span = int(ext.max()) + 1
    op_key = ranks[trace.track[ops]] * span + ext[ops]
    order = np.argsort(op_key, kind="stable")
    keys = op_key[order]
    call_key = ranks[trace.track[calls]] * span + ext[calls]
    at = np.minimum(np.searchsorted(keys, call_key), keys.size - 1)
    found = keys[at] == call_key
    out[calls[found]] = trace.name[ops[order[at[found]]]]
    return out


IDLE_KEPT = 10_000  # the longest gaps the page explains


@dataclass
class IdleBefore:
    """The idle gaps of the GPUs (the longest :data:`IDLE_KEPT`), each by the event that
    ended it: ``event`` (trace row), ``dur_ns`` and ``cause`` (index into :data:`CAUSES`)."""

    event: npt.NDArray[np.int64]
    dur_ns: npt.NDArray[np.int64]
    cause: npt.NDArray[np.int8]

    @classmethod
    def of(cls, trace: Trace) -> IdleBefore:
        gaps = classify(trace, find_gaps(trace), launch_links(trace), evidence=False)
        dur = gaps.end - gaps.start
        keep = np.argsort(-dur, kind="stable")[:IDLE_KEPT]
        return cls(gaps.next[keep], dur[keep], gaps.cause[keep].astype(np.int8))

    def on_page(
        self, event_rows: npt.NDArray[np.int64]
    ) -> dict[str, npt.NDArray[np.int32] | npt.NDArray[np.float32] | npt.NDArray[np.int8]]:
        """The gaps ended by events the page holds (``event_rows``, sorted): page event
        index, duration (ms) and cause."""
        at = np.minimum(np.searchsorted(event_rows, self.event), max(event_rows.size - 1, 0))
        shown = (event_rows.size > 0) & (event_rows[at] == self.event)
        return {
            "ev": at[shown].astype(np.int32),
            "ms": (self.dur_ns[shown] / 1e6).astype(np.float32),
            "cause": self.cause[shown],
        }


IDLE_CAUSES = CAUSES


@dataclass
class LaneNames:
    """Per lane: the short name for the axis, the group (process or device) header it sits
    under, and whether the lane is that header itself."""

    short: list[str]
    group: list[str]
    header: npt.NDArray[np.bool_]


def short_track_name(trace: Trace, track: int, thread_names: dict[str, str]) -> str:
    """A lane's short name: the thread's name (or ``thread <tid>``), ``stream <id>``."""
    tracks = trace.tracks
    device, stream = int(tracks["device"][track]), int(tracks["stream"][track])
    if tracks["kind"][track] == TrackKind.CPU:
        return thread_names.get(f"{device}:{stream}") or f"thread {stream}"
    return f"stream {stream}"


def group_name(trace: Trace, track: int, process_names: dict[str, str], multi_rank: bool) -> str:
    """The header of a track's group: its process (name and id) or its GPU."""
    tracks = trace.tracks
    device = int(tracks["device"][track])
    if tracks["kind"][track] == TrackKind.CPU:
        name = f"{process_names.get(str(device), 'process')} {device}"
    else:
        name = f"GPU {device}"
    return f"rank {int(tracks['rank'][track])} · {name}" if multi_rank else name
