"""What the microbenchmarks say about their own figures: latency's points per octave as
asked, the peak matmul's fraction was taken against, and launch's host clock beside the
published reference figure."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from perflab.errors import InputError
from perflab.machine import latency, launch, matmul
from perflab.model.machine import BenchResult

KIB = 1024


def _chase(**options: object) -> BenchResult:
    return latency.run(
        backend="cpu",
        min_bytes=4 * KIB,
        max_bytes=64 * KIB,
        budget_ms=2,
        steps=2000,
        show_progress=False,
        **options,  # type: ignore[arg-type]
    )


def test_latency_quick_keeps_an_explicit_per_octave() -> None:
    """gpu-check asks for quick=True, per_octave=2: four octaves give 9 points, not 5."""
    asked = _chase(quick=True, per_octave=2)
    assert len(asked.get("chase").x) == 9
    assert asked.options["per_octave"] == 2
    default = _chase(quick=True)
    assert len(default.get("chase").x) == 5 and default.options["per_octave"] == 1
    assert _chase().options["per_octave"] == 2


def test_matmul_records_the_peak_its_fraction_used(tmp_path: Path) -> None:
    result = matmul.run(
        backend="cpu",
        dtypes=("numpy-fp32",),
        sizes=(32,),
        budget_ms=2,
        peaks={"numpy-fp32": 1000.0},
        show_progress=False,
    )
    best = matmul.best_gflops(result)["numpy-fp32"]
    assert result.options["fraction_of_peak"] == {"numpy-fp32": best / 1000.0}
    used = result.options["peak_used"]["numpy-fp32"]
    assert used == {
        "gflops": 1000.0,
        "figure": "numpy-fp32 peak",
        "dense": None,  # a caller's figure: dense or sparse is not known
        "source": "peaks= argument",
    }
    again = BenchResult.load(result.save(tmp_path / "matmul.json"))
    assert again.options["peak_used"] == result.options["peak_used"]
    assert again.options["fraction_of_peak"] == result.options["fraction_of_peak"]


def test_matmul_on_a_gpu_names_the_dense_spec_figure_and_its_source() -> None:
    used = matmul.peaks_used("NVIDIA H200", None, on_gpu=True)
    bf16, fp8 = used["bf16"], used["fp8"]
    assert bf16["figure"] == "BF16/FP16 tensor" and bf16["dense"] is True
    assert bf16["device"] == "H200" and "datasheet" in bf16["source"]
    assert "sparsity" in bf16["derived"]  # the datasheet's sparse figure, halved
    assert math.isclose(fp8["gflops"], 2 * bf16["gflops"], rel_tol=0.01)
    assert used["fp16"]["figure"] == "BF16/FP16 tensor"
    assert matmul.spec_peaks("NVIDIA H200") == {d: p["gflops"] for d, p in used.items()}
    assert matmul.peaks_used("NVIDIA H200", None, on_gpu=False) == {}


@pytest.mark.parametrize("bad", [0.0, -5.0, math.nan, math.inf, "989", True])
def test_matmul_refuses_a_peak_that_is_not_a_positive_number(bad: object) -> None:
    with pytest.raises(InputError, match="positive finite"):
        matmul.run(
            backend="cpu",
            dtypes=("numpy-fp32",),
            sizes=(32,),
            peaks={"numpy-fp32": bad},  # type: ignore[dict-item]
            show_progress=False,
        )


def test_launch_on_cuda_names_each_series_clock_beside_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CUDA branch, run on the CPU: the timing engine on the host clock stands in for
    the CUDA one, Python calls for the kernels, a no-op for the synchronisation."""
    real = launch.median_call_ns
    clocks: dict[str, str] = {}

    def engine(fn: Callable[[], object], backend: str, **kw: object) -> float:
        clocks[str(kw["name"]).rsplit(" x", 1)[0]] = backend
        kw.pop("graph", None)
        return real(fn, "cpu", **kw)  # type: ignore[arg-type]

    cpu = launch.run(backend="cpu", batches=(1,), budget_ms=2, show_progress=False)
    assert launch.METHOD_NOTE not in cpu.warnings  # no kernels, no reference to compare
    fake_torch = SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(launch, "resolve_backend", lambda backend: "cuda")
    monkeypatch.setattr(launch, "import_extra", lambda name, needs: fake_torch)
    monkeypatch.setattr(launch, "_cuda_kernels", lambda torch: {"empty": lambda: None})
    monkeypatch.setattr(launch, "median_call_ns", engine)
    monkeypatch.setattr(launch, "GRAPH_NODES", (10,))
    result = launch.run(backend="cuda", batches=(1, 10), budget_ms=2, show_progress=False)
    assert [s.name for s in result.series] == [
        f"empty/{launch.GPU_STREAM}",
        f"empty/{launch.GPU_GRAPH}",
        f"empty/{launch.HOST_DISPATCH}",
        f"empty/{launch.HOST_SYNC}",
    ]
    # the GPU series on the engine's CUDA clock, the host series on the host's
    assert clocks == {name: "cuda" if "GPU clock" in name else "cpu" for name in clocks}
    assert len(clocks) == 4
    assert launch.METHOD_NOTE in result.warnings and launch.REFERENCE_NOTE in result.warnings
    text = str(result)
    assert "GPU clock" in text and "2.4-2.5 us" in text and "torch's dispatch" in text
