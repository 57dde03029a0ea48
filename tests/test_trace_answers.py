"""The answers perflab gives on the real traces in tests/data stay what they were when their
digests were written: ``perflab trace summary --json`` and ``perflab trace idle --json`` byte
for byte, and the arrays a timeline is drawn from (its levels of detail, and the launch that
each event's GPU work came from) element for element. Memory-saving changes to the reader,
the model's keys and the levels of detail must leave every one of them as it was.

An intended change of an answer writes the digests again:
``.venv/bin/python tests/test_trace_answers.py`` (then say in the commit what changed).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from data_paths import DATA, TRACES

from perflab.analysis.lod import build_pyramid
from perflab.cli import main
from perflab.io import load_trace
from perflab.model.trace import TrackKind
from perflab.model.trace_keys import launch_links

ANSWERS = DATA / "trace_answers.json"
GENERATED = "generated intervals: levels of detail"
FILES = sorted(
    [
        *TRACES.glob("kineto/*.json.gz"),
        *TRACES.glob("cpu/*.json.gz"),
        *TRACES.glob("hta_critical_path/*.json.gz"),
        TRACES / "nsys" / "power_iteration.sqlite",
    ]
)


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _array_digest(*arrays: np.ndarray) -> str:  # type: ignore[type-arg]
    return _digest(*(f"{a.dtype.str}{a.shape}".encode() + a.tobytes() for a in arrays))


def _printed(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def _pyramid_digest(path: Path) -> str:
    """The levels of detail over every event, one lane per track, GPU tracks summarised (as
    a timeline builds them, without the page's own lane order)."""
    trace = load_trace(path)
    if len(trace) == 0:
        return "no events"
    start = (trace.start_ns - int(trace.start_ns.min())).astype(np.float64)
    gpu = np.flatnonzero(trace.tracks["kind"] == TrackKind.GPU)
    pyramid = build_pyramid(
        start,
        start + trace.dur_ns,
        trace.track.astype(np.int64),
        len(trace.tracks),
        summary_lanes=gpu if gpu.size else None,
        row_budget=20_000,
    )
    arrays = [np.array([pyramid.t0, pyramid.t1, pyramid.factor])]
    for level in pyramid.levels:
        arrays += [np.array([level.tiles, level.per_tile]), level.offsets, level.rows, level.busy]
    return _array_digest(*arrays)


def _generated_pyramid_digest() -> str:
    """Levels of detail over 300,000 seeded intervals on 12 lanes, deep enough for every
    level to be cut by its row budget."""
    rng = np.random.default_rng(7)
    n = 300_000
    start = np.sort(rng.uniform(0, 1e9, n))
    end = start + rng.lognormal(8, 2, n)
    lane = rng.integers(0, 12, n)
    pyramid = build_pyramid(start, end, lane, 12, summary_lanes=np.arange(4), row_budget=50_000)
    arrays = [np.array([pyramid.t0, pyramid.t1])]
    for level in pyramid.levels:
        arrays += [np.array([level.tiles, level.per_tile]), level.offsets, level.rows, level.busy]
    return _array_digest(*arrays)


def answers(path: Path) -> dict[str, str]:
    summary = _printed(["trace", "summary", str(path), "--json"])
    idle = _printed(["trace", "idle", str(path), "--json"])
    return {
        "summary": _digest(summary.encode()),
        "idle": _digest(idle.encode()),
        "pyramid": _pyramid_digest(path),
        "launch_links": _array_digest(launch_links(load_trace(path))),
    }


def _key(path: Path) -> str:
    return path.relative_to(TRACES).as_posix()


@pytest.mark.parametrize("path", FILES, ids=_key)
def test_answers_on_real_traces_are_unchanged(path: Path) -> None:
    expected = json.loads(ANSWERS.read_text())[_key(path)]
    assert answers(path) == expected


def test_levels_of_detail_of_generated_intervals_are_unchanged() -> None:
    assert _generated_pyramid_digest() == json.loads(ANSWERS.read_text())[GENERATED]


def test_every_real_trace_has_its_answers() -> None:
    assert sorted(json.loads(ANSWERS.read_text())) == sorted([GENERATED, *map(_key, FILES)])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    doc: dict[str, object] = {_key(p): answers(p) for p in FILES}
    doc[GENERATED] = _generated_pyramid_digest()
    ANSWERS.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {ANSWERS} ({len(doc)} traces)")
