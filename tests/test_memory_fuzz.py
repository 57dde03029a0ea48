"""Seeded mutation fuzzing of the allocator's memory events: the real CPU trace recorded with
profile_memory=True, mutated as tests/test_fuzz_io.py mutates traces and, half the time, in
the fields of its [memory] events. The only outcomes accepted: a trace whose memory report
holds together (figures in range, JSON without NaN, the same after a save and load), or a
perflab error naming the file (``PERFLAB_FUZZ_SECONDS`` per test, default 2)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

from data_paths import TRACES
from test_fuzz_io import ODD_VALUES, SECONDS, check_trace, mutate_json, run

from perflab.io import load_trace
from perflab.model.memory import MAX_BYTES
from perflab.model.trace import Trace
from perflab.render.views import to_text

REAL = TRACES / "cpu" / "cpu_memory_train.json.gz"
MEMORY_ARGS = ("Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id")


def mutate_memory(rng: random.Random, text: bytes) -> bytes:
    """Odd values in memory events' fields (or their times), or a field taken away."""
    doc = json.loads(text)
    memory = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    for event in rng.sample(memory, rng.choice([1, 2, 5, 20])):
        key = rng.choice([*MEMORY_ARGS, "ts", "tid", "ph"])
        place = event if key in ("ts", "tid", "ph") else event["args"]
        if rng.random() < 0.2:
            place.pop(key, None)
        else:
            place[key] = rng.choice([*ODD_VALUES, MAX_BYTES, -MAX_BYTES, "i", "X"])
    return json.dumps(doc).encode()


def _maker() -> Any:
    text = gzip.decompress(REAL.read_bytes())

    def make(rng: random.Random, workdir: Path) -> Path:
        mutate = mutate_memory if rng.random() < 0.5 else mutate_json
        path = workdir / "t.json"
        path.write_bytes(mutate(rng, text))
        return path

    return make


def check_memory(trace: Trace, workdir: Path) -> None:
    check_trace(trace, workdir)
    report = trace.memory()
    doc = report.to_dict()
    json.dumps(doc, allow_nan=False)
    to_text(report)
    for device in report.devices:
        assert 0 <= device.peak_allocated <= MAX_BYTES
        assert device.final_allocated <= device.peak_allocated
    again = Trace.load(trace.save(workdir / "memory.npz")).memory().to_dict()
    assert {**again, "source": ""} == {**doc, "source": ""}, "save round trip changed it"


def test_fuzz_memory_events(tmp_path: Path) -> None:
    stats = run("kineto memory", 11, _maker(), load_trace, check_memory, tmp_path, SECONDS)
    print(stats.line("kineto memory"))
    assert stats.tried > 0 and stats.ok > 0
    assert not stats.failures, "\n".join(stats.failures[:20])
