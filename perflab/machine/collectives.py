"""Collectives through ``torch.distributed``: all_reduce, all_gather, reduce_scatter,
all_to_all and broadcast over message sizes, reported with nccl-tests' algbw and busbw
(definitions in :mod:`perflab.analysis.collectives`), with an alpha-beta fit per op.

Backends: ``gloo`` on CPUs (several processes on one machine: the CPU analog) and
``nccl`` on GPUs. Launch:

- by default, ``world_size`` processes are spawned with ``torch.multiprocessing`` and
  meet over TCP on 127.0.0.1 at a free port;
- under ``torchrun`` (``RANK``/``WORLD_SIZE`` set), the current process is one rank and
  the group forms through ``env://``, so a sweep also runs across nodes.

Every op's result is checked (e.g. all_reduce of ``rank + 1`` must give
``n(n+1)/2`` everywhere) before it is timed, so a row is only written for a collective
that really ran and was right. Time per op is each rank's mean over ``iters``
back-to-back calls, averaged across ranks: what nccl-tests reports by default (``-a 1``;
``-a 3`` would report the slowest rank, ``-a 0`` rank 0).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from perflab.analysis.collectives import (
    OPS,
    algbw_GBps,
    busbw_GBps,
    fit_alpha_beta,
    message_bytes,
    per_rank_count,
)
from perflab.capture import env
from perflab.errors import InputError, NoGPUError, PerflabError, import_extra
from perflab.machine._common import progress
from perflab.model.machine import AlphaBetaFit, CollectiveResult, CollectiveRow

if TYPE_CHECKING:
    from torch.multiprocessing.spawn import ProcessContext

BACKENDS = ("gloo", "nccl")
TIME_ACROSS_RANKS = "mean"  # nccl-tests' default report (-a 1): the average over ranks
ELEMENT_SIZE = 4  # float32
STARTUP_SLACK_S = 60.0  # spawning and importing torch in each process
MAX_SPAWNED = 64
MAX_MESSAGE_BYTES = 64 << 30  # larger than any GPU's memory for one buffer
MAX_TIMEOUT_S = 86_400.0  # a day; timedelta overflows on absurd values


@dataclass
class CollectiveSpec:
    """What to run; sent to every rank."""

    backend: str = "gloo"
    world_size: int = 2
    ops: tuple[str, ...] = ("all_reduce",)
    sizes: tuple[int, ...] = (1 << 10, 1 << 20)
    warmup: int = 3
    min_iters: int = 5
    max_iters: int = 200
    budget_ms: float = 50.0
    timeout_s: float = 120.0
    show_progress: bool | None = None

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise InputError(f"backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if not 1 <= self.world_size <= MAX_SPAWNED:
            raise InputError(f"world size must be 1..{MAX_SPAWNED}, not {self.world_size}")
        bad = [op for op in self.ops if op not in OPS]
        if bad or not self.ops:
            raise InputError(f"unknown collective(s) {bad} (known: {', '.join(OPS)})")
        if not self.sizes or any(not 1 <= s <= MAX_MESSAGE_BYTES for s in self.sizes):
            raise InputError(
                f"message sizes must be 1 B to {MAX_MESSAGE_BYTES >> 30} GiB, "
                f"got {list(self.sizes)}"
            )
        if self.min_iters < 1 or self.max_iters < self.min_iters or self.warmup < 0:
            raise InputError("need 1 <= min_iters <= max_iters and warmup >= 0")
        if not 0 < self.timeout_s <= MAX_TIMEOUT_S:
            raise InputError(
                f"timeout must be more than 0 and at most {MAX_TIMEOUT_S:.0f} s, "
                f"not {self.timeout_s}"
            )


# --- one collective on one rank -------------------------------------------------------


def _buffers(
    torch: ModuleType, op: str, count: int, rank: int, n: int, device: str
) -> tuple[Callable[[], object], Callable[[], bool]]:
    """``(call, check)``: the op on fresh buffers, and whether its result is right."""
    import torch.distributed as dist

    def full(size: int, value: float) -> Any:
        return torch.full((size,), value, dtype=torch.float32, device=device)

    # torch >= 2.13 renamed the tensor forms (*_single); torch 2.11 has only the old names
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    mine = float(rank + 1)
    if op == "all_reduce":
        x = full(count, mine)
        return (lambda: dist.all_reduce(x)), lambda: bool((x == n * (n + 1) / 2).all())
    if op == "broadcast":
        x = full(count, mine)
        return (lambda: dist.broadcast(x, src=0)), lambda: bool((x == 1.0).all())
    if op == "all_gather":
        x, out = full(count, mine), full(count * n, -1.0)
        expected = torch.arange(1, n + 1, dtype=torch.float32, device=device)
        return (
            (lambda: gather(out, x)),
            lambda: bool((out.view(n, count) == expected[:, None]).all()),
        )
    if op == "reduce_scatter":
        x, out = full(count * n, mine), full(count, -1.0)
        return ((lambda: scatter(out, x)), lambda: bool((out == n * (n + 1) / 2).all()))
    # all_to_all: chunk j of rank r holds r * n + j; rank r receives chunk r of every rank j
    chunks = torch.arange(n, dtype=torch.float32, device=device) + rank * n
    x = chunks.repeat_interleave(count)
    out = full(count * n, -1.0)
    expected = torch.arange(n, dtype=torch.float32, device=device) * n + rank
    return (
        (lambda: dist.all_to_all_single(out, x)),
        lambda: bool((out.view(n, count) == expected[:, None]).all()),
    )


def _agree(torch: ModuleType, value: float, device: str, op: str) -> float:
    """The same number on every rank: the max, min or mean of each rank's ``value``."""
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64, device=device)
    reduce = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "mean": dist.ReduceOp.SUM}
    dist.all_reduce(t, op=reduce[op])
    total = float(t.item())
    return total / dist.get_world_size() if op == "mean" else total


