"""A small multi-rank training program run event by event, with its Kineto traces: the truth
for critical paths and what-ifs.

Every rank runs the same steps on one host thread and three streams (compute, a side stream and
NCCL's): a pinned input copy; forward ops, each a Python gap, an op and its kernel launch; a side
kernel that waits for the forward's last kernel through cudaEventRecord / cudaStreamWaitEvent;
backward ops (on the straggler rank one backward kernel runs longer); an all-reduce that waits
for the backward through an event and ends, on every rank, when the last rank arrived plus its
transfer; an optimizer kernel that waits for the all-reduce; a CUDA graph of small kernels (one
``cudaGraphLaunch``); a blocking readback (a pageable device-to-host copy, as ``loss.item()``
does); a stretch of tiny ops that keeps the GPU waiting on the host; and logging on the host.

The rules the GPU follows: work may start ``LATENCY`` after its launch call begins, ``GAP``
after the work before it on its stream ends, and after every event its stream waits for; a
copy call of pageable memory returns ``RETURN`` after its copy ends. A :class:`Change` scales
durations as ``--what-if`` does (host: every host duration; kernels: kernels and copies; a
kernel pattern; comm: the all-reduce's transfer), so running the program again with a change is
the truth that a replay must predict. Times are integer nanoseconds, written as Kineto's
microseconds with three decimals.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LATENCY = 4_000
GAP = 1_000
RETURN = 6_000
CALL = 5_000
COMPUTE, SIDE, NCCL = 7, 20, 30
ORIGIN = 1_000_000_000
NEVER = -(1 << 60)
STEPS = 4
SLOW_KERNEL = "bwd_gemm_3"  # the straggler's slow kernel
NCCL_NAME = "ncclKernel_AllReduce_RING_LL_Sum_float"


@dataclass(frozen=True)
class Change:
    """Factors on durations: host, kernels (kernels and copies), comm (transfers), and
    per kernel-name pattern."""

    host: float = 1.0
    kernels: float = 1.0
    comm: float = 1.0
    patterns: tuple[tuple[str, float], ...] = ()

    def gpu(self, name: str, ns: int) -> int:
        factor = self.kernels
        for pattern, f in self.patterns:
            if re.search(pattern, name):
                factor *= f
        return round(ns * factor)


@dataclass
class Rank:
    """One rank's state while the program runs: its host clock, its streams, its events."""

    rank: int
    change: Change
    host: int = ORIGIN
    corr: int = 0
    free: dict[int, int] = field(default_factory=dict)  # stream -> end of its last work
    waits: dict[int, int] = field(default_factory=dict)  # stream -> event it must wait for
    events: list[dict[str, Any]] = field(default_factory=list)
    step_gpu_end: int = NEVER

    def x(
        self, cat: str, name: str, start: int, dur: int, gpu: int | None = None, **args: Any
    ) -> None:
        pid, tid = (self.rank, gpu) if gpu is not None else (1000 + self.rank, 1)
        if gpu is not None:
            args |= {"device": self.rank, "stream": gpu}
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": start / 1000,
                "dur": dur / 1000,
            }
            | ({"args": args} if args else {})
        )

    def py(self, ns: int) -> None:
        """Untraced host work."""
        self.host += round(ns * self.change.host)

    def call(self, name: str, ns: int = CALL) -> tuple[int, int]:
        """A runtime call on the host: its start and correlation id."""
        self.corr += 1
        start, dur = self.host, round(ns * self.change.host)
        self.x("cuda_runtime", name, start, dur, correlation=self.corr)
        self.host += dur
        return start, self.corr

    def queue(self, stream: int, call_start: int) -> int:
        """When work launched at ``call_start`` on ``stream`` may start."""
        ready = max(call_start + LATENCY, self.free.get(stream, NEVER) + GAP)
        return max(ready, self.waits.pop(stream, NEVER))

    def kernel(
        self, name: str, ns: int, stream: int = COMPUTE, call: str = "cudaLaunchKernel"
    ) -> int:
        at, corr = self.call(call)
        start = self.queue(stream, at)
        dur = self.change.gpu(name, ns)
        self.x("kernel", name, start, dur, gpu=stream, correlation=corr)
        self.free[stream] = start + dur
        self.step_gpu_end = max(self.step_gpu_end, start + dur)
        return start + dur

    def op(
        self,
        name: str,
        kernel: str,
        ns: int,
        stream: int = COMPUTE,
        pre: int = 15_000,
        post: int = 10_000,
    ) -> None:
        """A Python gap, then an op that launches one kernel."""
        self.py(30_000)
        begin = self.host
        self.host += round(pre * self.change.host)
        self.kernel(kernel, ns, stream)
        self.host += round(post * self.change.host)
        self.x("cpu_op", name, begin, self.host - begin)

    def record(self, stream: int) -> int:
        """cudaEventRecord on ``stream``: the event completes when its work so far does."""
        self.call("cudaEventRecord", 2_000)
        return self.free.get(stream, NEVER)

    def wait(self, stream: int, event: int) -> None:
        at, corr = self.call("cudaStreamWaitEvent", 2_000)
        self.x("cuda_sync", "Stream Wait Event", at + 1_000, 1_000, gpu=stream, correlation=corr)
        self.waits[stream] = max(self.waits.get(stream, NEVER), event)

    def copy(self, name: str, ns: int, blocking: bool) -> None:
        at, corr = self.call("cudaMemcpyAsync", 8_000)
        start = self.queue(COMPUTE, at)
        dur = self.change.gpu(name, ns)
        self.x("gpu_memcpy", name, start, dur, gpu=COMPUTE, correlation=corr, bytes=65536)
        self.free[COMPUTE] = start + dur
        self.step_gpu_end = max(self.step_gpu_end, start + dur)
        if blocking:  # the call returns after its copy: rewrite its end
            end = max(self.host, start + dur + round(RETURN * self.change.host))
            self.events[-2]["dur"] = (end - at) / 1000
            self.host = end

    def graph(self, kernels: list[tuple[str, int]]) -> None:
        """One cudaGraphLaunch whose kernels run in order on the compute stream."""
        at, corr = self.call("cudaGraphLaunch", 8_000)
        for name, ns in kernels:
            start = self.queue(COMPUTE, at)
            dur = self.change.gpu(name, ns)
            self.x("kernel", name, start, dur, gpu=COMPUTE, correlation=corr)
            self.free[COMPUTE] = start + dur
            self.step_gpu_end = max(self.step_gpu_end, start + dur)


