"""The bandwidth loops: passes over the arrays inside one call (C on the CPU, Triton on a
GPU), so that cache-sized points are not bound by call overhead; which engine measured
each point, saved and loaded; plateaus split at the caches' sizes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from perflab.errors import SchemaError
from perflab.machine import _bandwidth_kernels as loops
from perflab.machine import _common, bandwidth
from perflab.machine.ceilings import bandwidth_ceilings
from perflab.model.machine import BenchResult, Series

KIB, MIB = 1 << 10, 1 << 20
SMALL_CACHES = {"L1": 32 * KIB, "L2": 256 * KIB}
ROOT = Path(__file__).resolve().parents[1]
needs_cc = pytest.mark.skipif(
    shutil.which("gcc") is None and shutil.which("cc") is None and not os.environ.get("PERFLAB_CC"),
    reason="no C compiler",
)

# --- the C loops ----------------------------------------------------------------------


@needs_cc
@pytest.mark.parametrize("n", [1, 7, 16, 33, 1000, 1021])
def test_c_loops_compute_every_pass(n: int):
    values = np.arange(n, dtype=np.float64) % 7  # small integers: sums and FMAs are exact
    read = loops.CLoop("read", n, passes=5, scale=3.0)
    read.arrays[0][:] = values
    read()
    assert read.sum[0] == 5 * values.sum()  # the tail too, once per pass
    copy = loops.CLoop("copy", n, passes=3, scale=3.0)
    copy.arrays[1][:] = values
    copy()
    assert np.array_equal(copy.arrays[0], values)
    triad = loops.CLoop("triad", n, passes=2, scale=3.0)
    triad.arrays[0][:] = -1.0
    triad.arrays[1][:], triad.arrays[2][:] = values, values + 1
    triad()
    assert np.array_equal(triad.arrays[0], values + 3.0 * (values + 1))


@needs_cc
def test_c_loop_arrays_start_on_a_cache_line_and_the_build_is_named():
    loop = loops.CLoop("triad", 100, passes=1, scale=3.0)
    assert all(a.ctypes.data % 64 == 0 and a.size == 100 for a in loop.arrays)
    assert loops.c_preflight().startswith("C loop (")
    assert loops.c_library().flags[0] == "-O2"


@needs_cc
def test_a_compiler_refusing_march_native_builds_the_portable_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    real = shutil.which("gcc") or shutil.which("cc") or os.environ["PERFLAB_CC"]
    picky = tmp_path / "picky-cc"
    picky.write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ "$a" = -march=native ] && exit 1; done\nexec {real} "$@"\n'
    )
    picky.chmod(0o755)
    monkeypatch.setenv("PERFLAB_CC", str(picky))
    loops.c_library.cache_clear()
    try:
        assert loops.c_library().flags == ("-O2",)
        test_c_loops_compute_every_pass(1021)  # 16-byte vectors, same results
    finally:
        loops.c_library.cache_clear()


# --- passes and engines (pure) --------------------------------------------------------


def test_passes_fill_one_call_with_the_window():
    # 8 KiB per pass at 400 bytes/ns: 20.48 ns; 2442 passes make 50 us
    assert bandwidth.passes_for(8 * KIB, 400.0) == 2442
    assert bandwidth.passes_for(1 << 30, 400.0) == 1
    assert bandwidth.passes_for(8, 400.0) == bandwidth.MAX_PASSES  # capped
    sizes = [2**k for k in range(6, 34)]
    passes = [bandwidth.passes_for(s, 20_000.0) for s in sizes]
    assert passes == sorted(passes, reverse=True)
    for size, p in zip(sizes, passes, strict=True):
        assert p * size / 20_000.0 >= bandwidth.WINDOW_NS or p in (1, bandwidth.MAX_PASSES)


def test_each_point_gets_the_loop_engine_where_it_works():
    cpu = bandwidth.Engines("cpu", "C loop (gcc -O2)")
    assert {cpu.for_point(k, h) for k in ("copy", "read") for h in (True, False)} == {"c-loop"}
    assert bandwidth.Engines("cpu", None, "no C loop").for_point("copy", True) == "numpy"
    gpu = bandwidth.Engines("cuda", "Triton loop")
    assert gpu.for_point("copy", True) == "triton-loop"
    assert gpu.for_point("copy", False) == "torch-graph"  # past the last cache
    assert gpu.for_point("read", False) == "triton-loop"  # torch has no read kernel
    assert bandwidth.Engines("cuda", None, "no Triton").for_point("triad", True) == "torch-graph"


# --- the sweep with a fake timer ------------------------------------------------------


class PassTimer:
    """A call costs EMPTY_NS plus its passes over its working set at RATE bytes per ns."""

    EMPTY_NS = 400.0
    RATE = 100.0

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, fn: Any, backend: str, **kw: Any) -> float:
        self.calls.append({"backend": backend, "passes": getattr(fn, "passes", 1), **kw})
        words = kw["name"].split()
        moved = 0 if words[1] == "empty" else int(words[1])
        return self.EMPTY_NS + getattr(fn, "passes", 1) * moved / self.RATE


@pytest.fixture
def pass_timer(monkeypatch: pytest.MonkeyPatch) -> PassTimer:
    timer = PassTimer()
    monkeypatch.setattr(bandwidth, "median_call_ns", timer)
    monkeypatch.setattr(bandwidth, "cache_capacities", lambda on_gpu: dict(SMALL_CACHES))
    monkeypatch.setattr(_common, "cache_capacities", lambda on_gpu: dict(SMALL_CACHES))
    return timer


@needs_cc
def test_cpu_points_are_c_loops_with_their_passes_recorded(pass_timer: PassTimer):
    result = bandwidth.run(
        backend="cpu", kernels=("copy", "read"), min_bytes=8 * KIB, max_bytes=MIB, per_octave=1
    )
    for kind in ("copy", "read"):
        s = result.get(kind)
        assert bandwidth.point_engines(result, kind) == ["c-loop"] * len(s)
        moved = s.x // bandwidth.ARRAYS[kind] // 8 * bandwidth.ARRAYS[kind] * 8
        want = [bandwidth.passes_for(m, bandwidth.FASTEST_GBPS["cpu"]) for m in moved]
        assert s.extra["passes"].tolist() == want and want[0] > 1
        assert np.array_equal(s.extra["repeats"], s.extra["passes"])  # one call per window
        # the floor is one pass over 16 elements; no point comes near it
        assert not bandwidth.overhead_bound(s.extra["overhead_share"]).any()
    empties = [c for c in pass_timer.calls if "empty" in c["name"]]
    assert {c["name"] for c in empties} == {"copy empty call (c-loop)", "read empty call (c-loop)"}
    assert all(c["passes"] == 1 for c in empties)
    # batched: one alone would sit within the timer's floor
    assert {c["number"] for c in empties} == {bandwidth.MAX_REPEATS}
    assert {c["number"] for c in pass_timer.calls} - {bandwidth.MAX_REPEATS} == {1}
    assert result.options["empty_call_ns_by_engine"] == {
        "copy": {"c-loop": PassTimer.EMPTY_NS},
        "read": {"c-loop": PassTimer.EMPTY_NS},
    }
    assert result.options["implementation"].startswith("c-loop: C loop (")
    assert result.warnings[-1] == "no GPU: C loops on the CPU (the CPU analog)"


def test_without_a_c_compiler_the_sweep_uses_numpy_and_says_so(
    pass_timer: PassTimer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PERFLAB_CC", "/no/such/cc")
    loops.c_library.cache_clear()
    try:
        result = bandwidth.run(
            backend="cpu", kernels=("copy",), min_bytes=8 * KIB, max_bytes=64 * KIB, per_octave=1
        )
    finally:
        loops.c_library.cache_clear()  # the next use builds with the real compiler
    assert bandwidth.point_engines(result, "copy") == ["numpy"] * 4
    assert result.get("copy").extra["passes"].tolist() == [1.0] * 4
    (why,) = [w for w in result.warnings if w.startswith("no C loop")]
    assert "PERFLAB_CC='/no/such/cc' is not an executable C compiler" in why
    assert "numpy calls of one pass each" in why
    assert "numpy copyto" in result.options["implementation"]


class FakeTritonLoop:
    def __init__(self, kind: str, n: int, passes: int, scale: float, programs: int) -> None:
        self.passes = passes

    def __call__(self) -> None:
        pass


def test_gpu_cache_points_are_triton_loops_and_memory_points_torch_graphs(
    pass_timer: PassTimer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(bandwidth, "resolve_backend", lambda backend: "cuda")
    monkeypatch.setattr(
        bandwidth, "choose_engines", lambda backend: bandwidth.Engines("cuda", "Triton loop")
    )
    monkeypatch.setattr(loops, "TritonLoop", FakeTritonLoop)
    monkeypatch.setattr(loops, "triton_elements", lambda n: max(2048, n // 2048 * 2048))
    monkeypatch.setattr(bandwidth, "_torch_kernel", lambda kind, n: lambda: None)
    result = bandwidth.run(
        backend="cuda", kernels=("copy",), min_bytes=MIB // 4, max_bytes=4 * MIB, per_octave=1
    )
    copy = result.get("copy")
    engines = bandwidth.point_engines(result, "copy")
    assert engines == ["triton-loop"] + ["torch-graph"] * 4  # hot up to 256 KiB
    points = [c for c in pass_timer.calls if "empty" not in c["name"]]
    assert points[0]["passes"] == bandwidth.passes_for(256 * KIB, 20_000.0) > 1
    assert points[0]["number"] == 1 and points[0]["graph"] is False  # one launch per window
    assert all(c["graph"] for c in points[1:])  # torch calls replayed as one graph
    assert copy.extra["passes"].tolist() == [points[0]["passes"], 1, 1, 1, 1]
    floors = result.options["empty_call_ns_by_engine"]["copy"]
    assert set(floors) == {"triton-loop", "torch-graph"}
    assert result.options["empty_call_ns"] == {"copy": floors["triton-loop"]}
    assert result.options["implementation"].startswith("triton-loop up to the last cache")


# --- saved results --------------------------------------------------------------------


@needs_cc
def test_engines_and_passes_round_trip_and_older_files_load(pass_timer, tmp_path: Path):
    result = bandwidth.run(
        backend="cpu", kernels=("copy",), min_bytes=8 * KIB, max_bytes=MIB, per_octave=1
    )
    saved = BenchResult.load(result.save(tmp_path / "bw.json"))
    assert bandwidth.point_engines(saved, "copy") == bandwidth.point_engines(result, "copy")
    assert np.array_equal(saved.get("copy").extra["passes"], result.get("copy").extra["passes"])
    doc = json.loads((tmp_path / "bw.json").read_text())
    del doc["options"]["engines"], doc["series"][0]["extra"]["passes"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = BenchResult.load(tmp_path / "old.json")
    assert bandwidth.point_engines(old, "copy") is None
    assert "passes" not in old.get("copy").extra
    assert bandwidth_ceilings(old, on_gpu=False)[0] == bandwidth_ceilings(saved, False)[0]


@pytest.mark.parametrize(
    "engines", [{"copy": ["c-loop"]}, {"copy": ["c-loop", "gpu-magic"]}, ["c-loop"], {}]
)
def test_a_tampered_engine_record_is_refused(tmp_path: Path, engines: Any):
    copy = Series("copy", [8 * KIB, 16 * KIB], [100.0, 110.0], "bytes", "GBps")
    result = BenchResult("bandwidth", "d", "cpu", series=[copy], options={"engines": engines})
    loaded = BenchResult.load(result.save(tmp_path / "bw.json"))
    with pytest.raises(SchemaError, match=r"bw\.json.*options\.engines\.copy"):
        bandwidth.point_engines(loaded, "copy")


# --- plateaus split at the caches' sizes ----------------------------------------------


def sloped(y: list[float]) -> Series:
    """Points at 8 KiB ... 8 MiB (one per octave) with the rates ``y``."""
    x = np.asarray([8 * KIB * 2**i for i in range(len(y))], dtype=np.float64)
    return Series("copy", x, np.asarray(y), "bytes", "GBps")


CACHES = {"L1": 32 * KIB, "L2": 512 * KIB, "L3": 4 * MIB}


def test_a_plateau_over_two_caches_falling_by_a_fifth_is_split(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(bandwidth, "cache_capacities", lambda on_gpu: dict(CACHES))
    monkeypatch.setattr(_common, "cache_capacities", lambda on_gpu: dict(CACHES))
    # L1 200; then from 64 KiB a fall of a few percent per point, L2 ~105 to L3 ~86, and
    # one point past L3: the detector sees one plateau from 64 KiB to 8 MiB
    series = sloped([200, 200, 200, 110, 106, 104, 100, 92, 86, 84, 82])
    assert [lv.name for lv in _common.hierarchy_levels(series, on_gpu=False)] == ["L1", "DRAM"]
    levels, notes = bandwidth.cache_levels(series, on_gpu=False)
    assert [(lv.name, lv.x_min, lv.x_max, lv.value, lv.points) for lv in levels] == [
        ("L1", 8 * KIB, 32 * KIB, 200.0, 3),
        ("L2", 64 * KIB, 512 * KIB, 105.0, 4),
        ("L3", MIB, 4 * MIB, 86.0, 3),  # the lone point past L3 is a transition
    ]
    assert notes == [
        "copy: one plateau from 64 KiB to 8 MiB spans several caches' sizes; split there "
        "(L2 105 GB/s > L3 86 GB/s): the rate falls from each to the next by over 15%, in "
        "steps under the plateau detector's"
    ]


def test_a_flat_plateau_or_a_part_of_one_point_is_not_split(monkeypatch: pytest.MonkeyPatch):
    caches = dict(CACHES)
    monkeypatch.setattr(bandwidth, "cache_capacities", lambda on_gpu: caches)
    monkeypatch.setattr(_common, "cache_capacities", lambda on_gpu: caches)
    flat = sloped([200, 200, 200, 100, 100, 98, 96, 95, 94, 93])  # L2 to L3: under 15%
    levels, notes = bandwidth.cache_levels(flat, on_gpu=False)
    assert [lv.name for lv in levels] == ["L1", "L3"] and notes == []
    caches["L2"] = 64 * KIB  # now the faster L2 part is one point: no level of its own
    lone = sloped([200, 200, 200, 120, 95, 94, 93, 92, 91, 90])
    levels, notes = bandwidth.cache_levels(lone, on_gpu=False)
    assert [lv.name for lv in levels] == ["L1", "L3"] and notes == []


# --- a real sweep on this CPU: structure, never speed ---------------------------------


@needs_cc
def test_cpu_sweep_l1_and_l2_points_are_not_overhead_bound():
    """With passes inside one call, an L1-sized copy moves ~50 us of data per call
    against an empty call of well under a microsecond (numpy calls were refused)."""
    result = bandwidth.run(
        backend="cpu",
        kernels=("copy",),
        min_bytes=8 * KIB,
        max_bytes=512 * KIB,
        per_octave=1,
        budget_ms=5,
        show_progress=False,
    )
    copy = result.get("copy")
    assert bandwidth.point_engines(result, "copy") == ["c-loop"] * len(copy)
    assert np.all(copy.extra["passes"] > 1)
    share = copy.extra["overhead_share"]
    assert np.all(np.isfinite(share) & (share > 0))
    # generous: bound is a share over 0.1; a C call here is about 0.01 of an empty call
    assert not bandwidth.overhead_bound(share).any(), share
    assert not any("call overhead" in w for w in result.warnings)


# --- the Triton loop ------------------------------------------------------------------

INTERPRETED = r"""
import torch
from perflab.machine._triton_stream import KIND_CODES, stream_kernel

