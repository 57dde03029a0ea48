"""gpu-check's microbenchmark sections: bandwidth, latency, launch and matmul (small sweeps
on the CPU in a dry run), the ceilings they give, host-to-device copies and collectives.
With a record folder, each result is also saved there as ``machine/NAME.json`` (what the
notebooks replay), with the ceilings."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from perflab.capture import env
from perflab.machine.gpu_check_run import Section

if TYPE_CHECKING:
    from perflab.model.machine import BenchResult


class Quiet(TypedDict):
    quick: bool
    show_progress: bool


QUIET: Quiet = {"quick": True, "show_progress": False}


def _bandwidth(backend: str) -> BenchResult:
    from perflab.machine import bandwidth

    if backend == "cuda":
        return bandwidth.run(backend="cuda", **QUIET)
    return bandwidth.run(backend="cpu", max_bytes=16 << 20, budget_ms=10, **QUIET)


def _latency(backend: str) -> BenchResult:
    from perflab.machine import latency

    if backend == "cuda":
        return latency.run(backend="cuda", per_octave=2, max_bytes=512 << 20, **QUIET)
    return latency.run(backend="cpu", max_bytes=16 << 20, budget_ms=10, **QUIET)


def _launch(backend: str) -> BenchResult:
    from perflab.machine import launch

    if backend == "cuda":
        return launch.run(backend="cuda", **QUIET)
    return launch.run(backend="cpu", batches=(1, 100), budget_ms=10, **QUIET)


def _matmul(backend: str) -> BenchResult:
    from perflab.machine import matmul

    if backend == "cuda":
        return matmul.run(backend="cuda", **QUIET)
    return matmul.run(
        backend="cpu", dtypes=("numpy-fp32",), sizes=(128, 256), budget_ms=10, **QUIET
    )


# (name, H200 seconds, dry-run seconds, the sweep): the ceilings read bandwidth and matmul
SWEEPS: tuple[tuple[str, float, float, Callable[[str], BenchResult]], ...] = (
    ("bandwidth", 10, 15, _bandwidth),
    ("latency", 10, 15, _latency),
    ("launch", 5, 10, _launch),
    ("matmul", 10, 10, _matmul),
)


class BenchSections:
    """The microbenchmark sections of one check: what each measured is kept for the
    ceilings, and saved under ``record_dir`` when there is one."""

    def __init__(self, record_dir: Path | None = None) -> None:
        self.record_dir = record_dir
        self.kept: dict[str, BenchResult] = {}

    def keep(self, name: str, result: BenchResult) -> dict[str, object]:
        self.kept[name] = result
        if self.record_dir is not None:
            (self.record_dir / "machine").mkdir(parents=True, exist_ok=True)
            result.save(self.record_dir / "machine" / f"{name}.json")
        doc: dict[str, object] = result.to_dict()
        return doc

    def sweep(
        self, name: str, measure: Callable[[str], BenchResult], backend: str
    ) -> dict[str, object]:
        return self.keep(name, measure(backend))

    def h2d(self, backend: str) -> dict[str, object]:
        from perflab.machine import h2d

        if backend != "cuda":
            return {"skipped": "h2d needs a GPU (no CPU analog)"}
        return self.keep("h2d", h2d.run(backend="cuda", **QUIET))

    def ceilings(self, backend: str) -> dict[str, object]:
        from perflab.machine.ceilings import from_results
        from perflab.model.ceilings import save_ceilings

        if "bandwidth" not in self.kept or "matmul" not in self.kept:
            return {"skipped": "the ceilings need the bandwidth and matmul sections"}
        ceilings = from_results(self.kept["bandwidth"], self.kept["matmul"])
        if self.record_dir is not None:
            save_ceilings(ceilings, self.record_dir / "machine" / "ceilings.json")
        doc: dict[str, object] = ceilings.to_dict()
        return doc

    def sections(self) -> list[Section]:
        sweeps = [
            Section(name, gpu_s, cpu_s, functools.partial(self.sweep, name, measure))
            for name, gpu_s, cpu_s, measure in SWEEPS
        ]
        return [
            *sweeps,
            Section("ceilings", 1, 0, self.ceilings),
            Section("h2d", 10, 0, self.h2d),
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
