"""The sections of ``scripts/gpu-check``: the packages they need (checked first: the check
stops there, exit 2, when one is missing), the environment, the timing engine on real
kernels, the ``gpu`` tests, and the microbenchmarks. Each section is a function of the
backend, so ``--dry-run`` runs the very same code on the CPU backend (no GPU needed) and
the plumbing is tested here and in CI.

Runs from the source tree (``PYTHONPATH=.``) with numpy, torch, pytest and perflab's core
(msgspec, isal; cupy, triton and pynvml when present): no render code, no progress bars,
no IPython, bokeh, hypothesis, nbformat or nvtx. :mod:`perflab.machine.gpu_modules` reads
what the sections and the gpu tests import and brings missing wheels from ``.whl/``.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from perflab.capture import env
from perflab.capture.toolchain import tool_output
from perflab.machine import gpu_modules
from perflab.machine.gpu_modules import GPU_TEST_FILES

if TYPE_CHECKING:
    from perflab.model.machine import BenchResult
    from perflab.model.timing import TimingResult

SMI_TIMEOUT_S = 30
ROOT = Path(__file__).resolve().parents[2]
PYTEST_TIMEOUT_S = 240


@dataclass(frozen=True)
class Section:
    """One step of the check: its name, its estimated seconds on an H200 and on this
    machine's CPU (dry run), and the function (backend -> JSON-able result)."""

    name: str
    gpu_estimate_s: float
    cpu_estimate_s: float
    run: Callable[[str], object]


class CheckFailed(Exception):
    """A section ran but something it checks did not hold (reported as ``failed``)."""

    status = "failed"

    def __init__(self, message: str, result: object) -> None:
        super().__init__(message)
        self.result = result


class MissingPackages(CheckFailed):
    """Packages the later sections import are not here (``missing``: the check stops)."""

    status = "missing"


# --- modules ---------------------------------------------------------------------------


def modules(backend: str, wheel_dir: Path = gpu_modules.WHEEL_DIR) -> dict[str, object]:
    """Every third-party package that the sections and the gpu tests import is here (or
    optional); missing ones with a wheel in ``wheel_dir`` are installed from it first."""
    found = gpu_modules.reach(GPU_TEST_FILES)
    checked = gpu_modules.check_and_bring(found, wheel_dir)
    result = checked.to_dict()
    if checked.missing:
        result["instructions"] = gpu_modules.instructions(checked)
        names = ", ".join(gpu_modules.dist_of(n) for n in sorted(checked.missing))
        raise MissingPackages(f"missing: {names}", result)
    return result


# --- environment ----------------------------------------------------------------------


def _driver_version() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    out = tool_output([smi, "--query-gpu=driver_version", "--format=csv,noheader"], SMI_TIMEOUT_S)
    lines = (out or "").strip().splitlines()
    return lines[0].strip() if lines else None


def _cuda_versions() -> dict[str, str]:
    found: dict[str, str] = {}
    try:
        import torch

        found["torch_cuda"] = str(torch.version.cuda)
    except ImportError:
        found["torch"] = "not installed"
    try:
        import cupy

        found["cuda_runtime"] = str(cupy.cuda.runtime.runtimeGetVersion())
        found["cuda_driver_api"] = str(cupy.cuda.runtime.driverGetVersion())
    except Exception as exc:  # cupy missing or unable to reach the driver
        found["cupy"] = f"unavailable ({type(exc).__name__})"
    try:
        import pynvml  # noqa: F401

        found["pynvml"] = "present"
    except ImportError:
        found["pynvml"] = "absent: NVML is read from libnvidia-ml.so.1 through ctypes"
    return found


def environment(backend: str) -> dict[str, object]:
    return {
        "backend": backend,
        "machine": env.info(),
        "driver": _driver_version(),
        "versions": {**env.versions(), **_cuda_versions()},
    }


# --- timing engine --------------------------------------------------------------------


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
    floor_ns: float | None
    resolution_ns: float | None
    host_ns_median: float | None
    host_bound_samples: object
    queue_filler_ns: object
    cold: object
    warmup_calls: object
    throttle: dict[str, object]
    warnings: list[str]


class CheckDoc(TypedDict):
    passed: bool
    detail: str


class DoBenchRow(TypedDict):
    do_bench_median_us: float
    perflab_median_us: float
    ratio: float


