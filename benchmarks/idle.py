"""``perflab trace idle`` against ``perflab trace summary`` on the same generated trace.

The causes of idle time must cost about what a summary costs: both read the file, which
dominates, and the causes add a few sorts of the trace's rows. Contenders, each the whole CLI
process in a fresh interpreter (wall time from interpreter start to result, imports included;
run by benchmarks/trace.py's runner), taking turns ``--repeat`` times, the median kept:

- ``summary``: ``perflab trace summary FILE --json`` (which includes the idle time by cause)
- ``idle``: ``perflab trace idle FILE`` (the causes, the per-step table and the evidence of
  the 10 longest gaps, as text)
- ``idle --json``: ``perflab trace idle FILE --json`` (every gap with its evidence: tens of
  MB of JSON for a million events)

Then, in this process on the loaded trace, the analyses alone: ``summarize(trace)`` against
``idle_causes(trace)`` (median of ``--repeat`` runs each). The input is benchmarks/
trace_scale.py's generated Kineto trace (``--events``, default one million: per kernel a
cpu_op, its cudaLaunchKernel, two flow events and the kernel, on four streams). Ratios are
printed and written with machine, versions and date to benchmarks/results/idle.json (these
machines are noisy: ratios hold where absolute times drift). No GPU is needed or used.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "idle.json"
CLI = """
from perflab.cli import main
import contextlib, io
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["trace", {command}, PATH{options}]) == 0
result = {{"output_bytes": len(out.getvalue())}}
"""
CONTENDERS = {
    "summary": CLI.format(command='"summary"', options=', "--json"'),
    "idle": CLI.format(command='"idle"', options=""),
    "idle --json": CLI.format(command='"idle"', options=', "--json"'),
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
            print(f"  {name}: {run['seconds']:.2f} s")
    return {name: bench.median_run(r) for name, r in runs.items()}


def time_analyses(path: Path, repeat: int) -> dict[str, float]:
    """Median seconds of each analysis alone on the loaded trace."""
    from perflab.analysis.idle_causes import idle_causes
    from perflab.analysis.trace_summary import summarize
    from perflab.io import load_trace

    trace = load_trace(path, python=True, workers=0)
    analyses: dict[str, Callable[[Any], Any]] = {"summarize": summarize, "idle_causes": idle_causes}
    seconds: dict[str, list[float]] = {name: [] for name in analyses}
    for _ in range(repeat):
        for name, analyse in analyses.items():
            began = time.perf_counter()
            analyse(trace)
            seconds[name].append(time.perf_counter() - began)
    return {name: statistics.median(s) for name, s in seconds.items()} | {"events": len(trace)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="generated trace size")
    ap.add_argument("--repeat", type=int, default=5, help="runs per contender, taking turns")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()
    scale, bench = load_script("trace_scale"), load_script("trace")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"generated_{args.events}.json.gz"
        written = scale.generate(path, args.events)
        print(f"generated {path.name}: {written} events")
        processes = run_processes(path, args.repeat, args.timeout)
        analyses = time_analyses(path, args.repeat)
    base = processes["summary"]["seconds"]
    ratios = {name: processes[name]["seconds"] / base for name in CONTENDERS if name != "summary"}
    for name, ratio in ratios.items():
        print(f"perflab trace {name}: {ratio:.2f}x the time of perflab trace summary --json")
    ratios["idle_causes / summarize"] = analyses["idle_causes"] / analyses["summarize"]
    print(f"idle_causes(trace): {ratios['idle_causes / summarize']:.2f}x summarize(trace)")
    doc = {
        "benchmark": "idle",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": bench.machine(),
        "versions": bench.versions(None),
        "events_generated": written,
        "repeat": args.repeat,
        "note": "whole CLI processes (seconds from interpreter start to result, imports "
        "included), median of runs taking turns; 'analyses': seconds of each analysis alone "
        "on the loaded trace (median); ratios over 'perflab trace summary --json'. No GPU.",
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
