"""perflab's timer against timeit and torch.utils.benchmark.Timer, in one run.

Two questions, on the same workloads and in the same process:

* overhead: what does each tool report for a call that does nothing, timed one call
  per sample? That is the cost the timer adds to every sample (goal: <= 1 us).
* spread: how repeatable the number each tool reports is: each tool is run REPEATS
  times on the same workload and we take the relative standard deviation of its
  reported medians (goal: no worse than timeit). The within-run relative IQR is
  reported too, but it is not comparable across tools: timeit's 5 samples each
  average ~0.2 s of calls, perflab's samples are single short batches.

timeit runs as ``python -m timeit`` does (autorange, then 5 repeats);
torch.utils.benchmark.Timer with ``blocked_autorange``; perflab with its default
budgets. On a GPU, ``triton.testing.do_bench`` is added for the GPU workloads.

    python benchmarks/timer.py
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import perflab
from perflab.capture.env import cuda_available, current_device_name, versions

OUT = Path(__file__).parent / "results" / "timer.json"
REPEATS = 5
WORKLOADS: dict[str, tuple[str, str]] = {
    "sorted-1k": ("import random; x = [random.random() for _ in range(1000)]", "sorted(x)"),
    "numpy-sum-1M": ("import numpy as np; a = np.ones(1_000_000)", "a.sum()"),
    "torch-matmul-256": ("import torch; a = torch.randn(256, 256)", "a @ a"),
}
GPU_WORKLOADS: dict[str, tuple[str, str]] = {
    "cuda-matmul-4096": ("import torch; a = torch.randn(4096, 4096, device='cuda')", "a @ a"),
}


def _rel_iqr(samples: np.ndarray) -> float:
    q1, q3 = np.percentile(samples, [25, 75])
    return float((q3 - q1) / np.median(samples))


def _summary(samples_ns: np.ndarray, wall_s: float) -> dict[str, Any]:
    return {
        "median_ns": float(np.median(samples_ns)),
        "rel_iqr": _rel_iqr(samples_ns),
        "n": int(samples_ns.size),
        "wall_s": wall_s,
    }


def _fn(setup: str, stmt: str) -> Callable[[], object]:
    ns: dict[str, Any] = {}
    exec(setup, ns)
    return eval(f"lambda: {stmt}", ns)  # a plain call, like timeit's inner loop


def with_perflab(setup: str, stmt: str, **kw: Any) -> dict[str, Any]:
    fn = _fn(setup, stmt)
    t0 = time.perf_counter()
    r = perflab.bench(fn, **kw)
    return _summary(r.samples_ns, time.perf_counter() - t0)


def with_timeit(setup: str, stmt: str, number: int | None = None) -> dict[str, Any]:
    timer = timeit.Timer(stmt, setup=setup)
    t0 = time.perf_counter()
    if number is None:
        number, _ = timer.autorange()
    samples = np.array(timer.repeat(repeat=5 if number > 1 else 1000, number=number))
    return _summary(samples / number * 1e9, time.perf_counter() - t0)


def with_torch_timer(setup: str, stmt: str) -> dict[str, Any]:
    from torch.utils.benchmark import Timer

    t0 = time.perf_counter()
    m = Timer(stmt=stmt, setup=setup).blocked_autorange(min_run_time=0.2)
    return _summary(np.array(m.times) * 1e9, time.perf_counter() - t0)


def with_do_bench(setup: str, stmt: str) -> dict[str, Any]:
    from triton.testing import do_bench

    fn = _fn(setup, stmt)
    t0 = time.perf_counter()
    times_ms = np.array(do_bench(fn, return_mode="all"))
    return _summary(times_ms * 1e6, time.perf_counter() - t0)


def repeated(run: Callable[[str, str], dict[str, Any]], setup: str, stmt: str) -> dict[str, Any]:
    """Run one tool REPEATS times; keep the last run's details and the spread of medians."""
    runs = [run(setup, stmt) for _ in range(REPEATS)]
    medians = np.array([r["median_ns"] for r in runs])
    return {
        **runs[-1],
        "median_ns": float(np.median(medians)),
        "repeat_rel_std": float(medians.std() / medians.mean()),
        "wall_s": float(np.mean([r["wall_s"] for r in runs])),
    }


def overhead() -> dict[str, Any]:
    """Each tool timing a call that does nothing, one call per sample."""
    return {
        "perflab": with_perflab("", "None", number=1, backend="cpu", budget_ms=50)["median_ns"],
        "timeit": with_timeit("", "None", number=1)["median_ns"],
    }


def main() -> None:
    rows: list[dict[str, Any]] = []
    ov = overhead()
    print(
        f"per-sample overhead (no-op, 1 call/sample): perflab {ov['perflab']:.0f} ns, "
        f"timeit {ov['timeit']:.0f} ns"
    )
    print(
        f"{'workload':18s} {'tool':8s} {'median':>11s} {'rep.std%':>9s} {'IQR%':>7s} "
        f"{'n':>6s} {'wall s':>7s}"
    )
    gpu = cuda_available()
    for name, (setup, stmt) in {**WORKLOADS, **(GPU_WORKLOADS if gpu else {})}.items():
        runners: dict[str, Callable[[str, str], dict[str, Any]]] = {"perflab": with_perflab}
        runners["do_bench" if name in GPU_WORKLOADS else "timeit"] = (
            with_do_bench if name in GPU_WORKLOADS else with_timeit
        )
        runners["torch"] = with_torch_timer
        tools = {tool: repeated(run, setup, stmt) for tool, run in runners.items()}
        for tool, s in tools.items():
            print(
                f"{name:18s} {tool:8s} {s['median_ns'] / 1e3:9.2f}us "
                f"{100 * s['repeat_rel_std']:8.2f}% {100 * s['rel_iqr']:6.1f}% "
                f"{s['n']:6d} {s['wall_s']:7.2f}"
            )
        base = tools.get("timeit") or tools["do_bench"]
        rows.append(
            {
                "workload": name,
                **tools,
                "repeatability_ratio_perflab_over_baseline": tools["perflab"]["repeat_rel_std"]
                / max(base["repeat_rel_std"], 1e-12),
                "wall_ratio_perflab_over_baseline": tools["perflab"]["wall_s"] / base["wall_s"],
            }
        )
    doc = {
        "benchmark": "timer",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"device": current_device_name(), "platform": platform.platform()},
        "versions": versions(),
        "gpu": gpu,
        "note": "" if gpu else "no GPU: CPU workloads only, timed with the host clock",
        "overhead_ns": ov,
        "rows": rows,
    }
    OUT.write_text(json.dumps(doc, indent=1))
    print(f"written: {OUT}")


if __name__ == "__main__":
    main()
