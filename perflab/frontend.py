"""The options-to-call code the magics share with the CLI: ``%%gpuprofile`` with
``perflab time``, ``%%ptx`` with ``perflab ptx``; and ``perflab.bench(fn)``, the same timing
from Python.

One definition of each flag, applied to the magic's ``magic_arguments`` and to the
CLI's argparse parser; one function that turns parsed timing options into a timed run
(with ``--trace`` and ``--record``), and the compile steps (target, flags, Triton specs)
both compile front-ends call."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar, cast

from perflab.analysis.precision import PRECISIONS
from perflab.capture import env
from perflab.capture.interpreter import watch_interpreter
from perflab.capture.timer import TimingOptions, time_function
from perflab.capture.toolchain import DEFAULT_TIMEOUT_S
from perflab.errors import InputError
from perflab.model.kernel import CompileResult
from perflab.model.listeners import notify
from perflab.model.timing import TimingResult
from perflab.model.units import parse_size

if TYPE_CHECKING:
    from typing import Unpack

    from perflab.capture.compile import TritonSpec
    from perflab.model.trace import Trace
    from perflab.render.ptx_view import ViewOptions

F = TypeVar("F", bound=Callable[..., object])


class ArgumentOptions(TypedDict, total=False):
    """The keyword arguments of ``add_argument`` the flags use (argparse's and IPython's)."""

    action: str
    choices: Sequence[str]
    default: object
    dest: str
    help: str
    metavar: str
    type: Callable[[str], object]


# (flags, argparse keyword arguments)
ArgumentSpecs = list[tuple[tuple[str, ...], ArgumentOptions]]
TIMING_ARGUMENTS: ArgumentSpecs = [
    (
        ("--budget",),
        ArgumentOptions(
            type=float,
            default=100.0,
            metavar="MS",
            help="time budget in milliseconds: sampling stops when it is spent, or earlier "
            "once the noise target is met (default 100)",
        ),
    ),
    (
        ("--max-noise",),
        ArgumentOptions(
            type=float,
            default=0.5,
            metavar="PCT",
            help="noise target: stop once the median's relative standard error is below "
            "PCT percent, after at least 10 samples (default 0.5; 0: use the whole budget)",
        ),
    ),
    (
        ("--warmup",),
        ArgumentOptions(
            type=float,
            default=25.0,
            metavar="MS",
            help="warm-up budget in milliseconds (default 25)",
        ),
    ),
    (
        ("-n",),
        ArgumentOptions(
            type=int,
            dest="number",
            metavar="N",
            help="calls per sample (default: 1 on a GPU; enough for 20 us on the CPU)",
        ),
    ),
    (
        ("-r",),
        ArgumentOptions(
            type=int,
            dest="repeat",
            metavar="R",
            help="number of samples (default: as many as the budget allows, >= 10)",
        ),
    ),
    (
        ("--flush-l2",),
        ArgumentOptions(
            dest="flush_l2",
            action="store_true",
            default=None,
            help="flush the L2 (CPU: last-level cache) before every sample (default on a GPU)",
        ),
    ),
    (
        ("--no-flush-l2",),
        ArgumentOptions(
            dest="flush_l2",
            action="store_false",
            help="keep caches warm between samples (default on the CPU)",
        ),
    ),
    (
        ("--graph",),
        ArgumentOptions(
            action="store_true",
            help="capture the code as a CUDA graph and time its replay "
            "(removes launch overhead; GPU only)",
        ),
    ),
    (
        ("--hot",),
        ArgumentOptions(
            action="store_true",
            help="hot measurement for tiny kernels (as nvbench's): calls back to back, one "
            "timed window around a batch long enough to dwarf an empty sample's window (the "
            "timer's own overhead), no cache "
            "flush; reported per call",
        ),
    ),
    (
        ("--backend",),
        ArgumentOptions(
            choices=("auto", "cuda", "cpu"),
            default="auto",
            help="timing backend (default: cuda when a GPU is present)",
        ),
    ),
    (("--name",), ArgumentOptions(default=None, help="name of the NVTX range and of the result")),
    (
        ("--no-nvtx",),
        ArgumentOptions(
            dest="no_nvtx",
            action="store_true",
            help="do not emit an NVTX range around the timed runs",
        ),
    ),
    (
        ("--trace",),
        ArgumentOptions(
            action="store_true",
            help="profile one extra run with torch.profiler and show the kernels "
            "(CPU ops without a GPU)",
        ),
    ),
    (
        ("--flops",),
        ArgumentOptions(
            type=float,
            default=None,
            metavar="N",
            help="floating-point operations per call (for the roofline point)",
        ),
    ),
    (
        ("--bytes",),
        ArgumentOptions(
            type=float,
            default=None,
            metavar="N",
            help="bytes moved per call (for the roofline point)",
        ),
    ),
    (
        ("--dtype",),
        ArgumentOptions(
            choices=PRECISIONS,
            default=None,
            help="the precision the timed arithmetic runs in: the roofline's compute ceiling, "
            "and what a comparison checks (default: with --roofline, the dtype of the "
            "matmuls and convolutions that did most of the FLOPs; tf32 for float32 on a "
            "GPU where torch allows TF32)",
        ),
    ),
    (
        ("--record",),
        ArgumentOptions(
            default=None,
            metavar="FILE",
            help="with a GPU: run and save the result to FILE; without one: "
            "replay FILE (saying where and when it was measured)",
        ),
    ),
]


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


def timing_options(args: argparse.Namespace, default_name: str) -> TimingOptions:
    """The TimingOptions a parsed command line asks for (validated)."""
    opts = TimingOptions(
        warmup_ms=args.warmup,
        budget_ms=args.budget,
        number=args.number,
        repeat=args.repeat,
        flush_l2=args.flush_l2,
        graph=args.graph,
        hot=args.hot,
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


class BenchOptions(TypedDict, total=False):
    """The fields of :class:`~perflab.capture.timer.TimingOptions`, as ``bench`` takes them."""

    warmup_ms: float
    budget_ms: float
    number: int | None
    repeat: int | None
    flush_l2: bool | None
    graph: bool
    hot: bool
    backend: str
    name: str
    nvtx: bool
    min_samples: int
    max_samples: int
    max_noise: float
    fill_queue: bool
    extra: dict[str, object]


def bench(fn: Callable[[], object], /, **options: Unpack[BenchOptions]) -> TimingResult:
    """Time ``fn()`` and return a :class:`~perflab.model.timing.TimingResult`; the Python
    counterpart of ``%%gpuprofile`` and ``perflab time``.

    ``options`` are the fields of :class:`~perflab.capture.timer.TimingOptions`:
    ``budget_ms`` (the timeout, default 100) and ``warmup_ms``; ``number`` calls per sample
    and ``repeat`` samples (a fixed count, no stopping rule); ``max_noise``, the relative
    standard error of the median to stop at (default 0.005); ``flush_l2`` (default: on for
    CUDA, off for the CPU); ``graph`` to time a CUDA-graph replay; ``hot`` to time tiny
    kernels in back-to-back batches (no flush); ``backend`` ("auto",
    "cuda" or "cpu"); ``name``; ``nvtx``; ``min_samples``, ``max_samples`` and ``fill_queue``.
    A bad option, or an ``fn`` that is not callable, raises :class:`~perflab.errors.InputError`.

    The result keeps every sample (``samples_ns``) with ``median_ns``, ``ci95_ns``,
    ``compare(other)`` and ``save(path)``, and goes to the result listeners (the lab's
    history panel) as ``%%gpuprofile``'s do.

    >>> r = bench(lambda: sum(range(1000)), backend="cpu", budget_ms=20)
    >>> r.n > 0
    True
    """
    with watch_interpreter() as seen:
        result = time_function(fn, **options)
    result.interpreter = seen.interpreter
    return notify(result)


@dataclass
class TimedRun:
    """What a timing front-end shows: the result, the trace (``--trace``), notes."""

    result: TimingResult
    trace: Trace | None = None
    replayed: bool = False
    notes: list[str] = field(default_factory=list)


def replay_instead(record: str | None) -> bool:
    """``--record FILE`` with no GPU and FILE present: replay rather than run."""
    return bool(record) and not env.cuda_available() and os.path.exists(str(record))


def timed_run(fn: Callable[[], object], args: argparse.Namespace, default_name: str) -> TimedRun:
    """Run ``fn`` as the parsed options ask: replay, or time (and trace, and record)."""
    opts = timing_options(args, default_name)
    if replay_instead(args.record):
        result = TimingResult.load(args.record)
        _given_dtype(result, args.dtype)
        return TimedRun(
            result,
            replayed=True,
            notes=[
                f"no GPU: replayed {args.record} (measured on {result.device}, {result.created}; "
                f"{_versions_text(result)}); the code was not run"
            ],
        )
    with watch_interpreter() as seen:
        result = time_function(fn, opts)
    result.interpreter = seen.interpreter
    result.flops, result.bytes = args.flops, args.bytes
    _given_dtype(result, args.dtype)
    run = TimedRun(result)
    if getattr(args, "roofline", False) and (_uncounted(args) or args.dtype is None):
        run.notes.append(_count_work(fn, result, counts=_uncounted(args)))
    if args.trace:
        run.trace = _trace_once(fn, result)
    if args.record:
        run.notes.append(_record(result, args.record))
    return run


def _trace_once(fn: Callable[[], object], result: TimingResult) -> Trace:
    from perflab.analysis.side_streams import side_stream_warning
    from perflab.analysis.trace_stats import kernel_table
    from perflab.capture.profile import profile

    trace = profile(fn, cuda=result.backend == "cuda")
    result.kernels = kernel_table(trace)
    warning = side_stream_warning(trace)
    if warning is not None:
        result.warnings.append(warning)
    return trace


def _given_dtype(result: TimingResult, dtype: str | None) -> None:
    """``--dtype``, where given, is the precision the result ran in."""
    if dtype is not None:
        result.dtype, result.dtype_why = dtype, "--dtype"


def _uncounted(args: argparse.Namespace) -> bool:
    """Neither --flops nor --bytes given: the roofline counts both."""
    return args.flops is None and args.bytes is None


def _count_work(fn: Callable[[], object], result: TimingResult, *, counts: bool) -> str:
    """Run ``fn`` once more under torch's FLOP counter: its FLOPs and bytes where
    ``counts`` (none were given), its precision where --dtype did not say; what was
    counted, in words."""
    from perflab.model.units import format_bytes, format_rate
    from perflab.render.work import count_work

    work = count_work(fn)
    said = []
    if counts:
        result.flops, result.bytes = work.flops, work.bytes
        said.append(
            f"{format_rate(result.flops, 'FLOP', 4)} (torch FlopCounterMode), at least "
            f"{format_bytes(result.bytes)} moved (tensor sizes)"
        )
    if result.dtype is None:
        result.dtype, result.dtype_why = work.precision.name, work.precision.why
        known = result.dtype is not None
        said.append(f"precision {result.dtype} ({result.dtype_why})" if known else result.dtype_why)
    return f"counted per call: {'; '.join(said)}"


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


# ---- `%%ptx` and `perflab ptx` -----------------------------------------------------------

# (flags, argparse keyword arguments), shared by the CLI and the magic
COMPILE_ARGUMENTS: ArgumentSpecs = [
    (
        ("--arch",),
        ArgumentOptions(
            default=None,
            metavar="SM",
            help="target, e.g. sm_80, sm_90a, sm_100a (default: the current GPU, else sm_90a)",
        ),
    ),
    (
        ("--flags",),
        ArgumentOptions(
            default="",
            metavar="FLAGS",
            help='extra nvcc flags, e.g. "-maxrregcount=32 -DN=4 -O3 -Xptxas -v": '
            "-D, -U, -I, -O, -maxrregcount, -Xptxas and the math, warning and "
            "lambda switches, with checked values; anything else is refused with the list",
        ),
    ),
    (("--std",), ArgumentOptions(default="c++17", help="C++ standard (default c++17)")),
    (
        ("--kernel",),
        ArgumentOptions(
            default=None, metavar="NAME", help="show only this kernel (name or unique prefix)"
        ),
    ),
    (
        ("--block",),
        ArgumentOptions(
            type=int,
            default=None,
            metavar="N",
            help="threads per block for the occupancy estimate (default 256; "
            "Triton: num_warps x 32)",
        ),
    ),
    (
        ("--smem",),
        ArgumentOptions(
            default=None,
            metavar="BYTES",
            help="dynamic shared memory per block for occupancy, e.g. 48K",
        ),
    ),
    (
        ("--timeout",),
        ArgumentOptions(
            type=float,
            default=DEFAULT_TIMEOUT_S,
            metavar="S",
            help=f"seconds a compiler run may take (default {DEFAULT_TIMEOUT_S:g})",
        ),
    ),
]


# options whose value may itself start with "-": argparse reads `--flags "-DX=1"` as two
# options ("expected one argument"), so such a pair is joined into `--flags=-DX=1` first
DASH_VALUE_OPTIONS = ("--flags",)


def join_dash_values(argv: Sequence[str], options: Sequence[str] = DASH_VALUE_OPTIONS) -> list[str]:
    """``[..., "--flags", "-DX=1", ...]`` -> ``[..., "--flags=-DX=1", ...]``."""
    joined: list[str] = []
    position = 0
    while position < len(argv):
        token = argv[position]
        following = argv[position + 1] if position + 1 < len(argv) else None
        if token in options and following is not None and following.startswith("-"):
            joined.append(f"{token}={following}")
            position += 2
        else:
            joined.append(token)
            position += 1
    return joined


def accept_dash_values(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` (a subcommand's) join :data:`DASH_VALUE_OPTIONS` values first;
    argparse hands a subcommand its arguments through ``parse_known_args``."""
    parse = parser.parse_known_args

    def parse_joined(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return parse(join_dash_values(sys.argv[1:] if args is None else args), namespace)

    setattr(parser, "parse_known_args", parse_joined)  # noqa: B010  (an instance override)


def default_arch() -> str:
    """The current GPU's target (``sm_90a`` on a Hopper GPU), else sm_90a."""
    from perflab.model.arch import Arch, parse_arch

    for dev in env.gpu_devices():
        try:
            return Arch.preferred(parse_arch(str(dev.get("compute_capability", ""))).cc).name
        except InputError:
            continue
    return "sm_90a"


def dynamic_smem(args: argparse.Namespace) -> int | None:
    if args.smem is None:
        return None
    try:
        return parse_size(str(args.smem))
    except ValueError as exc:
        raise InputError(f"--smem: {exc}") from None


def view_options(
    args: argparse.Namespace,
    result: CompileResult,
    *,
    show: Sequence[str] | None = None,
    diff_with: CompileResult | None = None,
) -> ViewOptions:
    from perflab.render.ptx_view import PANES, ViewOptions

    # a Triton result holds one kernel: there --kernel chose the function, not a view filter
    kernel = args.kernel if result.lang == "cuda" else None
    smem = dynamic_smem(args)
    return ViewOptions(
        kernel=kernel,
        show=PANES if show is None else show,
        block_size=args.block,
        dynamic_shared=smem,
        diff_with=diff_with,
    )


def compile_cuda_from_args(
    source: str, args: argparse.Namespace, *, source_name: str, include_dirs: list[str]
) -> CompileResult:
    from perflab.capture.compile import compile_cuda

    result = compile_cuda(
        source,
        arch=args.arch or default_arch(),
        flags=args.flags,
        std=args.std,
        timeout=args.timeout,
        source_name=source_name,
        include_dirs=include_dirs,
    )
    if args.kernel:
        result.kernel(args.kernel)  # fail early, naming the kernels there are
    return result


TRITON_ARGUMENTS: ArgumentSpecs = [
    (
        ("--signature",),
        ArgumentOptions(
            default=None,
            metavar="TYPES",
            help="Triton: types of the non-constexpr parameters in order, e.g. "
            '"*fp32,*fp32,i32" (or create a TritonSpec in the source)',
        ),
    ),
    (
        ("--constexprs",),
        ArgumentOptions(
            default=None,
            metavar="K=V,...",
            help="Triton: values of the tl.constexpr parameters, e.g. BLOCK=1024",
        ),
    ),
    (
        ("--num-warps",),
        ArgumentOptions(type=int, default=4, help="Triton: warps per program (default 4)"),
    ),
    (
        ("--num-stages",),
        ArgumentOptions(type=int, default=3, help="Triton: pipeline stages (default 3)"),
    ),
]


def unquote(value: str | None) -> str | None:
    """IPython keeps the quotes around ``--flags "-O3 -DN=4"``: drop one matching pair."""
    if value and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_constexprs(text: str) -> dict[str, object]:
    """``"BLOCK=1024,EVEN=True"`` -> ``{"BLOCK": 1024, "EVEN": True}``."""
    import ast

    found: dict[str, object] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        if not sep or not name.strip().isidentifier():
            raise InputError(f"--constexprs: expected NAME=VALUE, not {part!r}")
        try:
            found[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            found[name.strip()] = value.strip()
    return found


class _JitFunction(Protocol):
    """What is read of a ``@triton.jit`` function (any value with ``arg_names`` and ``fn``)."""

    __name__: str


def triton_specs(new_values: list[object], args: argparse.Namespace) -> list[TritonSpec]:
    """What to compile from the values a Triton source defined: the TritonSpecs it
    created, or (with ``--signature``) a spec for its one ``@triton.jit`` function."""
    from perflab.capture.compile import TritonSpec

    if args.signature is None:
        specs = [v for v in new_values if isinstance(v, TritonSpec)]
        if not specs:
            raise InputError(
                "no Triton compile spec: pass --signature (and --constexprs) "
                "or create a perflab.TritonSpec in the source"
            )
        return specs
    jitted = [
        cast("_JitFunction", v) for v in new_values if hasattr(v, "arg_names") and hasattr(v, "fn")
    ]
    if args.kernel:
        jitted = [f for f in jitted if f.__name__ == args.kernel]
    if len(jitted) != 1:
        names = ", ".join(f.__name__ for f in jitted) or "none"
        raise InputError(
            f"--signature needs exactly one @triton.jit function (found {names});"
            " choose one with --kernel NAME"
        )
    spec = TritonSpec(
        jitted[0],
        signature=args.signature,
        constexprs=parse_constexprs(args.constexprs or ""),
        num_warps=args.num_warps,
        num_stages=args.num_stages,
    )
    return [spec]


def compile_triton_specs(
    specs: list[TritonSpec], args: argparse.Namespace, *, source_name: str
) -> list[CompileResult]:
    arch = args.arch or default_arch()
    return [spec.compile(arch, args.timeout, source_name=source_name) for spec in specs]
