"""Microbenchmarks on this machine's real hardware (the CPU analogs), their model objects,
views and CLI; the CUDA paths are gpu-marked."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from perflab.capture import env
from perflab.cli import main
from perflab.errors import InputError, NoGPUError, SchemaError, ToolchainError
from perflab.machine import bandwidth, h2d, latency, launch, matmul, topology
from perflab.machine._common import size_sweep
from perflab.model.machine import BenchResult, Level, Series, load_result

KIB, MIB = 1 << 10, 1 << 20


@pytest.fixture(scope="module")
def cpu_latency() -> BenchResult:
    # 4 KiB .. 64 MiB, one point per octave: L1, L2 and memory on any CPU
    return latency.run(backend="cpu", quick=True, show_progress=False)


def test_microbenchmarks_are_attributes_of_perflab_machine():
    import perflab

    assert perflab.machine.latency is latency
    assert perflab.machine.topology is topology
    with pytest.raises(AttributeError, match="no attribute 'chase'"):
        _ = perflab.machine.chase


def test_compiled_chase_follows_the_permutation():
    links = latency.cyclic_permutation(1000, 8, seed=5)
    starts = np.flatnonzero(links[::8] != links[::8] + 1)  # every line is linked
    assert starts.size == 1000
    # one cycle through all lines: 1000 hops come back to the start, fewer do not
    assert latency.follow(links, 0, 1000) == 0
    assert all(latency.follow(links, 0, k) != 0 for k in (1, 17, 999))
    chain = latency._HostChain(1000 * 64, 64, seed=5)
    try:
        assert chain.walk(123) == latency.follow(chain.links, 0, 123)
        assert chain.walk(877) == 0  # the state carried over: 123 + 877 = a full cycle
    finally:
        chain.close()


def test_cpu_latency_levels_are_found_and_ordered(cpu_latency):
    chase = cpu_latency.get("chase")
    assert cpu_latency.backend == "cpu" and cpu_latency.benchmark == "latency"
    assert np.all(chase.y > 0)
    assert np.all(np.diff(chase.x) > 0)
    # latency grows with the working set: memory is far slower than the first cache
    assert chase.y[-1] > 5 * chase.y[0]
    levels = chase.levels
    assert len(levels) >= 2, chase.points()
    assert [lv.value for lv in levels] == sorted(lv.value for lv in levels)
    assert levels[0].name == "L1"
    assert any("no GPU" in w for w in cpu_latency.warnings)


def test_latency_json_shape(cpu_latency):
    from perflab.machine._common import result_json

    doc = json.loads(json.dumps(result_json(cpu_latency), allow_nan=False))
    assert {"points", "levels"} <= set(doc)
    assert all(set(p) == {"bytes", "ns"} for p in doc["points"])  # no cycles on a CPU
    assert all(isinstance(p["bytes"], int) for p in doc["points"])
    assert all(set(lv) == {"name", "bytes_max", "ns"} for lv in doc["levels"])
    ns = [lv["ns"] for lv in doc["levels"]]
    assert ns == sorted(ns)  # fastest first


def test_save_replay_and_views(cpu_latency, tmp_path):
    path = cpu_latency.save(tmp_path / "lat.json")
    again = load_result(path)
    assert isinstance(again, BenchResult)
    assert again.replayed_from == str(path)
    assert np.array_equal(again.get("chase").y, cpu_latency.get("chase").y)
    assert [lv.to_dict() for lv in again.get("chase").levels] == [
        lv.to_dict() for lv in cpu_latency.get("chase").levels
    ]
    bundle = again._repr_mimebundle_()
    assert "replayed from" in bundle["text/plain"] and "<svg" in bundle["text/html"]
    frame = again.to_pandas()
    assert list(frame.columns[:3]) == ["series", "bytes", "ns"]
    assert len(frame) == len(again.get("chase"))


def test_cli_latency_json_and_replay(tmp_path, capsys):
    saved = tmp_path / "lat.json"
    assert main(["machine", "latency", "--quick", "--json", "--save", str(saved)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "cpu" and len(doc["levels"]) >= 2
    assert main(["machine", "latency", "--replay", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "plateaus:" in out and "replayed from" in out


def test_cpu_bandwidth_positive_and_memory_slower_than_caches():
    result = bandwidth.run(
        backend="cpu", quick=True, min_bytes=64 * KIB, max_bytes=128 * MIB, show_progress=False
    )
    assert [s.name for s in result.series] == ["copy", "triad"]
    for s in result.series:
        assert s.y_unit == "GBps" and np.all(s.y > 0) and np.all(np.isfinite(s.y))
        # working sets past every cache move data slower than those that fit in L2
        in_l2 = s.y[(s.x >= 128 * KIB) & (s.x <= 512 * KIB)]
        in_dram = s.y[s.x >= 128 * MIB]
        assert np.median(in_dram) < np.median(in_l2)


def test_cpu_launch_and_matmul_small():
    lr = launch.run(backend="cpu", batches=(10, 100), budget_ms=10, show_progress=False)
    assert [s.name for s in lr.series] == ["python call", "torch op"]
    costs = launch.steady_us(lr)
    assert all(v > 0 for v in costs.values())
    assert costs["torch op"] > costs["python call"]  # a torch op does a Python call and more
    mr = matmul.run(
        backend="cpu",
        dtypes=("numpy-fp64", "torch-fp32"),
        sizes=(64, 128),
        budget_ms=10,
        show_progress=False,
    )
    best = matmul.best_gflops(mr)
    assert set(best) == {"numpy-fp64", "torch-fp32"} and all(v > 0 for v in best.values())


def test_bad_options_are_perflab_errors():
    with pytest.raises(InputError, match="unknown matmul dtype"):
        matmul.run(backend="cpu", dtypes=("fp4",))
    with pytest.raises(InputError, match="unknown bandwidth kernel"):
        bandwidth.run(backend="cpu", kernels=("scale",))
    with pytest.raises(InputError, match="backend"):
        latency.run(backend="tpu")
    with pytest.raises(InputError, match="size range"):
        size_sweep(1024, 512)


@pytest.mark.skipif(env.cuda_available(), reason="a GPU is present")
def test_gpu_only_benchmarks_say_no_gpu(capsys):
    with pytest.raises(NoGPUError, match=r"^no GPU: h2d \(host-device copies\) needs a CUDA GPU$"):
        h2d.run()
    with pytest.raises(NoGPUError, match=r"^no GPU: backend 'cuda' needs a CUDA GPU$"):
        latency.run(backend="cuda")
    assert main(["machine", "h2d"]) == 2
    assert "no GPU" in capsys.readouterr().err


def test_size_sweep_is_log_spaced_and_aligned():
    sizes = size_sweep(4 * KIB, 1 * MIB, per_octave=2)
    assert sizes[0] == 4 * KIB and sizes[-1] == 1 * MIB
    assert len(sizes) == 17 and all(s % 64 == 0 for s in sizes)


# --- model files ----------------------------------------------------------------------


def make_result(name: str = "copy") -> BenchResult:
    s = Series(
        name,
        np.array([1024, 2048]),
        np.array([10.0, 20.0]),
        "bytes",
        "GBps",
        levels=[Level("L1", 1024, 2048, 15.0, 2)],
    )
    return BenchResult(benchmark="bandwidth", device="dev", backend="cpu", series=[s])


def test_series_columns_must_match():
    with pytest.raises(ValueError, match="column y has 1 values"):
        Series("s", np.array([1, 2]), np.array([1.0]))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        json.dumps({"perflab": "TimingResult", "schema_version": 1}),
        json.dumps({"perflab": "BenchResult", "schema_version": 99}),
        json.dumps({"perflab": "BenchResult", "schema_version": 1, "benchmark": "x"}),
        json.dumps(
            {
                "perflab": "BenchResult",
                "schema_version": 1,
                "benchmark": "x",
                "device": "d",
                "backend": "cpu",
                "series": [{"name": "s", "x": [1, 2], "y": [1]}],
            }
        ),
        json.dumps(
            {
                "perflab": "BenchResult",
                "schema_version": 1,
                "benchmark": "x",
                "device": "d",
                "backend": "cpu",
                "series": "nope",
            }
        ),
    ],
)
def test_damaged_files_raise_schema_error(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SchemaError) as info:
        load_result(path)
    assert str(path) in str(info.value)


def test_mutated_saved_result_never_crashes_otherwise(tmp_path):
    """Byte-level mutations of a saved file: it loads, or it is a SchemaError."""
    good = make_result().save(tmp_path / "good.json").read_bytes()
    rng = np.random.default_rng(0)
    outcomes: list[str] = []
    for i in range(200):
        data = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(len(data)))] = int(rng.integers(32, 127))
        path = tmp_path / f"m{i}.json"
        path.write_bytes(bytes(data))
        try:
            load_result(path)
            outcomes.append("loaded")
        except SchemaError:
            outcomes.append("rejected")
    # anything else (KeyError, TypeError...) would have escaped and failed the test
    assert "rejected" in outcomes


def test_html_escapes_names():
    r = make_result("<script>alert(1)</script>")
    r.device = "<b>dev</b>"
    r.warnings.append("<img src=x>")
    bundle = r._repr_mimebundle_()
    for page in (bundle["text/html"], bundle["image/svg+xml"]):  # the chart's picture too
        assert "<script>alert(1)</script>" not in page and "<b>dev</b>" not in page
        assert "&lt;script&gt;" in page
    assert "<img src=x>" not in bundle["text/html"]


# --- topology -------------------------------------------------------------------------

# The layout of `nvidia-smi topo -m` (header indented by a tab, one row per device, then
# the legend); written here for the test, link codes as nvidia-smi documents them.
TOPO_SAMPLE = (
    "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tNV18\tNV18\tPIX\t0-47\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNV18\tNV18\tPXB\t0-47\t0\t\tN/A\n"
    "GPU2\tNV18\tNV18\t X \tNV18\tSYS\t48-95\t1\t\tN/A\n"
    "GPU3\tNV18\tNV18\tNV18\t X \tSYS\t48-95\t1\t\tN/A\n"
    "NIC0\tPIX\tPXB\tSYS\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
)
NCCL_SAMPLE = (
    "host:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    "host:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
    "host:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0\n"
    "host:1:1 [0] NCCL INFO Using network IB\n"
)


def test_topology_parsers():
    topo = topology.from_text(TOPO_SAMPLE, NCCL_SAMPLE)
    assert topo.devices == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0"]
    assert topo.link("GPU0", "GPU3") == "NV18" and topo.link("GPU2", "NIC0") == "SYS"
    assert topology.describe_link("NV18") == "18 bonded NVLinks"
    assert topo.nccl_transports == {"P2P/CUMEM/read": 2, "NET/IB/0": 1}
    assert topo.nccl_network == "IB"
    assert "NV18" in str(topo)


@pytest.mark.parametrize(
    "text",
    ["", "no matrix here\n", "\tGPU0\tGPU1\nGPU0\t X \n", "\tGPU0\tGPU1\nGPU0\t X \tNV4\n"],
)
def test_topology_bad_text_is_input_error(text):
    with pytest.raises(InputError):
        topology.parse_topo_matrix(text)


# --- review fixes: TF32 switch, failing sizes, TLB names, chase preflight, noise log -----


def test_tf32_switch_uses_fp32_precision_and_restores_it() -> None:
    torch = pytest.importorskip("torch")
    mm = torch.backends.cuda.matmul
    if not hasattr(mm, "fp32_precision"):
        pytest.skip("this torch has only allow_tf32")
    before = mm.fp32_precision
    with matmul._tf32(torch, True):
        assert mm.fp32_precision == "tf32"
    assert mm.fp32_precision == before
    with matmul._tf32(torch, False):
        assert mm.fp32_precision == "ieee"
    assert mm.fp32_precision == before


def test_one_failing_size_keeps_the_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    real = matmul._time_product

    def flaky(dtype: str, n: int, backend: str, budget_ms: float, noise: Any) -> float:
        if n == 256 and dtype == "numpy-fp32":
            raise RuntimeError("out of memory (simulated at one size)")
        return real(dtype, n, backend, budget_ms, noise)

    monkeypatch.setattr(matmul, "_time_product", flaky)
    r = matmul.run(
        backend="cpu", dtypes=("numpy-fp32",), sizes=(128, 256), budget_ms=10, show_progress=False
    )
    s = r.get("numpy-fp32")
    assert np.isfinite(s.y[0]) and np.isnan(s.y[1])
    assert any("numpy-fp32 n=256: RuntimeError" in w for w in r.warnings)
    assert matmul.best_gflops(r) == {"numpy-fp32": float(s.y[0])}
    assert "n/a" in str(r) and "<svg" in r._repr_mimebundle_()["image/svg+xml"]


def test_gpu_levels_past_l2_say_tlb_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    from perflab.machine import _common

    monkeypatch.setattr(
        _common, "cache_capacities", lambda on_gpu: {"L1": 256 * KIB, "L2": 50 * MIB}
    )
    sizes = np.array([2**k for k in range(12, 34)], dtype=float)  # 4 KiB .. 8 GiB
    ns = np.select(
        [sizes <= 128 * KIB, sizes <= 32 * MIB, sizes <= 1 << 30], [20.0, 150.0, 500.0], 900.0
    )
    names = [lv.name for lv in latency._named_levels(Series("chase", sizes, ns), on_gpu=True)]
    assert names[:2] == ["L1", "L2"]
    assert "HBM (+TLB misses)" in names and "HBM + more TLB misses" in names
    assert not any(name.endswith("far") and name.startswith("HBM") for name in names)


def test_latency_stride_is_checked_and_recorded() -> None:
    with pytest.raises(InputError, match="multiple of 8"):
        latency.run(backend="cpu", stride_bytes=12, show_progress=False)
    r = latency.run(
        backend="cpu",
        min_bytes=64 * KIB,
        max_bytes=128 * KIB,
        stride_bytes=4096,
        steps=1 << 10,
        budget_ms=5,
        show_progress=False,
    )
    assert r.options["stride_bytes"] == 4096


class _HostChase:
    """A chase on the host, for the preflight's choice (not a GPU path)."""

    method = "host"

    def walk(self, links: Any, steps: int) -> int:
        return latency.follow(links, 0, steps)


