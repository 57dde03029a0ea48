"""Memory bandwidth: copy and triad over working sets from KB to GB.

GB/s counts the bytes the operation must read plus write (STREAM's convention; write
allocation is not counted): copy moves ``2 x n x itemsize`` for ``b[:] = a``, triad
``3 x n x itemsize`` for ``a = b + s * c``. The working set is the size of all arrays
together, so it can be compared with cache sizes.

- CUDA: ``torch`` ``copy_`` and ``torch.add(b, c, alpha=s, out=a)`` (one kernel each),
  timed with CUDA events; the plateaus are L2 and HBM.
- CPU (the analog): numpy ``copyto`` and a numpy triad. numpy runs the triad as two passes
  (``c * s`` then ``+ b``), so it moves more bytes than it is credited with and reads
  below copy.

Each point repeats its operation inside the timed window (``repeats`` calls between one
pair of marks; on a GPU replayed as one CUDA graph): enough calls for at least 50 us of
data movement even at a rate above any level's (:func:`repeats_for`), so that a cache-sized
point does not time the marks and one launch. A copy repeated over arrays that fit in a
cache keeps them there, which is the point: working sets up to the last cache are timed
hot (no flush), larger ones cold (the caches flushed before each sample; their arrays
exceed the last cache, so every repeat streams from memory too).

What a call costs without data is measured as well: the same operation on
``EMPTY_CALL_ELEMENTS`` elements (the empty call), before and after the sweep (the
smaller kept). A point whose call takes under ``OVERHEAD_BOUND_RATIO`` (10) times the
empty call's spends over a tenth of its time on the call, not on memory: no level is
named from it and it never becomes a ceiling. Repeats shorten no call: on the CPU each
repeat is a numpy call of a few hundred ns, longer than a copy that fits in L1 takes,
and on a GPU each is a kernel with its start and drain (a microsecond or two), so the
L1 points of the CPU and the smaller L2 points of a GPU are overhead-bound.

Per point, besides GB/s: ``repeats`` (calls per timed window), ``overhead_share`` (the
empty call's time over the call's) and ``hot`` (1: timed hot, 0: timed cold).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError, import_extra
from perflab.machine._common import (
    NoiseLog,
    cache_capacities,
    hierarchy_levels,
    median_call_ns,
    new_result,
    progress,
    resolve_backend,
    size_sweep,
)
from perflab.model.machine import BenchResult, Series
from perflab.model.units import counted, format_bytes, format_ns

KERNELS = ("copy", "triad")
ARRAYS = {"copy": 2, "triad": 3}
SCALE = 3.0
WINDOW_NS = 50_000.0  # data movement per timed window, at the fastest rate below
# Above any level's copy rate on each backend, so a window holds at least WINDOW_NS of
# data movement wherever the point sits (an H200's L2 is near 10 TB/s, a CPU's L1 a few
# hundred GB/s): these size the repeats, they are not measurements.
FASTEST_GBPS = {"cuda": 20_000.0, "cpu": 400.0}
MAX_REPEATS = 1024  # calls per window: ~1-2 ms of call cost at most, inside small budgets
EMPTY_CALL_ELEMENTS = 16
OVERHEAD_BOUND_RATIO = 10.0  # a call under 10x the empty call's: over a tenth is the call


def repeats_for(
    bytes_moved: float,
    fastest_GBps: float,
    *,
    window_ns: float = WINDOW_NS,
    cap: int = MAX_REPEATS,
) -> int:
    """Calls per timed window so that the window holds at least ``window_ns`` of data
    movement even at ``fastest_GBps`` (bytes per ns), from 1 to ``cap``."""
    for label, value in (
        ("bytes moved per call", bytes_moved),
        ("fastest rate (GB/s)", fastest_GBps),
        ("window (ns)", window_ns),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{label} must be a number, not {value!r}")
        if not (math.isfinite(value) and value > 0):
            raise InputError(f"{label} must be positive and finite, not {value!r}")
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise InputError(f"the most repeats must be a whole number from 1, not {cap!r}")
    return max(1, min(cap, math.ceil(window_ns * fastest_GBps / bytes_moved)))


def overhead_bound(overhead_share: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Points whose call took under OVERHEAD_BOUND_RATIO times the empty call's, from
    their ``overhead_share`` column; a share not recorded (NaN) is not judged bound."""
    share = np.asarray(overhead_share, dtype=np.float64)
    return np.asarray(np.nan_to_num(share, nan=0.0) > 1.0 / OVERHEAD_BOUND_RATIO)


