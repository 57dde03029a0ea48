"""Collective-communication maths with nccl-tests' definitions (``doc/PERFORMANCE.md``
in NVIDIA/nccl-tests), and an alpha-beta model fitted to a sweep.

For a collective on ``n`` ranks taking ``t`` seconds:

- ``S`` (the ``bytes`` column) is count x element size, multiplied by ``n`` for
  all_gather, reduce_scatter and all_to_all (the whole gathered or scattered buffer);
- algorithm bandwidth ``algbw = S / t``;
- bus bandwidth ``busbw = algbw x factor``, with factor ``2(n-1)/n`` for all_reduce,
  ``(n-1)/n`` for all_gather, reduce_scatter and all_to_all, and ``1`` for broadcast.
  busbw is comparable with the hardware's link bandwidth whatever ``n`` is.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from perflab.model.machine import AlphaBetaFit

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
# Ops whose S is the whole buffer: each rank holds S / n of it.
_BUFFER_TIMES_RANKS = frozenset({"all_gather", "reduce_scatter", "all_to_all"})


def _check(op: str, world_size: int) -> None:
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r} (known: {', '.join(OPS)})")
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, not {world_size}")


def busbw_factor(op: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``op`` on ``world_size`` ranks."""
    _check(op, world_size)
    n = world_size
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op == "broadcast":
        return 1.0
    return (n - 1) / n


def message_bytes(op: str, count: int, element_size: int, world_size: int) -> int:
    """``S``: count x element size, times the world size for gather/scatter/all-to-all.

    ``count`` is the per-rank element count: the whole buffer for all_reduce and
    broadcast; what each rank sends in all_gather, receives in reduce_scatter, and
    sends to each peer in all_to_all.
    """
    _check(op, world_size)
    base = count * element_size
    return base * world_size if op in _BUFFER_TIMES_RANKS else base


def per_rank_count(op: str, nbytes: int, element_size: int, world_size: int) -> int:
    """The ``count`` that gives a message of about ``nbytes`` (at least one element)."""
    _check(op, world_size)
    per = world_size if op in _BUFFER_TIMES_RANKS else 1
    return max(1, nbytes // (element_size * per))


def algbw_GBps(nbytes: float, time_s: float) -> float:
    """Algorithm bandwidth ``S / t`` in GB/s (10^9 bytes per second, as nccl-tests)."""
    if not time_s > 0:
        raise ValueError(f"time must be positive, not {time_s!r}")
    return nbytes / time_s / 1e9


def busbw_GBps(op: str, nbytes: float, time_s: float, world_size: int) -> float:
    return algbw_GBps(nbytes, time_s) * busbw_factor(op, world_size)


def fit_alpha_beta(nbytes: npt.ArrayLike, time_s: npt.ArrayLike) -> AlphaBetaFit:
    """Fit ``t = alpha + S / beta`` to a sweep, minimising *relative* errors.

    Sizes span decades, so an ordinary least-squares fit would let the largest
    message decide everything; weighting each point by ``1 / t`` gives every size a
    say. ``alpha`` is clamped at 0 when the data put it below (pure bandwidth).
    """
    s = np.asarray(nbytes, dtype=np.float64).reshape(-1)
    t = np.asarray(time_s, dtype=np.float64).reshape(-1)
    if s.size != t.size:
        raise ValueError(f"{s.size} sizes but {t.size} times")
    ok = np.isfinite(s) & np.isfinite(t) & (t > 0) & (s >= 0)
    s, t = s[ok], t[ok]
    if s.size < 2 or np.ptp(s) == 0:
        raise ValueError("an alpha-beta fit needs at least two distinct message sizes")
    design = np.column_stack([np.ones_like(s), s]) / t[:, None]
    (alpha, inv_beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:  # latency below zero is noise: refit the slope alone
        alpha = 0.0
        inv_beta = float(np.sum(s / t) / np.sum((s / t) ** 2))
    # a slope that moves no point by even 1e-9 of its time is round-off: no bandwidth term
    flat = inv_beta * s.max() <= 1e-9 * t.min()
    beta = math.inf if flat else 1.0 / inv_beta
    predicted = alpha + (0.0 if flat else s * inv_beta)
    rel_rms = float(np.sqrt(np.mean(((predicted - t) / t) ** 2)))
    return AlphaBetaFit(
        alpha_s=float(alpha), beta_Bps=float(beta), rel_rms=rel_rms, points=int(s.size)
    )