class _WrongChase(_HostChase):
    method = "wrong"

    def walk(self, links: Any, steps: int) -> int:
        return -1


def test_chase_preflight_takes_the_first_that_walks_right() -> None:
    def broken() -> Any:
        raise ImportError("No module named 'cupy'")

    broken.method = "CUDA C++ through CuPy"  # type: ignore[attr-defined]
    assert latency.chase_backend((broken, _WrongChase, _HostChase)).method == "host"
    with pytest.raises(ToolchainError) as info:
        latency.chase_backend((broken, _WrongChase))
    text = str(info.value)
    assert "No module named 'cupy'" in text and "preflight walk ended at -1" in text


def test_triton_chase_compiles_for_sm90_with_serial_loads() -> None:
    pytest.importorskip("triton")
    from perflab.capture.compile import compile_triton
    from perflab.machine import _triton_chase

    r = compile_triton(
        _triton_chase.chase_kernel,
        signature=_triton_chase.SIGNATURE,
        constexprs={},
        arch="sm_90",
        num_warps=1,
        num_stages=1,
    )
    loads = [ln for ln in r.ptx.splitlines() if "ld.global" in ln]
    assert len(loads) == 2  # the start pointer, then one dependent load per hop
    assert any("st.global" in ln for ln in r.ptx.splitlines())  # the result is stored


