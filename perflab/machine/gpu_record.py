"""The sections of ``scripts/gpu-record``: real results for the course's notebooks, recorded
on a GPU with the notebooks' own code paths (perflab's timing engine with ``%%gpuprofile``'s
defaults, the microbenchmarks, torch.profiler, Nsight Compute), each saved with its device,
date and versions so that a notebook on a machine without a GPU replays it, labelled as
recorded, beside its live CPU analog.

The first section runs before anything else touches the GPU in the process: first calls are
only first once. ``--dry-run`` runs every section on the CPU backend with small sizes (the
plumbing, tested in CI); what it writes is marked ``dry-run`` and never becomes a recording.

Layout of the output folder (one folder per notebook)::

    00-quickstart/  matmul-512, matmul-1024, triton-add, torch-add, matmul-trace (.json)
    01-timing/      first-calls, sort-alone, sort-noisy, sum-{1MiB,32MiB}-{warm,cold},
                    sum-n1, sum-n10, sort-200k
    03-roofline/    points: matmul-{dtype}-{n}, add-{n}, matmul-1x1
    04-ncu/         triton-add.csv, matmul.csv (ncu --csv --page details) and .ncu-rep
    10-launch/      add-2^{k} (the crossover sweep), ten-kernels-{eager,graph}
    12-inference/   first-calls, batch1-{warm,cold,graph}, end-to-end (gpu_record_e2e.py:
                    the host clock around call and sync, and CUDA events, a fixed number of
                    warm samples each, for eager, a CUDA graph and torch.compile)
    16-training/    train-steps.json.gz (a torch.profiler trace with perflab.range phases)
    17-collectives/ nccl-sweep.json (notebook 17's NCCL sweep; only with 2 or more GPUs)
    MANIFEST.json   the environment, every section's status, and the checksum of every file

Each folder is named after the notebook that replays it (``machine/``, written by
``scripts/gpu-check --record``, is read by several).
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, TypedDict

import numpy as np

from perflab.capture import _proc, env
from perflab.machine.gpu_check import Section, _path_with
from perflab.model.machine import BenchResult, Series
from perflab.model.serialize import write_atomic, write_text

if TYPE_CHECKING:
    import torch
    from torch import nn

    from perflab.model.timing import TimingResult

ROOT = Path(__file__).resolve().parents[2]
NCU_TIMEOUT_S = 75.0  # each ncu call; the whole record must fit in about 3 minutes


class Recorder:
    """Where the results go and what was written; ``backend`` is ``cuda`` or ``cpu``."""

    def __init__(self, out: Path, backend: str) -> None:
        self.out = out
        self.backend = backend
        self.written: list[str] = []

    @property
    def on_gpu(self) -> bool:
        return self.backend == "cuda"

    @property
    def device(self) -> str:
        return "cuda" if self.on_gpu else "cpu"

    def path(self, folder: str, name: str) -> Path:
        where = self.out / folder
        where.mkdir(parents=True, exist_ok=True)
        self.written.append(f"{folder}/{name}")
        return where / name

    def time(
        self,
        folder: str,
        name: str,
        fn: Callable[[], object],
        annotate: Callable[[TimingResult], None] | None = None,
        **options: object,
    ) -> TimingResult:
        """Time ``fn`` as ``%%gpuprofile --name NAME`` would (its defaults unless
        ``options`` say otherwise), let ``annotate`` add to the result (FLOPs and bytes, a
        kernel table) and save it as ``folder/NAME.json``."""
        from perflab.capture.timer import time_function

        result = time_function(fn, None, name=name, backend=self.backend, **options)
        if annotate is not None:
            annotate(result)
        result.save(self.path(folder, f"{_file_name(name)}.json"))
        return result

    def series(self, folder: str, name: str, benchmark: str, series: list[Series]) -> None:
        """Host-clock readings (first calls...) as a BenchResult with provenance."""
        result = BenchResult(
            benchmark=benchmark,
            device=env.current_device_name(),
            backend=self.backend,
            versions=env.versions(),
            series=series,
        )
        result.save(self.path(folder, f"{name}.json"))


def _file_name(name: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return keep.strip("-") or "result"


def _sync(torch: ModuleType, on_gpu: bool) -> None:
    if on_gpu:
        torch.cuda.synchronize()


def host_times(calls: int, fn: Callable[[], object], after: Callable[[], None]) -> list[float]:
    """Host-clock ns of ``calls`` calls of ``fn``, each followed by ``after`` (inside its
    time: with a sync, the latency a caller sees, call after call)."""
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        after()
        times.append(float(time.perf_counter_ns() - t0))
    return times


def _calls_series(name: str, values: list[float]) -> Series:
    return Series(
        name=name,
        x=np.arange(1, len(values) + 1, dtype=np.float64),
        y=np.asarray(values, dtype=np.float64),
        x_unit="call",
        y_unit="ns",
    )


# --- 01 and 11: first calls (must run first in the process) ----------------------------


def first_calls(rec: Recorder) -> Mapping[str, object]:
    """Notebook 01's matmul launched without and with a synchronisation, from the first
    call on, and notebook 12's model's first five calls: host clock, one process."""
    import torch

    n = 4096 if rec.on_gpu else 512
    x = torch.randn(n, n, device=rec.device)
    _sync(torch, rec.on_gpu)

    def nothing() -> None:
        return None

    no_sync = host_times(5, lambda: x @ x, nothing)
    _sync(torch, rec.on_gpu)
    synced = host_times(5, lambda: x @ x, lambda: _sync(torch, rec.on_gpu))
    rec.series(
        "01-timing",
        "first-calls",
        "first-calls",
        [
            _calls_series(f"matmul {n} fp32, no sync", no_sync),
            _calls_series(f"matmul {n} fp32, with sync", synced),
        ],
    )
    model, sample = inference_model(rec)
    with torch.inference_mode():
        firsts = host_times(5, lambda: model(sample), lambda: _sync(torch, rec.on_gpu))
    rec.series("12-inference", "first-calls", "first-calls", [_calls_series("model", firsts)])
    return {"matmul_no_sync_ns": no_sync, "matmul_sync_ns": synced, "model_ns": firsts}


def inference_model(rec: Recorder) -> tuple[nn.Module, torch.Tensor]:
    """Notebook 12's model (the same layers, seed and input) on the recorder's device."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = (
        nn.Sequential(
            nn.Linear(256, 512),
            nn.GELU(),
            nn.LayerNorm(512),
            nn.Linear(512, 512),
            nn.GELU(),
            nn.LayerNorm(512),
            nn.Linear(512, 10),
        )
        .to(rec.device)
        .eval()
    )
    return model, torch.randn(1, 256, device=rec.device)


