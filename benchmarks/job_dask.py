"""A whole job summarised on a Dask LocalCluster (N worker processes) against perflab's
one-process path, on generated jobs of growing rank counts with the same events per rank:
time, the driver's peak memory (does it grow with the ranks?) and each worker's peak memory;
the job's overview timeline drawn on the cluster (time, driver peak, page size), also for a
job of many small ranks (--many-ranks); then the projection for a job of 1,024 ranks of 500k
events each on 32 workers, from the measured cost per event. Each run is a fresh process, so
its peak RSS is its own. Writes benchmarks/results/job_dask.json.

Run: .venv/bin/python benchmarks/job_dask.py [--ranks 8,32,64] [--events 20000000]
     [--workers 2] [--many-ranks 1024]   (--events: all the events at the largest rank count)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "job_dask.json"
PROJECTED = {"ranks": 1024, "events_per_rank": 500_000, "workers": 32}


def child(mode: str, directory: str, workers: int) -> dict[str, Any]:
    """One measurement in this (fresh) process: ``local`` or ``dask``."""
    t0 = time.perf_counter()
    if mode == "overview":
        return overview(directory, workers)
    if mode == "local":
        from perflab.analysis.job import summarize_job
        from perflab.io.job import load_job

        doc = summarize_job(load_job(directory, workers=0)).to_dict()
        worker_kib: list[int] = []
    else:
        import distributed

        import perflab

        with (
            distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            t0 = time.perf_counter()  # the cluster's start is not the job's time
            doc = perflab.load_job(directory, client=client).summary().to_dict()
            seconds = time.perf_counter() - t0
            peaks = client.run(peak_kib)
            worker_kib = sorted(int(v) for v in peaks.values())
        return _row(seconds, worker_kib, doc)
    return _row(time.perf_counter() - t0, worker_kib, doc)


def overview(directory: str, workers: int) -> dict[str, Any]:
    """The job's overview timeline (a lane per group of ranks) on a LocalCluster: time,
    peaks, the page's size."""
    import distributed

    import perflab
    from perflab.render.job_overview import job_overview

    with (
        distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
        tempfile.TemporaryDirectory() as tmp,
    ):
        t0 = time.perf_counter()
        activity = perflab.load_job(directory, client=client).activity()
        out = job_overview(activity).save(Path(tmp) / "overview.html")
        seconds = time.perf_counter() - t0
        size_mb = out.stat().st_size / 1e6
        worker_kib = sorted(int(v) for v in client.run(peak_kib).values())
    lanes = len(activity.groups)
    return {**_row(seconds, worker_kib, {"ranks": {}}), "page_mb": size_mb, "lanes": lanes}


def peak_kib() -> int:
    """This process's peak resident memory (VmHWM: its own address space's, unlike
    ru_maxrss, which keeps the parent's high-water mark across fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # not Linux: the best there is


def _row(seconds: float, worker_kib: list[int], doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "seconds": seconds,
        "driver_peak_mib": peak_kib() / 1024,
        "worker_peak_mib": [k / 1024 for k in worker_kib],
        "ranks_summarised": len(doc["ranks"]),
    }


def measure(mode: str, directory: Path, workers: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(directory), "--workers", str(workers)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def projection(rows: dict[str, dict[str, Any]], workers: int) -> dict[str, Any]:
    """Seconds for PROJECTED from the largest job's worker time per event, assuming the
    per-event cost stays the same, the workers read in parallel with no shared-filesystem
    limit, and the driver's merge grows linearly with the ranks (its share measured too)."""
    largest = max(rows.values(), key=lambda r: r["events"])
    worker_s_per_event = largest["dask"]["seconds"] * workers / largest["events"]
    events = PROJECTED["ranks"] * PROJECTED["events_per_rank"]
    read = events * worker_s_per_event / PROJECTED["workers"]
    return {
        **PROJECTED,
        "worker_seconds_per_million_events": worker_s_per_event * 1e6,
        "projected_seconds": read,
        "assumptions": "cost per event as measured here on the largest job (read + summary "
        "on a worker, this machine's cores), workers reading in parallel with no filesystem "
        "bottleneck, the driver's merge not limiting (its time is inside the measured total)",
    }


