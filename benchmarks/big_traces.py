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

``--hta-python PY`` also runs Holistic Trace Analysis (what users run instead; HTA pins its own
dependencies, so it lives in its own virtualenv: ``python -m venv V && V/bin/pip install
HolisticTraceAnalysis``) on each size, after perflab's commands on it, under the same runner:
``hta temporal`` (``TraceAnalysis`` on a folder holding the file as rank 0, then
``get_temporal_breakdown``: beside ``trace summary``) and ``hta idle`` (the same load, then
``get_idle_time_breakdown``: beside ``trace idle``); each records when its load finished. An
HTA run is stopped at ``--hta-timeout`` seconds or when its processes' memory passes
``--hta-memory-limit`` (default: 70% of the memory available at the start, so that a shared
machine does not run out), and is recorded as stopped with the time, CPU time and memory it
had reached; once HTA does not finish a size, the larger sizes are not tried. Each size gets
the ratio perflab/HTA of the two paired runs (seconds, CPU seconds, peak bytes), from runs of
this invocation only: an upper bound where HTA was stopped.

``--merge`` keeps the runs of the results file that this invocation does not repeat (each
with the date it was measured), so that HTA can be added without running every perflab
command again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
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

HTA = {
    "hta temporal": """
import time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=PATH)
loaded = time.perf_counter() - t0
table = ta.get_temporal_breakdown(visualize=False)
result = {"load_seconds": loaded, "rows": int(len(table)), "columns": list(map(str, table))}
""",
    "hta idle": """
import time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=PATH)
loaded = time.perf_counter() - t0
table = ta.get_idle_time_breakdown(visualize=False)[0]
result = {"load_seconds": loaded, "rows": int(len(table)), "columns": list(map(str, table))}
""",
}
PAIRS = {"summary": "hta temporal", "idle": "hta idle"}  # perflab command -> HTA's closest
HTA_NOTE = (
    "HTA 'hta temporal': TraceAnalysis on a folder holding the file as rank 0 (parses the "
    "whole trace into a pandas DataFrame per rank), then get_temporal_breakdown: per rank the "
    "GPU's idle, compute and non-compute time. 'hta idle': the same load, then "
    "get_idle_time_breakdown: rank 0's idle time per stream split into host wait, kernel wait "
    "(gaps under 30 us between kernels) and other. These are not the analyses perflab's "
    "commands do: trace summary also gives per-device busy time, kernel categories, the top "
    "kernels, communication/compute overlap and memcpy; trace idle names every gap of the "
    "GPU's busy time (across streams, not per stream) with a cause followed from the host "
    "call that launched the work after it (Python functions read too) and its evidence, and "
    "its JSON lists every gap. Ratios are perflab/HTA (below 1: perflab took less) of runs "
    "of the same invocation; where HTA was stopped (timeout or memory limit) they are upper "
    "bounds, from what it had reached; load_seconds: from the start of HTA's code (its imports "
    "included) to the end of its load."
)
POLL_S = 0.5  # how often a watched run's memory and CPU time are read
PAGE = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _group_usage(group: int) -> tuple[int, float]:
    """Resident bytes and CPU seconds of the processes of process group ``group`` now (the
    leader's CPU time counts its children that ended)."""
    rss, cpu = 0, 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[2]) != group:  # field 5 of stat, counted after the name
                continue
            with open(f"/proc/{entry.name}/statm") as fh:
                rss += int(fh.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        if int(entry.name) == group:
            ticks += int(fields[13]) + int(fields[14])  # children that ended
        cpu += ticks / CLOCK_TICKS
    return rss, cpu


def run_watched(
    python: str, code: str, path: Path, timeout: float, memory_limit: int | None
) -> dict[str, Any]:
    """``code`` on ``path`` in a fresh process under benchmarks/trace.py's runner, in its own
    process group, whose memory (the sum of its processes' resident memory) and CPU time are
    read every POLL_S seconds: the group is killed past ``timeout`` seconds or
    ``memory_limit`` bytes. A run that finished: the runner's figures. Else an ``error`` with
    the seconds, CPU seconds and peak bytes it had reached."""
    bench = load_script("trace")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    load_before = os.getloadavg()[0]
    peak, cpu, stopped = 0, 0.0, None
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        began = time.perf_counter()
        argv = [python, "-c", bench.RUNNER, str(path), code]
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, start_new_session=True)
        try:
            while proc.poll() is None:
                rss, cpu_now = _group_usage(proc.pid)
                peak, cpu = max(peak, rss), max(cpu, cpu_now)
                stopped = _stop_reason(time.perf_counter() - began, peak, timeout, memory_limit)
                if stopped is not None:
                    break
                time.sleep(POLL_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        elapsed = time.perf_counter() - began
        out.seek(0)
        err.seek(0)
        for line in out.read().splitlines():
            if line.startswith("RESULT ") and stopped is None:
                return {**json.loads(line[7:]), "watched_peak_bytes": peak}
        if stopped is None:
            stopped = _failure(proc.returncode, err.read())
    return {
        "error": stopped,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "peak_bytes": peak,
        "load_avg": [load_before, os.getloadavg()[0]],
    }


def _stop_reason(elapsed: float, peak: int, timeout: float, limit: int | None) -> str | None:
    if elapsed > timeout:
        return f"timed out after {timeout:.0f} s"
    if limit is not None and peak > limit:
        return f"stopped at the memory limit ({limit / 1e9:.3g} GB)"
    return None


def _failure(returncode: int, stderr: str) -> str:
    if returncode == -signal.SIGKILL:
        return "killed (SIGKILL: the system ran out of memory?)"
    last = (stderr.strip().splitlines() or [f"failed (exit status {returncode})"])[-1]
    return last[:300]


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


def _run(
    name: str, python: str, code: str, path: Path, timeout: float, limit: int | None = None
) -> dict[str, Any]:
    run = run_watched(python, code, path, timeout, limit)
    what = f"error: {run['error']} (reached " if "error" in run else ""
    print(
        f"  {name}: {what}{run['seconds']:.1f} s, {run['cpu_seconds']:.1f} CPU s, peak "
        f"{run['peak_bytes'] / 1e6:.0f} MB{')' if what else ''}, load {run['load_avg'][0]:.1f}",
        flush=True,
    )
    run["date"] = _now()
    return run


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _hta_runs(
    args: argparse.Namespace, n: int, path: Path, limit: int | None
) -> dict[str, dict[str, Any]]:
    """HTA's runs on one file, from a folder that holds it as rank 0 (HTA reads folders)."""
    with tempfile.TemporaryDirectory(prefix="hta-") as folder:
        os.symlink(path.resolve(), Path(folder, "rank-0.json.gz"))
        return {
            name: _run(name, args.hta_python, code, Path(folder), args.hta_timeout, limit)
            for name, code in HTA.items()
        }


def _ratios(perflab: dict[str, Any], hta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """perflab/HTA per pair of runs where perflab finished. Where HTA was stopped, the
    ratios are upper bounds ("bound": "at most"): its time and peak would only have grown."""
    ratios: dict[str, dict[str, Any]] = {}
    keys = ("seconds", "cpu_seconds", "peak_bytes")
    for command, name in PAIRS.items():
        mine, theirs = perflab.get(command, {}), hta.get(name, {})
        if not mine or "error" in mine or not all(theirs.get(k) for k in keys):
            continue
        ratio: dict[str, Any] = {key: round(mine[key] / theirs[key], 4) for key in keys}
        if "error" in theirs:
            ratio["bound"] = "at most (HTA was stopped: " + theirs["error"] + ")"
        ratios[f"{command} / {name}"] = ratio
    return ratios


def _hta_limit(text: str | None) -> int | None:
    """--hta-memory-limit in bytes (a number of GB), else 70% of the memory available now."""
    if text is not None:
        return int(float(text) * 1e9)
    from perflab.commands._common import available_memory

    available = available_memory()
    return None if available is None else int(available * 0.7)


def _merged(earlier: dict[str, Any], fresh: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``fresh`` (command -> size -> run) over the earlier file's runs, each earlier run
    dated with its file's date where it has no date of its own."""
    merged: dict[str, dict[str, Any]] = {}
    for command, by_size in earlier.get("runs", {}).items():
        merged[command] = {n: {"date": earlier.get("date"), **r} for n, r in by_size.items()}
    for command, by_size in fresh.items():
        merged.setdefault(command, {}).update(by_size)
    return merged


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
    ap.add_argument("--commands", default=",".join(COMMANDS), help="commands to run ('' none)")
    ap.add_argument("--keep", type=Path, default=None, help="folder for the generated files")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--hta-python", default=None, help="python of a virtualenv with HTA")
    ap.add_argument("--hta-timeout", type=float, default=600.0, help="seconds per HTA run")
    ap.add_argument("--hta-memory-limit", default=None, metavar="GB", help="per HTA run")
    ap.add_argument("--merge", action="store_true", help="keep the file's runs not repeated")
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
    commands = [c for c in args.commands.split(",") if c]
    limit = _hta_limit(args.hta_memory_limit) if args.hta_python else None
    earlier = json.loads(args.output.read_text()) if args.merge and args.output.exists() else {}
    bench = load_script("trace")
    bench.compile_bytecode()
    rows: dict[str, dict[int, dict[str, Any]]] = {c: {} for c in commands}
    hta: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        files = _files(sizes, folder)
        hta_failed = None
        for n, file in files.items():
            print(f"{n} events ({file['gzip_bytes'] / 1e6:.0f} MB gzip):", flush=True)
            for command in commands:
                code = COMMANDS[command]
                rows[command][n] = _run(command, sys.executable, code, file["path"], args.timeout)
            if args.hta_python and hta_failed is not None:
                hta[n] = {"skipped": f"HTA did not finish {hta_failed} events"}
            elif args.hta_python:
                runs = _hta_runs(args, n, file["path"], limit)
                mine = {c: rows[c][n] for c in commands}
                hta[n] = {"runs": runs, "perflab/hta": _ratios(mine, runs)}
                if any("error" in run for run in runs.values()):
                    hta_failed = n
            # written after each size, so that a long run cut short keeps what it measured
            _save(_document(args, bench, files, rows, hta, limit, earlier), args.output)
    doc = _document(args, bench, files, rows, hta, limit, earlier)
    print("\n".join(_goal_line(name, goal) for name, goal in doc["goals"].items()))
    _save(doc, args.output)
    print(f"wrote {args.output}")
    return 0


def _save(doc: dict[str, Any], output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(doc, indent=1) + "\n")


def _document(
    args: argparse.Namespace,
    bench: Any,
    files: dict[int, dict[str, Any]],
    rows: dict[str, dict[int, dict[str, Any]]],
    hta: dict[int, dict[str, Any]],
    limit: int | None,
    earlier: dict[str, Any],
) -> dict[str, Any]:
    """The results file: this invocation's runs, over ``earlier`` (the file as it was
    before this invocation, with --merge; else empty)."""
    runs = _merged(
        earlier, {c: {str(n): r for n, r in by_size.items()} for c, by_size in rows.items()}
    )
    sizes = {
        str(n): {"events": f["events"], "gzip_bytes": f["gzip_bytes"]} for n, f in files.items()
    }
    all_files = {**earlier.get("files", {}), **sizes}
    events = {int(n): int(f["events"]) for n, f in all_files.items()}
    # goals compare runs with each other: only this invocation's, which ran on the same code
    # and in the same spell of the machine's load (the earlier file's goals are kept beside)
    fresh = {c: by_size for c, by_size in rows.items() if by_size}
    doc: dict[str, Any] = {
        "benchmark": "big_traces",
        "note": "one run per command and size (a whole process each: seconds from interpreter "
        "start to result, CPU seconds with children, peak memory = peak RSS plus the largest "
        "child's); load_avg: the 1-minute load average when the run started and ended, on a "
        "machine shared with other work; date: when each run was measured. No GPU "
        "(generated traces). HTA: see hta.note.",
        "date": _now(),
        "machine": bench.machine(),
        # HTA's versions stay with the HTA runs kept from an earlier file
        "versions": {**earlier.get("versions", {}), **bench.versions(args.hta_python)},
        "goals": _goals(fresh, events),
        "files": all_files,
        "runs": runs,
    }
    if hta or "hta" in earlier:
        sized = {**earlier.get("hta", {}).get("sizes", {}), **{str(n): h for n, h in hta.items()}}
        doc["hta"] = {
            "note": HTA_NOTE,
            "timeout_s": args.hta_timeout,
            "memory_limit_bytes": limit,
            "sizes": sized,
        }
        if not hta:  # kept from the earlier file, with its own settings
            doc["hta"] = earlier["hta"]
    if args.baseline is not None:
        base = json.loads(args.baseline.read_text())
        keep = ("date", "machine", "goals", "runs")
        doc["baseline"] = {"commit": args.baseline_commit, **{k: base[k] for k in keep}}
    elif "baseline" in earlier:
        doc["baseline"] = earlier["baseline"]
    if earlier.get("goals"):
        doc["earlier_goals"] = {"date": earlier.get("date"), "goals": earlier["goals"]}
    return doc


if __name__ == "__main__":
    sys.exit(main())
