"""One Kineto file ten times bigger: does perflab's load + summary stay linear and bounded?

The same generator writes a trace of ``--small`` events (default 1M) and one of ``--large``
events (default 10M, about 180 MB of gzip); the whole ``perflab trace summary FILE --json``
process runs on each (``--repeat`` times, taking turns; the median is kept), measured by the
runner of benchmarks/trace.py: wall time from interpreter start to result, imports included;
CPU time with children; peak memory = the process's peak RSS plus its largest child's (the
helper process that decodes part of a large file). Goals: the large file's time <= 10x the
small one's (linear or better) and its peak memory <= 1.5 GB. Results go to
benchmarks/results/trace_scale.json.

The generated trace is written as current Kineto writes one: ``baseTimeNanoseconds`` and
times relative to it in microseconds with three decimals; per kernel a cpu_op, its
cudaLaunchKernel, two ac2g flow events and the kernel (every 50th a memcpy) on four streams,
with CPU thread and process names.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "trace_scale.json"
GOALS = {"time_ratio": 10.0, "peak_bytes": 1.5e9}
BASE_NS = 1_700_000_000_000_000_000
KERNELS = [
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(ReduceOp)",
    "triton_poi_fused_add_mul_0",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4>>",
]
SUMMARY = """
from perflab.cli import main
import contextlib, io, json
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert main(["trace", "summary", PATH, "--json"]) == 0
s = json.loads(out.getvalue())
busy = sum(d["busy_us"] for d in s["devices"].values())
result = {"events": s["events"], "kernels": s["kernels"]["count"], "busy_us": busy}
"""


def trace_benchmark() -> Any:
    """benchmarks/trace.py as a module (its runner, machine and version helpers)."""
    return load_script("trace")


def _us(ns: int) -> str:
    """Kineto's time text: microseconds with three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def generate(path: Path, n_events: int, seed: int = 0) -> int:
    """Write a Kineto trace of about ``n_events`` events as text, a few thousand events at a
    time (never the whole document in memory); gzip through ISA-L when installed. Returns the
    number of events written."""
    try:
        from isal import igzip as gzip_module
    except ImportError:  # pragma: no cover
        import gzip as gzip_module  # type: ignore[no-redef]
    rng = random.Random(seed)
    pid, tid = 4242, 4243
    head = (
        '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic"}], '
        '"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}, '
        f'"baseTimeNanoseconds": {BASE_NS}, "traceEvents": [\n'
        f'{{"name": "process_name", "ph": "M", "ts": 0.000, "pid": {pid}, "tid": 0, '
        '"args": {"name": "python3.12"}},\n'
        f'{{"name": "thread_name", "ph": "M", "ts": 0.000, "pid": {pid}, "tid": {tid}, '
        '"args": {"name": "thread 4243 (pt_main_thread)"}}'
    )
    written = 2
    t_cpu = 1_000_000  # ns after the base time
    free = {7: t_cpu, 20: t_cpu, 24: t_cpu, 28: t_cpu}
    with gzip_module.open(path, "wb", compresslevel=1) as fh:
        fh.write(head.encode())
        chunk: list[str] = []
        for i in range(max(n_events - written, 0) // 5):
            corr = 1000 + i
            op_dur = rng.randrange(5_000, 30_000)
            launch = t_cpu + op_dur * 3 // 10
            stream = (7, 20, 24, 28)[i % 4]
            start = max(free[stream], launch + rng.randrange(2_000, 20_000))
            dur = rng.randrange(1_000, 60_000)
            free[stream] = start + dur
            copy = i % 50 == 0
            gpu_args = (
                '"bytes": 1048576'
                if copy
                else '"registers per thread": 64, "shared memory": 0, "grid": [128, 1, 1], '
                '"block": [256, 1, 1], "est. achieved occupancy %": 50'
            )
            chunk.append(
                f',\n{{"ph": "X", "cat": "cpu_op", "name": "aten::op{i % 40}", "pid": {pid}, '
                f'"tid": {tid}, "ts": {_us(t_cpu)}, "dur": {_us(op_dur)}, '
                f'"args": {{"External id": {corr}, "Sequence number": {i}, "Ev Idx": {i}}}}}'
                f',\n{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", '
                f'"pid": {pid}, "tid": {tid}, "ts": {_us(launch)}, "dur": 4.500, '
                f'"args": {{"External id": {corr}, "cbid": 211, "correlation": {corr}}}}}'
                f',\n{{"ph": "X", "cat": "{"gpu_memcpy" if copy else "kernel"}", '
                f'"name": "{"Memcpy HtoD (Pinned -> Device)" if copy else KERNELS[i % 6]}", '
                f'"pid": 0, "tid": {stream}, "ts": {_us(start)}, "dur": {_us(dur)}, '
                f'"args": {{"External id": {corr}, "device": 0, "stream": {stream}, '
                f'"correlation": {corr}, {gpu_args}}}}}'
                f',\n{{"ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, '
                f'"ts": {_us(launch)}, "cat": "ac2g", "name": "ac2g"}}'
                f',\n{{"ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, '
                f'"ts": {_us(start)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
            )
            written += 5
            t_cpu += op_dur + rng.randrange(0, 3_000)
            if len(chunk) >= 2000:
                fh.write("".join(chunk).encode())
                chunk = []
        fh.write("".join(chunk).encode())
        fh.write(b'\n], "traceName": "generated"}')
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=1_000_000, help="events of the small trace")
    ap.add_argument("--large", type=int, default=10_000_000, help="events of the large trace")
    ap.add_argument("--repeat", type=int, default=3, help="runs per file, taking turns")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()
    bench = trace_benchmark()
    bench.compile_bytecode()
    files: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for label, n in (("small", args.small), ("large", args.large)):
            path = Path(tmp) / f"generated_{n}.json.gz"
            began = time.perf_counter()
            events = generate(path, n)
            paths[label] = path
            files[label] = {"events": events, "gzip_bytes": path.stat().st_size}
            print(
                f"generated {path.name}: {events} events, {path.stat().st_size / 1e6:.0f} MB "
                f"gzip, in {time.perf_counter() - began:.0f} s"
            )
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label in paths}
        for _ in range(args.repeat):
            for label, path in paths.items():
                run = _run(bench, path, args.timeout)
                runs[label].append(run)
                print(f"{label}: {_brief(run)}")
    for label in files:
        files[label].update(_median(runs[label]))
    goals = _goals(files)
    for name, goal in goals.items():
        verdict = "met" if goal["met"] else "NOT met"
        print(f"{name}: {goal['value']:.3g} (goal {goal['goal']:.3g}): {verdict}")
    doc = {
        "benchmark": "trace_scale",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": bench.machine(),
        "versions": bench.versions(None),
        "repeat": args.repeat,
        "note": "the whole 'perflab trace summary FILE --json' process per run: seconds "
        "(interpreter start to result), CPU seconds with children, peak memory = peak RSS plus "
        "the largest child's; median run per file (the faster middle one of an even count), "
        "the files taking turns. No GPU (generated "
        "traces).",
        "goals": goals,
        "files": files,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.output}")
    return 0


