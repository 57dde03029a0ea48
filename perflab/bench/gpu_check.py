"""The GPU section of the GPU check: run the microbenchmarks on CUDA in a few minutes and
return one JSON-able document (device, driver, versions, every result, a short summary).

Runs from the source tree (``PYTHONPATH=.``) with torch, cupy and numpy only: no render
code, no progress bars, no nvtx. Each benchmark runs on its own, so one failure is
recorded under ``errors`` and the others still run::

    PYTHONPATH=. python -m perflab.bench.gpu_check --out gpu-bench.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from perflab.capture import env
from perflab.capture.toolchain import tool_output
from perflab.errors import NoGPUError
from perflab.model.timing import now_iso

SMI_TIMEOUT_S = 30


def _driver_version() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    out = tool_output([smi, "--query-gpu=driver_version", "--format=csv,noheader"], SMI_TIMEOUT_S)
    if out is None:
        return None
    lines = out.strip().splitlines()
    return lines[0].strip() if lines else None


def _cuda_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        import torch

        found["torch_cuda"] = str(torch.version.cuda)
    except ImportError:
        pass
    try:
        import cupy

        found["cuda_runtime"] = str(cupy.cuda.runtime.runtimeGetVersion())
        found["cuda_driver_api"] = str(cupy.cuda.runtime.driverGetVersion())
    except Exception:  # cupy missing or unable to reach the driver
        found["cuda_runtime"] = "unavailable"
    return found


def _sections(quick: bool) -> dict[str, Callable[[], Any]]:
    from perflab.bench import bandwidth, h2d, latency, launch, matmul

    top = (512 << 20) if quick else None  # past the L2 into HBM, in seconds not minutes
    return {
        "bandwidth": lambda: bandwidth.run(backend="cuda", quick=quick, show_progress=False),
        "latency": lambda: latency.run(
            backend="cuda", per_octave=2, max_bytes=top, show_progress=False
        ),
        "launch": lambda: launch.run(backend="cuda", quick=quick, show_progress=False),
        "matmul": lambda: matmul.run(backend="cuda", quick=quick, show_progress=False),
        "h2d": lambda: h2d.run(backend="cuda", quick=quick, show_progress=False),
    }


def _collectives(quick: bool) -> Any:
    import torch

    from perflab.analysis.collectives import OPS
    from perflab.bench import collectives

    sizes = [1 << 10, 1 << 20, 64 << 20] + ([] if quick else [1 << 30])
    return collectives.run(
        backend="nccl",
        world_size=torch.cuda.device_count(),
        ops=OPS,
        sizes=sizes,
        show_progress=False,
    )


def _summary(results: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers: plateaus, launch costs, best GFLOP/s, copy peaks."""
    from perflab.bench import launch
    from perflab.bench.ceilings import bandwidth_by_level, flops_by_dtype

    out: dict[str, Any] = {}
    if "bandwidth" in results:
        out["bandwidth_GBps"] = {
            s.name: {lv.name: lv.value for lv in s.levels} for s in results["bandwidth"].series
        }
        out["ceilings_bandwidth_GBps"] = bandwidth_by_level(results["bandwidth"], True)
    if "latency" in results:
        chase = results["latency"].series[0]
        out["latency_levels"] = chase.level_rows()
        out["latency_cycles"] = {
            lv.name: _cycles_at(chase, lv.x_min, lv.x_max) for lv in chase.levels
        }
    if "launch" in results:
        out["launch_us_per_kernel"] = launch.steady_us(results["launch"])
    if "matmul" in results:
        out["matmul_best_GFLOPs"] = flops_by_dtype(results["matmul"])
        out["matmul_fraction_of_spec_peak"] = results["matmul"].options.get("fraction_of_peak")
    if "h2d" in results:
        out["h2d_peak_GBps"] = {s.name: float(s.y.max()) for s in results["h2d"].series}
    if "collectives" in results:
        out["collectives_peak_busbw_GBps"] = {
            op: max(r.busbw_GBps for r in results["collectives"].rows if r.op == op)
            for op in {r.op for r in results["collectives"].rows}
        }
    return out


def _cycles_at(series: Any, lo: float, hi: float) -> float | None:
    import numpy as np

    cycles = series.extra.get("cycles")
    if cycles is None:
        return None
    mask = (series.x >= lo) & (series.x <= hi)
    return float(np.median(cycles[mask])) if mask.any() else None


def run_gpu_benchmarks(quick: bool = True) -> dict[str, Any]:
    """Bandwidth, latency, launch, matmul and h2d on CUDA (and collectives over NCCL when
    there is more than one GPU); about three minutes with ``quick``.

    Returns ``{"device", "devices", "driver", "versions", "created", "quick", "results",
    "summary", "errors", "seconds"}``; ``results[name]`` is the benchmark's ``to_dict()``.
    Raises :class:`perflab.errors.NoGPUError` when there is no GPU.
    """
    if not env.cuda_available():
        raise NoGPUError("the GPU benchmarks need a CUDA GPU (no GPU here)")
    started = time.monotonic()
    sections = _sections(quick)
    gpus = env.gpu_devices()
    if len(gpus) > 1:
        sections["collectives"] = lambda: _collectives(quick)
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name, section in sections.items():
        t0 = time.monotonic()
        try:
            results[name] = section()
        except Exception as exc:  # one broken benchmark must not hide the others
            errors[name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
        seconds[name] = round(time.monotonic() - t0, 2)
    return {
        "device": env.current_device_name(),
        "devices": gpus,
        "driver": _driver_version(),
        "versions": {**env.versions(), **_cuda_versions()},
        "created": now_iso(),
        "quick": quick,
        "results": {name: r.to_dict() for name, r in results.items()},
        "summary": _summary(results),
        "errors": errors,
        "seconds": {**seconds, "total": round(time.monotonic() - started, 2)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="perflab GPU microbenchmarks")
    parser.add_argument("--out", help="write the JSON document here (default: stdout)")
    parser.add_argument("--full", action="store_true", help="full sweeps (slower)")
    args = parser.parse_args(argv)
    try:
        doc = run_gpu_benchmarks(quick=not args.full)
    except NoGPUError as exc:
        print(f"perflab: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(doc, indent=1, allow_nan=False, default=str)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)
    return 1 if doc["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
