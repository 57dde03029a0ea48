"""The options-to-call code shared by ``%%gpuprofile`` and ``perflab time``.

One definition of each flag, applied to the magic's ``magic_arguments`` and to the
CLI's argparse parser, and one function that turns parsed options into a timed run
(with ``--trace`` and ``--record``)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

from perflab.capture import env
from perflab.capture.timer import BenchOptions, bench
from perflab.errors import InputError
from perflab.model.timing import TimingResult

F = TypeVar("F", bound=Callable[..., Any])

# (flags, argparse keyword arguments)
TIMING_ARGUMENTS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (
        ("--budget",),
        dict(
            type=float,
            default=100.0,
            metavar="MS",
            help="time budget in milliseconds: sampling stops when it is spent, or earlier "
            "once the noise target is met (default 100)",
        ),
    ),
    (
        ("--max-noise",),
        dict(
            type=float,
            default=0.5,
            metavar="PCT",
            help="noise target: stop once the median's relative standard error is below "
            "PCT percent, after at least 10 samples (default 0.5; 0: use the whole budget)",
        ),
    ),
    (
        ("--warmup",),
        dict(
            type=float,
            default=25.0,
            metavar="MS",
            help="warm-up budget in milliseconds (default 25)",
        ),
    ),
    (
        ("-n",),
        dict(
            type=int,
            dest="number",
            metavar="N",
            help="calls per sample (default: 1 on a GPU; enough for 20 us on the CPU)",
        ),
    ),
    (
        ("-r",),
        dict(
            type=int,
            dest="repeat",
            metavar="R",
            help="number of samples (default: as many as the budget allows, >= 10)",
        ),
    ),
    (
        ("--flush-l2",),
        dict(
            dest="flush_l2",
            action="store_true",
            default=None,
            help="flush the L2 (CPU: last-level cache) before every sample (default on a GPU)",
        ),
    ),
    (
        ("--no-flush-l2",),
        dict(
            dest="flush_l2",
            action="store_false",
            help="keep caches warm between samples (default on the CPU)",
        ),
    ),
    (
        ("--graph",),
        dict(
            action="store_true",
            help="capture the code as a CUDA graph and time its replay "
            "(removes launch overhead; GPU only)",
        ),
    ),
    (
        ("--backend",),
        dict(
            choices=("auto", "cuda", "cpu"),
            default="auto",
            help="timing backend (default: cuda when a GPU is present)",
        ),
    ),
    (("--name",), dict(default=None, help="name of the NVTX range and of the result")),
    (
        ("--no-nvtx",),
        dict(
            dest="no_nvtx",
            action="store_true",
            help="do not emit an NVTX range around the timed runs",
        ),
    ),
    (
        ("--trace",),
        dict(
            action="store_true",
            help="profile one extra run with torch.profiler and show the kernels "
            "(CPU ops without a GPU)",
        ),
    ),
    (
        ("--flops",),
        dict(
            type=float,
            default=None,
            metavar="N",
            help="floating-point operations per call (for the roofline point)",
        ),
    ),
    (
        ("--bytes",),
        dict(
            type=float,
            default=None,
            metavar="N",
            help="bytes moved per call (for the roofline point)",
        ),
    ),
    (
        ("--record",),
        dict(
            default=None,
            metavar="FILE",
            help="with a GPU: run and save the result to FILE; without one: "
            "replay FILE (saying where and when it was measured)",
        ),
    ),
]


ArgumentSpecs = list[tuple[tuple[str, ...], dict[str, Any]]]


def magic_arguments_from(specs: ArgumentSpecs) -> Callable[[F], F]:
    """A decorator adding ``specs`` to an IPython magic (its own flags, applied after)."""

    def decorate(func: F) -> F:
        from IPython.core.magic_arguments import argument

        for flags, kwargs in reversed(specs):
            func = argument(*flags, **kwargs)(func)
        return func

    return decorate


def add_arguments(parser: argparse.ArgumentParser, specs: ArgumentSpecs) -> None:
    for flags, kwargs in specs:
        parser.add_argument(*flags, **kwargs)


with_timing_arguments = magic_arguments_from(TIMING_ARGUMENTS)


def bench_options(args: argparse.Namespace, default_name: str) -> BenchOptions:
    """The BenchOptions a parsed command line asks for (validated)."""
    opts = BenchOptions(
        warmup_ms=args.warmup,
        budget_ms=args.budget,
        number=args.number,
        repeat=args.repeat,
        flush_l2=args.flush_l2,
        graph=args.graph,
        backend=args.backend,
        name=args.name or default_name,
        nvtx=not args.no_nvtx,
        max_noise=args.max_noise / 100,
    )
    if not (math.isfinite(args.max_noise) and 0 <= args.max_noise < 100):
        raise InputError(f"--max-noise must be a percentage from 0 to 100, not {args.max_noise}")
    opts.validate()
    for label, value in (("--flops", args.flops), ("--bytes", args.bytes)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise InputError(f"{label} must be a finite non-negative number, not {value}")
    return opts


@dataclass
class TimedRun:
    """What a timing front-end shows: the result, the trace (``--trace``), notes."""

    result: TimingResult
    trace: Any = None
    replayed: bool = False
    notes: list[str] = field(default_factory=list)


def replay_instead(record: str | None) -> bool:
    """``--record FILE`` with no GPU and FILE present: replay rather than run."""
    return bool(record) and not env.cuda_available() and os.path.exists(str(record))


def timed_run(fn: Callable[[], object], args: argparse.Namespace, default_name: str) -> TimedRun:
    """Run ``fn`` as the parsed options ask: replay, or time (and trace, and record)."""
    opts = bench_options(args, default_name)
    if replay_instead(args.record):
        result = TimingResult.load(args.record)
        return TimedRun(
            result,
            replayed=True,
            notes=[
                f"no GPU: replayed {args.record} (measured on {result.device}, {result.created}; "
                f"{_versions_text(result)}); the code was not run"
            ],
        )
    result = bench(fn, opts)
    result.flops, result.bytes = args.flops, args.bytes
    run = TimedRun(result)
    if getattr(args, "roofline", False) and args.flops is None and args.bytes is None:
        run.notes.append(_count_work(fn, result))
    if args.trace:
        run.trace = _trace_once(fn, result)
    if args.record:
        run.notes.append(_record(result, args.record))
    return run


def _trace_once(fn: Callable[[], object], result: TimingResult) -> Any:
    from perflab.analysis.trace_stats import kernel_table
    from perflab.capture.profile import profile

    trace = profile(fn, cuda=result.backend == "cuda")
    result.kernels = kernel_table(trace)
    return trace


def _count_work(fn: Callable[[], object], result: TimingResult) -> str:
    from perflab.model.units import format_bytes
    from perflab.render.roofline import count_flops_bytes

    result.flops, result.bytes = count_flops_bytes(fn)
    return (
        f"counted per call: {result.flops:.4g} FLOP (torch FlopCounterMode), "
        f"at least {format_bytes(result.bytes)} moved (tensor sizes)"
    )


def _record(result: TimingResult, path: str) -> str:
    if result.backend != "cuda":
        return f"no GPU: {path} not written (records hold GPU measurements; this ran on the CPU)"
    result.save(path)
    return f"recorded to {path} ({result.device}, {result.created})"


def _versions_text(result: TimingResult) -> str:
    return ", ".join(f"{k} {v}" for k, v in result.versions.items()) or "versions unknown"


def user_frames(tb: TracebackType | None, filename: str) -> TracebackType | None:
    """The part of a traceback that starts in the user's code (drop perflab's frames)."""
    first = tb
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            return tb
        tb = tb.tb_next
    return first
