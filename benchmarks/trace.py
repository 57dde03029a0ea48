"""Trace loading + summary: perflab against what users run instead, on the same files.

Contenders, each in a fresh subprocess (wall time from interpreter start to result, imports
included; CPU time of the process and its children; peak memory: the process's peak RSS plus
its largest child's, an upper bound when the two peaks did not coincide). perflab's bytecode
is compiled first, as an installed package's is:

- ``perflab``: ``load_trace(path).summary()``; a file of 64 MB of JSON or more is decoded
  by this process and a helper process per spare core (one on a two-core machine)
- ``perflab (one process)``: the same with ``workers=0``, no helper
- ``floor``: gunzip + the fastest typed JSON decode of the same file, no analysis at all: the
  fastest gunzip installed (ISA-L through python-isal, which perflab also uses, else zlib),
  then msgspec (the fastest typed decoder we know for Python) into perflab's own decode types,
  or into a minimal type with only the fields a summary needs, whichever is faster; the
  cyclic garbage collector is off, as it is for msgspec's best case (perflab's types read
  times beyond 2**43 us as text, as perflab does, where its fast types refuse them)
- ``pandas``: ``json.load`` + ``pandas.DataFrame`` + the same busy/idle/kernel numbers
- ``hta``: Holistic Trace Analysis ``TraceAnalysis`` + temporal and kernel breakdowns, run by
  the Python given with ``--hta-python`` (HTA pins its own dependencies, so it lives in its
  own virtualenv: ``python -m venv V && V/bin/pip install HolisticTraceAnalysis``)
- ``perflab timeline`` (generated trace only): the whole ``perflab timeline FILE -o OUT.html``
  process

Inputs: the real Kineto traces in tests/data/traces/kineto and a generated deterministic trace
(``--events``, default about one million: kernels on four streams, each with its cpu_op,
launch and flow events). Each contender runs ``--repeat`` times on the generated trace (once
on the small real ones), the contenders taking turns, and the median is kept; each run
records the machine's load average (1 minute) when it started and ended, since other work may
share this machine. The goals are checked on the generated trace: perflab >= 20x faster than
HTA in every round (each round's HTA time over the same round's perflab time) with <= 0.15 of
its peak memory in every round, and median time <= 1.2x the floor's. Results go to
benchmarks/results/trace.json (earlier results: its history).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import gzip
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "traces" / "kineto"
RESULTS = ROOT / "benchmarks" / "results" / "trace.json"
GOALS = {"hta_time": 20.0, "hta_memory": 0.15, "floor_time": 1.2}

KERNEL_NAMES = [
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(ReduceOp)",
    "triton_poi_fused_add_mul_0",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4>>",
]


def generate(path: Path, n_events: int, seed: int = 0) -> None:
    """A Kineto-shaped trace: per kernel a cpu_op, a cudaLaunchKernel, two flow events and
    the kernel itself (5 events), spread over 4 streams; every 50th GPU op is a memcpy."""
    rng = random.Random(seed)
    pid, tid = 4242, 4243
    events: list[dict[str, Any]] = []
    t_cpu = 1_700_000_000_000_000.0
    stream_free = {7: t_cpu, 20: t_cpu, 24: t_cpu, 28: t_cpu}
    for i in range(n_events // 5):
        corr = 1000 + i
        op_dur = rng.uniform(5, 30)
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"aten::op{i % 40}",
                "pid": pid,
                "tid": tid,
                "ts": round(t_cpu, 3),
                "dur": round(op_dur, 3),
                "args": {"External id": corr, "Sequence number": i, "Ev Idx": i},
            }
        )
        launch_ts = t_cpu + op_dur * 0.3
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": pid,
                "tid": tid,
                "ts": round(launch_ts, 3),
                "dur": 4.5,
                "args": {"External id": corr, "cbid": 211, "correlation": corr},
            }
        )
        stream = (7, 20, 24, 28)[i % 4]
        start = max(stream_free[stream], launch_ts + rng.uniform(2, 20))
        dur = rng.uniform(1, 60)
        stream_free[stream] = start + dur
        copy = i % 50 == 0
        gpu: dict[str, Any] = {
            "ph": "X",
            "cat": "gpu_memcpy" if copy else "kernel",
            "name": "Memcpy HtoD (Pinned -> Device)" if copy else KERNEL_NAMES[i % 6],
            "pid": 0,
            "tid": stream,
            "ts": round(start, 3),
            "dur": round(dur, 3),
            "args": {"External id": corr, "device": 0, "stream": stream, "correlation": corr},
        }
        if copy:
            gpu["args"]["bytes"] = 1 << 20
        else:
            gpu["args"].update(
                {
                    "registers per thread": 64,
                    "shared memory": 0,
                    "grid": [128, 1, 1],
                    "block": [256, 1, 1],
                    "est. achieved occupancy %": 50,
                }
            )
        events.append(gpu)
        events.append(
            {
                "ph": "s",
                "id": corr,
                "pid": pid,
                "tid": tid,
                "ts": round(launch_ts, 3),
                "cat": "ac2g",
                "name": "ac2g",
            }
        )
        events.append(
            {
                "ph": "f",
                "id": corr,
                "pid": 0,
                "tid": stream,
                "ts": round(start, 3),
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        t_cpu += op_dur + rng.uniform(0, 3)
    doc = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 0, "world_size": 1},
        "deviceProperties": [{"id": 0, "name": "synthetic"}],
        "traceEvents": events,
    }
    with gzip.open(path, "wt", compresslevel=1) as fh:
        json.dump(doc, fh)


# the fastest gunzip installed; both floors start with it
GUNZIP = """
try:
    from isal.igzip import decompress
