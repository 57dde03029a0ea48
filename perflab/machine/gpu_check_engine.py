"""gpu-check's timing-engine section: the engine on real kernels (a matmul cold and warm, a
tiny kernel with and without the queue filler, the tiny kernel as a graph of 100 calls, a
256 MiB copy), checks of what each result must carry, and on a GPU the engine against
``triton.testing.do_bench`` (:mod:`perflab.machine.gpu_check_do_bench`). On the CPU the
queue logic runs on the host worker-thread queue instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

from perflab.machine.gpu_check_run import CheckDoc, CheckFailed, check, failed_checks, positive

if TYPE_CHECKING:
    from perflab.model.timing import TimingResult

MATMUL_N = 4096  # on a GPU; 256 on the CPU
ENGINE_BUDGET_MS = 150


class WorkloadOptions(TypedDict, total=False):
    """The options of ``time_function`` that the workloads set."""

    flush_l2: bool
    fill_queue: bool
    graph: bool
    number: int


Workload = tuple[str, Callable[[], object], WorkloadOptions]


class RunSummary(TypedDict):
    """One timing run as the report keeps it (microseconds, and the engine's notes)."""

    median_us: float
    ci95_us: list[float]
    n: int
    number: int
    stop_reason: str
    empty_window_ns: float | None
    tick_ns: float | None
    host_ns_median: float | None
    host_bound_samples: object
    host_bound_undecided: object
    queue_filler_ns: object
    cold: object
    warmup_calls: object
    throttle: dict[str, object]
    warnings: list[str]


def _workloads(backend: str) -> list[Workload]:
    """(label, fn, bench options) on real work: a matmul cold and warm, a tiny kernel
    with and without the queue filler, and the tiny kernel as a graph of 100 calls."""
    import torch

    device = "cuda" if backend == "cuda" else "cpu"
    n = MATMUL_N if backend == "cuda" else 256
    dtype = torch.bfloat16 if backend == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    small = torch.randn(1024, device=device)
    work: list[Workload] = [
        ("matmul_flush", lambda: torch.matmul(a, a, out=out), {"flush_l2": True}),
        ("matmul_warm", lambda: torch.matmul(a, a, out=out), {"flush_l2": False}),
        ("small_add_stream", lambda: small.add_(1.0), {"flush_l2": False}),
        ("small_add_no_filler", lambda: small.add_(1.0), {"flush_l2": False, "fill_queue": False}),
    ]
    if backend == "cuda":
        graph: WorkloadOptions = {"flush_l2": False, "graph": True, "number": 100}
        work.append(("small_add_graph", lambda: small.add_(1.0), graph))
        src = torch.ones(64 << 20, device=device)  # 256 MiB: past the L2
        dst = torch.empty_like(src)
        work.append(("copy_256MiB_flush", lambda: dst.copy_(src), {"flush_l2": True}))
    return work


# (label in the timing engine's runs) timed by triton.testing.do_bench too: both flush the L2
AGAINST_DO_BENCH = ("matmul_flush", "copy_256MiB_flush")


def _summary(r: TimingResult) -> RunSummary:
    lo, hi = r.ci95_ns
    return {
        "median_us": r.median_ns / 1e3,
        "ci95_us": [lo / 1e3, hi / 1e3],
        "n": r.n,
        "number": r.number,
        "stop_reason": r.stop_reason,
        "empty_window_ns": r.empty_window_ns,  # what the timer reads for a sample of nothing
        "tick_ns": r.tick_ns,  # the step its readings come in
        "host_ns_median": None if r.host_ns is None else float(sorted(r.host_ns)[r.n // 2]),
        "host_bound_samples": r.options["host_bound_samples"],
        "host_bound_undecided": r.options.get("host_bound_undecided"),
        "queue_filler_ns": r.options["queue_filler_ns"],
        "cold": r.options["cold"],
        "warmup_calls": r.options["warmup_calls"],
        "throttle": {k: v for k, v in r.throttle.items() if k != "drop"},
        "warnings": r.warnings,
    }


def timing_engine(backend: str) -> dict[str, object]:
    """The timing engine on real kernels, with checks of what the review found."""
    from perflab.capture.timer import time_function

    work = _workloads(backend)
    rows = {
        label: _summary(
            time_function(fn, name=label, backend=backend, budget_ms=ENGINE_BUDGET_MS, **kw)
        )
        for label, fn, kw in work
    }
    checks = _engine_checks(rows, backend)
    if backend != "cuda":
        checks.update(_host_queue_checks())
    result: dict[str, object] = {"runs": rows, "checks": checks}
    if backend == "cuda":
        flush = rows["matmul_flush"]
        result["matmul_tflops"] = 2 * MATMUL_N**3 / flush["median_us"] / 1e6
        result["do_bench"] = _against_do_bench(work, checks)
    bad = failed_checks(checks)
    if bad:
        raise CheckFailed(f"timing engine checks failed: {', '.join(bad)}", result)
    return result


def _against_do_bench(work: list[Workload], checks: dict[str, CheckDoc]) -> dict[str, object]:
    """The chosen kernels against do_bench in interleaved pairs; one check per kernel."""
    from perflab.machine.gpu_check_do_bench import compare_on_gpu

    chosen: dict[str, tuple[Callable[[], object], dict[str, Any]]] = {
        label: (fn, {"budget_ms": ENGINE_BUDGET_MS, **kw})
        for label, fn, kw in work
        if label in AGAINST_DO_BENCH
    }
    found = compare_on_gpu(chosen)
    for label, row in found.items():
        checks[f"{label}: agrees with do_bench (interleaved pairs, clock-corrected)"] = check(
            row["passed"], row["detail"]
        )
    return dict(found)


def _engine_checks(rows: dict[str, RunSummary], backend: str) -> dict[str, CheckDoc]:
    every = rows.values()
    checks = {
        "stop_reason and host_ns on every result": check(
            all(r["stop_reason"] and r["host_ns_median"] is not None for r in every),
            str({k: r["stop_reason"] for k, r in rows.items()}),
        ),
        "empty window and tick on every result": check(
            all(positive(r["empty_window_ns"]) and positive(r["tick_ns"]) for r in every),
            str({k: (r["empty_window_ns"], r["tick_ns"]) for k, r in rows.items()}),
        ),
        "throttle field says checked, or why not": check(
            all(r["throttle"].get("checked") or r["throttle"].get("why") for r in every),
            str(rows["matmul_warm"]["throttle"]),
        ),
        "flush makes every call cold (one call per sample)": check(
            rows["matmul_flush"]["cold"] == "every call", str(rows["matmul_flush"]["cold"])
        ),
    }
    if backend == "cuda":
        checks.update(_queue_checks(rows))
    return checks


def _queue_checks(rows: dict[str, RunSummary]) -> dict[str, CheckDoc]:
    """On a GPU: the filler keeps a tiny kernel's samples off the host's pace, its absence
    is flagged, and a graph's warm-up is counted per call."""
    stream, bare = rows["small_add_stream"], rows["small_add_no_filler"]
    graph = rows["small_add_graph"]
    # 25 ms of warm-up at the measured per-call time, not 100x that
    warm_ms = _number(graph["warmup_calls"]) * graph["median_us"] / 1e3
    return {
        "tiny kernel with the filler: at most 10% samples host-bound": check(
            _number(stream["host_bound_samples"]) <= 0.1 * stream["n"],
            f"{stream['host_bound_samples']} of {stream['n']}, "
            f"filler {stream['queue_filler_ns']:.0f} ns",
        ),
        "tiny kernel without the filler: flagged host-bound": check(
            _number(bare["host_bound_samples"]) > 0, f"{bare['host_bound_samples']} of {bare['n']}"
        ),
        "graph warm-up counted per call (about 25 ms)": check(
            warm_ms < 100, f"{graph['warmup_calls']} calls ~ {warm_ms:.1f} ms"
        ),
    }


def _number(value: object) -> float:
    """A count or time the engine put in a result's options."""
    if not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    return value


def _host_queue_checks() -> dict[str, CheckDoc]:
    """The queue logic (filler sizing, the engine's host-bound flags, on the device's
    evidence) on the host worker-thread queue: what the GPU path does, run for real
    without a GPU."""
    from perflab.capture.timer import HostQueueClock, TimingOptions, measure

    clock = HostQueueClock()
    try:

        def late_call() -> None:  # the host sleeps 2 ms before enqueueing 0.5 ms of work
            time.sleep(0.002)
            clock.submit(lambda: time.sleep(0.0005))

        opts = TimingOptions(budget_ms=40, warmup_ms=1)
        filled = measure(clock, late_call, opts)
        bare = measure(clock, late_call, TimingOptions(budget_ms=20, warmup_ms=1, fill_queue=False))
    finally:
        clock.close()
    flags = [int(r.idle.flagged.sum()) if r.idle is not None else 0 for r in (filled, bare)]
    n = [len(r.samples.window_ns) for r in (filled, bare)]
    return {
        "host queue: a filler keeps the queue full": check(
            flags[0] <= n[0] // 4, f"{flags[0]} of {n[0]} flagged, filler {filled.lead_ns:.0f} ns"
        ),
        # flagged on the device's evidence, which a sample can lack (one in ten, now and
        # then, on a busy 2-core host): most, not all
        "host queue: without a filler the host sleep is flagged": check(
            flags[1] >= 3 * n[1] / 4, f"{flags[1]} of {n[1]} flagged"
        ),
    }