def _workloads(backend: str) -> list[Workload]:
    """(label, fn, bench options) on real work: a matmul cold and warm, a tiny kernel
    with and without the queue filler, and the tiny kernel as a graph of 100 calls."""
    import torch

    device = "cuda" if backend == "cuda" else "cpu"
    n = 4096 if backend == "cuda" else 256
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
DO_BENCH_TOLERANCE = 0.05


def _against_do_bench(work: list[Workload], rows: dict[str, RunSummary]) -> dict[str, DoBenchRow]:
    """Each chosen kernel's median from ``triton.testing.do_bench`` (its defaults: 25 ms
    warm-up, 100 ms of repetitions, a 256 MB zeroing between them) against perflab's."""
    from triton.testing import do_bench

    found: dict[str, DoBenchRow] = {}
    for label, fn, _ in work:
        if label in AGAINST_DO_BENCH:
            theirs_us = float(do_bench(fn, return_mode="median")) * 1e3
            ours_us = rows[label]["median_us"]
            found[label] = {
                "do_bench_median_us": theirs_us,
                "perflab_median_us": ours_us,
                "ratio": ours_us / theirs_us,
            }
    return found


def _summary(r: TimingResult) -> RunSummary:
    lo, hi = r.ci95_ns
    return {
        "median_us": r.median_ns / 1e3,
        "ci95_us": [lo / 1e3, hi / 1e3],
        "n": r.n,
        "number": r.number,
        "stop_reason": r.stop_reason,
        "floor_ns": r.floor_ns,  # what the timer reads for a sample of nothing
        "resolution_ns": r.resolution_ns,  # its smallest step between two readings
        "host_ns_median": None if r.host_ns is None else float(sorted(r.host_ns)[r.n // 2]),
        "host_bound_samples": r.options["host_bound_samples"],
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
        label: _summary(time_function(fn, name=label, backend=backend, budget_ms=150, **kw))
        for label, fn, kw in work
    }
    checks = _engine_checks(rows, backend)
    if backend != "cuda":
        checks.update(_host_queue_checks())
    result: dict[str, object] = {"runs": rows, "checks": checks}
    if backend == "cuda":
        flush = rows["matmul_flush"]
        result["matmul_tflops"] = 2 * 4096**3 / flush["median_us"] / 1e6
        result["do_bench"] = against = _against_do_bench(work, rows)
        for label, row in against.items():
            checks[f"{label}: median within 5% of do_bench's"] = _check(
                abs(row["ratio"] - 1) <= DO_BENCH_TOLERANCE,
                f"perflab {row['perflab_median_us']:.2f} us, do_bench "
                f"{row['do_bench_median_us']:.2f} us (ratio {row['ratio']:.3f})",
            )
    bad = [name for name, ok in checks.items() if not ok["passed"]]
    if bad:
        raise CheckFailed(f"timing engine checks failed: {', '.join(bad)}", result)
    return result


def _check(passed: bool, detail: str) -> CheckDoc:
    return {"passed": bool(passed), "detail": detail}


def _engine_checks(rows: dict[str, RunSummary], backend: str) -> dict[str, CheckDoc]:
    every = rows.values()
    checks = {
        "stop_reason and host_ns on every result": _check(
            all(r["stop_reason"] and r["host_ns_median"] is not None for r in every),
            str({k: r["stop_reason"] for k, r in rows.items()}),
        ),
        "timer floor and resolution on every result": _check(
            all(_positive(r["floor_ns"]) and _positive(r["resolution_ns"]) for r in every),
            str({k: (r["floor_ns"], r["resolution_ns"]) for k, r in rows.items()}),
        ),
        "throttle field says checked, or why not": _check(
            all(r["throttle"].get("checked") or r["throttle"].get("why") for r in every),
            str(rows["matmul_warm"]["throttle"]),
        ),
        "flush makes every call cold (one call per sample)": _check(
            rows["matmul_flush"]["cold"] == "every call", str(rows["matmul_flush"]["cold"])
        ),
    }
    if backend != "cuda":
        return checks
    stream, bare = rows["small_add_stream"], rows["small_add_no_filler"]
    graph = rows["small_add_graph"]
    checks["tiny kernel with the filler: at most 10% samples host-bound"] = _check(
        _number(stream["host_bound_samples"]) <= 0.1 * stream["n"],
        f"{stream['host_bound_samples']} of {stream['n']}, "
        f"filler {stream['queue_filler_ns']:.0f} ns",
    )
    checks["tiny kernel without the filler: flagged host-bound"] = _check(
        _number(bare["host_bound_samples"]) > 0, f"{bare['host_bound_samples']} of {bare['n']}"
    )
    # 25 ms of warm-up at the measured per-call time, not 100x that
    warm_ms = _number(graph["warmup_calls"]) * graph["median_us"] / 1e3
    checks["graph warm-up counted per call (about 25 ms)"] = _check(
        warm_ms < 100, f"{graph['warmup_calls']} calls ~ {warm_ms:.1f} ms"
    )
    return checks


def _number(value: object) -> float:
    """A count or time the engine put in a result's options."""
    if not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    return value


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _host_queue_checks() -> dict[str, CheckDoc]:
    """The queue logic (filler sizing, host-bound flags) on the host worker-thread queue:
    what the GPU path does, run for real without a GPU."""
    from perflab.capture.timer import HostQueueClock, TimingOptions, host_bound, measure

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
    flags = [
        int(host_bound(r.samples.window_ns, r.samples.host_ns, r.samples.lead_ns).sum())
        for r in (filled, bare)
    ]
    n = [len(r.samples.window_ns) for r in (filled, bare)]
    return {
        "host queue: a filler keeps the queue full": _check(
            flags[0] <= n[0] // 4, f"{flags[0]} of {n[0]} flagged, filler {filled.lead_ns:.0f} ns"
        ),
        "host queue: without a filler the host sleep is flagged": _check(
            flags[1] == n[1], f"{flags[1]} of {n[1]} flagged"
        ),
    }


# --- gpu tests --------------------------------------------------------------------------


def gpu_tests(backend: str) -> dict[str, object]:
    """``pytest -m gpu`` on the GPU test files (on the CPU they collect and skip)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "gpu",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=--strict-markers -ra",
        *GPU_TEST_FILES,
    ]
    # the source tree first, then what was there (a folder of wheels installed by `modules`)
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(_path_with(str(ROOT)))}
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: a timeout ends all of it
    )
    try:
        out, _ = proc.communicate(timeout=PYTEST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise CheckFailed(f"gpu tests timed out after {PYTEST_TIMEOUT_S} s", _tail(out)) from None
    tail = _tail(out)
    result: dict[str, object] = {"returncode": proc.returncode, "command": cmd[2:], **tail}
    if proc.returncode != 0:
        raise CheckFailed(f"gpu tests: {tail['summary']}", result)
    left_out = not_collected(out)
    if left_out:  # conftest leaves out a gpu file whose imports are missing: not a pass
        result["not_collected"] = left_out
        raise CheckFailed(f"gpu tests: {len(left_out)} file(s) not collected", result)
    return result


def not_collected(pytest_output: str) -> list[str]:
    """The files that tests/conftest.py left out of a gpu-only run, with why."""
    mark = gpu_modules.NOT_COLLECTED
    return [ln.split(mark, 1)[1] for ln in pytest_output.splitlines() if mark in ln]


def _path_with(first: str) -> list[str]:
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != first]
    return [first, *rest]


class Tail(TypedDict):
    summary: str
    tail: str


def _tail(out: str) -> Tail:
    lines = [ln for ln in (out or "").splitlines() if ln.strip()]
    return {"summary": lines[-1] if lines else "", "tail": "\n".join(lines[-40:])}


# --- microbenchmarks ---------------------------------------------------------------------


class Quiet(TypedDict):
    quick: bool
    show_progress: bool


def _bench_sections(record_dir: Path | None = None) -> list[Section]:
    """The microbenchmarks; with ``record_dir``, each result is also saved there as
    ``machine/NAME.json`` (for the notebooks' replays), with the ceilings they give."""
    from perflab.machine import bandwidth, h2d, latency, launch, matmul

    kept: dict[str, BenchResult] = {}

    def keep(name: str, result: BenchResult) -> dict[str, object]:
        kept[name] = result
        if record_dir is not None:
            (record_dir / "machine").mkdir(parents=True, exist_ok=True)
            result.save(record_dir / "machine" / f"{name}.json")
        doc: dict[str, object] = result.to_dict()
        return doc

    def sweep(
        name: str, backend: str, gpu: Callable[[], BenchResult], cpu: Callable[[], BenchResult]
    ) -> dict[str, object]:
        return keep(name, gpu() if backend == "cuda" else cpu())

    def run_h2d(backend: str) -> dict[str, object]:
        if backend != "cuda":
            return {"skipped": "h2d needs a GPU (no CPU analog)"}
        return keep("h2d", h2d.run(backend="cuda", quick=True, show_progress=False))

    def run_ceilings(backend: str) -> dict[str, object]:
        from perflab.machine.ceilings import from_results
        from perflab.model.ceilings import save_ceilings

        if "bandwidth" not in kept or "matmul" not in kept:
            return {"skipped": "the ceilings need the bandwidth and matmul sections"}
        ceilings = from_results(kept["bandwidth"], kept["matmul"])
        if record_dir is not None:
            save_ceilings(ceilings, record_dir / "machine" / "ceilings.json")
        doc: dict[str, object] = ceilings.to_dict()
        return doc

    quiet: Quiet = {"quick": True, "show_progress": False}
    return [
        Section(
            "bandwidth",
            10,
            15,
            lambda b: sweep(
                "bandwidth",
                b,
                lambda: bandwidth.run(backend="cuda", **quiet),
                lambda: bandwidth.run(backend="cpu", max_bytes=16 << 20, budget_ms=10, **quiet),
            ),
        ),
        Section(
            "latency",
            10,
            15,
            lambda b: sweep(
                "latency",
                b,
                lambda: latency.run(backend="cuda", per_octave=2, max_bytes=512 << 20, **quiet),
                lambda: latency.run(backend="cpu", max_bytes=16 << 20, budget_ms=10, **quiet),
            ),
        ),
        Section(
            "launch",
            5,
            10,
            lambda b: sweep(
                "launch",
                b,
                lambda: launch.run(backend="cuda", **quiet),
                lambda: launch.run(backend="cpu", batches=(1, 100), budget_ms=10, **quiet),
            ),
        ),
        Section(
            "matmul",
            10,
            10,
            lambda b: sweep(
                "matmul",
                b,
                lambda: matmul.run(backend="cuda", **quiet),
                lambda: matmul.run(
                    backend="cpu", dtypes=("numpy-fp32",), sizes=(128, 256), budget_ms=10, **quiet
                ),
            ),
        ),
        Section("ceilings", 1, 0, run_ceilings),
        Section("h2d", 10, 0, run_h2d),
        Section("collectives", 30, 0, collectives),
    ]


def collectives(backend: str) -> dict[str, object]:
    gpus = env.gpu_devices() if backend == "cuda" else []
    if len(gpus) < 2:
        return {"skipped": f"collectives need 2 or more GPUs ({len(gpus)} here)"}
    from perflab.analysis.collectives import OPS
    from perflab.machine import collectives as coll

    sizes = [1 << 10, 1 << 20, 64 << 20]
    result = coll.run(backend="nccl", world_size=len(gpus), ops=OPS, sizes=sizes)
    doc: dict[str, object] = result.to_dict()
    return doc


def sections(
    skip_tests: bool = False,
    wheel_dir: Path = gpu_modules.WHEEL_DIR,
    record_dir: Path | None = None,
) -> list[Section]:
    """Every section in order; seconds are estimates (H200: about 2x what a run on
    one took, 2026-12-04; this 2-core VM's CPU)."""
    steps = [
        Section("modules", 5, 5, functools.partial(modules, wheel_dir=wheel_dir)),
        Section("environment", 5, 5, environment),
        Section("timing engine", 5, 15, timing_engine),
    ]
    steps += _bench_sections(record_dir)
    if not skip_tests:  # last: a run cut short by its time limit keeps the measurements
        steps.append(Section("gpu tests", 60, 45, gpu_tests))
    return steps


# --- running --------------------------------------------------------------------------


class _Estimate(TypedDict):
    estimate_s: float


class SectionEntry(_Estimate, total=False):
    """One section's line in the report: its estimate, then what happened."""

    status: str
    seconds: float
    result: object
    error: str
    traceback: str


class _Sections(TypedDict):
    sections: dict[str, SectionEntry]


class Report(_Sections, total=False):
    """What scripts/gpu-check and scripts/gpu-record write (they add keys of their own)."""

    exit_code: int


def run_section(section: Section, backend: str) -> SectionEntry:
    """``{"status": ok|failed|error|skipped, "seconds", "estimate_s", "result"|"error"}``;
    a section's exception never stops the check."""
    t0 = time.monotonic()
    entry: SectionEntry = {
        "estimate_s": section.gpu_estimate_s if backend == "cuda" else section.cpu_estimate_s
    }
    try:
        result = section.run(backend)
        skipped = isinstance(result, dict) and set(result) == {"skipped"}
        entry["status"], entry["result"] = ("skipped" if skipped else "ok"), result
    except CheckFailed as exc:
        entry["status"], entry["error"], entry["result"] = exc.status, str(exc), exc.result
    except Exception as exc:  # one broken section must not hide the others
        entry["status"], entry["error"] = "error", f"{type(exc).__name__}: {exc}"
        entry["traceback"] = traceback.format_exc(limit=6)
    entry["seconds"] = round(time.monotonic() - t0, 1)
    return entry


def run_all(steps: list[Section], backend: str, report: Report, path: Path, tag: str) -> int:
    """Run ``steps`` in order into ``report["sections"]``, saying each on stderr and writing
    ``report`` to ``path`` after every one (a run cut short keeps what finished); stop at
    once at a missing package. Sets and returns ``report["exit_code"]``. Serves
    scripts/gpu-check and scripts/gpu-record."""
    import json

    from perflab.model.serialize import write_text

    def save() -> None:
        write_text(path, json.dumps(report, indent=1, default=str))

    for section in steps:
        print(f"[{tag}] {section.name} ...", file=sys.stderr, flush=True)
        report["sections"][section.name] = entry = run_section(section, backend)
        error = f": {entry['error']}" if entry.get("error") else ""
        print(
            f"[{tag}] {section.name}: {entry['status']} in {entry['seconds']} s "
            f"(estimate {entry['estimate_s']} s){error}",
            file=sys.stderr,
            flush=True,
        )
        save()
        if entry["status"] == "missing":  # nothing after it could run: stop at once
            missing = entry.get("result")
            if isinstance(missing, dict):
                print(missing["instructions"], file=sys.stderr, flush=True)
            break
    report["exit_code"] = exit_code(report)
    save()
    return int(report["exit_code"])


def summary_table(report: Report) -> str:
    """One table of every section (status, seconds against the estimate, and the error
    or a short note), then the total."""
    head = f"{'section':16} {'status':8} {'seconds':>8} {'est.':>6}  note"
    lines = [head, "-" * len(head)]
    total = 0.0
    for name, entry in report["sections"].items():
        total += entry["seconds"]
        note = entry.get("error") or _note(name, entry.get("result"))
        lines.append(
            f"{name:16} {entry['status']:8} {entry['seconds']:8.1f} {entry['estimate_s']:6.0f}  "
            f"{note}"[:160]
        )
    lines.append(f"{'total':16} {'':8} {total:8.1f}")
    return "\n".join(lines)


def _note(name: str, result: object) -> str:
    if not isinstance(result, dict):
        return ""
    if "skipped" in result:
        return str(result["skipped"])
    if name == "gpu tests":
        return str(result.get("summary", ""))
    if name == "timing engine":
        runs = result.get("runs", {})
        return ", ".join(f"{k} {v['median_us']:.3g} us" for k, v in runs.items())[:120]
    if name == "modules":
        return _modules_note(result)
    if name == "environment":
        devices = result.get("machine", {}).get("devices", [{}])
        return str(devices[0].get("name", ""))
    if not any(k in result for k in ("series", "rows", "flops")):  # a recording's numbers
        return ", ".join(f"{k} {v:.4g}" for k, v in result.items() if _positive(v))[:120]
    warnings = result.get("warnings") or []
    return f"{len(result.get('series') or result.get('rows') or [])} series/rows" + (
        f"; {warnings[0]}" if warnings else ""
    )


def _modules_note(result: dict[str, object]) -> str:
    present = result.get("present", {})
    note = f"{len(present) if isinstance(present, dict) else 0} present"
    if result.get("installed_from_wheels"):
        note += f", installed from .whl/: {_names(result['installed_from_wheels'])}"
    if result.get("optional_absent"):
        note += f"; optional, absent: {_names(result['optional_absent'])}"
    return note


def _names(value: object) -> str:
    """A list's items, or a dict's keys, comma-separated."""
    return ", ".join(str(v) for v in value) if isinstance(value, (list, dict)) else str(value)


def exit_code(report: Report) -> int:
    """0 when every section is ok or skipped; 1 when any failed or errored; 2 when
    packages are missing (the check stopped before measuring anything)."""
    statuses = {e["status"] for e in report["sections"].values()}
    if "missing" in statuses:
        return 2
    return 1 if statuses & {"failed", "error"} else 0
