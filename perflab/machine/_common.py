"""What the microbenchmarks share: size sweeps, progress bars, the backend, timing a call."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from perflab.analysis.plateaus import detect_plateaus, name_levels
from perflab.capture import env
from perflab.errors import InputError
from perflab.model.machine import BenchResult, Level, Series

T = TypeVar("T")
TIME_UNITS = frozenset({"ns", "us", "ms", "s"})


def size_sweep(lo: int, hi: int, per_octave: int = 2) -> list[int]:
    """Sizes from ``lo`` to ``hi`` bytes, ``per_octave`` points per doubling, 64-byte aligned."""
    if lo < 1 or hi < lo:
        raise InputError(f"size range must satisfy 1 <= low <= high, got {lo}..{hi}")
    if per_octave < 1:
        raise InputError(f"points per octave must be at least 1, not {per_octave}")
    steps = math.floor(math.log2(hi / lo) * per_octave + 1e-9)
    sizes = {max(64, int(lo * 2 ** (i / per_octave)) // 64 * 64) for i in range(steps + 1)}
    return sorted(sizes)


def progress(items: Iterable[T], desc: str, enabled: bool | None = None) -> Iterator[T]:
    """A progress bar on stderr; on by default only when stderr is a terminal."""
    show = sys.stderr.isatty() if enabled is None else enabled
    if not show:
        yield from items
        return
    from tqdm import tqdm  # type: ignore[import-untyped]

    # the CLI's stderr escapes control characters; the bar's redrawing "\r" must act
    terminal = getattr(sys.stderr, "unescaped", sys.stderr)
    bar = tqdm(items, desc=desc, file=terminal, leave=False, unit="pt")
    try:
        yield from bar
    finally:
        bar.close()


def resolve_backend(backend: str) -> str:
    """``"auto"`` -> ``"cuda"`` or ``"cpu"``; ``"cuda"`` without a GPU is an error."""
    if backend not in ("auto", "cpu", "cuda"):
        raise InputError(f"backend must be auto, cpu or cuda, not {backend!r}")
    if backend == "auto":
        return env.default_backend()
    if backend == "cuda":
        env.require_gpu("backend 'cuda'")
    return backend


def new_result(benchmark: str, backend: str, options: dict[str, object]) -> BenchResult:
    return BenchResult(
        benchmark=benchmark,
        device=env.current_device_name(),
        backend=backend,
        versions=env.versions(),
        options=options,
    )


class NoiseLog:
    """What the timing engine said about the points of a sweep, summed up: a result
    carries one line per kind of warning (noisy, host-bound, throttled) naming the points
    it concerns, and every other note (throttle check unavailable, persisting-L2 reset)
    once, not a warning per point."""

    KINDS = (
        (
            "noisy",
            ("noisy", "worst sample"),
            "noisy timing (IQR over 10% of the median or worst sample over 4x the best; "
            "other work may have interfered)",
        ),
        (
            "host-bound",
            ("host-bound",),
            "host-bound samples (the GPU may have waited for the host in the timed window)",
        ),
        (
            "throttled",
            ("clocks throttled", "dropped"),
            "clock throttling (samples dropped or NVML violation counters rose)",
        ),
    )

    def __init__(self) -> None:
        self.points = 0
        self.flagged: dict[str, list[str]] = {kind: [] for kind, _, _ in self.KINDS}
        self.notes: list[str] = []

    def add(self, name: str, warnings: list[str]) -> None:
        self.points += 1
        for warning in warnings:
            kind = next((k for k, starts, _ in self.KINDS if warning.startswith(starts)), None)
            if kind is not None:
                if name not in self.flagged[kind]:
                    self.flagged[kind].append(name)
            elif not warning.startswith(("no GPU", "only ")) and warning not in self.notes:
                self.notes.append(warning)

    def summary(self) -> list[str]:
        lines = []
        for kind, _, text in self.KINDS:
            names = self.flagged[kind]
            if names:
                shown = ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")
                lines.append(f"{text} at {len(names)} of {self.points} points ({shown})")
        return lines + self.notes


def median_call_ns(
    fn: Callable[[], object],
    backend: str,
    *,
    budget_ms: float,
    name: str,
    noise: NoiseLog | None = None,
    fill_queue: bool = True,
    number: int | None = None,
    graph: bool = False,
    flush: bool = False,
) -> float:
    """Median time of one ``fn()`` call through perflab's timing engine (no cache flush by
    default: the sweeps want warm caches; on a GPU a queue filler before each sample, so
    short kernels are not launch-bound). The engine's warnings go to ``noise``.
    ``fill_queue=False`` for calls that block the host anyway (pageable copies);
    ``number`` calls per timed window (``graph``: replayed as one CUDA graph); ``flush``
    evicts the caches before each sample."""
    from perflab.capture.timer import time_function

    result = time_function(
        fn,
        backend=backend,
        budget_ms=budget_ms,
        warmup_ms=min(budget_ms, 10.0),
        flush_l2=flush,
        nvtx=False,
        min_samples=5,
        name=name,
        fill_queue=fill_queue,
        number=number,
        graph=graph,
    )
    if noise is not None:
        noise.add(name, result.warnings)
    return result.median_ns


def cache_capacities(on_gpu: bool) -> dict[str, float]:
    """Cache sizes of this machine: sysfs on a CPU; L1 and L2 of GPU 0 on CUDA."""
    if not on_gpu:
        return {name.rstrip("d"): float(size) for name, size in env.cpu_caches().items()}
    caps = {}
    l1 = _gpu_l1_bytes()
    if l1:
        caps["L1"] = float(l1)
    l2 = env.gpu_devices()[0].get("l2_bytes")
    if l2:
        caps["L2"] = float(l2)
    return caps


def _gpu_l1_bytes() -> int | None:
    """Shared memory per SM as the driver reports it: the L1/shared carve-out's upper
    bound, which is what a one-thread chase can keep in L1 (cupy, else torch)."""
    with contextlib.suppress(Exception):  # no cupy, or it cannot see the device
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        return int(props["sharedMemPerMultiprocessor"])
    with contextlib.suppress(Exception):
        import torch

        torch_props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return int(getattr(torch_props, "shared_memory_per_multiprocessor", 0)) or None
    return None


def hierarchy_levels(
    series: Series, on_gpu: bool, *, repeat_suffix: str | None = None
) -> list[Level]:
    """Plateaus of ``series``, named after this machine's caches (and DRAM/HBM)."""
    levels = detect_plateaus(series.x, series.y)
    return name_levels(
        levels,
        cache_capacities(on_gpu),
        memory="HBM" if on_gpu else "DRAM",
        repeat_suffix=repeat_suffix,
    )


def fastest_first(series: Series) -> list[dict[str, object]]:
    """Level rows ordered from the fastest: lowest time, or highest rate."""
    sign = 1.0 if series.y_unit in TIME_UNITS else -1.0
    rows = series.level_rows()
    return sorted(rows, key=lambda row: sign * float(row[series.y_unit]))


def result_json(result: BenchResult) -> dict[str, object]:
    """The CLI's ``--json``: ``{"points", "levels"}`` for a one-series result, else one
    such entry per series, with device and backend either way."""

    from perflab.model.json_outputs import BenchView, SeriesView
    from perflab.model.schema import encode

    doc = BenchView(
        benchmark=result.benchmark,
        device=result.device,
        backend=result.backend,
        warnings=list(result.warnings),
    )
    if len(result.series) == 1:
        (series,) = result.series
        doc.points, doc.levels = series.points(), fastest_first(series)
    else:
        doc.series = [
            SeriesView(
                name=s.name,
                x_unit=s.x_unit,
                y_unit=s.y_unit,
                points=s.points(),
                levels=fastest_first(s),
            )
            for s in result.series
        ]
    return encode(doc)