def test_noise_log_keeps_host_bound_and_throttle_warnings() -> None:
    from perflab.machine._common import NoiseLog

    log = NoiseLog()
    log.add("copy 1 MiB", ["host-bound: in 3 of 10 samples ...", "no GPU: host clock"])
    log.add("copy 2 MiB", ["clocks throttled during the run: power 1.0 ms"])
    log.add("copy 4 MiB", ["throttle check unavailable: pynvml is not installed"])
    log.add("copy 8 MiB", ["throttle check unavailable: pynvml is not installed"])
    lines = log.summary()
    assert any(
        ln.startswith("host-bound samples") and "1 of 4 points (copy 1 MiB)" in ln for ln in lines
    )
    assert any(ln.startswith("clock throttling") and "copy 2 MiB" in ln for ln in lines)
    assert lines.count("throttle check unavailable: pynvml is not installed") == 1
    assert not any("no GPU" in ln for ln in lines)


# --- CUDA paths -----------------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_latency_has_cycles_and_levels() -> None:
    r = latency.run(backend="cuda", quick=True, max_bytes=256 * MIB, show_progress=False)
    chase = r.get("chase")
    assert np.all(chase.y > 0)
    if "chase kernel: CUDA C++ through CuPy" in r.warnings:
        assert np.all(chase.extra["cycles"] > 0)
    assert chase.y[-1] > 3 * chase.y[0]
    assert len(chase.levels) >= 2