@dataclass
class Run:
    """The ranks after the program ran, and each step's duration (earliest start to latest
    end over the ranks, GPU work the step launched included)."""

    ranks: list[Rank]
    steps: list[int]

    @property
    def mean_step(self) -> float:
        return sum(self.steps) / len(self.steps)

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        for r in self.ranks:
            doc = {
                "schemaVersion": 1,
                "deviceProperties": [{"id": r.rank, "name": "Simulated GPU"}],
                "distributedInfo": {
                    "backend": "nccl",
                    "rank": r.rank,
                    "world_size": len(self.ranks),
                },
                "traceEvents": sorted(r.events, key=lambda e: (e["ts"], -e["dur"])),
            }
            (directory / f"rank-{r.rank}.json").write_text(json.dumps(doc))
        return directory


def simulate(
    ranks: int = 3, straggler: int = 1, change: Change | None = None, seed: int = 0
) -> Run:
    """The program (module docstring) on ``ranks`` ranks, ``straggler`` the slow one."""
    change = change or Change()
    rng = random.Random(seed)
    plan = _plan(rng, ranks, straggler)
    state = [Rank(r, change, host=ORIGIN + 3_000 * r) for r in range(ranks)]
    steps = []
    for step in range(STEPS):
        begins = [r.host for r in state]
        for r in state:
            r.step_gpu_end = NEVER
            _before_allreduce(r, plan[r.rank])
        arrivals = [_arrive(r) for r in state]
        peak = max(a for a, _ in arrivals)
        transfer = round(300_000 * change.comm)
        for r, (arrival, corr) in zip(state, arrivals, strict=True):
            r.x("kernel", NCCL_NAME, arrival, peak + transfer - arrival, gpu=NCCL, correlation=corr)
            r.free[NCCL] = peak + transfer
            r.step_gpu_end = max(r.step_gpu_end, peak + transfer)
        ends = []
        for r, begin in zip(state, begins, strict=True):
            _after_allreduce(r, plan[r.rank])
            r.x("user_annotation", f"ProfilerStep#{step}", begin, r.host - begin)
            ends.append(max(r.host, r.step_gpu_end))
            r.host += 1_000
        steps.append(max(ends) - min(begins))
    return Run(state, steps)


def _plan(rng: random.Random, ranks: int, straggler: int) -> list[dict[str, list[int]]]:
    """Per rank: the kernel durations of each phase (the straggler's slow kernel longer)."""
    forward = [rng.randrange(150_000, 400_000) for _ in range(6)]
    backward = [rng.randrange(200_000, 500_000) for _ in range(6)]
    out = []
    for r in range(ranks):
        mine = list(backward)
        if r == straggler:
            mine[3] = round(mine[3] * 2.5)
        out.append({"forward": forward, "backward": mine})
    return out


def _before_allreduce(r: Rank, plan: dict[str, list[int]]) -> None:
    r.py(200_000)
    r.copy("Memcpy HtoD (Pinned -> Device)", 30_000, blocking=False)
    for i, ns in enumerate(plan["forward"]):
        r.op("aten::linear", f"fwd_gemm_{i}", ns)
    event = r.record(COMPUTE)
    r.wait(SIDE, event)
    r.kernel("side_kernel", 100_000, SIDE)
    for i, ns in enumerate(plan["backward"]):
        r.op("aten::mm", f"bwd_gemm_{i}", ns)
    r.wait(NCCL, r.record(COMPUTE))


def _arrive(r: Rank) -> tuple[int, int]:
    """Launch the all-reduce: when this rank arrives, and the launch's correlation id."""
    at, corr = r.call("cudaLaunchKernel", 10_000)
    return r.queue(NCCL, at), corr


def _after_allreduce(r: Rank, plan: dict[str, list[int]]) -> None:
    r.wait(COMPUTE, r.record(NCCL))
    r.op("Optimizer.step", "optimizer_kernel", 80_000)
    r.graph([(f"graph_kernel_{j}", 20_000) for j in range(5)])
    begin = r.host
    r.copy("Memcpy DtoH (Device -> Pageable)", 8_000, blocking=True)
    r.x("cpu_op", "aten::item", begin, r.host - begin)
    for i in range(20):  # tiny ops after the readback: the GPU waits for the host
        r.op("aten::add", f"tiny_kernel_{i % 4}", 5_000, pre=20_000, post=10_000)
    r.py(20_000)
    log = r.host
    r.host += round(100_000 * r.change.host)
    r.x("cpu_op", "log_metrics", log, r.host - log)
    r.py(50_000)
