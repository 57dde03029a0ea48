"""Kineto traces with injected idle causes, and the truth about every gap they contain.

:func:`injected_trace` strings together segments, each of which makes the GPU idle for a
known reason (the host busy in a Python function, a sync then host work, a DtoH readback of
pageable memory then a sync, tiny kernels launched back to back, a cross-stream wait, a
collective waiting for its peers, work with no launch, a thread that records only runtime
calls) and records, for every gap it creates, where the gap begins, its cause and names that
its evidence must mention. DtoD copies (no gap) are counted. Every segment ends with a long
kernel launched while the GPU is still busy, so the host is behind the GPU when the next
segment begins and no gap appears that was not injected. Each segment sits in its own
``ProfilerStep#<n>`` range. Times are whole microseconds (exact in Kineto's JSON).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PID, MAIN, OTHER_THREAD, DEVICE = 100, 101, 202, 0
STREAM, SIDE_STREAM = 7, 20
ORIGIN = 1_000_000  # us
LONG_KERNEL = "long_gemm_kernel"
LONG_US = 800


@dataclass(frozen=True)
class Gap:
    """An injected gap: where it starts (us on the trace clock), its cause, and names its
    evidence must contain."""

    start_us: int
    end_us: int
    cause: str
    evidence: tuple[str, ...]
    step: int


@dataclass
class Builder:
    """Kineto events, a host clock (main thread) and the time the GPU's work ends."""

    events: list[dict[str, Any]] = field(default_factory=list)
    host: int = ORIGIN
    gpu_end: int = ORIGIN
    corr: int = 1000
    gaps: list[Gap] = field(default_factory=list)
    dtod: int = 0
    step: int = 0
    host_last: int = ORIGIN  # the latest end of a host event on any thread

    def x(self, cat: str, name: str, ts: int, dur: int, tid: int = MAIN, **args: Any) -> None:
        pid = DEVICE if cat in ("kernel", "gpu_memcpy", "gpu_memset") else PID
        if pid == PID:
            self.host_last = max(self.host_last, ts + dur)
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
            | ({"args": args} if args else {})
        )

    def launch(
        self,
        name: str,
        at: int,
        gpu_start: int,
        gpu_dur: int,
        *,
        call: str = "cudaLaunchKernel",
        call_dur: int = 5,
        cat: str = "kernel",
        stream: int = STREAM,
        tid: int = MAIN,
        **gpu_args: Any,
    ) -> int:
        """A runtime call at ``at`` and the GPU work it launched; returns the call's end."""
        self.corr += 1
        self.x("cuda_runtime", call, at, call_dur, tid=tid, correlation=self.corr)
        self.x(
            cat,
            name,
            gpu_start,
            gpu_dur,
            tid=stream,
            device=DEVICE,
            stream=stream,
            correlation=self.corr,
            **gpu_args,
        )
        self.gpu_end = max(self.gpu_end, gpu_start + gpu_dur)
        return at + call_dur

    def close(self, stream: int = STREAM) -> None:
        """Launch a long kernel while the GPU is busy (queued: it starts when the GPU's work
        ends, no gap), leaving the host behind the GPU."""
        at = self.host + 2
        assert at + 5 <= self.gpu_end, "the closing kernel must be queued"
        self.host = self.launch(LONG_KERNEL, at, self.gpu_end, LONG_US, stream=stream)

    def injected(self, start: int, end: int, cause: str, *evidence: str) -> None:
        self.gaps.append(Gap(start, end, cause, evidence, self.step))

    def document(self) -> dict[str, Any]:
        props = [{"id": DEVICE, "name": "Generated GPU", "computeMajor": 9, "computeMinor": 0}]
        return {
            "schemaVersion": 1,
            "deviceProperties": props,
            "traceEvents": sorted(self.events, key=lambda e: (e["ts"], -e["dur"])),
        }


# -- segments: each injects gaps of one cause and ends with Builder.close() ------------------


def host_busy(b: Builder, rng: random.Random) -> None:
    """The thread runs a Python function past the GPU's end, then launches."""
    busy = rng.randint(100, 400)
    start = b.host + 2
    end = b.gpu_end + busy
    b.x("python_function", "train.py(40): preprocess_batch", start, end - start)
    b.x("cpu_op", "aten::to", start + 1, end - start - 2)
    at = end + 1
    k0 = at + 5 + 2
    b.injected(b.gpu_end, k0, "host-busy", "preprocess_batch", "cudaLaunchKernel")
    b.host = b.launch("relu_kernel", at, k0, 30)
    b.close()