@pytest.mark.gpu
def test_cuda_bandwidth_launch_matmul_h2d_run():
    bw = bandwidth.run(backend="cuda", quick=True, max_bytes=256 * MIB, show_progress=False)
    assert all(np.all(s.y > 0) for s in bw.series)
    copy = bw.get("copy")  # L2-sized points repeat in one graph; past the L2 they run cold
    assert copy.extra["repeats"][0] > 1 and np.all(copy.extra["repeats"] >= 1)
    assert bw.options["empty_call_ns"]["copy"] > 0
    assert copy.extra["hot"].tolist() == [float(x <= bw.options["hot_up_to_bytes"]) for x in copy.x]
    lr = launch.run(backend="cuda", batches=(10, 100), show_progress=False)
    costs = launch.steady_us(lr)
    # a launch the host waits for costs more than one back to back, on the GPU's clock
    assert costs["empty/launch+sync, host clock"] > costs["empty/stream, GPU clock"] > 0
    assert costs["empty/stream, GPU clock"] > costs["empty/graph node, GPU clock"] > 0
    assert costs["empty/host dispatch per launch"] > 0
    assert lr.get("empty/graph node, GPU clock").x.tolist() == list(launch.GRAPH_NODES)
    mm = matmul.run(backend="cuda", dtypes=("fp32", "bf16"), sizes=(1024,), show_progress=False)
    assert all(v > 0 for v in matmul.best_gflops(mm).values())
    hd = h2d.run(quick=True, max_bytes=16 * MIB, show_progress=False)
    assert len(hd.series) == 4 and all(np.all(s.y > 0) for s in hd.series)