def _time_op(
    torch: ModuleType, spec: CollectiveSpec, op: str, nbytes: int, rank: int, n: int, device: str
) -> CollectiveRow:
    import torch.distributed as dist

    count = per_rank_count(op, nbytes, ELEMENT_SIZE, n)
    call, check = _buffers(torch, op, count, rank, n, device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    call()
    sync()
    verified = _agree(torch, 1.0 if check() else 0.0, device, "min") == 1.0
    if not verified:
        raise PerflabError(f"{op} of {nbytes} bytes on {n} ranks gave a wrong result")
    t0 = time.perf_counter()
    for _ in range(spec.warmup):
        call()
    sync()
    estimate = _agree(torch, (time.perf_counter() - t0) / max(spec.warmup, 1), device, "max")
    iters = int(
        min(spec.max_iters, max(spec.min_iters, spec.budget_ms / 1e3 / max(estimate, 1e-9)))
    )
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    sync()
    seconds = _agree(torch, (time.perf_counter() - t0) / iters, device, TIME_ACROSS_RANKS)
    size = message_bytes(op, count, ELEMENT_SIZE, n)
    return CollectiveRow(
        op=op,
        bytes=size,
        world_size=n,
        backend=spec.backend,
        time_us=seconds * 1e6,
        algbw_GBps=algbw_GBps(size, seconds),
        busbw_GBps=busbw_GBps(op, size, seconds, n),
        iters=iters,
        verified=verified,
    )


def _sweep_on_rank(spec: CollectiveSpec, rank: int, n: int) -> list[CollectiveRow]:
    import torch

    device = "cpu"
    if spec.backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = f"cuda:{torch.cuda.current_device()}"
    pairs = [(op, s) for op in spec.ops for s in spec.sizes]
    show = spec.show_progress if rank == 0 else False
    return [
        _time_op(torch, spec, op, s, rank, n, device)
        for op, s in progress(pairs, f"collectives ({spec.backend}, {n} ranks)", show)
    ]


def _worker(rank: int, spec_doc: dict[str, Any], init_method: str, out_path: str) -> None:
    """Body of one spawned rank; rank 0 writes the rows as JSON to ``out_path``."""
    import torch.distributed as dist

    spec = CollectiveSpec(
        **{**spec_doc, "ops": tuple(spec_doc["ops"]), "sizes": tuple(spec_doc["sizes"])}
    )
    dist.init_process_group(
        spec.backend,
        init_method=init_method,
        rank=rank,
        world_size=spec.world_size,
        timeout=_dt.timedelta(seconds=spec.timeout_s),
    )
    try:
        rows = _sweep_on_rank(spec, rank, spec.world_size)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(out_path).write_text(json.dumps([r.to_dict() for r in rows]), encoding="utf-8")


# --- launching ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(spec: CollectiveSpec) -> list[CollectiveRow]:
    # torch.multiprocessing.spawn is also a function name: fetch the module itself
    start: Any = importlib.import_module("torch.multiprocessing.spawn").start_processes
    with tempfile.TemporaryDirectory(prefix="perflab-coll-") as tmp:
        out = Path(tmp) / "rows.json"
        ctx = start(
            _worker,
            args=(asdict(spec), f"tcp://127.0.0.1:{free_port()}", str(out)),
            nprocs=spec.world_size,
            join=False,
            start_method="spawn",
        )
        _join(ctx, spec.timeout_s + STARTUP_SLACK_S)
        if not out.exists():
            raise PerflabError("collectives: rank 0 finished without writing its results")
        doc = json.loads(out.read_text(encoding="utf-8"))
    return [CollectiveRow.from_dict(r) for r in doc]


def _join(ctx: ProcessContext, deadline_s: float) -> None:
    """Wait for every rank; a failed rank or the deadline ends the others too."""
    from torch.multiprocessing.spawn import ProcessExitedException, ProcessRaisedException

    end = time.monotonic() + deadline_s
    try:
        while not ctx.join(timeout=0.5):
            if time.monotonic() > end:
                raise PerflabError(
                    f"collectives: ranks still running after {deadline_s:.0f} s; "
                    "stopped them (a hung collective or an overloaded machine)"
                )
    except (ProcessRaisedException, ProcessExitedException) as exc:
        raise PerflabError(f"collectives: a rank failed: {_last_line(str(exc))}") from None
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.terminate()
                proc.join(5)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else text


def _under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ


def _in_this_process(spec: CollectiveSpec) -> list[CollectiveRow]:
    """Run as one rank of a ``torchrun`` job (every rank returns the same rows)."""
    import torch.distributed as dist

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    spec.world_size = n
    dist.init_process_group(
        spec.backend,
        init_method="env://",
        rank=rank,
        world_size=n,
        timeout=_dt.timedelta(seconds=spec.timeout_s),
    )
    try:
        return _sweep_on_rank(spec, rank, n)
    finally:
        dist.destroy_process_group()


def _check_backend(spec: CollectiveSpec, spawning: bool) -> None:
    # the ranks' own imports of torch.distributed come after this one
    import_extra("torch.distributed", "perflab machine collectives")
    if spec.backend != "nccl":
        return
    env.require_gpu("backend nccl", "use --backend gloo")
    import torch

    gpus = torch.cuda.device_count()
    if spawning and gpus < spec.world_size:
        raise NoGPUError(
            f"nccl with {spec.world_size} ranks needs {spec.world_size} GPUs; "
            f"this machine has {gpus}"
        )


def run(
    *,
    backend: str = "gloo",
    world_size: int = 2,
    ops: Sequence[str] = ("all_reduce",),
    sizes: Sequence[int] = (1 << 10, 1 << 20),
    budget_ms: float = 50.0,
    min_iters: int = 5,
    max_iters: int = 200,
    timeout_s: float = 120.0,
    launcher: str = "auto",
    show_progress: bool | None = None,
) -> CollectiveResult:
    """Time each op at each message size ``S`` (bytes, nccl-tests' S) on ``world_size``
    ranks. ``launcher``: ``"spawn"``, ``"torchrun"`` (this process is a rank), or
    ``"auto"`` (torchrun when its environment variables are set)."""
    spec = CollectiveSpec(
        backend=backend,
        world_size=world_size,
        ops=tuple(ops),
        sizes=tuple(int(s) for s in sizes),
        budget_ms=budget_ms,
        min_iters=min_iters,
        max_iters=max_iters,
        timeout_s=timeout_s,
        show_progress=show_progress,
    )
    spec.validate()
    if launcher not in ("auto", "spawn", "torchrun"):
        raise InputError(f"launcher must be auto, spawn or torchrun, not {launcher!r}")
    in_place = launcher == "torchrun" or (launcher == "auto" and _under_torchrun())
    _check_backend(spec, spawning=not in_place)
    rows = _in_this_process(spec) if in_place else _spawn(spec)
    result = CollectiveResult(
        benchmark="collectives",
        device=env.current_device_name(),
        backend=spec.backend,
        versions=env.versions(),
        rows=rows,
        fits=fit_per_op(rows),
        options={
            "world_size": spec.world_size,
            "ops": list(spec.ops),
            "sizes": list(spec.sizes),
            "dtype": "float32",
            "launcher": "torchrun" if in_place else "torch.multiprocessing spawn",
            "time": "mean over iters, averaged across ranks (nccl-tests' default, -a 1)",
        },
    )
    if spec.backend == "gloo":
        result.warnings.append(
            f"gloo on CPU processes of one machine ({spec.world_size} "
            "ranks): the CPU analog, not a GPU interconnect"
        )
    return result


def fit_per_op(rows: Sequence[CollectiveRow]) -> dict[str, AlphaBetaFit]:
    """Alpha-beta fit for every op measured at two or more distinct sizes."""
    fits = {}
    for op in dict.fromkeys(r.op for r in rows):
        mine = [r for r in rows if r.op == op]
        with contextlib.suppress(ValueError):  # fewer than two sizes: no fit
            fits[op] = fit_alpha_beta([r.bytes for r in mine], [r.time_us * 1e-6 for r in mine])
    return fits