def sync_then_host(b: Builder, rng: random.Random) -> None:
    """The thread blocks in cudaStreamSynchronize until the GPU drains, then runs host code."""
    work = rng.randint(150, 500)
    s0, g0 = b.host + 2, b.gpu_end
    b.x("cuda_runtime", "cudaStreamSynchronize", s0, g0 + 4 - s0)
    b.x("python_function", "train.py(77): postprocess", g0 + 6, work)
    at = g0 + 6 + work + 1
    k0 = at + 7
    b.injected(g0, k0, "after-sync", "cudaStreamSynchronize", "postprocess")
    b.host = b.launch("add_kernel", at, k0, 40)
    b.close()


def readback(b: Builder, rng: random.Random) -> None:
    """cudaMemcpyAsync DtoH into pageable memory blocks until the copy ends; then a sync and
    host work."""
    work = rng.randint(200, 600)
    at = b.host + 2
    c0 = b.gpu_end
    copy_end = c0 + 8
    b.launch(
        "Memcpy DtoH (Device -> Pageable)",
        at,
        c0,
        8,
        call="cudaMemcpyAsync",
        call_dur=copy_end + 3 - at,
        cat="gpu_memcpy",
        bytes=65536,
    )
    s0 = copy_end + 4
    b.x("cuda_runtime", "cudaStreamSynchronize", s0, 2)
    b.x("cpu_op", "log_metrics", s0 + 3, work)
    launch_at = s0 + 3 + work + 1
    k0 = launch_at + 7
    b.injected(
        copy_end,
        k0,
        "after-sync",
        "cudaMemcpyAsync",
        "Memcpy DtoH (Device -> Pageable)",
        "cudaStreamSynchronize",
        "log_metrics",
    )
    b.host = b.launch("gemv_kernel", launch_at, k0, 50)
    b.close()


def tiny_kernels(b: Builder, rng: random.Random) -> None:
    """Host work past the GPU's end (one host-busy gap), then tiny kernels launched back to
    back: each runs 2 us, each launch takes 6 us, so the GPU waits for every launch."""
    n = rng.randint(3, 8)
    g0 = b.gpu_end
    b.x("cpu_op", "build_inputs", b.host + 2, g0 + 60 - b.host - 2)
    at = g0 + 61
    k0 = at + 6 + 1
    b.injected(g0, k0, "host-busy", "build_inputs")
    for i in range(n):
        b.x("cpu_op", "aten::add", at - 1, 7)
        end = b.launch(f"tiny_kernel_{i}", at, k0, 2, call_dur=6)
        at = end + 1
        prev_end, k0 = k0 + 2, at + 6 + 1
        if i < n - 1:
            b.injected(prev_end, k0, "launch-overhead", "cudaLaunchKernel")
    # the closing kernel is launched 1 us after the last launch: back to back as well
    close_at = at
    k_close = close_at + 5 + 1
    b.injected(b.gpu_end, k_close, "launch-overhead", "cudaLaunchKernel")
    b.host = b.launch(LONG_KERNEL, close_at, k_close, LONG_US)


def dtod_copies(b: Builder, rng: random.Random) -> None:
    """Device-to-device copies queued behind the GPU's work: no gap, counted by direction."""
    for _ in range(rng.randint(1, 4)):
        b.host = b.launch(
            "Memcpy DtoD (Device -> Device)",
            b.host + 2,
            b.gpu_end,
            10,
            call="cudaMemcpyAsync",
            cat="gpu_memcpy",
            bytes=1 << 20,
        )
        b.dtod += 1
    b.close()


def cross_stream_wait(b: Builder, rng: random.Random) -> None:
    """Work on a side stream, queued early behind a cudaStreamWaitEvent, starts well after
    the GPU has gone idle (its event came from elsewhere)."""
    wait = rng.randint(80, 300)
    g0 = b.gpu_end
    b.x("cuda_runtime", "cudaStreamWaitEvent", b.host + 2, 1)
    b.host = b.launch("side_kernel", b.host + 4, g0 + wait, 40, stream=SIDE_STREAM)
    b.injected(g0, g0 + wait, "gpu-dependency", "cudaStreamWaitEvent", "side_kernel")
    b.close(stream=SIDE_STREAM)


def collective(b: Builder, rng: random.Random) -> None:
    """An all-reduce queued early waits for its peers."""
    wait = rng.randint(100, 400)
    g0 = b.gpu_end
    b.host = b.launch(
        "ncclKernel_AllReduce_RING_LL_Sum_float", b.host + 2, g0 + wait, 60, call_dur=8
    )
    b.injected(g0, g0 + wait, "gpu-dependency", "ncclKernel_AllReduce", "collective")
    b.close()


