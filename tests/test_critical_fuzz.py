"""Critical paths of damaged traces: events dropped, times jittered, correlation ids and
streams swapped, on a single trace and on a job. The only acceptable outcomes are a result
whose paths add up to their steps and whose replay gives back the recording, or perflab's
own error."""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from step_sim import simulate

from perflab.analysis.critical_graph import build_graph, rank_graph
from perflab.analysis.critical_path import critical_path, job_critical_path
from perflab.analysis.critical_replay import replay
from perflab.errors import InputError
from perflab.io import load_trace
from perflab.io.job import load_job


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    run = simulate(ranks=2, straggler=1)
    return [
        {"traceEvents": r.events, "distributedInfo": {"rank": r.rank, "world_size": 2}}
        for r in run.ranks
    ]


def _damaged(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    events = [dict(e, args=dict(e.get("args", {}))) for e in doc["traceEvents"]]
    events = [e for e in events if rng.random() > 0.1]  # a tenth dropped
    for e in events:
        roll = rng.random()
        if roll < 0.1:
            e["ts"] += rng.uniform(-20, 20)  # jittered by up to 20 us
        elif roll < 0.15 and "correlation" in e["args"]:
            e["args"]["correlation"] = rng.randrange(0, 50)  # linked to something else
        elif roll < 0.18 and "stream" in e["args"]:
            e["args"]["stream"] = rng.choice([7, 20, 30, 99])
        elif roll < 0.2:
            e["dur"] = 0.0
    return {**doc, "traceEvents": events}


def _check(result: Any) -> None:
    for step in result.steps:
        assert int(step.path.dur.sum()) == step.duration_ns
        assert sum(step.by_kind.values()) == step.duration_ns
    json.dumps(result.to_dict(), allow_nan=False)


@pytest.mark.parametrize("seed", range(12))
def test_a_damaged_trace_gives_a_consistent_path_or_a_perflab_error(
    docs: list[dict[str, Any]], seed: int, tmp_path: Path
) -> None:
    rng = random.Random(seed)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(_damaged(docs[0], rng)))
    try:
        trace = load_trace(path)
        _check(critical_path(trace, what_if=["host=0.5,kernels=2", "comm=0"]))
    except InputError:
        return
    g = build_graph([rank_graph(trace)])
    start, end = replay(g, g.dur)
    assert np.array_equal(start, g.start) and np.array_equal(end, g.end)


@pytest.mark.parametrize("seed", range(6))
def test_a_damaged_job_gives_a_consistent_path_or_a_perflab_error(
    docs: list[dict[str, Any]], seed: int, tmp_path: Path
) -> None:
    rng = random.Random(100 + seed)
    for i, doc in enumerate(docs):
        (tmp_path / f"rank-{i}.json").write_text(json.dumps(_damaged(doc, rng)))
    with contextlib.suppress(InputError):
        _check(job_critical_path(load_job(tmp_path, workers=0), what_if=["comm=2"]))


def test_a_trace_without_events_is_a_perflab_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(InputError, match="no host or GPU events"):
        critical_path(load_trace(path))


def test_a_step_of_no_length_has_an_empty_path(tmp_path: Path) -> None:
    path = tmp_path / "instant.json"
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1}
    path.write_text(json.dumps({"traceEvents": [step | {"ts": 10.0, "dur": 0.0}]}))
    result = critical_path(load_trace(path), what_if=["host=2"])
    assert [(s.step, s.duration_ns, len(s.path.dur)) for s in result.steps] == [
        ("ProfilerStep#1", 0, 0)
    ]
    assert "no time" in str(result)