# --- 00: the quickstart's cells ------------------------------------------------------------


def quickstart(rec: Recorder) -> Mapping[str, object]:
    import torch

    from perflab.analysis.trace_stats import kernel_table
    from perflab.capture.profile import profile

    a = torch.randn(512, 512, device=rec.device)
    b = torch.randn(1024, 1024, device=rec.device)
    mm512 = rec.time("00-quickstart", "matmul-512", lambda: a @ a)
    mm1024 = rec.time("00-quickstart", "matmul-1024", lambda: b @ b)
    n = 1 << 14
    x, y = torch.rand(n, device=rec.device), torch.rand(n, device=rec.device)
    out = torch.empty_like(x)
    done = {"matmul-512_us": mm512.median_ns / 1e3, "matmul-1024_us": mm1024.median_ns / 1e3}
    if rec.on_gpu:  # Triton's interpreter on the CPU would time numpy, not a kernel
        from perflab.machine import _triton_add

        _triton_add.launch(x, y, out, n)
        torch.cuda.synchronize()
        if not torch.allclose(out, x + y):
            raise RuntimeError("the Triton add kernel gave a wrong result")
        t_add = rec.time(
            "00-quickstart", "triton-add", lambda: _triton_add.launch(x, y, out, n), budget_ms=50
        )
        done["triton-add_us"] = t_add.median_ns / 1e3
    torch_add = rec.time(
        "00-quickstart", "torch-add", lambda: torch.add(x, y, out=out), budget_ms=50
    )
    done["torch-add_us"] = torch_add.median_ns / 1e3

    def traced() -> object:
        return a @ a + 1.0

    def kernels(result: TimingResult) -> None:  # as --trace does: one more run, profiled
        result.kernels = kernel_table(profile(traced, cuda=rec.on_gpu))

    result = rec.time("00-quickstart", "matmul-trace", traced, kernels, budget_ms=50)
    done["matmul-trace_us"] = result.median_ns / 1e3
    return done


