"""``perflab trace critical`` against ``perflab trace summary`` on the same 8-rank job.

Both read the ranks' files, which dominates; the critical path adds each rank's dependency
graph, the collectives tied across ranks, every step's path walked back and named, and a
replay per what-if. Goal: ``trace critical`` within 2x the time of ``trace summary`` (the
ratio of the two in the same run). Contenders, each the whole CLI process in a fresh
interpreter (wall time from interpreter start to result, imports included; run by
benchmarks/trace.py's runner), taking turns ``--repeat`` times, the median kept:

- ``summary``: ``perflab trace summary DIR --json`` (what benchmarks/job.py times)
- ``critical``: ``perflab trace critical DIR`` (every step's path; the text view shows 8)
- ``critical --json``: ``perflab trace critical DIR --json`` (every stretch of every path)
- ``critical --what-if``: ``perflab trace critical DIR --what-if comm=0.5`` (one replay)

Then, in this process on the loaded job, the analyses alone: ``summarize_job`` against
``job_critical_path`` (median of ``--repeat`` runs each). The input is benchmarks/job.py's
generated job (``--ranks`` files of about ``--events`` events in all, a straggler). Ratios are
printed and written with machine, versions, load averages and date to
benchmarks/results/critical.json (these machines are noisy and shared: ratios hold where
absolute times drift). No GPU is needed or used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "critical.json"
GOAL = 2.0
CLI = load_script("idle").CLI  # one CLI process template for every trace command's benchmark
CONTENDERS = {
    "summary": CLI.format(command='"summary"', options=', "--json"'),
    "critical": CLI.format(command='"critical"', options=""),
    "critical --json": CLI.format(command='"critical"', options=', "--json"'),
    "critical --what-if": CLI.format(command='"critical"', options=', "--what-if", "comm=0.5"'),
}


def run_processes(path: Path, repeat: int, timeout: float) -> dict[str, Any]:
    """Each contender's median run, the contenders taking turns."""
    bench = load_script("trace")
    bench.compile_bytecode()
    bench.CONTENDERS.update(CONTENDERS)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CONTENDERS}
    for _ in range(repeat):
        for name in CONTENDERS:
            run = bench.run_contender(sys.executable, name, path, timeout)
            if "error" in run:
                raise SystemExit(f"{name}: {run['error']}")
            runs[name].append(run)
            print(f"  {name}: {run['seconds']:.2f} s, load average {run['load_avg'][0]:.2f}")
    return {name: bench.median_run(r) for name, r in runs.items()}


def time_analyses(path: Path, repeat: int) -> dict[str, Any]:
    """Median seconds of each analysis alone on the loaded job."""
    from perflab.analysis.critical_path import job_critical_path
    from perflab.analysis.job import summarize_job
    from perflab.io.job import load_job

    job = load_job(path, workers=0)
    seconds: dict[str, list[float]] = {"summarize_job": [], "job_critical_path": []}
    for _ in range(repeat):
        for name, analyse in (
            ("summarize_job", summarize_job),
            ("job_critical_path", job_critical_path),
        ):
            began = time.perf_counter()
            analyse(job)
            seconds[name].append(time.perf_counter() - began)
    result = job_critical_path(job)
    return {name: statistics.median(s) for name, s in seconds.items()} | {
        "events": sum(len(r.trace) for r in job),
        "steps": len(result.steps),
        "graph": result.graph,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--events", type=int, default=1_950_000, help="events in all ranks")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender, taking turns")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()
    job_bench, bench = load_script("job"), load_script("trace")
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        job_dir = Path(tmp)
        iterations = args.events // (args.ranks * job_bench.EVENTS_PER_ITERATION)
        job_bench.generate_job(
            job_dir, args.ranks, iterations, straggler=args.ranks * 5 // 8, seed=1
        )
        in_files = job_bench._count_events(job_dir)
        print(f"generated {args.ranks} ranks, {iterations} iterations each, {in_files} events")
        processes = run_processes(job_dir, args.repeat, args.timeout)
        analyses = time_analyses(job_dir, args.repeat)
    base = processes["summary"]["seconds"]
    ratios = {name: processes[name]["seconds"] / base for name in CONTENDERS if name != "summary"}
    for name, ratio in ratios.items():
        print(f"perflab trace {name}: {ratio:.2f}x the time of perflab trace summary --json")
    ratios["job_critical_path / summarize_job"] = (
        analyses["job_critical_path"] / analyses["summarize_job"]
    )
    print(
        f"job_critical_path(job): {ratios['job_critical_path / summarize_job']:.2f}x summarize_job"
    )
    doc = {
        "benchmark": "critical",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": bench.machine(),
        "versions": bench.versions(None),
        "ranks": args.ranks,
        "events": in_files,  # in the files, as benchmarks/job.py counts them (flows included)
        "events_loaded": analyses["events"],  # the traces' rows (flow events are read, not kept)
        "repeat": args.repeat,
        "load_avg": {"start": load_start, "end": os.getloadavg()},
        "note": "whole CLI processes (seconds from interpreter start to result, imports "
        "included), median of runs taking turns; 'analyses': seconds of each analysis alone "
        "on the loaded job (median); ratios over 'perflab trace summary --json'. The goal is "
        "checked on 'critical' (the command's default output). No GPU.",
        "goal": {
            "value": round(ratios["critical"], 3),
            "goal": GOAL,
            "met": ratios["critical"] <= GOAL,
        },
        "processes": processes,
        "analyses": analyses,
        "ratios": ratios,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