def overview_of_many(job: Any, ranks: int, workers: int) -> dict[str, Any]:
    """The overview of a job of ``ranks`` small rank files (many ranks, few events each)."""
    with tempfile.TemporaryDirectory() as tmp:
        job.generate_job(Path(tmp), ranks, 10, straggler=ranks // 3, seed=2)
        row = {"ranks": ranks, "events": job._count_events(Path(tmp))}
        row["overview"] = measure("overview", Path(tmp), workers)
    o = row["overview"]
    print(
        f"overview of {ranks} ranks ({row['events']:,} events): {o['seconds']:.1f} s, "
        f"{o['lanes']} lanes, page {o['page_mb']:.1f} MB, driver peak "
        f"{o['driver_peak_mib']:.0f} MiB",
        flush=True,
    )
    return row


def _line(row: dict[str, Any], workers: int) -> str:
    local, dask, view = row["local"], row["dask"], row["overview"]
    peaks = ", ".join(f"{m:.0f}" for m in dask["worker_peak_mib"])
    return (
        f"{row['ranks']:4d} ranks, {row['events']:,} events: one process {local['seconds']:.1f} s "
        f"(peak {local['driver_peak_mib']:.0f} MiB); Dask x{workers} {dask['seconds']:.1f} s, "
        f"driver peak {dask['driver_peak_mib']:.0f} MiB, workers {peaks} MiB; overview "
        f"{view['seconds']:.1f} s, driver peak {view['driver_peak_mib']:.0f} MiB, page "
        f"{view['page_mb']:.1f} MB"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="8,32,64", help="comma-separated rank counts")
    ap.add_argument("--events", type=int, default=20_000_000, help="events at the most ranks")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument(
        "--many-ranks",
        type=int,
        default=1024,
        help="also draw the overview of a job of this many small ranks (0: do not)",
    )
    ap.add_argument("--output", type=Path, default=RESULTS)
    ap.add_argument("--note", default="", help="added to the results (e.g. machine load)")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.workers)))
        return 0
    job, bench = load_script("job"), load_script("trace")
    counts = sorted(int(r) for r in args.ranks.split(","))
    per_rank = args.events // counts[-1]
    iterations = max(1, per_rank // job.EVENTS_PER_ITERATION)
    rows: dict[str, dict[str, Any]] = {}
    for ranks in counts:
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            job.generate_job(directory, ranks, iterations, straggler=ranks // 2, seed=1)
            events = job._count_events(directory)
            row: dict[str, Any] = {"ranks": ranks, "events": events}
            for mode in ("local", "dask", "overview"):
                row[mode] = measure(mode, directory, args.workers)
            rows[str(ranks)] = row
            print(_line(row, args.workers), flush=True)
    many = overview_of_many(job, args.many_ranks, args.workers) if args.many_ranks else None
    small, large = rows[str(counts[0])], rows[str(counts[-1])]
    growth = large["dask"]["driver_peak_mib"] / small["dask"]["driver_peak_mib"]
    print(f"driver peak at {counts[-1]} ranks / at {counts[0]}: {growth:.2f}x")
    projected = projection(rows, args.workers)
    print(
        f"projected: {PROJECTED['ranks']} ranks x {PROJECTED['events_per_rank']:,} events on "
        f"{PROJECTED['workers']} workers: {projected['projected_seconds'] / 60:.1f} min"
    )
    doc = {
        "benchmark": "job_dask",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": bench.machine(),
        "versions": bench.versions(None),
        "workers": args.workers,
        "events_per_rank": per_rank,
        "results": rows,
        "driver_peak_growth": {"from": counts[0], "to": counts[-1], "ratio": growth},
        "projection": projected,
        "overview_of_many_ranks": many,
        "note": args.note,
    }
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