def quickstart_magics(rec: Recorder) -> Mapping[str, object]:
    """The quickstart's ``%%gpuprofile`` cells themselves, with ``--record``, in an IPython
    shell (where IPython is installed): the magic's own path, end to end."""
    try:
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:
        return {"skipped": "IPython is not installed here"}
    folder = rec.out / "00-quickstart"
    folder.mkdir(parents=True, exist_ok=True)
    ip = InteractiveShell.instance()
    cells = [
        "%load_ext perflab",
        f"import torch\ndevice = {rec.device!r}\n"
        "a = torch.randn(512, 512, device=device)\nb = torch.randn(1024, 1024, device=device)",
    ]
    magic = {
        "magic-matmul-512": "--name matmul-512 -v mm512\nc = a @ a",
        "magic-matmul-1024": "--name matmul-1024 --compare mm512 -v mm1024\nd = b @ b",
        "magic-matmul-trace": "--name matmul-trace --trace --budget 50\nc = a @ a + 1.0",
    }
    done: dict[str, object] = {}
    for cell in cells:
        _run_cell(ip, cell)
    for name, body in magic.items():
        path = rec.path("00-quickstart", f"{name}.json")
        options, code = body.split("\n", 1)
        _run_cell(ip, f"%%gpuprofile {options} --record {path}\n{code}")
        done[name] = path.exists()
        if not done[name]:  # --record writes only a GPU's measurements (not a dry run's)
            rec.written.remove(f"00-quickstart/{name}.json")
    return done


class _CellResult(Protocol):
    success: bool
    error_in_exec: BaseException | None


class _Shell(Protocol):
    """What is used of IPython's InteractiveShell."""

    def run_cell(self, raw_cell: str) -> _CellResult: ...


def _run_cell(ip: _Shell, cell: str) -> None:
    result = ip.run_cell(cell)
    if not result.success:
        raise RuntimeError(f"cell failed: {cell.splitlines()[0]}: {result.error_in_exec!r}")


# --- 01: timing done right ----------------------------------------------------------------


@contextmanager
def _busy_neighbours(count: int) -> Iterator[None]:
    """``count`` processes spinning on the CPU (killed, with their groups, on exit)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"], start_new_session=True, text=True
        )
        for _ in range(count)
    ]
    try:
        time.sleep(0.2)  # let them get going
        yield
    finally:
        for p in procs:
            _proc.kill_group(p)


def timing_traps(rec: Recorder) -> Mapping[str, object]:
    """Notebook 01's sections on the GPU: noisy neighbours, warm against cold caches at two
    sizes, one call against ten per sample, and the closing ``%%gpuprofile`` cell."""
    import torch

    folder = "01-timing"
    work = torch.rand(200_000, device=rec.device)
    alone = rec.time(folder, "sort-alone", lambda: torch.sort(work), budget_ms=400, max_noise=0)
    with _busy_neighbours(2):
        noisy = rec.time(folder, "sort-noisy", lambda: torch.sort(work), budget_ms=400, max_noise=0)
    done = {"sort_alone_us": alone.median_ns / 1e3, "sort_noisy_us": noisy.median_ns / 1e3}
    for label, nbytes in (("1MiB", 1 << 20), ("32MiB", 32 << 20)):
        data = torch.ones(nbytes // 8, dtype=torch.float64, device=rec.device)
        for temp, flush in (("warm", False), ("cold", True)):
            r = rec.time(folder, f"sum-{label}-{temp}", data.sum, budget_ms=200, flush_l2=flush)
            done[f"sum_{label}_{temp}_us"] = r.median_ns / 1e3
    small = torch.ones(1 << 17, dtype=torch.float64, device=rec.device)
    # a dry run's CPU flushes a last-level cache per sample and may share its cores: one
    # sample of ten calls must still fit the budget there
    budget = 100 if rec.on_gpu else 2000
    for calls in (1, 10):
        r = rec.time(
            folder, f"sum-n{calls}", small.sum, budget_ms=budget, flush_l2=True, number=calls
        )
        done[f"sum_n{calls}_us"] = r.median_ns / 1e3
    r = rec.time(folder, "sort-200k", lambda: torch.sort(work), budget_ms=200)
    done["sort_200k_us"] = r.median_ns / 1e3
    return done


# --- 03: roofline points --------------------------------------------------------------------


def roofline_points(rec: Recorder) -> Mapping[str, object]:
    """Matmuls and adds with their FLOPs and bytes, timed as ``%%gpuprofile`` times them
    (flushed caches on a GPU); the ceilings come from gpu-check's sweeps."""
    import torch

    folder = "03-roofline"
    done: dict[str, object] = {}
    dtypes = (
        {"bf16": torch.bfloat16, "fp32": torch.float32} if rec.on_gpu else {"fp32": torch.float32}
    )
    sizes = (32, 1024, 4096, 8192) if rec.on_gpu else (32, 256)
    for label, dtype in dtypes.items():
        for n in sizes:
            done[f"matmul-{label}-{n}_tflops"] = _matmul_point(rec, folder, label, dtype, n)
    for n in (1 << 14, 1 << 24, 1 << 28) if rec.on_gpu else (1 << 14, 1 << 20):
        done[f"add-{n}_gbps"] = _add_point(rec, folder, n)
    one = [torch.randn(1, 1, device=rec.device) for _ in range(3)]
    r = rec.time(folder, "matmul-1x1", lambda: torch.matmul(one[0], one[1], out=one[2]))
    done["matmul-1x1_us"] = r.median_ns / 1e3
    return done


