"""The biggest traces: time and peak memory of ``perflab trace summary --json``, ``perflab trace
idle --json`` and ``perflab timeline`` on Kineto files of 1M, 10M and 20M events.

The files are written by benchmarks/trace_scale.py's generator (gzip, as current Kineto
writes them); each command runs as a whole process under benchmarks/trace.py's runner: wall
time from interpreter start to result, CPU time with children, peak memory = the process's
peak RSS plus its largest child's (a helper process that decodes part of a large file).

Goals (``--sizes`` must hold 10M and 20M for the memory ones): at 10M events the summary and
the timeline peak at 1.0 GB or less; from 10M to 20M events each grows by 40 bytes an event
or less; the timeline of 10M events takes at most 1.3x the summary's time, and each of the
two at most 8x its own time on 1M events. The machine is shared: the load average at the
start and end of every run is recorded with it, and the time goals are also given in CPU
seconds, which another process's load changes less than the wall clock. Results go to
benchmarks/results/big_traces.json.

    .venv/bin/python benchmarks/big_traces.py [--sizes 1000000,10000000,20000000]
        [--commands summary,idle,timeline] [--keep DIR]

``--keep DIR`` writes the generated files there and reuses them on the next run (20M events
is about 410 MB of gzip); without it they go to a temporary folder that is removed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "big_traces.json"
SIZES = (1_000_000, 10_000_000, 20_000_000)
GOALS = {"peak_bytes_10m": 1.0e9, "bytes_per_event": 40.0, "timeline_ratio": 1.3, "ratio_1m": 8.0}
_CLI = """
from perflab.cli import main
import contextlib, hashlib, io
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main({argv}) == 0
result = {{"sha256": hashlib.sha256(out.getvalue().encode()).hexdigest()}}
"""
COMMANDS = {
    "summary": _CLI.format(argv='["trace", "summary", PATH, "--json"]'),
    "idle": _CLI.format(argv='["trace", "idle", PATH, "--json"]'),
    "timeline": """
import os, tempfile
from perflab.cli import main
out = os.path.join(tempfile.mkdtemp(), "timeline.html")
assert main(["timeline", PATH, "-o", out]) == 0
result = {"output_bytes": os.path.getsize(out)}
os.remove(out)
""",
}


def _files(sizes: list[int], folder: Path) -> dict[int, dict[str, Any]]:
    scale = load_script("trace_scale")
    files = {}
    for n in sizes:
        path = folder / f"generated_{n}.json.gz"
        began = time.perf_counter()
        if path.exists():
            events = 2 + (n - 2) // 5 * 5  # what the generator writes (see generate)
        else:
            events = scale.generate(path, n)
            print(f"generated {path.name} in {time.perf_counter() - began:.0f} s", flush=True)
        files[n] = {"path": path, "events": events, "gzip_bytes": path.stat().st_size}
    return files


def _run(bench: Any, command: str, path: Path, timeout: float) -> dict[str, Any]:
    run: dict[str, Any] = bench.run_code(sys.executable, COMMANDS[command], path, timeout)
    if "error" in run:
        print(f"  {command}: error: {run['error']}", flush=True)
    else:
        print(
            f"  {command}: {run['seconds']:.1f} s, {run['cpu_seconds']:.1f} CPU s, peak "
            f"{run['peak_bytes'] / 1e6:.0f} MB, load {run['load_avg'][0]:.1f}",
            flush=True,
        )
    return run


def _goals(rows: dict[str, dict[int, dict[str, Any]]], events: dict[int, int]) -> dict[str, Any]:
    """Each goal that the sizes and commands measured allow, with its value."""
    goals: dict[str, Any] = {}
    small, big, bigger = 1_000_000, 10_000_000, 20_000_000

    def value(command: str, n: int, key: str) -> float | None:
        run = rows.get(command, {}).get(n, {})
        return None if "error" in run or key not in run else float(run[key])

    for command in ("summary", "timeline"):
        peak = value(command, big, "peak_bytes")
        if peak is not None:
            goals[f"{command} peak at 10M"] = _goal(peak, GOALS["peak_bytes_10m"])
        peak2 = value(command, bigger, "peak_bytes")
        if peak is not None and peak2 is not None and bigger in events:
            growth = (peak2 - peak) / (events[bigger] - events[big])
            goals[f"{command} growth 10M->20M (bytes/event)"] = _goal(
                growth, GOALS["bytes_per_event"]
            )
        for clock, key in (("time", "seconds"), ("CPU time", "cpu_seconds")):
            t1, t10 = value(command, small, key), value(command, big, key)
            if t1 and t10 is not None:
                goals[f"{command} 10M/1M {clock}"] = _goal(t10 / t1, GOALS["ratio_1m"])
    for clock, key in (("time", "seconds"), ("CPU time", "cpu_seconds")):
        summary, timeline = value("summary", big, key), value("timeline", big, key)
        if summary and timeline is not None:
            goals[f"timeline/summary {clock} at 10M"] = _goal(
                timeline / summary, GOALS["timeline_ratio"]
            )
    return goals


def _goal(value: float, goal: float) -> dict[str, Any]:
    return {"value": round(value, 3), "goal": goal, "met": value <= goal}


def _goal_line(name: str, goal: dict[str, Any]) -> str:
    verdict = "met" if goal["met"] else "NOT met"
    return f"{name}: {goal['value']:.4g} (goal {goal['goal']:.4g}): {verdict}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="events per file")
    ap.add_argument("--commands", default=",".join(COMMANDS), help="commands to run")
    ap.add_argument("--keep", type=Path, default=None, help="folder for the generated files")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--output", type=Path, default=RESULTS)
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="results of an earlier run (another commit) to keep beside these",
    )
    ap.add_argument("--baseline-commit", default=None, help="the commit that run measured")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    commands = args.commands.split(",")
    bench = load_script("trace")
    bench.compile_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        files = _files(sizes, folder)
        rows: dict[str, dict[int, dict[str, Any]]] = {c: {} for c in commands}
        for n, file in files.items():
            print(f"{n} events ({file['gzip_bytes'] / 1e6:.0f} MB gzip):", flush=True)
            for command in commands:
                rows[command][n] = _run(bench, command, file["path"], args.timeout)
    events = {n: int(f["events"]) for n, f in files.items()}
    goals = _goals(rows, events)
    print("\n".join(_goal_line(name, goal) for name, goal in goals.items()))
    doc = {
        "benchmark": "big_traces",
        "note": "one run per command and size (a whole process each: seconds from interpreter "
        "start to result, CPU seconds with children, peak memory = peak RSS plus the largest "
        "child's); load_avg: the 1-minute load average when the run started and ended, on a "
        "machine shared with other work. No GPU (generated traces). HTA is not compared "
        "here: it is not installed beside perflab (benchmarks/trace.py runs it from its own "
        "Python with --hta-python).",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": bench.machine(),
        "versions": bench.versions(None),
        "goals": goals,
        "files": {
            str(n): {"events": f["events"], "gzip_bytes": f["gzip_bytes"]} for n, f in files.items()
        },
        "runs": {c: {str(n): run for n, run in by_size.items()} for c, by_size in rows.items()},
    }
    if args.baseline is not None:
        earlier = json.loads(args.baseline.read_text())
        keep = ("date", "machine", "goals", "runs")
        doc["baseline"] = {"commit": args.baseline_commit, **{k: earlier[k] for k in keep}}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
