"""Trace diff: ``perflab trace diff`` against Holistic Trace Analysis's ``TraceDiff`` on the
same pair of traces, in the same run.

Input: HTA's own trace_diff test pair (tests/data/trace_diff, a control and a test trace of
six ProfilerSteps each, about 100k events apiece). Contenders, each in a fresh subprocess
(wall time from interpreter start to result, imports included, as benchmarks/trace.py
measures; that script's runner, bytecode compilation, machine and version records are used
here):

- ``perflab --step``: load both traces and compare one step, ``diff_traces(c, t,
  step=STEP)``: the work HTA does;
- ``perflab``: load both and compare the whole traces with per-step statistics and
  verdicts (the default of ``perflab trace diff``), for information;
- ``hta``: ``LabeledTrace`` of each (HTA's load) and ``TraceDiff.compare_traces`` of the same
  step, GPU kernels, run by the Python given with ``--hta-python`` (HTA pins its own
  dependencies: ``python -m venv V && V/bin/pip install HolisticTraceAnalysis``). Without it
  the benchmark skips HTA and says so.

The contenders take turns ``--repeat`` times and the median run is kept; the ratio is HTA's
median time over ``perflab --step``'s. Results go to benchmarks/results/trace_diff.json.

``--reference`` writes, instead, the reference the test suite holds perflab to:
tests/data/trace_diff/hta_step1010.json, HTA's GPU rows for the step (name, counts and
total durations on each side), with the command, HTA's version and the date.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "trace_diff"
RESULTS = ROOT / "benchmarks" / "results" / "trace_diff.json"
REFERENCE = DATA / "hta_step1010.json"
STEP = 1010

PERFLAB_STEP = f"""
import os
from perflab.io import load_trace
from perflab.analysis.trace_diff import diff_traces
control = load_trace(os.path.join(PATH, "control", "control.json.gz"), progress=False)
test = load_trace(os.path.join(PATH, "test", "test.json.gz"), progress=False)
rows = diff_traces(control, test, step={STEP}).kernels
result = {{"gpu_rows": len(rows)}}
"""
PERFLAB_WHOLE = PERFLAB_STEP.replace(f", step={STEP}", "")
HTA = f"""
import os
from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff
control = LabeledTrace(label="control", trace_dir=os.path.join(PATH, "control"))
test = LabeledTrace(label="test", trace_dir=os.path.join(PATH, "test"))
df = TraceDiff.compare_traces(
    control, test, control_iteration={STEP}, test_iteration={STEP}, device_type=DeviceType.GPU
)
result = {{"gpu_rows": int(len(df))}}
"""
# HTA's GPU rows of the step as JSON on stdout (the --reference mode)
HTA_ROWS = (
    HTA.replace('result = {"gpu_rows": int(len(df))}', "")
    + """
import json, sys
rows = [
    {
        "name": str(name),
        "control_count": int(r["control_counts"]),
        "test_count": int(r["test_counts"]),
        "control_us": float(r["control_total_duration"]),
        "test_us": float(r["test_total_duration"]),
    }
    for name, r in df.iterrows()
]
result = {"rows": rows}
"""
)
CONTENDERS = {"perflab --step": PERFLAB_STEP, "perflab": PERFLAB_WHOLE, "hta": HTA}


def lay_out(folder: Path) -> Path:
    """The pair as HTA reads it: one directory per trace."""
    for side in ("control", "test"):
        (folder / side).mkdir()
        shutil.copy(DATA / f"{side}.json.gz", folder / side / f"{side}.json.gz")
    return folder


def run(python: str, code: str, path: Path, timeout: float) -> dict[str, Any]:
    """One contender in a fresh process, timed by benchmarks/trace.py's runner."""
    return dict(load_script("trace").run_code(python, code, path, timeout))