def _matmul_point(rec: Recorder, folder: str, label: str, dtype: torch.dtype, n: int) -> float:
    """TFLOP/s of an n x n x n matmul into a preallocated output (``out=``, as 01 teaches)."""
    import torch

    a, b = (torch.randn(n, n, device=rec.device, dtype=dtype) for _ in range(2))
    c = torch.empty(n, n, device=rec.device, dtype=dtype)
    # as %%gpuprofile --roofline counts them: 2n^3 FLOPs, the three matrices' bytes at least
    flops, nbytes = 2.0 * n**3, 3.0 * n * n * a.element_size()
    name = f"matmul-{label}-{n}"
    r = rec.time(folder, name, lambda: torch.matmul(a, b, out=c), _work(flops, nbytes))
    return float(flops / r.median_ns / 1e3)


def _add_point(rec: Recorder, folder: str, n: int) -> float:
    """GB/s of a float32 add of n elements (two read, one written)."""
    import torch

    x, y, z = (torch.randn(n, device=rec.device) for _ in range(3))
    r = rec.time(folder, f"add-{n}", lambda: torch.add(x, y, out=z), _work(n, 12.0 * n))
    return float(12.0 * n / r.median_ns)


def _work(flops: float, nbytes: float) -> Callable[[TimingResult], None]:
    """Sets a result's FLOPs and bytes per call (its roofline point)."""

    def annotate(result: TimingResult) -> None:
        result.flops, result.bytes = flops, nbytes

    return annotate


# --- 06: launch overhead -------------------------------------------------------------------


def launch_costs(rec: Recorder) -> Mapping[str, object]:
    """Notebook 10's crossover sweep (``add_`` on 1 to 4 Mi elements) and ten small
    kernels launched eagerly and as one CUDA graph."""
    import torch

    folder = "10-launch"
    done: dict[str, object] = {}
    for power in range(0, 23, 2):
        done[f"add_2^{power}_us"] = _add_in_place(rec, folder, 1 << power)
    y = torch.rand(1024, device=rec.device)

    def ten_small_kernels() -> None:
        for _ in range(10):
            y.add_(1.0)

    eager = rec.time(folder, "ten-kernels-eager", ten_small_kernels, flush_l2=False)
    done["ten_eager_us"] = eager.median_ns / 1e3
    if rec.on_gpu:
        graphed = rec.time(
            folder, "ten-kernels-graph", ten_small_kernels, graph=True, flush_l2=False
        )
        done["ten_graph_us"] = graphed.median_ns / 1e3
    return done


def _add_in_place(rec: Recorder, folder: str, n: int) -> float:
    import torch

    x = torch.rand(n, device=rec.device)
    name = f"add-2^{n.bit_length() - 1}"
    r = rec.time(folder, name, lambda: x.add_(1.0), budget_ms=30, flush_l2=False)
    return float(r.median_ns / 1e3)


# --- 11: batch-1 inference --------------------------------------------------------------------


