"""The summaries of :func:`perflab.analysis.trace_diff.diff_traces`: the GPU change by kernel
category and by stream, the GPUs' idle time by cause on each side, and the headline naming
the largest changes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from perflab.analysis.diff_match import Group, Prepared, grouped_sum
from perflab.analysis.diff_names import family
from perflab.analysis.diff_rows import F64, DiffRows, IdleSplit, Split
from perflab.analysis.idle_classify import CAUSES, classify, find_gaps
from perflab.analysis.steps import gap_steps
from perflab.model.trace import Trace, TrackKind
from perflab.model.units import format_ns

HEADLINE_PARTS = 3
# how the headline says "more idle ..." of each cause
IDLE_WORDS = {
    "host-busy": "while the host was busy",
    "after-sync": "after syncs",
    "launch-overhead": "in launch overhead",
    "launch-blocked": "in blocked launch calls",
    "gpu-dependency": "waiting on the GPU side",
    "unknown": "of unknown cause",
}


def _row_values(rows: DiffRows) -> tuple[F64, F64]:
    """Each row's control and test time as the splits count it: the per-step mean with
    per-step statistics, else the total."""
    if rows.per_step:
        return rows.control_steps.mean(axis=1), rows.test_steps.mean(axis=1)
    return rows.control_ns, rows.test_ns


def category_splits(rows: DiffRows) -> list[Split]:
    c, t = _row_values(rows)
    labels = list(dict.fromkeys(rows.categories))
    code = np.array([labels.index(x) for x in rows.categories], dtype=np.int64)
    c_sum = np.bincount(code, weights=c, minlength=len(labels)) if len(code) else np.zeros(0)
    t_sum = np.bincount(code, weights=t, minlength=len(labels)) if len(code) else np.zeros(0)
    splits = [Split(n, float(a), float(b)) for n, a, b in zip(labels, c_sum, t_sum, strict=True)]
    return sorted(splits, key=lambda s: (-abs(s.change_ns), s.name))


def _stream_labels(trace: Trace) -> list[str]:
    """Per track: the stream name the diff matches streams by (``stream 7``, or ``GPU 0
    stream 7`` in a trace with several GPUs)."""
    tracks = trace.tracks
    gpu = tracks["kind"] == TrackKind.GPU
    pairs = {
        (int(r), int(d)) for r, d, g in zip(tracks["rank"], tracks["device"], gpu, strict=True) if g
    }
    several = len(pairs) > 1
    labels = []
    for rank, device, stream in zip(
        tracks["rank"], tracks["device"], tracks["stream"], strict=True
    ):
        where = ""
        if several:
            where = (f"rank {rank} " if int(rank) else "") + f"GPU {device} "
        labels.append(f"{where}stream {stream}")
    return labels


def _stream_values(side: Prepared, group: Group, per_step: bool) -> dict[str, float]:
    labels = _stream_labels(side.trace)
    keep = group.step >= 0 if per_step else np.ones(len(group.dur), dtype=bool)
    sums = grouped_sum(group.track[keep].astype(np.int64), group.dur[keep], len(labels))
    scale = 1.0 / group.n_steps if per_step else 1.0
    out: dict[str, float] = {}
    for label, total in zip(labels, sums.tolist(), strict=True):
        if total:
            out[label] = out.get(label, 0.0) + total * scale
    return out


def stream_splits(
    sides: tuple[Prepared, Prepared], groups: tuple[Group, Group], per_step: bool
) -> list[Split]:
    c = _stream_values(sides[0], groups[0], per_step)
    t = _stream_values(sides[1], groups[1], per_step)
    splits = [Split(k, c.get(k, 0.0), t.get(k, 0.0)) for k in dict.fromkeys([*c, *t])]
    return sorted(splits, key=lambda s: (-abs(s.change_ns), s.name))


def _idle_values(side: Prepared, per_step: bool) -> tuple[F64, F64 | None]:
    """Per cause (:data:`CAUSES` order): the side's idle time in the compared scope (the mean
    over its steps with per-step statistics) and, then, its per-step median."""
    trace, causes = side.trace, len(CAUSES)
    gaps = classify(trace, find_gaps(trace), side.links, evidence=False)
    cause, dur = gaps.cause.astype(np.int64), gaps.end - gaps.start
    if not per_step and side.chosen < 0:
        return grouped_sum(cause, dur, causes), None
    owner = gap_steps(trace, side.steps, gaps, side.links)
    if side.chosen >= 0:
        mine = owner == side.chosen
        return grouped_sum(cause[mine], dur[mine], causes), None
    n, inside = len(side.steps), owner >= 0
    cells = grouped_sum(cause[inside] * n + owner[inside], dur[inside], causes * n)
    table = cells.reshape(causes, n)
    return table.sum(axis=1) / n, np.median(table, axis=1)


def idle_splits(sides: tuple[Prepared, Prepared], per_step: bool) -> list[IdleSplit]:
    (c, c_median), (t, t_median) = (_idle_values(s, per_step) for s in sides)
    return [
        IdleSplit(
            cause,
            float(c[k]),
            float(t[k]),
            None if c_median is None else float(c_median[k]),
            None if t_median is None else float(t_median[k]),
        )
        for k, cause in enumerate(CAUSES)
    ]


_NOUN = {"kernel": "kernel", "memcpy": "memcpy", "memset": "memset"}


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + format_ns(abs(ns))


def headline(rows: DiffRows, scope: str, idle: Sequence[Split] = ()) -> str:
    """``+3.1 ms per step of GPU time: +2.4 ms in 2 new triton_poi_fused_* kernels, 0.5 ms
    more idle after syncs, ...``: the GPU change and the largest of the changes that explain
    it: groups of rows (by verdict and name family) and the idle time of each cause."""
    total = float(rows.change_ns.sum())
    per = " per step" if rows.per_step else f" ({scope})"
    head = f"{_signed(total)}{per} of GPU time"
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, (name, verdict, kind) in enumerate(
        zip(rows.names, rows.verdict, rows.kinds, strict=True)
    ):
        groups.setdefault((verdict, family(name), kind), []).append(i)
    sized = sorted(
        ((float(rows.change_ns[m].sum()), key, m) for key, m in groups.items()),
        key=lambda x: -abs(x[0]),
    )
    # only the largest groups can make the headline, with or without the idle causes
    top = sized[:HEADLINE_PARTS]
    found = [(ns, _part(ns, key, members, rows)) for ns, key, members in top if ns]
    found += [(s.change_ns, _idle_part(s)) for s in idle if s.change_ns]
    found.sort(key=lambda x: -abs(x[0]))
    parts = [text for _, text in found[:HEADLINE_PARTS]]
    if not parts:
        return f"{head}: no change"
    return f"{head}: " + ", ".join(parts)


def _idle_part(split: Split) -> str:
    more = "more" if split.change_ns > 0 else "less"
    words = IDLE_WORDS.get(split.name, split.name)
    return f"{format_ns(abs(split.change_ns))} {more} idle {words}"


def _part(ns: float, key: tuple[str, str, str], members: list[int], rows: DiffRows) -> str:
    verdict, fam, kind = key
    noun = _NOUN.get(kind, "op")
    if len(members) == 1:
        return f"{_signed(ns)} in `{rows.names[members[0]]}` ({verdict})"
    return f"{_signed(ns)} in {len(members)} {verdict} `{fam}` {noun}s"