def _numpy_kernel(kind: str, n: int) -> Callable[[], object]:
    rng = np.random.default_rng(0)
    arrays = [rng.random(n) for _ in range(ARRAYS[kind])]
    if kind == "copy":
        src, dst = arrays
        return lambda: np.copyto(dst, src)
    a, b, c = arrays

    def triad() -> None:
        np.multiply(c, SCALE, out=a)
        np.add(a, b, out=a)

    return triad


def _torch_kernel(kind: str, n: int) -> Callable[[], object]:
    torch = import_extra("torch", "perflab machine bandwidth on a GPU")

    arrays = [torch.rand(n, device="cuda", dtype=torch.float32) for _ in range(ARRAYS[kind])]
    if kind == "copy":
        src, dst = arrays
        return lambda: dst.copy_(src)
    a, b, c = arrays
    return lambda: torch.add(b, c, alpha=SCALE, out=a)


@dataclass(frozen=True)
class Point:
    """One working set's measurement: the time of one call and how it was taken.
    ``budget_bound``: the repeats would have outlasted the budget, so one call per window."""

    bytes_moved: int
    ns_per_call: float
    repeats: int
    hot: bool
    budget_bound: bool = False

    @property
    def GBps(self) -> float:
        return self.bytes_moved / self.ns_per_call  # bytes per ns == GB/s


def _itemsize(backend: str) -> int:
    return 4 if backend == "cuda" else 8  # float32 on a GPU, float64 on the CPU


def _time_calls(
    kind: str, n: int, backend: str, *, hot: bool, budget_ms: float, noise: NoiseLog, name: str
) -> Point:
    """``repeats_for`` calls of the kernel on ``n`` elements per timed window; the median
    time of one call. The timing engine refuses a window it estimates to outlast the
    whole budget (a slow or disturbed call): that point is timed one call per window."""
    moved = ARRAYS[kind] * n * _itemsize(backend)
    repeats = repeats_for(moved, FASTEST_GBPS[backend])
    fn = (_torch_kernel if backend == "cuda" else _numpy_kernel)(kind, n)

    def median_ns(number: int) -> float:
        return median_call_ns(
            fn,
            backend,
            budget_ms=budget_ms,
            name=name,
            noise=noise,
            number=number,
            graph=backend == "cuda" and number > 1,
            flush=not hot,
        )

    if repeats == 1:
        return Point(moved, median_ns(1), 1, hot)
    try:
        return Point(moved, median_ns(repeats), repeats, hot)
    except InputError:  # the window would outlast the budget; any other error recurs below
        return Point(moved, median_ns(1), 1, hot, budget_bound=True)