def inference(rec: Recorder) -> Mapping[str, object]:
    """Notebook 12's batch-1 latency as ``%%gpuprofile`` times it (the GPU's time behind a
    queue filler, in the engine's rounds): 2,000 warm samples, 300 cold ones, and the same
    model replayed as a CUDA graph (2,000 samples). What a client sees, end to end, and its
    tail from one fixed run of samples, are :mod:`perflab.machine.gpu_record_e2e`'s."""
    import torch

    folder = "12-inference"
    model, x = inference_model(rec)
    repeat = 2000 if rec.on_gpu else 200
    done: dict[str, float] = {}
    with torch.inference_mode():
        warm = rec.time(
            folder, "batch1-warm", lambda: model(x), repeat=repeat, flush_l2=False, budget_ms=5000
        )
        cold = rec.time(
            folder,
            "batch1-cold",
            lambda: model(x),
            repeat=300 if rec.on_gpu else 30,
            flush_l2=True,
            budget_ms=20_000,
        )
        done.update(warm_p50_us=_pct(warm, 50), warm_p99_us=_pct(warm, 99))
        done.update(cold_p50_us=_pct(cold, 50))
        if rec.on_gpu:
            graph = rec.time(
                folder,
                "batch1-graph",
                lambda: model(x),
                repeat=repeat,
                flush_l2=False,
                graph=True,
                budget_ms=5000,
            )
            done.update(graph_p50_us=_pct(graph, 50), graph_p99_us=_pct(graph, 99))
    return done


def _pct(result: TimingResult, q: float) -> float:
    return float(np.percentile(result.samples_ns, q) / 1e3)


# --- 10: a profiled training loop ---------------------------------------------------------------


TRAINING_SIZES = {"cuda": (512, 4, 32, 256), "cpu": (64, 2, 4, 32)}  # width, layers, batch, seq
TRAINING_CLASSES = 1000


def training_model(width: int, layers: int) -> nn.Module:
    """Notebook 16's recorded model: ``layers`` transformer encoder layers (8 heads, a
    feed-forward 4 x ``width`` wide) and a 1,000-way linear head, on the default device."""
    from torch import nn

    body = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(width, 8, 4 * width, batch_first=True), layers
    )
    return nn.Sequential(body, nn.Linear(width, TRAINING_CLASSES))


