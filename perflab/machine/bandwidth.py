"""Memory bandwidth: read, copy and triad over working sets from KB to GB.

GB/s counts the bytes the operation must read plus write (STREAM's convention; write
allocation is not counted): read moves ``n x itemsize`` (a sum of ``a``), copy
``2 x n x itemsize`` for ``b[:] = a``, triad ``3 x n x itemsize`` for ``a = b + s * c``.
The working set is the size of all arrays together, so it can be compared with cache
sizes. The sweep runs copy and triad by default; read on request.

Engines (which one measured each point is recorded, see :func:`point_engines`):

- ``c-loop`` (CPU): a small C library compiled at run time
  (:mod:`perflab.machine._bandwidth_kernels`) that makes ``passes`` passes over its
  arrays inside one call. Without a C compiler the sweep falls back to ``numpy``
  (``copyto``, and a triad run by numpy as two passes, ``c * s`` then ``+ b``, which
  moves more bytes than it is credited with) and says so.
- ``triton-loop`` (GPU, working sets up to the last cache): a Triton kernel making
  ``passes`` passes in one launch, its loads cached in L2 only
  (:mod:`perflab.machine._triton_stream`). Past the last cache, and where Triton cannot
  build or run, ``torch-graph``: torch ``copy_`` and ``torch.add(b, c, alpha=s, out=a)``
  (one kernel each; torch has no read kernel, so read needs Triton), their calls in a
  window replayed as one CUDA graph.

Each point repeats its operation inside the timed window: a loop engine makes enough
passes in one call for at least 50 us of data movement even at a rate above any
level's (:func:`passes_for`), so one call over an L1- or L2-sized working set moves far
more data than the call costs, and is timed alone; the call engines make that many
calls between one pair of marks (:func:`repeats_for`; at most 1024). A copy repeated
over arrays that fit in a cache keeps them there, which is the point: working sets up to
the last cache are timed hot (no flush), larger ones cold (the caches flushed before
each sample; their arrays exceed the last cache, so every repeat streams from memory
too).

What a call costs without data is measured as well: the same engine and operation on
``EMPTY_CALL_ELEMENTS`` elements and one pass (the empty call; the Triton loop's least is
one tile), before and after the sweep (the smaller kept). A point whose call takes under
``OVERHEAD_BOUND_RATIO`` (10) times its engine's empty call spends over a tenth of its
time on the call, not on memory: no level is named from it and it never becomes a
ceiling. Repeated calls shorten no call: a numpy call costs a few hundred ns, longer than
an L1-sized copy, and a torch kernel in a graph a microsecond or two, so without a loop
engine the L1 points of the CPU and the smaller L2 points of a GPU are overhead-bound.

Levels: the plateaus of the points that are not overhead-bound, named after the caches;
one that spans several caches' sizes is split at them when its part in each is over 15%
faster than in the next (:func:`cache_levels`): the plateau detector ends a level only at
a 25% step between neighbouring points, and a CPU's rate often falls from L2 to L3 by
less per point.

Per point, besides GB/s: ``repeats`` (passes over the arrays per timed window: calls x
passes), ``passes`` (inside one call), ``overhead_share`` (the engine's empty call's time
over the call's) and ``hot`` (1: timed hot, 0: timed cold).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError, PerflabError, SchemaError, import_extra
from perflab.machine import _bandwidth_kernels as loops
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
from perflab.model.machine import BenchResult, Level, Series
from perflab.model.units import counted, format_bytes, format_ns, format_rate

KERNELS = ("copy", "triad", "read")
DEFAULT_KERNELS = ("copy", "triad")
ARRAYS = loops.ARRAYS  # arrays per kernel: read 1, copy 2, triad 3
SCALE = 3.0
WINDOW_NS = 50_000.0  # data movement per timed window, at the fastest rate below
# Above any level's copy rate on each backend, so a window holds at least WINDOW_NS of
# data movement wherever the point sits (an H200's L2 is near 10 TB/s, a CPU's L1 a few
# hundred GB/s): these size the repeats, they are not measurements.
FASTEST_GBPS = {"cuda": 20_000.0, "cpu": 400.0}
MAX_REPEATS = 1024  # calls per window: ~1-2 ms of call cost at most, inside small budgets
MAX_PASSES = 1 << 20  # passes in one call of a loop engine (a 64-byte array at 400 GB/s)
EMPTY_CALL_ELEMENTS = 16
OVERHEAD_BOUND_RATIO = 10.0  # a call under 10x the empty call's: over a tenth is the call
SPLIT_STEP = 0.15  # a plateau's part in a smaller cache, this much faster, is its own level

ENGINES = ("c-loop", "numpy", "triton-loop", "torch-graph")
LOOP_ENGINE = {"cpu": "c-loop", "cuda": "triton-loop"}  # passes inside one call
CALL_ENGINE = {"cpu": "numpy", "cuda": "torch-graph"}  # one pass per call


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


def passes_for(bytes_per_pass: float, fastest_GBps: float) -> int:
    """Passes over the arrays inside one call of a loop engine, so that one call holds
    at least WINDOW_NS of data movement even at ``fastest_GBps``: from 1 to MAX_PASSES."""
    return repeats_for(bytes_per_pass, fastest_GBps, cap=MAX_PASSES)


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
    if kind == "read":
        (src,) = arrays
        total = np.zeros((), dtype=np.float64)  # the sum is stored: the read is not dead
        return lambda: np.sum(src, out=total)
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
    if kind == "read":
        raise InputError("the read kernel on a GPU needs Triton (torch has no read kernel)")
    a, b, c = arrays
    return lambda: torch.add(b, c, alpha=SCALE, out=a)


@dataclass(frozen=True)
class Engines:
    """Which engine measures each point on one backend. ``loop`` says how the loop
    engine was built, or is None with ``why_not`` saying why it is not used."""

    backend: str
    loop: str | None
    why_not: str = ""
    programs: int = 1  # Triton programs per launch

    def for_point(self, kind: str, hot: bool) -> str:
        """The loop engine where it works, except past the last cache on a GPU (where
        torch's kernels stream as well), but for read, which torch has no kernel for."""
        if self.loop is None or (self.backend == "cuda" and not hot and kind != "read"):
            return CALL_ENGINE[self.backend]
        return LOOP_ENGINE[self.backend]


def choose_engines(backend: str) -> Engines:
    """Build the loop engine of ``backend`` and check it on a small array (a read's sum,
    a copy); where that fails the sweep uses the call engine, and says why."""
    if backend == "cpu":
        try:
            return Engines(backend, loops.c_preflight())
        except (PerflabError, OSError) as exc:  # no compiler, a failed build or load
            return Engines(backend, None, f"no C loop ({exc})")
    try:
        programs = loops.gpu_programs()
        return Engines(backend, loops.triton_preflight(programs), programs=programs)
    except Exception as exc:  # import, compile or launch failure: torch calls instead
        return Engines(backend, None, f"no Triton loop ({type(exc).__name__}: {exc})")


@dataclass(frozen=True)
class Kernel:
    """One engine's callable over one working set: ``passes`` passes per call, each
    moving ``bytes_per_pass``."""

    fn: Callable[[], object]
    engine: str
    passes: int
    bytes_per_pass: int


def _itemsize(backend: str) -> int:
    return 4 if backend == "cuda" else 8  # float32 on a GPU, float64 on the CPU


def make_kernel(
    kind: str, n: int, backend: str, engine: str, engines: Engines, *, one_pass: bool = False
) -> Kernel:
    """``kind`` over arrays of ``n`` elements on ``engine``; a loop engine makes
    :func:`passes_for` passes per call (one with ``one_pass``: the empty call)."""
    if engine == "triton-loop":
        n = loops.triton_elements(n)  # whole tiles
    moved = ARRAYS[kind] * n * _itemsize(backend)
    if engine in (CALL_ENGINE["cpu"], CALL_ENGINE["cuda"]):
        fn = (_torch_kernel if backend == "cuda" else _numpy_kernel)(kind, n)
        return Kernel(fn, engine, 1, moved)
    passes = 1 if one_pass else passes_for(moved, FASTEST_GBPS[backend])
    if engine == "c-loop":
        return Kernel(loops.CLoop(kind, n, passes, SCALE), engine, passes, moved)
    return Kernel(loops.TritonLoop(kind, n, passes, SCALE, engines.programs), engine, passes, moved)


@dataclass(frozen=True)
class WorkingSetPoint:
    """One working set's measurement: the time of one call and how it was taken.
    ``calls`` per timed window, ``passes`` inside each; ``budget_bound``: the calls
    would have outlasted the budget, so one call per window."""

    bytes_per_pass: int
    ns_per_call: float
    calls: int
    hot: bool
    engine: str = "numpy"
    passes: int = 1
    budget_bound: bool = False

    @property
    def repeats(self) -> int:
        """Passes over the arrays per timed window."""
        return self.calls * self.passes

    @property
    def GBps(self) -> float:
        return self.bytes_per_pass * self.passes / self.ns_per_call  # bytes per ns == GB/s


def time_kernel(
    kernel: Kernel, backend: str, *, hot: bool, budget_ms: float, noise: NoiseLog, name: str
) -> WorkingSetPoint:
    """The median time of one call of ``kernel``, ``repeats_for`` calls per timed
    window: one for a loop engine's point (its passes already hold the window's data
    movement), many for a call engine's and for every empty call (one alone would be
    within the timer's own floor). The timing engine refuses a window it estimates to
    outlast the whole budget (a slow or disturbed call): that point is timed one call
    per window."""
    calls = repeats_for(kernel.bytes_per_pass * kernel.passes, FASTEST_GBPS[backend])

    def point(number: int, budget_bound: bool = False) -> WorkingSetPoint:
        ns = median_call_ns(
            kernel.fn,
            backend,
            budget_ms=budget_ms,
            name=name,
            noise=noise,
            number=number,
            graph=backend == "cuda" and number > 1,
            flush=not hot,
        )
        return WorkingSetPoint(
            kernel.bytes_per_pass, ns, number, hot, kernel.engine, kernel.passes, budget_bound
        )

    if calls == 1:
        return point(1)
    try:
        return point(calls)
    except InputError:  # the window would outlast the budget; any other error recurs below
        return point(1, budget_bound=True)


def measure_point(
    kind: str,
    working_set: int,
    backend: str,
    *,
    hot: bool,
    budget_ms: float,
    noise: NoiseLog,
    engine: str,
    engines: Engines,
) -> WorkingSetPoint:
    """One point of the sweep: ``kind`` over ``working_set`` bytes of arrays on
    ``engine``, timed hot (caches kept) or cold (flushed before each sample)."""
    n = max(1, working_set // (ARRAYS[kind] * _itemsize(backend)))
    kernel = make_kernel(kind, n, backend, engine, engines)
    return time_kernel(
        kernel, backend, hot=hot, budget_ms=budget_ms, noise=noise, name=f"{kind} {working_set} B"
    )


def empty_call_ns(
    kind: str, backend: str, *, budget_ms: float, noise: NoiseLog, engine: str, engines: Engines
) -> float:
    """The time of one ``kind`` call on ``engine`` that moves next to no data
    (EMPTY_CALL_ELEMENTS elements, one pass), taken the way the points are: the floor
    under the time of every point that engine measures."""
    kernel = make_kernel(kind, EMPTY_CALL_ELEMENTS, backend, engine, engines, one_pass=True)
    name = f"{kind} empty call" + ("" if engine in CALL_ENGINE.values() else f" ({engine})")
    return time_kernel(
        kernel, backend, hot=True, budget_ms=budget_ms, noise=noise, name=name
    ).ns_per_call


def sweep_series(
    kind: str, sizes: Sequence[int], points: Sequence[WorkingSetPoint], floors: Mapping[str, float]
) -> Series:
    """The points of one kernel as a series, with the columns ``repeats``, ``passes``,
    ``overhead_share`` (the floor of each point's engine over its call's time) and ``hot``."""
    ns = np.asarray([p.ns_per_call for p in points], dtype=np.float64)
    floor = np.asarray([floors[p.engine] for p in points], dtype=np.float64)
    return Series(
        kind,
        np.asarray(sizes),
        np.asarray([p.GBps for p in points]),
        "bytes",
        "GBps",
        extra={
            "repeats": np.asarray([p.repeats for p in points]),
            "passes": np.asarray([p.passes for p in points]),
            "overhead_share": floor / ns,
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


def cache_levels(series: Series, on_gpu: bool) -> tuple[list[Level], list[str]]:
    """The plateaus of ``series`` named after the caches, where a plateau spanning more
    than one cache's size is split at those sizes when at least two of its parts have
    two points or more and each is over SPLIT_STEP faster than the next; with a note for
    each split. The plateau detector ends a level only at a step of 25% between
    neighbouring points, while on a CPU the rate often falls from one cache to the next
    by less, or over several points (on a 2-core EPYC VM, L2 to L3 copy: about a
    quarter, a few percent per point). A part of one point is a transition, left out as
    the detector leaves out runs of one point."""
    levels = hierarchy_levels(series, on_gpu)
    capacities = sorted(cache_capacities(on_gpu).items(), key=lambda item: item[1])
    memory = "HBM" if on_gpu else "DRAM"
    homes = np.asarray(
        [next((cache for cache, size in capacities if x <= size), memory) for x in series.x]
    )
    out: list[Level] = []
    notes: list[str] = []
    for level in levels:
        taken = {other.name for other in levels if other is not level}
        parts = _cache_parts(series, level, homes)
        if parts is None or taken & {part.name for part in parts}:
            out.append(level)
            continue
        out.extend(parts)
        rates = " > ".join(f"{part.name} {format_rate(part.value * 1e9)}" for part in parts)
        notes.append(
            f"{series.name}: one plateau from {format_bytes(level.x_min)} to "
            f"{format_bytes(level.x_max)} spans several caches' sizes; split there "
            f"({rates}): the rate falls from each to the next by over {SPLIT_STEP:.0%}, "
            "in steps under the plateau detector's"
        )
    return out, notes


def _cache_parts(series: Series, level: Level, homes: npt.NDArray[np.str_]) -> list[Level] | None:
    """``level``'s points grouped by the smallest cache that holds each (``homes``), as
    levels, when two groups or more have two points or more and each of those is over
    SPLIT_STEP faster than the next; else None."""
    inside = (series.x >= level.x_min) & (series.x <= level.x_max)
    parts = []
    for name in dict.fromkeys(homes[inside].tolist()):
        mine = inside & (homes == name)
        if mine.sum() < 2:
            continue  # a transition
        x, y = series.x[mine], series.y[mine]
        parts.append(Level(name, float(x.min()), float(x.max()), float(np.median(y)), x.size))
    if len(parts) < 2:
        return None
    if any(a.value <= (1 + SPLIT_STEP) * b.value for a, b in itertools.pairwise(parts)):
        return None
    return parts


def size_span(sizes: npt.NDArray[np.float64]) -> str:
    """``"8 KiB - 45.2 KiB"``: the smallest and largest of some working sets."""
    low, high = float(sizes.min()), float(sizes.max())
    return format_bytes(low) if low == high else f"{format_bytes(low)} - {format_bytes(high)}"


def overhead_warning(
    series: Series, floors: Mapping[str, float], engines: Sequence[str] | None = None
) -> list[str]:
    """A line naming the overhead-bound points of ``series``, if it has any, with the
    empty call of their engine(s) (``engines``: each point's; default the only floor)."""
    bound = overhead_bound(series.extra.get("overhead_share", np.zeros(len(series))))
    if not bound.any():
        return []
    named = list(floors) if engines is None else [engines[int(i)] for i in np.flatnonzero(bound)]
    used = list(dict.fromkeys(named))
    if len(used) == 1:
        floor = format_ns(floors[used[0]])
    else:
        floor = ", ".join(f"{e} {format_ns(floors[e])}" for e in used)
    return [
        f"{series.name}: {int(bound.sum())} of {len(series)} points "
        f"({size_span(series.x[bound])}) take under "
        f"{OVERHEAD_BOUND_RATIO:g}x the time of an empty call ({floor}): they "
        "are bound by call overhead, not by memory, so no level is named from them and "
        "they are no ceiling"
    ]


def _budget_warning(
    kind: str, sizes: Sequence[int], points: Sequence[WorkingSetPoint], budget_ms: float
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


def point_engines(result: BenchResult, kind: str) -> list[str] | None:
    """The engine that measured each point of the series ``kind`` (``"c-loop"``,
    ``"numpy"``, ``"triton-loop"``, ``"torch-graph"``), or None for a result saved
    before engines were recorded. A record that is not one known engine per point is a
    SchemaError naming the file."""
    series = result.get(kind)
    record = result.options.get("engines")
    if record is None:
        return None
    names = record.get(kind) if isinstance(record, dict) else None
    if (
        not isinstance(names, list)
        or len(names) != len(series)
        or any(name not in ENGINES for name in names)
    ):
        raise SchemaError(
            f"options.engines.{kind} must list one of {', '.join(ENGINES)} for each of "
            f"its {len(series)} points, not {names!r}"[:300],
            source=result.replayed_from or "<result>",
        )
    return list(names)


def run(
    *,
    backend: str = "auto",
    kernels: tuple[str, ...] = DEFAULT_KERNELS,
    min_bytes: int | None = None,
    max_bytes: int | None = None,
    per_octave: int = 2,
    quick: bool = False,
    budget_ms: float = 40.0,
    show_progress: bool | None = None,
) -> BenchResult:
    """GB/s of ``kernels`` (copy and triad by default; also read) over working sets,
    each series with its plateaus named.

    Defaults: CPU 8 KiB-256 MiB (quick: 8 KiB-64 MiB, one point per octave); CUDA
    256 KiB-4 GiB (quick: 1 MiB-2 GiB).
    """
    chosen = resolve_backend(backend)
    on_gpu = chosen == "cuda"
    unknown = set(kernels) - set(KERNELS)
    if unknown:
        raise InputError(
            f"unknown bandwidth kernel(s) {sorted(unknown)} (known: {', '.join(KERNELS)})"
        )
    lo = min_bytes or ((1 << 20 if quick else 256 << 10) if on_gpu else 8 << 10)
    hi = max_bytes or (
        (2 << 30 if quick else 4 << 30) if on_gpu else (64 << 20 if quick else 256 << 20)
    )
    sizes = size_sweep(lo, hi, 1 if quick else per_octave)
    budget = budget_ms / (2 if quick else 1)
    last_cache = max(cache_capacities(on_gpu).values(), default=math.inf)
    engines = choose_engines(chosen)
    if "read" in kernels and on_gpu and engines.loop is None:
        raise InputError(f"the read kernel on a GPU needs the Triton loop: {engines.why_not}")
    noise = NoiseLog()
    result = new_result("bandwidth", chosen, _options(quick, chosen, last_cache, engines))
    floors: dict[str, dict[str, float]] = {}
    used: dict[str, list[str]] = {}
    for kind in kernels:
        hot = [n <= last_cache for n in sizes]
        used[kind] = [engines.for_point(kind, h) for h in hot]

        def floor(engine: str, kind: str = kind) -> float:
            return empty_call_ns(
                kind, chosen, budget_ms=budget, noise=noise, engine=engine, engines=engines
            )

        before = {engine: floor(engine) for engine in dict.fromkeys(used[kind])}
        points = [
            measure_point(
                kind, n, chosen, hot=h, budget_ms=budget, noise=noise, engine=e, engines=engines
            )
            for n, h, e in progress(
                list(zip(sizes, hot, used[kind], strict=True)),
                f"bandwidth {kind} ({chosen})",
                show_progress,
            )
        ]
        # before and after the points, the smaller kept: a burst of other work during
        # one measurement must not make real points look overhead-bound
        floors[kind] = {engine: min(ns, floor(engine)) for engine, ns in before.items()}
        series = sweep_series(kind, sizes, points, floors[kind])
        series.levels, split_notes = cache_levels(memory_bound_part(series), on_gpu)
        result.series.append(series)
        result.warnings.extend(split_notes)
        result.warnings.extend(overhead_warning(series, floors[kind], used[kind]))
        result.warnings.extend(_budget_warning(kind, sizes, points, budget))
    result.options["engines"] = used
    # the floor of the engine of each kernel's smallest point, which decides the
    # overhead-bound ones; every engine's below
    result.options["empty_call_ns"] = {k: floors[k][used[k][0]] for k in kernels}
    result.options["empty_call_ns_by_engine"] = floors
    result.warnings.extend(_sweep_notes(noise.summary(), result.series))
    if not math.isfinite(last_cache):
        result.warnings.append("cache sizes unknown: every point was timed hot (no flush)")
    result.warnings.extend(_engine_warnings(chosen, engines))
    return result


def _engine_warnings(backend: str, engines: Engines) -> list[str]:
    lines = []
    if engines.loop is None and backend == "cpu":
        lines.append(
            f"{engines.why_not}: numpy calls of one pass each instead; a numpy call costs "
            "longer than an L1-sized copy takes, so the smallest working sets are bound by "
            "call overhead and give no ceiling"
        )
    elif engines.loop is None:
        lines.append(
            f"{engines.why_not}: torch kernels in CUDA graphs instead; each costs a "
            "microsecond or two to start, so the smaller L2 points are bound by it"
        )
    if backend == "cpu":
        how = "C loops" if engines.loop else "numpy"
        lines.append(f"no GPU: {how} on the CPU (the CPU analog)")
    return lines


def _options(quick: bool, backend: str, last_cache: float, engines: Engines) -> dict[str, object]:
    on_gpu = backend == "cuda"
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
        "implementation": _implementation(backend, engines),
        "passes": (
            f"passes over the arrays inside one call of the {LOOP_ENGINE[backend]} engine: "
            f"{WINDOW_NS / 1e3:g} us of data movement at {FASTEST_GBPS[backend]:g} GB/s, at "
            f"most {MAX_PASSES}; one per call of the {CALL_ENGINE[backend]} engine"
        ),
        "repeats": (
            f"passes per timed window: calls x passes, the calls enough for "
            f"{WINDOW_NS / 1e3:g} us of data movement at {FASTEST_GBPS[backend]:g} GB/s "
            f"(one where the {LOOP_ENGINE[backend]} engine's passes hold it), at most "
            f"{MAX_REPEATS}" + (" (one CUDA graph)" if on_gpu else "")
        ),
        "hot_up_to_bytes": last_cache if known else None,
        "cache_state": cache_state,
        "overhead_bound": (
            f"a call under {OVERHEAD_BOUND_RATIO:g}x its engine's empty call's time "
            f"({EMPTY_CALL_ELEMENTS} elements, one pass)"
        ),
    }


def _implementation(backend: str, engines: Engines) -> str:
    if backend == "cpu":
        if engines.loop:
            return f"c-loop: {engines.loop}, passes inside one call"
        return f"numpy copyto/sum/multiply+add ({engines.why_not})"
    torch_part = "torch-graph: torch copy_/add(out=), calls replayed as one CUDA graph"
    if engines.loop:
        return (
            f"triton-loop up to the last cache ({engines.loop}, passes inside one launch, "
            f"loads cached in L2 only); {torch_part} past it"
        )
    return f"{torch_part} ({engines.why_not})"