def measure_point(
    kind: str, working_set: int, backend: str, *, hot: bool, budget_ms: float, noise: NoiseLog
) -> Point:
    """One point of the sweep: ``kind`` over ``working_set`` bytes of arrays, timed hot
    (caches kept) or cold (flushed before each sample)."""
    n = max(1, working_set // (ARRAYS[kind] * _itemsize(backend)))
    return _time_calls(
        kind, n, backend, hot=hot, budget_ms=budget_ms, noise=noise, name=f"{kind} {working_set} B"
    )


def empty_call_ns(kind: str, backend: str, *, budget_ms: float, noise: NoiseLog) -> float:
    """The time of one ``kind`` call that moves next to no data (EMPTY_CALL_ELEMENTS
    elements), taken the way the points are: the floor under every point's time."""
    point = _time_calls(
        kind,
        EMPTY_CALL_ELEMENTS,
        backend,
        hot=True,
        budget_ms=budget_ms,
        noise=noise,
        name=f"{kind} empty call",
    )
    return point.ns_per_call


def sweep_series(
    kind: str, sizes: Sequence[int], points: Sequence[Point], floor_ns: float
) -> Series:
    """The points of one kernel as a series, with the columns ``repeats``,
    ``overhead_share`` (``floor_ns`` over each call's time) and ``hot``."""
    ns = np.asarray([p.ns_per_call for p in points], dtype=np.float64)
    return Series(
        kind,
        np.asarray(sizes),
        np.asarray([p.GBps for p in points]),
        "bytes",
        "GBps",
        extra={
            "repeats": np.asarray([p.repeats for p in points]),
            "overhead_share": floor_ns / ns,
            "hot": np.asarray([1.0 if p.hot else 0.0 for p in points]),
        },
    )


def memory_bound_part(series: Series) -> Series:
    """``series`` without its overhead-bound points (all of it when none is recorded)."""
    share = series.extra.get("overhead_share")
    if share is None:
        return series
    keep = ~overhead_bound(share)
    return Series(
        series.name,
        series.x[keep],
        series.y[keep],
        series.x_unit,
        series.y_unit,
        extra={k: v[keep] for k, v in series.extra.items()},
    )


def size_span(sizes: npt.NDArray[np.float64]) -> str:
    """``"8 KiB - 45.2 KiB"``: the smallest and largest of some working sets."""
    low, high = float(sizes.min()), float(sizes.max())
    return format_bytes(low) if low == high else f"{format_bytes(low)} - {format_bytes(high)}"


def overhead_warning(series: Series, floor_ns: float) -> list[str]:
    """A line naming the overhead-bound points of ``series``, if it has any."""
    bound = overhead_bound(series.extra.get("overhead_share", np.zeros(len(series))))
    if not bound.any():
        return []
    return [
        f"{series.name}: {int(bound.sum())} of {len(series)} points "
        f"({size_span(series.x[bound])}) take under "
        f"{OVERHEAD_BOUND_RATIO:g}x the time of an empty call ({format_ns(floor_ns)}): they "
        "are bound by call overhead, not by memory, so no level is named from them and "
        "they are no ceiling"
    ]


def _budget_warning(
    kind: str, sizes: Sequence[int], points: Sequence[Point], budget_ms: float
) -> list[str]:
    short = [size for size, p in zip(sizes, points, strict=True) if p.budget_bound]
    if not short:
        return []
    return [
        f"{kind}: {counted(len(short), 'point')} ({size_span(np.asarray(short, float))}) "
        f"timed one call per window: the engine estimated their repeats to outlast the "
        f"{budget_ms:g} ms budget per point (a slow or disturbed call; raise budget_ms)"
    ]


FLUSHED_ONCE_NOTE = "L2 flushed before each sample only"  # the timing engine's, with -n > 1


def _sweep_notes(notes: list[str], series: Sequence[Series]) -> list[str]:
    """The timing engine's notes, where the one that says the repeats after a flush ran
    warm is replaced: past the last cache no repeat finds its arrays cached."""
    kept = [note for note in notes if not note.startswith(FLUSHED_ONCE_NOTE)]
    cold_repeated = any(np.any((s.extra["hot"] == 0) & (s.extra["repeats"] > 1)) for s in series)
    if cold_repeated:
        kept.append(
            "cold points: the caches are flushed before each sample, not before each "
            "repeat; their arrays exceed the last cache, so every repeat streams from memory"
        )
    return kept


def run(
    *,
    backend: str = "auto",
    kernels: tuple[str, ...] = KERNELS,
    min_bytes: int | None = None,
    max_bytes: int | None = None,
    per_octave: int = 2,
    quick: bool = False,
    budget_ms: float = 40.0,
    show_progress: bool | None = None,
) -> BenchResult:
    """Copy and triad GB/s over working sets, each series with its plateaus named.

    Defaults: CPU 32 KiB-256 MiB (quick: 64 KiB-64 MiB, one point per octave); CUDA
    256 KiB-4 GiB (quick: 1 MiB-2 GiB).
    """
    chosen = resolve_backend(backend)
    on_gpu = chosen == "cuda"
    unknown = set(kernels) - set(KERNELS)
    if unknown:
        raise InputError(f"unknown bandwidth kernel(s) {sorted(unknown)} (known: copy, triad)")
    lo = min_bytes or (
        (1 << 20 if quick else 256 << 10) if on_gpu else (64 << 10 if quick else 32 << 10)
    )
    hi = max_bytes or (
        (2 << 30 if quick else 4 << 30) if on_gpu else (64 << 20 if quick else 256 << 20)
    )
    sizes = size_sweep(lo, hi, 1 if quick else per_octave)
    budget = budget_ms / (2 if quick else 1)
    last_cache = max(cache_capacities(on_gpu).values(), default=math.inf)
    noise = NoiseLog()
    result = new_result("bandwidth", chosen, _options(quick, on_gpu, last_cache))
    floors: dict[str, float] = {}
    for kind in kernels:
        before = empty_call_ns(kind, chosen, budget_ms=budget, noise=noise)
        points = [
            measure_point(kind, n, chosen, hot=n <= last_cache, budget_ms=budget, noise=noise)
            for n in progress(sizes, f"bandwidth {kind} ({chosen})", show_progress)
        ]
        # before and after the points, the smaller kept: a burst of other work during
        # one measurement must not make real points look overhead-bound
        floors[kind] = min(before, empty_call_ns(kind, chosen, budget_ms=budget, noise=noise))
        series = sweep_series(kind, sizes, points, floors[kind])
        series.levels = hierarchy_levels(memory_bound_part(series), on_gpu)
        result.series.append(series)
        result.warnings.extend(overhead_warning(series, floors[kind]))
        result.warnings.extend(_budget_warning(kind, sizes, points, budget))
    result.options["empty_call_ns"] = floors
    result.warnings.extend(_sweep_notes(noise.summary(), result.series))
    if not math.isfinite(last_cache):
        result.warnings.append("cache sizes unknown: every point was timed hot (no flush)")
    if not on_gpu:
        result.warnings.append("no GPU: numpy copy/triad on the CPU (the CPU analog)")
    return result


def _options(quick: bool, on_gpu: bool, last_cache: float) -> dict[str, Any]:
    backend = "cuda" if on_gpu else "cpu"
    known = math.isfinite(last_cache)
    cache_state = (
        f"hot (no flush) up to {format_bytes(last_cache)}, the last cache; cold (flushed "
        "before each sample) past it"
        if known
        else "hot (no flush) at every size: cache sizes unknown"
    )
    return {
        "quick": quick,
        "dtype": "float32" if on_gpu else "float64",
        "bytes_counted": "read + written (STREAM convention)",
        "implementation": "torch copy_/add(out=)" if on_gpu else "numpy copyto/multiply+add",
        "repeats": (
            f"calls per timed window: {WINDOW_NS / 1e3:g} us of data movement at "
            f"{FASTEST_GBPS[backend]:g} GB/s, at most {MAX_REPEATS}"
            + (" (one CUDA graph)" if on_gpu else "")
        ),
        "hot_up_to_bytes": last_cache if known else None,
        "cache_state": cache_state,
        "overhead_bound": (
            f"a call under {OVERHEAD_BOUND_RATIO:g}x the empty call's time "
            f"({EMPTY_CALL_ELEMENTS} elements)"
        ),
    }