except ImportError:
    from gzip import decompress
"""
# perflab's contenders: load_trace(PATH, <options>)
PERFLAB = """
from perflab.io import load_trace
s = load_trace(PATH, {options}).summary().to_dict()
busy = sum(d["busy_us"] for d in s["devices"].values())
result = {{"kernels": s["kernels"]["count"], "busy_us": busy}}
"""
CONTENDERS = {
    "perflab": PERFLAB.format(options=""),
    "perflab (one process)": PERFLAB.format(options="workers=0"),
    "floor (perflab types)": GUNZIP
    + """
import gc, msgspec
from perflab.io.kineto import _DECODERS
gc.disable()
data = decompress(open(PATH, "rb").read())
try:
    doc = _DECODERS[0].decode(data)
except msgspec.ValidationError:  # times beyond 2**43 us: the exact types, as perflab does
    doc = _DECODERS[1].decode(data)
result = {"events": len(doc.traceEvents)}
""",
    "floor (minimal types)": GUNZIP
    + """
import gc, msgspec

class Args(msgspec.Struct, gc=False):
    device: int = -1
    stream: int = -1

class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = -1
    tid: int | str = -1
    ts: float = 0.0
    dur: float = 0.0
    args: Args | None = None

class File(msgspec.Struct):
    traceEvents: list[Event]

gc.disable()
data = decompress(open(PATH, "rb").read())
doc = msgspec.json.Decoder(File).decode(data)
result = {"events": len(doc.traceEvents)}
""",
    "pandas": """
import gzip, json
import pandas as pd
with gzip.open(PATH, "rt") as fh:
    doc = json.load(fh)
df = pd.DataFrame(doc["traceEvents"])
df = df[df["ph"] == "X"]
gpu = df[df["cat"].isin(["kernel", "gpu_memcpy", "gpu_memset"])].copy()
gpu["end"] = gpu["ts"] + gpu["dur"]
gpu = gpu.sort_values("ts")
gpu["reach"] = gpu["end"].cummax()
new = gpu["ts"] > gpu["reach"].shift(fill_value=-1e300)
block = new.cumsum()
g = gpu.groupby(block).agg(s=("ts", "min"), e=("reach", "max"))
kernels = gpu[gpu["cat"] == "kernel"]
by_name = kernels.groupby("name")["dur"].agg(["count", "sum"])
result = {"kernels": int(len(kernels)), "busy_us": float((g["e"] - g["s"]).sum())}
""",
    "hta": """
import os, shutil, tempfile
from hta.trace_analysis import TraceAnalysis
d = tempfile.mkdtemp()
shutil.copy(PATH, os.path.join(d, "rank-0.json.gz"))
ta = TraceAnalysis(trace_dir=d)
temporal = ta.get_temporal_breakdown(visualize=False)
kernels = ta.get_gpu_kernel_breakdown(visualize=False)
shutil.rmtree(d)
result = {"temporal_rows": int(len(temporal))}
""",
    "perflab timeline": """
