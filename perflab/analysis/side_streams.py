"""Kernels per GPU stream in a trace of one timed call (``--trace``): the timing events
sit on one stream, so kernels the call put on other streams are timed only when that
stream waits for them."""

from __future__ import annotations

import numpy as np

from perflab.model.trace import EventKind, Trace, TrackKind

MAX_STREAMS_NAMED = 4


def kernels_per_stream(trace: Trace) -> dict[str, int]:
    """Kernel count per GPU track (its label, e.g. ``"GPU 0 stream 7"``), most first."""
    tracks = trace.track[trace.kind == EventKind.KERNEL]
    counts = np.bincount(tracks, minlength=len(trace.tracks)) if tracks.size else np.zeros(0)
    gpu = np.flatnonzero(trace.tracks["kind"] == TrackKind.GPU)
    found = {
        trace.track_label(int(t)): int(counts[t]) for t in gpu if t < counts.size and counts[t]
    }
    return dict(sorted(found.items(), key=lambda item: -item[1]))


def side_stream_warning(trace: Trace) -> str | None:
    """A warning when the traced call ran kernels on more than one stream; None else."""
    counts = kernels_per_stream(trace)
    if len(counts) < 2:
        return None
    named = list(counts.items())[:MAX_STREAMS_NAMED]
    more = len(counts) - len(named)
    listed = ", ".join(f"{label}: {n}" for label, n in named) + (f", {more} more" if more else "")
    return (
        f"the traced run put kernels on {len(counts)} streams ({listed}): the timing events "
        "are on one stream (the current one), so kernels on the others are timed only if it "
        "waits for them (torch.cuda.current_stream().wait_stream(s)); otherwise they run "
        "outside the timed window"
    )
