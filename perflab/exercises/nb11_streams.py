"""Exercises of notebooks/11-streams-and-overlap.ipynb: a prediction about two threads that
overlap a copy with compute, a batch copy from pinned or pageable memory behind a compute
step, and which calls make the host wait for the GPU."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, choice, ranges

NOTEBOOK = "11-streams-and-overlap"

# the two-thread prediction's bands: (overlapped - longer) / shorter, 0 = fully hidden
OVERLAP_BOUNDS = (1 / 3, 2 / 3)
OVERLAP_LABELS = ("the longer one", "in between", "the sum")
BATCH_OPTIONS = ("both", "pinned only", "pageable only", "neither")
CALLS = (
    "loss.item()",
    "torch.cuda.synchronize()",
    "torch.nonzero(x)",
    "x_pinned.to('cuda', non_blocking=True)",
    "side.wait_stream(main)",
    "event.record(side)",
)
SERIALISING = ("loss.item()", "torch.cuda.synchronize()", "torch.nonzero(x)")


def _unhidden(v: Values) -> float:
    """How much of the shorter piece of work the overlap failed to hide: 0 when the pair took
    as long as the longer alone, 1 when it took the sum."""
    a, b = v["copy_ms"], v["compute_ms"]
    return float((v["overlapped_ms"] - max(a, b)) / min(a, b))


def _band(value: float) -> str:
    return OVERLAP_LABELS[sum(value >= bound for bound in OVERLAP_BOUNDS)]


def _copy_ms(v: Values, gbps: float) -> float:
    return float(v["batch_mib"] * 2**20 / (gbps * 1e9) * 1e3)


def _hides(v: Values) -> str:
    # a pinned copy on a side stream runs on a copy engine while the SMs compute; a pageable
    # one is staged by the host first (the call blocks), so it never runs behind the step
    return "pinned only" if _copy_ms(v, v["pinned_gbps"]) <= v["compute_ms"] else "neither"


EXERCISES = (
    Spec(
        "two-thread-overlap",
        NOTEBOOK,
        lambda v: (
            f"Alone, the copy took {v['copy_ms']:.1f} ms and the compute {v['compute_ms']:.1f} "
            "ms (the medians above). The next cell runs them together: the copy on a worker "
            "thread, the compute on this one, both in calls that release the GIL, on this "
            "machine's cores (shared with other users). Predict how long the pair takes: "
            "about 'the longer one' alone (the shorter hidden), 'in between', or about 'the "
            "sum' of the two (nothing hidden, or worse)."
        ),
        ranges(
            _unhidden,
            OVERLAP_BOUNDS,
            OVERLAP_LABELS,
            low="Two threads overlap only where each has a core, and memory bandwidth, of its "
            "own. Here a copy is work for a core (there is no copy engine), the machine has "
            "two cores, and other people's processes run on them too.",
            high="Both calls release the GIL, so the two threads can run at the same time on "
            "two cores: the pair can finish close to the longer of the two alone.",
            right="Compare the measured hidden fraction with the bound max(a, b).",
        ),
        lambda v: (
            f"Measured: {v['overlapped_ms']:.1f} ms for the pair, against "
            f"{max(v['copy_ms'], v['compute_ms']):.1f} ms for the longer alone (the bound) "
            f"and {v['copy_ms'] + v['compute_ms']:.1f} ms for the sum: "
            f"{max(0.0, 1 - _unhidden(v)):.0%} of the shorter piece was hidden. Two threads "
            "can reach max(a, b) only if each gets a core and the copy does not slow the "
            "compute by taking the memory bandwidth or the cache it needs. On a GPU the copy "
            "runs on a copy engine, hardware of its own, and the SMs keep computing: that is "
            "where max(a, b) is within reach."
        ),
        worked=lambda v: _band(_unhidden(v)),
        given={"copy_ms": "positive", "compute_ms": "positive"},
        measured={"overlapped_ms": "positive"},
    ),
    Spec(
        "batch-copy-hides",
        NOTEBOOK,
        lambda v: (
            f"Each training step copies a batch of {v['batch_mib']:.0f} MiB to the GPU and "
            f"then computes for {v['compute_ms']:.1f} ms. The loader copies the next batch "
            "with non_blocking=True on a side stream while the current step computes. "
            f"Recorded on the H200 at this size: {v['pinned_gbps']:.1f} GB/s from pinned "
            f"memory, {v['pageable_gbps']:.1f} GB/s from pageable memory. Which copy can run "
            "entirely behind the compute step, so that the step takes no longer than its "
            "compute: 'both', 'pinned only', 'pageable only' or 'neither'?"
        ),
        choice(
            _hides,
            BATCH_OPTIONS,
            why={
                "both": "Work out each copy's time (bytes / rate; 1 MiB = 2^20 bytes, 1 GB/s "
                "= 10^9 bytes per second) and compare it with the compute step. And what does "
                "the host do while a pageable copy is staged?",
                "pinned only": "Check the pinned copy's time against the compute step: bytes / "
                "rate, 1 MiB = 2^20 bytes.",
                "pageable only": "Pageable memory is the slower path: the driver stages it "
                "through a pinned buffer, and the host waits while it does.",
                "neither": "Work out the pinned copy's time (bytes / rate; 1 MiB = 2^20 bytes) "
                "and compare it with the compute step: a copy engine runs it while the SMs "
                "compute.",
            },
        ),
        lambda v: (
            f"Pinned: {v['batch_mib']:.0f} MiB / {v['pinned_gbps']:.1f} GB/s = "
            f"{_copy_ms(v, v['pinned_gbps']):.2f} ms, "
            + (
                "shorter than"
                if _copy_ms(v, v["pinned_gbps"]) <= v["compute_ms"]
                else "longer than"
            )
            + f" the {v['compute_ms']:.1f} ms step; a copy engine moves it while the SMs "
            f"compute. Pageable: {_copy_ms(v, v['pageable_gbps']):.2f} ms, and the rate is "
            "not the only problem: the driver stages pageable memory through a pinned buffer, "
            "the call returns only once its data is staged, and it may wait for the stream "
            "first, so the host cannot queue the next step's work while it copies. Pin the "
            "loader's buffers (DataLoader(pin_memory=True)) and copy with non_blocking=True."
        ),
        worked=_hides,
        given={
            "batch_mib": "positive",
            "pinned_gbps": "positive",
            "pageable_gbps": "positive",
            "compute_ms": "positive",
        },
    ),
    Spec(
        "serialising-calls",
        NOTEBOOK,
        "A training loop runs on a GPU with a main stream and a side stream `side` (x, loss "
        "are CUDA tensors; x_pinned is a pinned CPU tensor). Which of these calls make the "
        "host thread wait until the GPU has finished earlier work? Pick all that do: "
        + "; ".join(CALLS)
        + ".",
        choice(
            list(SERIALISING),
            CALLS,
            why={
                "x_pinned.to('cuda', non_blocking=True)": "From pinned memory a non-blocking "
                "copy is queued on the stream and the call returns at once: the copy engine "
                "does it later.",
                "side.wait_stream(main)": "wait_stream orders the two streams on the GPU: the "
                "side stream's later work waits for main's, the host does not wait.",
                "event.record(side)": "Recording an event queues a marker on the stream; only "
                "event.synchronize() (or .query() in a loop) makes the host wait for it.",
            },
            missed="Which results must the host have in its own memory before the call can "
            "return: a Python number, a shape that depends on the data, or the end of all "
            "queued work?",
            right="A number or a shape the host needs, or an explicit synchronize.",
        ),
        ".item() needs the value on the host, so it waits for the kernel that computes it "
        "and copies it back; torch.cuda.synchronize() waits for all queued work; "
        "torch.nonzero(x) needs the number of nonzero elements to allocate its output, so it "
        "copies that count to the host and waits for it. The non-blocking copy from pinned "
        "memory, wait_stream and event.record only queue work or ordering on the GPU. "
        'torch.cuda.set_sync_debug_mode("warn") makes PyTorch warn at each synchronising '
        "call.",
        worked=list(SERIALISING),
    ),
)

# the values of the notebook's stored run (its printed outputs), for tests/test_exercises.py
EXAMPLES = {
    "two-thread-overlap": {"copy_ms": 15.57, "compute_ms": 12.46, "overlapped_ms": 25.50},
    "batch-copy-hides": {
        "batch_mib": 64,
        "pinned_gbps": 55.2,
        "pageable_gbps": 11.1,
        "compute_ms": 3.0,
    },
}
