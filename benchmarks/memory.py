"""``perflab trace memory`` against ``perflab trace summary`` on the same generated trace.

Where the memory went must cost about what a summary costs: both read the file, which
dominates, and the memory report adds a few sorts of the memory events and one lookup of the
op around each. Contenders, each the whole CLI process in a fresh interpreter (wall time from
interpreter start to result, imports included; run by benchmarks/trace.py's runner through
benchmarks/idle.py's turn-taking, which also times the analyses and writes the results),
``--repeat`` runs each, the median kept:

- ``summary``: ``perflab trace summary FILE --json``
- ``memory``: ``perflab trace memory FILE`` (text)
- ``memory --json``: ``perflab trace memory FILE --json``

Then, in this process on the loaded trace, the analyses alone: ``summarize(trace)`` against
``memory_report(trace)``. The input is generated here (``--events``, default one million): a
training loop's host ops on one thread, each launching a kernel (runtime call, kernel, two
flow events), and the allocator's ``[memory]`` events of each op (an allocation, freed two ops
later), in ProfilerStep ranges of 1,000 ops split into forward and backward halves; each
step leaks one allocation. Ratios are printed and written with machine, versions and date to
benchmarks/results/memory.json (these machines are noisy: ratios hold where absolute times
drift). No GPU is needed or used.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "memory.json"
OPS_PER_STEP = 1000
PID, TID, STREAM = 4242, 4243, 7


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _x(cat: str, name: str, start: int, dur: int, tid: int = TID, args: str = "") -> str:
    pid = 0 if cat == "kernel" else PID
    extra = f', "args": {{{args}}}' if args else ""
    return (
        f',\n{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid}, '
        f'"ts": {_us(start)}, "dur": {_us(dur)}{extra}}}'
    )


class _Allocator:
    """The device's totals and the [memory] events that change them."""

    def __init__(self) -> None:
        self.allocated = 64 << 20  # before the trace
        self.reserved = 128 << 20
        self.next_addr = 1 << 40

    def event(self, at: int, amount: int, addr: int) -> str:
        self.allocated += amount
        self.reserved = max(self.reserved, -(-self.allocated // (2 << 20)) * (2 << 20))
        return (
            f',\n{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", '
            f'"pid": {PID}, "tid": {TID}, "ts": {_us(at)}, "args": {{"Total Reserved": '
            f'{self.reserved}, "Total Allocated": {self.allocated}, "Bytes": {amount}, '
            f'"Device Id": 0, "Device Type": 1, "Addr": {addr}}}}}'
        )


def generate(path: Path, n_events: int) -> int:
    """Write the trace (see the module docstring), a few thousand events at a time; the
    number of events written."""
    import gzip

    alloc = _Allocator()
    written, t, corr = 0, 1_000_000, 1000
    pending: list[tuple[int, int]] = []  # (addr, bytes) to free, oldest first
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(b'{"schemaVersion": 1, "traceEvents": [\n{"ph": "M", "name": "process_name", ')
        fh.write(f'"pid": {PID}, "tid": 0, "args": {{"name": "python"}}}}'.encode())
        step = 0
        while written < n_events:
            step += 1
            chunk, step_start = [], t
            for i in range(OPS_PER_STEP):
                corr += 1
                op_dur, size, addr = 20_000, 4096 * (1 + i % 16), alloc.next_addr
                alloc.next_addr += 1 << 20
                chunk.append(_x("cpu_op", f"aten::op{i % 40}", t, op_dur))
                chunk.append(alloc.event(t + 1_000, size, addr))
                if len(pending) >= 2:
                    chunk.append(alloc.event(t + 2_000, -pending[0][1], pending[0][0]))
                    pending.pop(0)
                pending.append((addr, size))
                launch = t + 5_000
                chunk.append(
                    _x(
                        "cuda_runtime",
                        "cudaLaunchKernel",
                        launch,
                        3_000,
                        args=f'"correlation": {corr}',
                    )
                )
                chunk.append(
                    _x(
                        "kernel",
                        "gemm",
                        launch + 4_000,
                        10_000,
                        STREAM,
                        f'"device": 0, "stream": {STREAM}, "correlation": {corr}',
                    )
                )
                chunk.append(
                    f',\n{{"ph": "s", "id": {corr}, "pid": {PID}, "tid": {TID}, '
                    f'"ts": {_us(launch)}, "cat": "ac2g", "name": "ac2g"}}'
                    f',\n{{"ph": "f", "id": {corr}, "pid": 0, "tid": {STREAM}, '
                    f'"ts": {_us(launch + 4_000)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
                )
                t += op_dur + 1_000
            leak = alloc.next_addr
            alloc.next_addr += 1 << 20
            chunk.append(_x("cpu_op", "aten::clone", t, 5_000))
            chunk.append(alloc.event(t + 1_000, 1 << 20, leak))  # never freed
            t += 6_000
            half = step_start + (t - step_start) // 2
            chunk.append(_x("user_annotation", f"ProfilerStep#{step}", step_start, t - step_start))
            chunk.append(_x("user_annotation", "## forward ##", step_start, half - step_start))
            chunk.append(_x("user_annotation", "## backward ##", half, t - half))
            written += OPS_PER_STEP * 7 - 2 * (step == 1) + 5
            fh.write("".join(chunk).encode())
        fh.write(b'\n], "traceName": "generated"}')
    return written


IDLE = load_script("idle")  # its turn-taking, timing and results file serve here too
CONTENDERS = {
    "summary": IDLE.CONTENDERS["summary"],
    "memory": IDLE.CLI.format(command='"memory"', options=""),
    "memory --json": IDLE.CLI.format(command='"memory"', options=', "--json"'),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="generated trace size")
    ap.add_argument("--repeat", type=int, default=3, help="runs per contender, taking turns")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()
    from perflab.analysis.memory import memory_report
    from perflab.analysis.trace_summary import summarize

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"memory_{args.events}.json.gz"
        written = generate(path, args.events)
        print(f"generated {path.name}: {written} events, {path.stat().st_size / 1e6:.0f} MB")
        processes = IDLE.run_processes(path, args.repeat, args.timeout, CONTENDERS)
        analyses = {"summarize": summarize, "memory_report": memory_report}
        timed = IDLE.time_analyses(path, args.repeat, analyses)
    run = {"events_generated": written, "repeat": args.repeat}
    IDLE.write_results(args.output, "memory", run, processes, timed, ("memory_report", "summarize"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