def training_trace(rec: Recorder) -> Mapping[str, object]:
    """A small transformer trained for a few steps under torch.profiler (CPU and CUDA
    activity), its phases marked with perflab.range; the loss read back every step, as
    many loops do for logging. Saved as Kineto JSON, gzipped."""
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, schedule

    import perflab

    torch.manual_seed(0)
    width, layers, batch, seq = TRAINING_SIZES[rec.backend]
    model = training_model(width, layers).to(rec.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = [torch.randn(batch, seq, width) for _ in range(4)]  # pageable host memory
    labels = [torch.randint(0, TRAINING_CLASSES, (batch, seq)) for _ in range(4)]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if rec.on_gpu else [])
    path = rec.out / "16-training" / "train-steps.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    losses: list[float] = []

    def step(i: int) -> None:
        with perflab.range("data"):
            xb = data[i % 4].to(rec.device, non_blocking=True)
            yb = labels[i % 4].to(rec.device, non_blocking=True)
        with perflab.range("forward"), torch.autocast(rec.device, dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
        with perflab.range("backward"):
            loss.backward()  # type: ignore[no-untyped-call]
        with perflab.range("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        with perflab.range("log"):
            losses.append(float(loss.item()))  # a readback: the host waits for the GPU

    with torch.profiler.profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=2, active=4),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for i in range(7):
            step(i)
            prof.step()
    _sync(torch, rec.on_gpu)
    gz = rec.path("16-training", "train-steps.json.gz")
    with open(path, "rb") as src:
        write_atomic(gz, lambda dst: dst.write(gzip.compress(src.read(), mtime=0)))
    path.unlink()
    return {"steps_profiled": 4, "losses": losses, "bytes": gz.stat().st_size}


# --- 17: NCCL collectives (two GPUs or more) --------------------------------------------------

NCCL_SIZES = (1 << 20, 16 << 20, 256 << 20, 1 << 30)  # notebook 17's sizes on NCCL
SWEEP_REPEATS = 3  # interleaved, as the notebook runs them
MAX_RANKS = 8


def collectives_sweep(rec: Recorder) -> Mapping[str, object]:
    """Notebook 17's sweep on NCCL, one rank per GPU (up to 8): its five collectives at
    its four sizes, three repeats interleaved, with the alpha-beta fit per op. One GPU
    cannot run a meaningful NCCL collective between ranks, so a machine with fewer than
    two skips it, as a dry run does (the notebook runs its gloo analog itself)."""
    gpus = env.gpu_devices() if rec.on_gpu else []
    if len(gpus) < 2:
        return {"skipped": f"NCCL collectives need 2 or more GPUs ({len(gpus)} here)"}
    from perflab.analysis.collectives import OPS
    from perflab.machine import collectives

    ranks = min(len(gpus), MAX_RANKS)
    result = collectives.run(
        backend="nccl",
        world_size=ranks,
        ops=OPS,
        sizes=NCCL_SIZES * SWEEP_REPEATS,
        budget_ms=20,
        show_progress=False,
    )
    result.save(rec.path("17-collectives", "nccl-sweep.json"))
    return {"ranks": ranks, "rows": len(result.rows)}


# --- 12: one Nsight Compute report --------------------------------------------------------------

NCU_TARGETS = {
    # name: (kernel filter, program)
    "triton-add": (
        "regex:add_kernel",
        "import torch; from perflab.machine import _triton_add as t\n"
        "n = 1 << 26\n"
        "x, y = torch.rand(n, device='cuda'), torch.rand(n, device='cuda')\n"
        "out = torch.empty_like(x); t.launch(x, y, out, n); torch.cuda.synchronize()\n",
    ),
    "matmul": (
        "regex:gemm|nvjet|xmma|cutlass",
        "import torch\n"
        "a = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)\n"
        "c = a @ a; torch.cuda.synchronize()\n",
    ),
}


def ncu_reports(rec: Recorder) -> Mapping[str, object]:
    """``ncu --set full`` of one kernel per target (the default clock control, base
    clocks), exported as a report and as ``--csv --page details``."""
    ncu = shutil.which("ncu")
    if not rec.on_gpu or ncu is None:
        return {"skipped": "ncu needs a GPU and ncu on PATH"}
    done: dict[str, dict[str, object]] = {}
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(_path_with(str(ROOT)))}
    for name, (kernel, program) in NCU_TARGETS.items():
        rep = rec.path("04-ncu", f"{name}.ncu-rep")
        profile_cmd = [
            ncu,
            "--set",
            "full",
            "-k",
            kernel,
            "-c",
            "1",
            "-f",
            "--export",
            str(rep),
            sys.executable,
            "-c",
            program,
        ]
        done[name] = {"profile": _tool(profile_cmd, environ)}
        if not rep.exists():
            continue
        csv = _tool([ncu, "--import", str(rep), "--csv", "--page", "details"], environ, keep=True)
        write_text(rec.path("04-ncu", f"{name}.csv"), csv["stdout"])
        done[name]["csv_lines"] = csv["stdout"].count("\n")
    return done


class _ToolTail(TypedDict):
    returncode: int
    tail: list[str]


class ToolRun(_ToolTail, total=False):
    """A tool's exit status and last lines (and with ``keep``, all it printed)."""

    stdout: str


def _tool(cmd: list[str], environ: dict[str, str], keep: bool = False) -> ToolRun:
    done = _proc.run(cmd, timeout=NCU_TIMEOUT_S, env=environ, cwd=str(ROOT))
    result: ToolRun = {
        "returncode": done.returncode,
        "tail": (done.stdout + done.stderr).strip().splitlines()[-12:],
    }
    if keep:
        result["stdout"] = done.stdout
    return result


# --- running --------------------------------------------------------------------------------


def sections(rec: Recorder) -> list[Section]:
    """In order; first calls first. Estimates: H200 seconds (about 2x one run's, 2026-12-04);
    this 2-core VM's CPU."""

    from perflab.machine import gpu_record_e2e  # it builds on this module

    def bind(fn: Callable[[Recorder], Mapping[str, object]]) -> Callable[[str], object]:
        return lambda _backend: fn(rec)

    return [
        Section("first calls", 2, 5, bind(first_calls)),
        Section("quickstart", 20, 5, bind(quickstart)),
        Section("quickstart magics", 5, 5, bind(quickstart_magics)),
        Section("timing traps", 5, 10, bind(timing_traps)),
        Section("roofline points", 5, 10, bind(roofline_points)),
        Section("launch costs", 2, 5, bind(launch_costs)),
        Section("inference", 5, 10, bind(inference)),
        Section("end-to-end latency", 60, 30, bind(gpu_record_e2e.end_to_end)),
        Section("training trace", 10, 15, bind(training_trace)),
        Section("collectives", 60, 0, bind(collectives_sweep)),
        Section("ncu", 60, 0, bind(ncu_reports)),
    ]