def test_sweep_kernels_store_their_results() -> None:
    """The trap of work whose result is never used (and so may be skipped or cached):
    every sweep kernel writes its result into memory that outlives the call, and the
    result is right."""
    copy = bandwidth._numpy_kernel("copy", 1000)
    copy()
    src, dst = (cell.cell_contents for cell in copy.__closure__ or ())
    assert np.array_equal(np.asarray(src), np.asarray(dst))
    product = matmul._cpu_matmul("numpy-fp64", 64)
    out = product()
    cells = [c.cell_contents for c in product.__closure__ or ()]
    a, b, stored = (c for c in cells if isinstance(c, np.ndarray))
    assert out is stored and np.allclose(stored, a @ b)


def _cpu_chase(
    monkeypatch: pytest.MonkeyPatch, steps: list[tuple[float, float]], last: float
) -> Series:
    """A CPU chase from 4 KiB to 256 MiB on a machine reporting a 32 KiB L1, 1 MiB L2 and
    32 MiB L3: ``steps`` are (largest size, ns) pairs, ``last`` the ns past them."""
    monkeypatch.setattr(
        latency, "cache_capacities", lambda on_gpu: {"L1": 32 * KIB, "L2": MIB, "L3": 32 * MIB}
    )
    sizes = np.array([2**k for k in range(12, 29)], dtype=float)  # 4 KiB .. 256 MiB
    ns = np.select([sizes <= size for size, _ in steps], [v for _, v in steps], last)
    return Series("chase", sizes, ns)


def test_cpu_plateau_as_slow_as_memory_inside_the_l3_is_named_dram_and_explained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A VM's view of a shared L3: the chase steps up to memory-like latency well inside the
    L3's reported size; that plateau must not read as the L3's latency."""
    series = _cpu_chase(
        monkeypatch, [(16 * KIB, 1.6), (256 * KIB, 4.7), (2 * MIB, 16.0), (32 * MIB, 158.0)], 216.0
    )
    levels, [warning] = latency._cpu_levels(series)
    assert [lv.name for lv in levels] == ["L1", "L2", "L3", "DRAM", "DRAM (slower)"]
    assert [lv.value for lv in levels[2:]] == [16.0, 158.0, 216.0]
    assert "4 MiB-32 MiB (158 ns) fits in the reported L3 (32 MiB)" in warning
    assert (
        "0.73x the 216 ns of the working sets past every cache" in warning
        and "heuristic" in warning
    )
    [slower] = latency._slower_repeat_warnings(levels)
    assert slower.startswith("a second DRAM plateau (216 ns) is 1.4x the first")
    assert latency._named_levels(series, on_gpu=False) == levels


def test_cpu_cache_plateaus_well_below_memory_keep_their_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    series = _cpu_chase(monkeypatch, [(16 * KIB, 1.6), (256 * KIB, 4.7), (16 * MIB, 16.0)], 110.0)
    levels, warnings = latency._cpu_levels(series)
    assert [lv.name for lv in levels] == ["L1", "L2", "L3", "DRAM"] and warnings == []
    # an L3 that held less than reported, still faster than a third of memory: a cache
    inside = _cpu_chase(
        monkeypatch, [(16 * KIB, 1.6), (256 * KIB, 4.7), (2 * MIB, 16.0), (16 * MIB, 30.0)], 110.0
    )
    levels, warnings = latency._cpu_levels(inside)
    assert [lv.name for lv in levels] == ["L1", "L2", "L3", "L3 (slower)", "DRAM"]
    assert (
        warnings == []
        and "two plateaus fit in the reported L3" in latency._slower_repeat_warnings(levels)[0]
    )