def no_launch(b: Builder, rng: random.Random) -> None:
    """Work no runtime call links to (no correlation id)."""
    wait = rng.randint(40, 200)
    g0 = b.gpu_end
    b.x("kernel", "orphan_kernel", g0 + wait, 20, tid=STREAM, device=DEVICE, stream=STREAM)
    b.gpu_end = g0 + wait + 20
    b.injected(g0, g0 + wait, "unknown", "orphan_kernel")
    b.close()


def runtime_only_thread(b: Builder, rng: random.Random) -> None:
    """A thread that records only runtime calls launches after the GPU went idle."""
    delay = rng.randint(40, 200)
    g0 = b.gpu_end
    at = g0 + delay
    k0 = at + 5 + 2
    b.launch("helper_thread_kernel", at, k0, 30, tid=OTHER_THREAD)
    b.injected(g0, k0, "unknown", "only CUDA runtime calls")
    b.close()


def launch_blocked(b: Builder, rng: random.Random) -> None:
    """A CPU op's launch call blocks (a full launch queue, the driver) for hundreds of
    microseconds: its kernel ran and the GPU went idle while the call had not returned; the
    thread's next launch follows it at once."""
    block = rng.randint(300, 900)
    at = b.host + 2
    b.host = b.launch("add_kernel", at, b.gpu_end, 20)  # queued behind the GPU's work
    g0 = b.gpu_end
    returned = g0 + block
    b.events[-2]["dur"] = returned - at  # the call, still blocked when the GPU went idle
    b.x("cpu_op", "aten::add", at - 1, returned - at + 2)
    k0 = returned + 3 + 5 + 2
    b.injected(g0, k0, "launch-blocked", "cudaLaunchKernel", "aten::add", "a heuristic")
    b.host = b.launch("relu_kernel", returned + 3, k0, 30)
    b.close()


SEGMENTS: dict[str, Callable[[Builder, random.Random], None]] = {
    "host-busy": host_busy,
    "sync": sync_then_host,
    "readback": readback,
    "tiny": tiny_kernels,
    "dtod": dtod_copies,
    "cross-stream": cross_stream_wait,
    "collective": collective,
    "no-launch": no_launch,
    "runtime-only": runtime_only_thread,
    "launch-blocked": launch_blocked,
}


@dataclass(frozen=True)
class Injected:
    """A generated trace (Kineto JSON document) and the truth about it."""

    doc: dict[str, Any]
    gaps: list[Gap]
    dtod: int
    segments: list[str]

    def data(self) -> bytes:
        return json.dumps(self.doc).encode()


def injected_trace(seed: int = 0, segments: list[str] | None = None, repeat: int = 2) -> Injected:
    """Every segment ``repeat`` times in a seeded order (or ``segments`` in that order)."""
    rng = random.Random(seed)
    names = segments if segments is not None else [*SEGMENTS] * repeat
    if segments is None:
        rng.shuffle(names)
    b = Builder()
    # a first long kernel: the host starts behind the GPU
    b.host = b.launch(LONG_KERNEL, b.host, b.host + 7, LONG_US)
    for step, name in enumerate(names, start=1):
        b.step = step
        begin = b.host + 1
        SEGMENTS[name](b, rng)
        # the step's range covers its host work on every thread (a helper thread's too)
        end = max(b.host, b.host_last) + 1
        b.x("user_annotation", f"ProfilerStep#{step}", begin, end - begin)
        b.host = end
    return Injected(b.document(), b.gaps, b.dtod, names)


# -- a training run's memory, with the truth about it ------------------------------------------
#
# :func:`memory_trace` writes the allocator's [memory] events of a training loop whose every
# allocation is labelled with the category it belongs to: parameters made at set-up,
# activations from the forward pass freed in the backward pass (on the autograd engine's
# thread, as on a GPU), gradients made once and kept, Adam's state made in the first step,
# temporaries freed inside their op, and a leak of LEAK bytes per step (a clone never
# freed). Memory from before the trace shows in the first event's total, and a block of it is
# freed in the first step. A loader thread allocates each step's batch on the CPU. The truth
# (peak, its op, what was live there by op and category, growth, final figures) is worked out
# from the labels, not from perflab's rules.

