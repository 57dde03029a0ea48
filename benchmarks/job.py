"""A whole distributed job (a directory of rank traces): perflab against HTA, on the same files.

Contenders, each in a fresh subprocess (the runner of benchmarks/trace.py: wall time from
interpreter start to result, imports included; CPU time of the process and its children; peak
memory: the process's peak RSS plus its largest child's):

- ``perflab``: the whole ``perflab trace summary DIR --json`` (ranks read by this process and a
  helper process per spare core, per-rank summaries, collectives matched across ranks,
  stragglers)
- ``perflab (one process)``: ``load_job(DIR, workers=0)`` + ``summarize_job``
- ``hta``: Holistic Trace Analysis ``TraceAnalysis(trace_dir=DIR)`` + temporal breakdown +
  communication/computation overlap, run by the Python given with ``--hta-python`` (its own
  virtualenv: ``python -m venv V && V/bin/pip install HolisticTraceAnalysis==0.5.0``); HTA
  parses the ranks with a multiprocessing pool on every core
- ``perflab timeline``: the whole ``perflab timeline DIR -o OUT.html`` process; then that page's
  first paint in headless Chromium (navigation start to every view drawn, as
  benchmarks/timeline.py measures it), ``--repeat`` times

Input: a generated deterministic job (``--ranks`` files ``rank-N.json.gz`` of about
``--events`` events in all; see :func:`generate_job`). The contenders take turns, ``--repeat``
times, and the median run is kept; each run records the machine's load average (1 minute) when
it started and ended. Goals: perflab >= 10x faster than HTA at <= 0.5x its peak memory
(children counted on both sides), checked only when both were measured in the same run; the
job timeline built in <= 6 s, <= 6 MB, first paint <= 1.5 s;
``--contenders`` reruns some contenders and keeps the others' results with their dates, and
a ratio across two dates is recorded as not checked. Results go to
benchmarks/results/job.json.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "job.json"
GOALS = {
    "hta_time": 10.0,
    "hta_memory": 0.5,
    "timeline_seconds": 6.0,
    "timeline_bytes": 6e6,
    "timeline_first_paint_ms": 1500.0,
}
BASE_NS = 1_700_000_000_000_000_000  # the job's wall clock at its start
COMPUTE = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
OVERLAP = "triton_poi_fused_add_mul_0"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
EVENTS_PER_ITERATION = 15  # 3 kernels x (kernel, cpu_op, launch, 2 flows); and step marks
STEP = 50  # iterations per ProfilerStep


def trace_benchmark() -> Any:
    """benchmarks/trace.py as a module (its runner, machine and version helpers)."""
    return load_script("trace")


@dataclass
class RankTruth:
    """What a generated rank's summary must say (ns)."""

    busy: int = 0
    span: int = 0
    kernels: int = 0
    comm_count: int = 0
    comm_total: int = 0
    overlapped: int = 0


@dataclass
class JobTruth:
    """Per rank, and per collective instance the ranks' comm kernel starts (job clock, ns)."""

    ranks: dict[int, RankTruth] = field(default_factory=dict)
    starts: list[dict[int, int]] = field(default_factory=list)