def hta_usable(python: str | None) -> str:
    """Why HTA cannot run ('' when it can)."""
    if not python:
        return "no --hta-python (or HTA_PYTHON) given"
    try:
        probe = subprocess.run(
            [python, "-c", "import hta.trace_diff"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python} cannot run: {exc}"
    if probe.returncode != 0:
        return f"{python} cannot import hta.trace_diff (HolisticTraceAnalysis not installed)"
    return ""


def write_reference(python: str, folder: Path, timeout: float) -> int:
    out = run(python, HTA_ROWS, folder, timeout)
    if "error" in out:
        print(f"HTA failed: {out['error']}", file=sys.stderr)
        return 1
    versions = load_script("trace").versions(python)
    doc = {
        "what": f"HTA TraceDiff.compare_traces of ProfilerStep#{STEP} of control.json.gz "
        f"and test.json.gz, device_type=GPU, use_short_name=False: per GPU name, the count "
        "and total duration (us) on each side",
        "made_by": "python benchmarks/trace_diff.py --reference --hta-python V/bin/python "
        "(V: a virtualenv with HolisticTraceAnalysis)",
        "hta_version": versions.get("HolisticTraceAnalysis"),
        "pandas_version": versions.get("pandas (hta venv)"),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "step": STEP,
        "columns": list(REFERENCE_COLUMNS),
    }
    rows = sorted(out["result"]["rows"], key=lambda r: r["name"])
    REFERENCE.write_text(_one_row_a_line(doc, [[r[c] for c in REFERENCE_COLUMNS] for r in rows]))
    print(f"wrote {REFERENCE} ({len(rows)} rows)")
    return 0


REFERENCE_COLUMNS = ("name", "control_count", "test_count", "control_us", "test_us")


def _one_row_a_line(doc: dict[str, Any], rows: list[list[Any]]) -> str:
    head = json.dumps(doc, indent=1)[:-2]
    body = ",\n".join("  " + json.dumps(r) for r in rows)
    return f'{head},\n "rows": [\n{body}\n ]\n}}\n'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--hta-python",
        default=os.environ.get("HTA_PYTHON"),
        help="python of a virtualenv with HolisticTraceAnalysis",
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs per contender")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    ap.add_argument("--output", type=Path, default=RESULTS)
    ap.add_argument("--reference", action="store_true", help=f"write {REFERENCE.name} only")
    args = ap.parse_args()

    trace = load_script("trace")
    why_not = hta_usable(args.hta_python)
    with tempfile.TemporaryDirectory() as tmp:
        folder = lay_out(Path(tmp))
        if args.reference:
            if why_not:
                print(f"cannot write the reference: {why_not}", file=sys.stderr)
                return 1
            return write_reference(args.hta_python, folder, args.timeout)
        if why_not:
            print(f"HTA skipped: {why_not}")
        trace.compile_bytecode()
        names = [n for n in CONTENDERS if n != "hta" or not why_not]
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
        for _ in range(args.repeat):  # round-robin: slow spells hit every contender alike
            for name in names:
                python = args.hta_python if name == "hta" else sys.executable
                runs[name].append(run(python, CONTENDERS[name], folder, args.timeout))
    row = {name: trace.median_run(runs[name]) for name in names}
    ratio = _ratio(row)
    for name in names:
        seconds = row[name].get("seconds")
        shown = f"{seconds:.2f} s" if isinstance(seconds, float) else row[name].get("error")
        print(f"{name:16} {shown}")
    print(f"HTA / perflab --step: {ratio:.1f}x" if ratio else "HTA / perflab --step: not run")
    doc = {
        "benchmark": "trace_diff",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": trace.machine(),
        "versions": trace.versions(None if why_not else args.hta_python),
        "input": "tests/data/trace_diff control.json.gz and test.json.gz (HTA's test pair)",
        "step": STEP,
        "repeat": args.repeat,
        "note": "seconds from interpreter start to result (imports, loading both traces and "
        "the comparison) of a fresh process per run, median of the runs, the contenders "
        "taking turns; hta_over_perflab: HTA's median over 'perflab --step''s (the same "
        "work: one step's GPU rows)",
        "hta_skipped": why_not or None,
        "hta_over_perflab": round(ratio, 2) if ratio else None,
        "rows": row,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


def _ratio(row: dict[str, dict[str, Any]]) -> float | None:
    mine, hta = row.get("perflab --step", {}), row.get("hta", {})
    if "seconds" not in mine or "seconds" not in hta:
        return None
    return float(hta["seconds"]) / float(mine["seconds"])


if __name__ == "__main__":
    sys.exit(main())