def _run(bench: Any, path: Path, timeout: float) -> dict[str, Any]:
    bench.CONTENDERS["perflab trace summary"] = SUMMARY
    run: dict[str, Any] = bench.run_contender(
        sys.executable, "perflab trace summary", path, timeout
    )
    return run


def _brief(run: dict[str, Any]) -> str:
    if "error" in run:
        return f"error: {run['error']}"
    return (
        f"{run['seconds']:.1f} s, {run['cpu_seconds']:.1f} CPU s, peak "
        f"{run['peak_bytes'] / 1e6:.0f} MB (children {run['children_peak_bytes'] / 1e6:.0f} MB)"
    )


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = sorted((r for r in runs if "error" not in r), key=lambda r: float(r["seconds"]))
    if not good:
        return {"error": runs[-1].get("error", "no run")}
    middle = good[(len(good) - 1) // 2]
    return {
        **middle,
        "all_seconds": [r["seconds"] for r in good],
        "all_peak_bytes": [r["peak_bytes"] for r in good],
        "median_seconds": statistics.median(r["seconds"] for r in good),
    }


def _goals(files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    small, large = files["small"], files["large"]
    if "error" in small or "error" in large:
        return {}
    ratio = large["seconds"] / small["seconds"]
    return {
        "time_ratio": {
            "value": round(ratio, 2),
            "goal": GOALS["time_ratio"],
            "met": ratio <= GOALS["time_ratio"],
            "events_ratio": round(large["events"] / small["events"], 2),
        },
        "peak_bytes": {
            "value": large["peak_bytes"],
            "goal": GOALS["peak_bytes"],
            "met": large["peak_bytes"] <= GOALS["peak_bytes"],
        },
    }


if __name__ == "__main__":
    sys.exit(main())