import os, tempfile
from perflab.cli import main
out = os.path.join(tempfile.mkdtemp(), "timeline.html")
assert main(["timeline", PATH, "-o", out]) == 0
result = {"output_bytes": os.path.getsize(out)}
os.remove(out)
""",
}
FLOORS = ("floor (perflab types)", "floor (minimal types)")

RUNNER = """
import json, os, resource, sys, time
PATH = sys.argv[1]
load_before = os.getloadavg()[0]
t0 = time.perf_counter()
exec(compile(sys.argv[2], "contender", "exec"))
elapsed = time.perf_counter() - t0
# VmHWM belongs to this process image (ru_maxrss would include the parent's before exec);
# children: the largest peak among those that ended (helper processes)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
own = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
peak = int(hwm[0].split()[1]) * 1024 if hwm else own.ru_maxrss * 1024
cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
print("RESULT " + json.dumps({
    "seconds": elapsed,
    "cpu_seconds": cpu,
    "peak_bytes": peak + kids.ru_maxrss * 1024,
    "children_peak_bytes": kids.ru_maxrss * 1024,
    "load_avg": [load_before, os.getloadavg()[0]],
    "result": result,
}))
"""


def compile_bytecode() -> None:
    """perflab's modules compiled to bytecode, as an installed package's are (pip compiles
    them): with PYTHONDONTWRITEBYTECODE set, every fresh process would otherwise compile
    whatever changed since the last write, in this process and in each helper."""
    compileall.compile_dir(ROOT / "perflab", quiet=1)


def run_contender(python: str, name: str, path: Path, timeout: float) -> dict[str, Any]:
    return run_code(python, CONTENDERS[name], path, timeout)


def run_code(python: str, code: str, path: Path, timeout: float) -> dict[str, Any]:
    """``code`` on ``path`` in a fresh process under :data:`RUNNER`, in its own process group
    (killed whole on a timeout): the ``RESULT`` line it prints, else an ``error``."""
    from perflab.capture import _proc

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        proc = _proc.run([python, "-c", RUNNER, str(path), code], timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:300]}


def versions(hta_python: str | None) -> dict[str, str]:
    import importlib.metadata as md

    found = {"python": platform.python_version()}
    for dist in ("numpy", "msgspec", "isal", "pandas"):
        with contextlib.suppress(md.PackageNotFoundError):
            found[dist] = md.version(dist)
    if hta_python:
        out = subprocess.run(
            [
                hta_python,
                "-c",
                "import importlib.metadata as m; "
                "print(m.version('HolisticTraceAnalysis'), m.version('pandas'))",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        parts = out.stdout.split()
        if len(parts) == 2:
            found["HolisticTraceAnalysis"], found["pandas (hta venv)"] = parts
    return found


def machine() -> dict[str, object]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="generated trace size")
    ap.add_argument(
        "--hta-python",
        default=os.environ.get("HTA_PYTHON"),
        help="python of a virtualenv with HolisticTraceAnalysis",
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs per contender (generated trace)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per contender")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()

    compile_bytecode()
    load_start = os.getloadavg()
    inputs = sorted(DATA.glob("*.json.gz")) if DATA.is_dir() else []
    names = ["perflab", "perflab (one process)", *FLOORS, "pandas"]
    names += ["hta"] if args.hta_python else []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / f"generated_{args.events}.json.gz"
        t0 = time.perf_counter()
        generate(generated, args.events)
        print(
            f"generated {generated.name} ({generated.stat().st_size >> 20} MiB gzip) in "
            f"{time.perf_counter() - t0:.1f} s"
        )
        for path in [*inputs, generated]:
            big = path == generated
            row: dict[str, Any] = {"input": path.name}
            contenders = [*names, "perflab timeline"] if big else names
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
            # round-robin, so that this machine's slow spells hit every contender alike
            for _ in range(args.repeat if big else 1):
                for name in contenders:
                    python = args.hta_python if name == "hta" else sys.executable
                    runs[name].append(run_contender(python, name, path, args.timeout))
            for name in contenders:
                row[name] = median_run(runs[name])
            row["floor"] = fastest_floor(row)
            rows.append(row)
            print(_line(row, [n for n in names if n not in FLOORS] + ["floor"]))
        goals = check_goals(rows[-1])
    for line in goal_lines(goals):
        print(line)
    doc = {
        "benchmark": "trace",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(args.hta_python),
        "events_generated": args.events,
        "repeat": args.repeat,
        "load_avg": {"start": load_start, "end": os.getloadavg()},
        "note": "seconds (interpreter start to result, imports included), CPU seconds (with "
        "children) and peak memory (peak RSS plus the largest child's) of a fresh process per "
        "run; median of the runs on the generated trace, the contenders taking turns; "
        "load_avg: the machine's 1, 5 and 15 minute load averages at the start and end "
        "(per run: the 1 minute one when it started and ended; 2 cores); the "
        "floor is the faster of the two floor decoders (one process); perflab decodes with "
        "helper processes on spare cores, 'perflab (one process)' without",
        "goals": goals,
        "rows": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.output}")
    return 0


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median time, every time and peak kept alongside."""
    good = sorted((r for r in runs if "error" not in r), key=lambda r: float(r["seconds"]))
    if not good:
        return runs[0]
    chosen = dict(good[len(good) // 2])
    if len(runs) > 1:
        chosen["all_seconds"] = [r.get("seconds") for r in runs]
        chosen["all_peak_bytes"] = [r.get("peak_bytes") for r in runs]
        chosen["all_cpu_seconds"] = [r.get("cpu_seconds") for r in runs]
        chosen["all_load_avg"] = [r.get("load_avg") for r in runs]
    return chosen


def fastest_floor(row: dict[str, Any]) -> dict[str, Any]:
    timed = [(name, row[name]) for name in FLOORS if "error" not in row[name]]
    if not timed:
        return {"error": "no floor decoder finished"}
    name, best = min(timed, key=lambda item: float(item[1]["seconds"]))
    return {**best, "decoder": name}


def check_goals(row: dict[str, Any]) -> dict[str, Any]:
    """The goals on the generated trace, as measured ratios; the same ratios for
    perflab in one process, for information."""
    goals = _ratios(row, row.get("perflab") or {})
    one = _ratios(row, row.get("perflab (one process)") or {})
    if one:
        goals["one_process"] = one
    return goals


def _ratios(row: dict[str, Any], perflab: dict[str, Any]) -> dict[str, Any]:
    """Time and memory against HTA in the worst round (a round whose run failed fails the
    goal), and the median time against the floor's; each with its value in every round."""
    floor, hta = (row.get(k) or {} for k in ("floor", "hta"))
    goals: dict[str, Any] = {}
    if "seconds" in perflab and "seconds" in hta:
        speedups = _per_round(hta, perflab, "seconds")
        memory = _per_round(perflab, hta, "peak_bytes")
        # NaN (a round where a run failed) fails the goal
        fastest = math.nan if any(map(math.isnan, speedups)) else min(speedups)
        biggest = math.nan if any(map(math.isnan, memory)) else max(memory)
        goals["hta_time"] = _goal(fastest, GOALS["hta_time"], fastest >= GOALS["hta_time"])
        goals["hta_time"]["rounds"] = [round(v, 3) for v in speedups]
        goals["hta_memory"] = _goal(biggest, GOALS["hta_memory"], biggest <= GOALS["hta_memory"])
        goals["hta_memory"]["rounds"] = [round(v, 3) for v in memory]
    if "seconds" in perflab and "seconds" in floor:
        ratio = perflab["seconds"] / floor["seconds"]
        goals["floor_time"] = _goal(ratio, GOALS["floor_time"], ratio <= GOALS["floor_time"])
        goals["floor_time"]["rounds"] = [round(v, 3) for v in _per_round(perflab, floor, "seconds")]
    return goals


def _per_round(top: dict[str, Any], bottom: dict[str, Any], key: str) -> list[float]:
    """top / bottom of one measure, round by round (NaN where either run failed)."""
    many = f"all_{key}"
    tops, bottoms = top.get(many, [top.get(key)]), bottom.get(many, [bottom.get(key)])
    if len(tops) != len(bottoms):  # not run in the same rounds
        return [math.nan]
    return [
        a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else math.nan
        for a, b in zip(tops, bottoms, strict=True)
    ]


def _goal(value: float, goal: float, met: bool) -> dict[str, Any]:
    return {"value": round(value, 3), "goal": goal, "met": met}


def goal_lines(goals: dict[str, Any]) -> list[str]:
    words = {
        "hta_time": "HTA time / perflab time",
        "hta_memory": "perflab peak / HTA peak",
        "floor_time": "perflab time / floor time",
    }
    lines = []
    for key, text in words.items():
        g = goals.get(key)
        if not isinstance(g, dict):
            lines.append(f"goal {text}: not measured")
            continue
        op = ">=" if key == "hta_time" else "<="
        verdict = "met" if g["met"] else "NOT met"
        worst = " in the worst round" if key.startswith("hta") else ""
        rounds = ", ".join(f"{v:.2f}" for v in g.get("rounds", []))
        lines.append(
            f"goal {text} = {g['value']:.2f}{worst} (goal {op} {g['goal']}): {verdict}"
            f" [rounds: {rounds}]"
        )
    one = goals.get("one_process", {})
    if one:
        values = ", ".join(f"{words[k].split(' = ')[0]} = {g['value']:.2f}" for k, g in one.items())
        lines.append(f"perflab in one process, for information: {values}")
    return lines


def _line(row: dict[str, Any], names: list[str]) -> str:
    base = row["perflab"]
    parts = [f"{row['input']}:"]
    for name in names:
        r = row.get(name)
        if not isinstance(r, dict):
            continue
        assert isinstance(base, dict)
        if "error" in r:
            parts.append(f"{name} error ({r['error']})")
            continue
        text = f"{name} {r['seconds']:.2f} s (cpu {r.get('cpu_seconds', 0):.2f} s) "
        text += f"{r['peak_bytes'] / 2**20:.0f} MiB"
        if name != "perflab" and "seconds" in base:
            text += f" ({r['seconds'] / base['seconds']:.2f}x perflab's time)"
        parts.append(text)
    return "  ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