def generate_job(
    directory: Path,
    ranks: int,
    iterations: int,
    *,
    straggler: int | None = None,
    late_share: float = 0.8,
    seed: int = 0,
    stop_early: dict[int, int] | None = None,
    start_late: dict[int, int] | None = None,
    distributed_info: bool = True,
    base_time: bool = True,
    collective_args: str = "",
    missing: dict[int, set[int]] | None = None,
) -> JobTruth:
    """Write ``rank-N.json.gz`` for every rank and return the truth.

    Each iteration, on every rank: a compute kernel (stream 7) of random length, then an NCCL
    all-reduce (stream 20) from the end of the compute until every rank has arrived plus the
    transfer time, with a small kernel (stream 7) inside it. ``straggler`` computes longer in
    ``late_share`` of the iterations. Each rank's timestamps are relative to its own
    ``baseTimeNanoseconds`` (a different one per rank) unless ``base_time`` is False; a rank in
    ``stop_early`` writes only that many iterations (a rank that crashed), one in
    ``start_late`` leaves out that many first iterations (a profiler that started late).
    ``collective_args``: "group" gives NCCL kernels a "Process Group Name", "seq" also a
    "Seq" (the iteration), as recent PyTorch does; a rank in ``missing`` lacks the NCCL kernel
    of those iterations (its other kernels stay).
    """
    rng = random.Random(seed)
    truth = JobTruth({r: RankTruth() for r in range(ranks)})
    events: dict[int, list[str]] = {r: [] for r in range(ranks)}
    first: dict[int, int] = {}
    last_end = {r: 0 for r in range(ranks)}
    t = 10_000_000_000  # ns after BASE_NS: after every rank's base time
    for i in range(iterations):
        compute = {r: rng.randrange(200_000, 260_000) for r in range(ranks)}
        if straggler is not None and rng.random() < late_share:
            compute[straggler] += rng.randrange(40_000, 80_000)
        arrive = {r: t + compute[r] for r in range(ranks)}
        done = max(arrive.values()) + rng.randrange(50_000, 70_000)
        overlap = rng.randrange(5_000, 20_000)
        alive = [
            r
            for r in range(ranks)
            if (start_late or {}).get(r, 0) <= i < (stop_early or {}).get(r, iterations)
        ]
        lost = {r for r in alive if i in (missing or {}).get(r, set())}
        truth.starts.append({r: arrive[r] for r in alive if r not in lost})
        comm = {"group": '"Process Group Name":"0",', "seq": f'"Process Group Name":"0","Seq":{i},'}
        for r in alive:
            out, tr = events[r], truth.ranks[r]
            corr = i * 4
            kernels = (
                (COMPUTE, 7, t, compute[r]),
                (NCCL, 20, arrive[r], done - arrive[r]),
                (OVERLAP, 7, arrive[r], overlap),
            )
            for k, (name, stream, start, dur) in enumerate(kernels):
                if k == 1 and r in lost:
                    continue
                extra = comm.get(collective_args, "") if k == 1 else ""
                out += _kernel_events(r, name, stream, start, dur, corr + k, base_time, extra)
            if i % STEP == 0:
                out.append(_step(r, i // STEP, t, base_time))
            first.setdefault(r, t)
            last_end[r] = done
            tr.busy += done - t
            tr.kernels += 3
            tr.comm_count += 1
            tr.comm_total += done - arrive[r]
            tr.overlapped += overlap
        t = done + rng.randrange(20_000, 40_000)
    for r in range(ranks):
        truth.ranks[r].span = last_end[r] - first[r]
        _write_rank(directory, r, ranks, events[r], distributed_info, base_time)
    return truth


def _base(rank: int) -> int:
    """Rank r's baseTimeNanoseconds: each rank its own, seconds apart."""
    return BASE_NS + rank * 1_000_000_007


def _ts(ns: int, rank: int, base_time: bool) -> str:
    """Microseconds with three decimals (exact): relative to the rank's base time, or
    without base times on one clock that starts at BASE_NS (small numbers: exact in float)."""
    rel = ns + BASE_NS - _base(rank) if base_time else ns
    return f"{rel // 1000}.{rel % 1000:03d}"


def _kernel_events(
    rank: int,
    name: str,
    stream: int,
    start: int,
    dur: int,
    corr: int,
    base_time: bool,
    extra: str = "",
) -> list[str]:
    """A kernel with its cpu_op, launch and the two ac2g flow events; ``extra``: more of the
    kernel's args (JSON members, each followed by a comma)."""
    pid, tid = 1000 + rank, 2000 + rank
    launch = start - 30_000
    ts = functools.partial(_ts, rank=rank, base_time=base_time)
    return [
        f'{{"ph":"X","cat":"cpu_op","name":"aten::op{corr % 7}","pid":{pid},"tid":{tid},'
        f'"ts":{ts(launch - 5_000)},"dur":20.0,"args":{{"External id":{corr}}}}}',
        f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":{pid},"tid":{tid},'
        f'"ts":{ts(launch)},"dur":4.5,"args":{{"External id":{corr},"correlation":{corr}}}}}',
        f'{{"ph":"X","cat":"kernel","name":"{name}","pid":{rank},"tid":{stream},'
        f'"ts":{ts(start)},"dur":{dur // 1000}.{dur % 1000:03d},"args":{{{extra}'
        f'"External id":{corr},"device":{rank},"stream":{stream},"correlation":{corr},'
        f'"registers per thread":64,"shared memory":0,"grid":[128,1,1],"block":[256,1,1]}}}}',
        f'{{"ph":"s","id":{corr},"pid":{pid},"tid":{tid},"ts":{ts(launch)},"cat":"ac2g",'
        f'"name":"ac2g"}}',
        f'{{"ph":"f","id":{corr},"pid":{rank},"tid":{stream},"ts":{ts(start)},"cat":"ac2g",'
        f'"name":"ac2g","bp":"e"}}',
    ]


def _step(rank: int, step: int, start: int, base_time: bool) -> str:
    """A ProfilerStep#N cpu_op (HTA's iteration marks), as long as ``STEP`` iterations."""
    ts = _ts(start - 40_000, rank, base_time)
    return (
        f'{{"ph":"X","cat":"cpu_op","name":"ProfilerStep#{step}","pid":{1000 + rank},'
        f'"tid":{2000 + rank},"ts":{ts},"dur":{STEP * 330}.0,"args":{{}}}}'
    )


def _write_rank(
    directory: Path,
    rank: int,
    ranks: int,
    events: list[str],
    distributed_info: bool,
    base_time: bool,
) -> None:
    head: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": rank, "name": "synthetic"}],
    }
    if distributed_info:  # spaced as Kineto writes it: HTA finds the rank with a regex
        head["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": ranks}
    if base_time:
        head["baseTimeNanoseconds"] = _base(rank)
    text = json.dumps(head)[:-1] + ', "traceEvents": [\n' + ",\n".join(events) + "]}"
    with gzip.open(directory / f"rank-{rank}.json.gz", "wt", compresslevel=1) as fh:
        fh.write(text)


# -- the benchmark ------------------------------------------------------------------------------

CONTENDERS = {
    "perflab": """
import contextlib, io
from perflab.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["trace", "summary", PATH, "--json"]) == 0
doc = json.loads(out.getvalue())
result = {"ranks": len(doc["ranks"]), "collectives": doc["collectives"]["count"],
          "straggler": doc["stragglers"][0]["rank"] if doc["stragglers"] else None,
          "busy_us": {r: v["busy_us"] for r, v in doc["ranks"].items()}}
""",
    "perflab (one process)": """
from perflab.io.job import load_job
from perflab.analysis.job import summarize_job
doc = summarize_job(load_job(PATH, workers=0)).to_dict()
result = {"ranks": len(doc["ranks"]), "collectives": doc["collectives"]["count"],
          "straggler": doc["stragglers"][0]["rank"] if doc["stragglers"] else None}
""",
    "perflab timeline": """
import os, tempfile
from perflab.cli import main
out = os.path.join(tempfile.mkdtemp(), "timeline.html")
assert main(["timeline", PATH, "-o", out]) == 0
result = {"output_bytes": os.path.getsize(out)}
os.remove(out)
""",
    "hta": """
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=PATH)
temporal = ta.get_temporal_breakdown(visualize=False)
overlap = ta.get_comm_comp_overlap(visualize=False)
idle = zip(temporal["rank"], temporal["idle_time(us)"])
result = {"temporal_rows": int(len(temporal)), "overlap_rows": int(len(overlap)),
          "idle_time_us": {str(r): float(v) for r, v in idle}}
""",
}


def run_contender(python: str, name: str, path: Path, timeout: float) -> dict[str, Any]:
    """One run in a fresh interpreter, through benchmarks/trace.py's runner."""
    bench = trace_benchmark()
    bench.CONTENDERS.update(CONTENDERS)
    result: dict[str, Any] = bench.run_contender(python, name, path, timeout)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--events", type=int, default=1_950_000, help="events in all ranks")
    ap.add_argument("--hta-python", default=None, help="python of a venv with HTA 0.5.0")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--output", type=Path, default=RESULTS)
    ap.add_argument("--note", default="", help="added to the results (e.g. machine load)")
    ap.add_argument(
        "--contenders",
        default="",
        help="comma-separated contenders to run (default: all); their results replace those "
        "in an existing results file, the others are kept with their dates",
    )
    args = ap.parse_args()
    bench = trace_benchmark()
    bench.compile_bytecode()
    load_start = os.getloadavg()
    iterations = args.events // (args.ranks * EVENTS_PER_ITERATION)
    straggler = args.ranks * 5 // 8  # rank 5 of 8
    names = ["perflab", "perflab (one process)", "perflab timeline"]
    names += ["hta"] if args.hta_python else []
    if args.contenders:
        names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        job_dir = Path(tmp)
        t0 = time.perf_counter()
        truth = generate_job(job_dir, args.ranks, iterations, straggler=straggler, seed=1)
        size = sum(p.stat().st_size for p in job_dir.iterdir())
        events = _count_events(job_dir)
        print(
            f"generated {args.ranks} ranks, {events} events, {size >> 20} MiB gzip in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for _ in range(args.repeat):  # round-robin: slow spells hit every contender alike
            for name in names:
                python = args.hta_python if name == "hta" else sys.executable
                runs[name].append(run_contender(python, name, job_dir, args.timeout))
                print(f"  {name}: {_brief(runs[name][-1])}", flush=True)
        paints = job_first_paints(job_dir, args.repeat) if "perflab timeline" in names else []
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    row = {name: {**bench.median_run(runs[name]), "date": date} for name in names}
    if paints:
        measured = [p for p in paints if p is not None]
        row["perflab timeline"]["first_paint_ms"] = (
            statistics.median(measured) if measured else None
        )
        row["perflab timeline"]["all_first_paint_ms"] = paints
    versions = bench.versions(args.hta_python)
    if args.contenders and args.output.exists():  # keep the other contenders' results
        before = json.loads(args.output.read_text())
        row = {**before["results"], **row}
        versions = {**before.get("versions", {}), **versions}
    goals = _goals(row)
    for line in _goal_lines(goals):
        print(line)
    doc = {
        "benchmark": "job",
        "date": date,
        "machine": bench.machine(),
        "versions": versions,
        "ranks": args.ranks,
        "events": events,
        "gzip_bytes": size,
        "straggler_injected": straggler,
        "collectives_generated": len(truth.starts),
        "repeat": args.repeat,
        "load_avg": {"start": load_start, "end": os.getloadavg()},
        "note": "seconds (interpreter start to result, imports included), CPU seconds (with "
        "children) and peak memory (peak RSS plus the largest child's) of a fresh process per "
        "run; median of the runs, the contenders taking turns; each result has the date it was "
        "measured. 'perflab timeline' is the whole 'perflab timeline DIR -o OUT.html' process "
        "(output_bytes: the page's size). load_avg: the machine's 1, 5 and 15 minute load "
        "averages at the start and end (per run: the 1 minute one when it started and ended; "
        "2 cores). " + args.note,
        "goals": goals,
        "results": row,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.output}")
    return 0


def job_first_paints(job_dir: Path, repeat: int) -> list[float | None]:
    """The job timeline page (``perflab timeline DIR -o OUT.html``) opened ``repeat`` times in
    headless Chromium: navigation start to every view drawn, as benchmarks/timeline.py
    measures it (None without Chromium)."""
    from perflab.cli import main as perflab_main

    with tempfile.TemporaryDirectory() as out_dir:
        page = Path(out_dir) / "job-timeline.html"
        assert perflab_main(["timeline", str(job_dir), "-o", str(page)]) == 0
        paints = [load_script("timeline").first_paint_ms(page) for _ in range(repeat)]
    print(f"  job timeline first paint: {paints} ms", flush=True)
    return paints


def _count_events(directory: Path) -> int:
    total = 0
    for path in directory.glob("rank-*.json.gz"):
        with gzip.open(path, "rt") as fh:
            total += sum(1 for line in fh if line.startswith('{"ph"'))
    return total


def _brief(run: dict[str, Any]) -> str:
    if "error" in run:
        return f"error: {run['error']}"
    return (
        f"{run['seconds']:.2f} s (cpu {run['cpu_seconds']:.2f} s), "
        f"{run['peak_bytes'] / 2**20:.0f} MiB, load average {run['load_avg'][0]:.2f} to "
        f"{run['load_avg'][1]:.2f}"
    )


def _goals(row: dict[str, Any]) -> dict[str, Any]:
    goals: dict[str, Any] = {}
    perflab, hta = row.get("perflab") or {}, row.get("hta") or {}
    if "seconds" in perflab and "seconds" in hta:
        speedup = hta["seconds"] / perflab["seconds"]
        memory = perflab["peak_bytes"] / hta["peak_bytes"]
        goals["hta_time"] = {
            "value": round(speedup, 3),
            "goal": GOALS["hta_time"],
            "met": speedup >= GOALS["hta_time"],
        }
        goals["hta_memory"] = {
            "value": round(memory, 3),
            "goal": GOALS["hta_memory"],
            "met": memory <= GOALS["hta_memory"],
        }
        if perflab.get("date") != hta.get("date"):  # a ratio across runs checks nothing
            for name in ("hta_time", "hta_memory"):
                goals[name]["met"] = None
                goals[name]["note"] = (
                    "not checked: perflab and HTA were measured in different runs (dates in "
                    "results), under different machine load"
                )
    timeline = row.get("perflab timeline") or {}
    if "seconds" in timeline:
        size = timeline["result"]["output_bytes"]
        goals["timeline_seconds"] = {
            "value": round(timeline["seconds"], 3),
            "goal": GOALS["timeline_seconds"],
            "met": timeline["seconds"] <= GOALS["timeline_seconds"],
        }
        goals["timeline_bytes"] = {
            "value": size,
            "goal": GOALS["timeline_bytes"],
            "met": size <= GOALS["timeline_bytes"],
        }
    paint = timeline.get("first_paint_ms")
    if paint is not None:
        goals["timeline_first_paint_ms"] = {
            "value": round(paint),
            "goal": GOALS["timeline_first_paint_ms"],
            "met": paint <= GOALS["timeline_first_paint_ms"],
        }
    return goals


def _goal_lines(goals: dict[str, Any]) -> list[str]:
    if not goals:
        return ["goals: not measured"]
    verdict = {True: "met", False: "NOT met", None: "not checked (different runs)"}
    return [
        f"{name}: {g['value']} (goal {g['goal']}): {verdict[g['met']]}" for name, g in goals.items()
    ]


if __name__ == "__main__":
    sys.exit(main())