AUTOGRAD, LOADER = 103, 104
CUDA, CPU_DEVICE = (1, 0), (0, -1)  # (Device Type, Device Id)
MIB = 1 << 20
BEFORE_TRACE = 8 * MIB  # allocated before the profiler started
FREED_BEFORE = 1 * MIB  # of which the trace frees this much
LEAK = 256 << 10
SOFTMAX_TEMP = 12 * MIB  # large: the peak is this temporary, in the last step
ACTIVATION = 3 * MIB
SEGMENT = 2 * MIB  # the reserved curve grows in whole segments
FACTORY_OPS = ("aten::empty", "aten::empty_strided", "aten::empty_like")


@dataclass
class Allocation:
    device: tuple[int, int]
    size: int
    op: str
    category: str
    index: int  # the allocation's position among its device's memory events
    freed_at: int | None = None  # the position of its free


@dataclass
class DeviceTruth:
    """What a device's memory events say, worked out from the labels."""

    peak: int
    peak_index: int
    peak_op: str
    live_by_op: dict[str, tuple[int, int]]  # op -> (bytes, count)
    live_by_category: dict[str, tuple[int, int]]
    final_allocated: int
    reserved_at_peak: int
    final_reserved: int


@dataclass
class MemoryStory:
    """Builds the events: a clock in us, each thread's stack of ops, the devices' totals."""

    steps: int
    layers: int
    events: list[dict[str, Any]] = field(default_factory=list)
    clock: int = ORIGIN
    stacks: dict[int, list[str]] = field(default_factory=dict)
    allocated: dict[tuple[int, int], int] = field(default_factory=dict)
    reserved: dict[tuple[int, int], int] = field(default_factory=dict)
    series: dict[tuple[int, int], list[tuple[int, int]]] = field(default_factory=dict)
    allocations: list[Allocation] = field(default_factory=list)
    by_addr: dict[int, Allocation] = field(default_factory=dict)
    next_addr: int = 0x7F0000000000

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def op(self, name: str, tid: int = MAIN, cat: str = "cpu_op") -> _OpRange:
        return _OpRange(self, name, tid, cat)

    def _memory(self, tid: int, device: tuple[int, int], amount: int, addr: int) -> int:
        total = self.allocated.get(device, BEFORE_TRACE if device == CUDA else 0) + amount
        self.allocated[device] = total
        reserved = self.reserved.get(device, -(-BEFORE_TRACE // SEGMENT) * SEGMENT)
        if device == CUDA and total > reserved:
            reserved = -(-total // SEGMENT) * SEGMENT
        reserved = reserved if device == CUDA else 0
        self.reserved[device] = reserved
        args = {
            "Total Reserved": reserved,
            "Total Allocated": total,
            "Bytes": amount,
            "Device Id": device[1],
            "Device Type": device[0],
            "Addr": addr,
        }
        self.events.append(
            {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]"}
            | {"pid": PID, "tid": tid, "ts": self.tick(), "args": args}
        )
        series = self.series.setdefault(device, [])
        series.append((total, reserved))
        return len(series) - 1

    def alloc(
        self, size: int, category: str, tid: int = MAIN, device: tuple[int, int] = CUDA
    ) -> int:
        """Allocate ``size`` bytes on the current op of ``tid``: its address."""
        addr = self.next_addr
        self.next_addr += size + 512
        named = [name for name in self.stacks.get(tid, []) if name not in FACTORY_OPS]
        op = named[-1] if named else (self.stacks.get(tid) or ["(outside any op)"])[-1]
        index = self._memory(tid, device, size, addr)
        record = Allocation(device, size, op, category, index)
        self.allocations.append(record)
        self.by_addr[addr] = record
        return addr

    def free(self, addr: int, tid: int = MAIN) -> None:
        record = self.by_addr.pop(addr)
        record.freed_at = self._memory(tid, record.device, -record.size, addr)

    def free_before_trace(self) -> None:
        """A block allocated before the trace, freed now (its address is new to the trace)."""
        self._memory(MAIN, CUDA, -FREED_BEFORE, 0x10000)

    def truth(self, device: tuple[int, int]) -> DeviceTruth:
        totals = [t for t, _ in self.series[device]]
        peak_index = totals.index(max(totals))
        live = [
            a
            for a in self.allocations
            if a.device == device
            and a.index <= peak_index
            and (a.freed_at is None or a.freed_at > peak_index)
        ]
        by_op: dict[str, tuple[int, int]] = {}
        by_category: dict[str, tuple[int, int]] = {}
        for a in live:
            for table, key in ((by_op, a.op), (by_category, a.category)):
                size, count = table.get(key, (0, 0))
                table[key] = (size + a.size, count + 1)
        before = totals[peak_index] - sum(a.size for a in live)
        if before:
            by_op["(allocated before the trace)"] = (before, 0)
            by_category["before the trace"] = (before, 0)
        peak_op = next(
            a.op for a in self.allocations if a.device == device and a.index == peak_index
        )
        return DeviceTruth(
            peak=totals[peak_index],
            peak_index=peak_index,
            peak_op=peak_op,
            live_by_op=by_op,
            live_by_category=by_category,
            final_allocated=totals[-1],
            reserved_at_peak=self.series[device][peak_index][1],
            final_reserved=self.series[device][-1][1],
        )


@dataclass
class _OpRange:
    """``with story.op(name, tid):`` an op (or range) on ``tid`` from now to the block's end."""

    story: MemoryStory
    name: str
    tid: int
    cat: str
    start: int = 0

    def __enter__(self) -> _OpRange:
        self.start = self.story.tick()
        self.story.stacks.setdefault(self.tid, []).append(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        end = self.story.tick()
        self.story.stacks[self.tid].pop()
        self.story.events.append(
            {"ph": "X", "cat": self.cat, "name": self.name, "pid": PID, "tid": self.tid}
            | {"ts": self.start, "dur": end - self.start}
        )


def _parameter_size(layer: int) -> int:
    return (layer + 1) * MIB


def _train_step(b: MemoryStory, step: int, batch: list[int]) -> None:
    layers = range(b.layers)
    with b.op(f"ProfilerStep#{step}", cat="user_annotation"):
        with b.op("aten::empty", tid=LOADER):  # the loader's next batch, on the CPU
            batch.append(b.alloc(64 << 10, "other", tid=LOADER, device=CPU_DEVICE))
        if step == 1:
            b.free_before_trace()
        activations = []
        with b.op("## forward ##", cat="user_annotation"):
            for _ in layers:
                with b.op("aten::linear"), b.op("aten::addmm"), b.op("aten::empty_strided"):
                    activations.append(b.alloc(ACTIVATION, "activations"))
            with b.op("aten::softmax"):
                with b.op("aten::empty"):
                    temp = b.alloc(SOFTMAX_TEMP, "temporaries")
                b.free(temp)
            with b.op("aten::clone"), b.op("aten::empty_strided"):
                b.alloc(LEAK, "other")  # kept by the loop: never freed
        with b.op("## backward ##", cat="user_annotation"):
            for layer in reversed(layers):
                with b.op("autograd::engine::evaluate_function: AddmmBackward0", tid=AUTOGRAD):
                    if step == 1:  # gradients made once, then accumulated in place
                        with b.op("aten::mm", tid=AUTOGRAD):
                            b.alloc(_parameter_size(layer), "gradients", tid=AUTOGRAD)
                    b.free(activations[layer], tid=AUTOGRAD)
            with b.op("aten::sum", tid=AUTOGRAD):  # phase from the main thread's range
                temp = b.alloc(4096, "temporaries", tid=AUTOGRAD)
                b.free(temp, tid=AUTOGRAD)
        with b.op("Optimizer.step#Adam.step", cat="user_annotation"):
            if step == 1:
                for layer in layers:
                    for _ in ("exp_avg", "exp_avg_sq"):
                        with b.op("aten::zeros_like"), b.op("aten::empty_like"):
                            b.alloc(_parameter_size(layer), "optimizer state")
            with b.op("aten::sqrt"):
                denominator = b.alloc(_parameter_size(0), "other")
            with b.op("aten::div"):
                b.free(denominator)
        if len(batch) > 1:
            b.free(batch.pop(0))  # the step before's batch


def memory_trace(steps: int = 4, layers: int = 3) -> MemoryStory:
    """A training run of ``steps`` ProfilerSteps over ``layers`` layers (see above)."""
    b = MemoryStory(steps, layers)
    with b.op("aten::to"):
        for layer in range(layers):
            with b.op("aten::empty_strided"):
                b.alloc(_parameter_size(layer), "parameters")
    batch: list[int] = []
    for step in range(1, steps + 1):
        _train_step(b, step, batch)
    return b


def memory_document(story: MemoryStory) -> dict[str, Any]:
    props = [{"id": DEVICE, "name": "Generated GPU", "computeMajor": 9, "computeMinor": 0}]
    events = sorted(story.events, key=lambda e: (e["ts"], -e.get("dur", 0)))
    return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": events}
