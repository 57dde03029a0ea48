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


def run_processes(
    path: Path, repeat: int, timeout: float, contenders: dict[str, str] = CONTENDERS
) -> dict[str, Any]:
    """Each contender's median run, the contenders taking turns."""
    bench = load_script("trace")
    bench.compile_bytecode()
    bench.CONTENDERS.update(contenders)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
    for _ in range(repeat):
        for name in contenders:
            run = bench.run_contender(sys.executable, name, path, timeout)
            if "error" in run:
                raise SystemExit(f"{name}: {run['error']}")
            runs[name].append(run)
            print(f"  {name}: {run['seconds']:.2f} s")
    return {name: bench.median_run(r) for name, r in runs.items()}


def time_analyses(
    path: Path, repeat: int, analyses: dict[str, Callable[[Any], Any]] | None = None
) -> dict[str, float]:
    """Median seconds of each analysis alone on the loaded trace (default: summarize and
    idle_causes)."""
    from perflab.analysis.idle_causes import idle_causes
    from perflab.analysis.trace_summary import summarize
    from perflab.io import load_trace

    trace = load_trace(path, python=True, workers=0)
    analyses = analyses or {"summarize": summarize, "idle_causes": idle_causes}
    seconds: dict[str, list[float]] = {name: [] for name in analyses}
    for _ in range(repeat):
        for name, analyse in analyses.items():
            began = time.perf_counter()
            analyse(trace)
            seconds[name].append(time.perf_counter() - began)
    return {name: statistics.median(s) for name, s in seconds.items()} | {"events": len(trace)}


def write_results(
    output: Path,
    name: str,
    run: dict[str, Any],
    processes: dict[str, Any],
    analyses: dict[str, float],
    pair: tuple[str, str],
) -> None:
    """Print the contenders' and the analyses' ratios (``pair``: which analysis over which)
    and write them, with the runs, machine, versions and date, to ``output``."""
    bench = load_script("trace")
    base = processes["summary"]["seconds"]
    ratios = {k: processes[k]["seconds"] / base for k in processes if k != "summary"}
    for contender, ratio in ratios.items():
        print(f"perflab trace {contender}: {ratio:.2f}x the time of perflab trace summary --json")
    key = f"{pair[0]} / {pair[1]}"
    ratios[key] = analyses[pair[0]] / analyses[pair[1]]
    print(f"{pair[0]}(trace): {ratios[key]:.2f}x {pair[1]}(trace)")
    doc = {
        "benchmark": name,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": bench.machine(),
        "versions": bench.versions(None),
        **run,
        "note": "whole CLI processes (seconds from interpreter start to result, imports "
        "included), median of runs taking turns; 'analyses': seconds of each analysis alone "
        "on the loaded trace (median); ratios over 'perflab trace summary --json'. No GPU.",
        "processes": processes,
        "analyses": analyses,
        "ratios": ratios,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(doc, indent=1))
    print(f"wrote {output}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="generated trace size")
    ap.add_argument("--repeat", type=int, default=5, help="runs per contender, taking turns")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()
    scale = load_script("trace_scale")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"generated_{args.events}.json.gz"
        written = scale.generate(path, args.events)
        print(f"generated {path.name}: {written} events")
        processes = run_processes(path, args.repeat, args.timeout)
        analyses = time_analyses(path, args.repeat)
    write_results(
        args.output,
        "idle",
        {"events_generated": written, "repeat": args.repeat},
        processes,
        analyses,
        ("idle_causes", "summarize"),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
