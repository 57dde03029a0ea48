"""A before/after pair of Kineto traces with known, injected changes.

Both traces run the same loop for ``steps`` ``ProfilerStep#<n>`` ranges; each step launches
every kernel of its side once (a CPU op, a ``cudaLaunchKernel`` and the kernel), then one
host-to-device copy. Durations are whole microseconds with seeded noise of ``noise`` (a
fraction, uniform) around their base. Against the control, the test has:

- ``slow_kernel`` twice as long (50 -> 100 us): ``slower``;
- ``gone_kernel`` no more (``gone``) and ``new_kernel`` new (``new``);
- ``old_name_kernel`` renamed ``new_name_kernel``, same time (one row with
  ``--rename old_name_kernel=new_name_kernel``: ``same``);
- ``gemm_kernel`` and the copy unchanged but for the noise: ``same``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kineto_gen import Builder

CONTROL_KERNELS = (
    ("gemm_kernel", 100),
    ("slow_kernel", 50),
    ("gone_kernel", 30),
    ("old_name_kernel", 40),
)
TEST_KERNELS = (
    ("gemm_kernel", 100),
    ("slow_kernel", 100),
    ("new_kernel", 60),
    ("new_name_kernel", 40),
)
COPY = "Memcpy HtoD (Pageable -> Device)"
COPY_US = 20
RENAME = "old_name_kernel=new_name_kernel"
# what the diff must say of each name, whole traces compared with several steps
EXPECTED = {
    "gemm_kernel": "same",
    "slow_kernel": "slower",
    "gone_kernel": "gone",
    "new_kernel": "new",
    "old_name_kernel": "gone",
    "new_name_kernel": "new",
    COPY: "same",
}
# the change per step of GPU time, us: 2x slow_kernel, new, gone (the rename is neutral)
CHANGE_PER_STEP_US = 50 + 60 - 30


def _noisy(us: int, rng: random.Random, noise: float) -> int:
    return max(1, round(us * rng.uniform(1 - noise, 1 + noise)))


def side(
    kernels: tuple[tuple[str, int], ...],
    steps: int,
    seed: int,
    noise: float,
    segment: Callable[[Builder, random.Random], None] | None = None,
) -> dict[str, Any]:
    """One trace of the pair as a Kineto document; ``segment`` (one of
    :data:`kineto_gen.SEGMENTS`) ends every step with its injected idle gaps."""
    rng = random.Random(seed)
    b = Builder()
    for step in range(1, steps + 1):
        begin = b.host
        for name, us in kernels:
            b.x("cpu_op", f"aten::{name}_op", b.host, 8)
            at = b.host + 1
            b.host = b.launch(name, at, max(b.gpu_end, at + 3), _noisy(us, rng, noise)) + 3
        at = b.host + 1
        copy_us = _noisy(COPY_US, rng, noise)
        b.host = b.launch(
            COPY, at, max(b.gpu_end, at + 3), copy_us, call="cudaMemcpyAsync", cat="gpu_memcpy"
        )
        b.host += 2
        if segment is not None:
            segment(b, rng)
        b.x("user_annotation", f"ProfilerStep#{step}", begin, b.host - begin)
        b.host += 1
    return b.document()


def pair(steps: int = 8, seed: int = 0, noise: float = 0.03) -> tuple[dict[str, Any], ...]:
    """The control and test documents (module docstring)."""
    return (
        side(CONTROL_KERNELS, steps, seed, noise),
        side(TEST_KERNELS, steps, seed + 1, noise),
    )
