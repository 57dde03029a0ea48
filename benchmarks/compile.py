"""Cold ``%%ptx`` compile against running nvcc + nvdisasm by hand on the same source, and a
warm (cached) redisplay. Prints ratios and writes benchmarks/results/compile.json.

Run: .venv/bin/python benchmarks/compile.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

SOURCE = (Path(__file__).resolve().parents[1] / "tests" / "data" / "ptx" / "kernels.cu").read_text()
RESULTS = Path(__file__).resolve().parent / "results" / "compile.json"


def raw_tools() -> float:
    """What a user would type: nvcc to a cubin with line info, then nvdisasm."""
    from perflab.capture.toolchain import require_tool

    nvcc, nvdisasm = require_tool("nvcc"), require_tool("nvdisasm")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "k.cu").write_text(SOURCE)
        start = time.perf_counter()
        subprocess.run(
            [
                str(nvcc.path),
                "-cubin",
                "-lineinfo",
                "-arch=sm_90a",
                "-Xptxas",
                "-v",
                "k.cu",
                "-o",
                "k.cubin",
            ],
            cwd=tmp,
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [str(nvdisasm.path), "-g", "-gi", "k.cubin"], cwd=tmp, check=True, capture_output=True
        )
        return time.perf_counter() - start


def perflab_cold() -> float:
    from perflab.capture.compile import compile_cuda
    from perflab.render.ptx_view import compile_bundle

    start = time.perf_counter()
    compile_bundle(compile_cuda(SOURCE, cache=False))
    return time.perf_counter() - start


def perflab_warm() -> float:
    from perflab.capture.compile import compile_cuda
    from perflab.render.ptx_view import compile_bundle

    compile_bundle(compile_cuda(SOURCE))  # fill the cache
    start = time.perf_counter()
    compile_bundle(compile_cuda(SOURCE))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PERFLAB_CACHE_DIR"] = cache
        perflab_cold()  # imports and first-use costs out of the way
        rows = {"raw nvcc + nvdisasm": [], "%%ptx cold": [], "%%ptx warm (cached)": []}
        for _ in range(args.repeat):  # interleaved, so drift hits all three alike
            rows["raw nvcc + nvdisasm"].append(raw_tools())
            rows["%%ptx cold"].append(perflab_cold())
            rows["%%ptx warm (cached)"].append(perflab_warm())
    med = {k: statistics.median(v) for k, v in rows.items()}
    raw = med["raw nvcc + nvdisasm"]
    for name, value in med.items():
        print(f"{name:22s} {value * 1e3:9.1f} ms  {value / raw:5.2f}x raw")
    from perflab.capture.env import versions
    from perflab.capture.toolchain import describe

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "compile",
                "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "machine": {
                    "cpu": platform.processor() or platform.machine(),
                    "cores": os.cpu_count(),
                    "python": platform.python_version(),
                },
                "versions": versions(),
                "tools": {k: (v or {}).get("version") for k, v in describe().items()},
                "repeat": args.repeat,
                "median_s": med,
                "ratio_to_raw": {k: v / raw for k, v in med.items()},
                "samples_s": rows,
            },
            indent=1,
        )
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