n, block, programs, passes = 8 * 64, 64, 3, 5
x = torch.arange(n, dtype=torch.float32)
y = torch.full((n,), 2.0)
out, sums = torch.zeros(n), torch.zeros(programs)

def launch(kind, src):
    stream_kernel[(programs,)](
        src, y, out, sums, n, passes, 3.0, KIND=KIND_CODES[kind], BLOCK=block
    )

launch("read", torch.ones(n))
assert sums.sum().item() == passes * n, sums  # n elements loaded in each pass
launch("read", x)
assert sums.sum().item() == passes * x.sum().item(), sums  # each of them once
launch("copy", x)
assert torch.equal(out, x)
launch("triad", x)
assert torch.equal(out, y + 3.0 * x)

# the sweep's launcher: whole tiles, one program per tile at most, only the arrays used
from perflab.machine._bandwidth_kernels import TritonLoop

read = TritonLoop("read", 3 * 2048 + 5, passes=4, scale=3.0, programs=8, device="cpu")
assert read.n == 3 * 2048 and read.grid == (3,) and read.out is read.x is read.y
read.x.fill_(1.0)
read()
assert read.sums.sum().item() == 4 * read.n, read.sums
copy = TritonLoop("copy", 2048, passes=2, scale=3.0, programs=8, device="cpu")
copy()
assert torch.equal(copy.out, copy.x) and copy.y is copy.x and copy.out is not copy.x
triad = TritonLoop("triad", 4096, passes=2, scale=3.0, programs=1, device="cpu")
triad()
assert torch.allclose(triad.out, triad.y + 3.0 * triad.x)
print("interpreted ok")
"""


def test_triton_loop_in_the_interpreter_reads_every_element_once_per_pass():
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", INTERPRETED],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
        check=False,
        start_new_session=True,
    )
    assert done.returncode == 0 and "interpreted ok" in done.stdout, done.stderr[-3000:]


def test_triton_loop_compiles_for_sm90_with_128_bit_loads_cached_in_l2_only():
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") not in (None, "", "0"):
        pytest.skip("TRITON_INTERPRET is set: no compiler")
    from perflab.capture import toolchain
    from perflab.capture.compile import compile_triton, disassemble
    from perflab.machine import _triton_stream as ts

    has_sass = toolchain.find_tool("nvdisasm") is not None
    for kind, loads, stores in (("read", 4, 0), ("copy", 4, 4), ("triad", 8, 4)):
        compiled = compile_triton(
            ts.stream_kernel,
            signature=ts.SIGNATURE,
            constexprs={"KIND": ts.KIND_CODES[kind], "BLOCK": ts.BLOCK},
            arch="sm_90",
            num_warps=ts.NUM_WARPS,
            aligned=list(ts.ALIGNED),
        )
        assert compiled.ptx.count("ld.global.cg.v4.b32") == loads, kind
        if not has_sass:
            continue
        sass = disassemble(compiled.cubin)
        ldg = re.findall(r"\bLDG\.[\w.]+", sass)
        stg = re.findall(r"\bSTG\.[\w.]+", sass)
        assert ldg == ["LDG.E.128.STRONG.GPU"] * loads, (kind, ldg)  # 16 B, L2 (.cg)
        assert stg.count("STG.E.128") == stores, (kind, stg)


@pytest.mark.gpu
def test_gpu_sweep_l2_points_are_triton_loops_not_bound_by_launches():
    result = bandwidth.run(
        backend="cuda",
        kernels=("copy", "read"),
        quick=True,
        max_bytes=256 * MIB,
        show_progress=False,
    )
    assert result.options["implementation"].startswith("triton-loop"), result.warnings
    for kind in ("copy", "read"):
        s = result.get(kind)
        hot = s.extra["hot"] == 1
        engines = np.asarray(bandwidth.point_engines(result, kind))
        assert hot.any() and np.all(engines[hot] == "triton-loop")
        assert np.all(s.extra["passes"][hot] > 1)
        assert not bandwidth.overhead_bound(s.extra["overhead_share"][hot]).any()
        assert np.all(s.y > 0)
    assert "L2" in bandwidth_ceilings(result, on_gpu=True)[0]
