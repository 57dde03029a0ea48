"""The verdict of a trace diff on each name, from the step-to-step noise.

For every name the trace diff has one sample per step on each side: the name's total time in
that step (0 in a step where it did not run). Two steps' samples are compared with the
two-sided Mann-Whitney U test (normal approximation with the tie correction and a continuity
correction of 1/2, as scipy's ``method="asymptotic"``), vectorised over names, and the
difference of the medians is the effect:

- ``same``: the medians differ by less than the minimum effect, ``MIN_RELATIVE`` of the
  control's median or ``MIN_ABSOLUTE_NS`` per step, whichever is larger (a change too small to
  matter, significant or not);
- ``slower`` / ``faster``: the effect is at least the minimum and ``p < ALPHA``;
- ``unclear``: the effect is at least the minimum but the steps are too noisy (or too few)
  to tell it from noise (``p >= ALPHA``). With 2 steps a side the test cannot reach ``ALPHA``:
  every change that matters is ``unclear``; 4 steps a side are the fewest that can.

Each name is tested on its own (no correction for testing many names): read a lone
``slower`` among hundreds of names with that in mind.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

ALPHA = 0.05
MIN_RELATIVE = 0.05
MIN_ABSOLUTE_NS = 1_000.0
METHOD = (
    "per-step totals of each name compared by a two-sided Mann-Whitney U test (normal "
    f"approximation, tie and continuity corrected); slower/faster when p < {ALPHA:g} and the "
    f"medians differ by at least {100 * MIN_RELATIVE:g}% of the control's or "
    f"{MIN_ABSOLUTE_NS / 1e3:g} us per step, same when they differ by less, unclear otherwise"
)

_ERFC = np.frompyfunc(math.erfc, 1, 1)


def midranks(samples: F64) -> tuple[F64, F64]:
    """Per row of ``samples``: the rank of each value among the row's (1-based, ties get the
    mean of their ranks), and the row's tie term, the sum over tied groups of t**3 - t."""
    rows, n = samples.shape
    order = np.argsort(samples, axis=1, kind="stable")
    ordered = np.take_along_axis(samples, order, axis=1)
    positions = np.broadcast_to(np.arange(n, dtype=np.int64), (rows, n))
    new_group = np.ones((rows, n), dtype=bool)
    new_group[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    first = np.maximum.accumulate(np.where(new_group, positions, 0), axis=1)
    ends_group = np.ones((rows, n), dtype=bool)
    ends_group[:, :-1] = new_group[:, 1:]
    last_rev = np.where(ends_group, positions, n)[:, ::-1]
    last = np.minimum.accumulate(last_rev, axis=1)[:, ::-1]
    sorted_ranks = (first + last) / 2.0 + 1.0
    size = (last - first + 1).astype(np.float64)
    ranks = np.empty_like(sorted_ranks)
    np.put_along_axis(ranks, order, sorted_ranks, axis=1)
    ties = np.sum(size**2 - 1.0, axis=1)  # each member of a group of t adds t**2 - 1
    return ranks, ties


def mann_whitney_p(control: F64, test: F64) -> F64:
    """Two-sided p-value of the Mann-Whitney U test per row of ``control`` (rows x n1) against
    the same row of ``test`` (rows x n2); 1.0 where every value of a row is equal."""
    rows, n1 = control.shape
    n2 = test.shape[1]
    if rows == 0 or n1 == 0 or n2 == 0:
        return np.ones(rows, dtype=np.float64)
    n = n1 + n2
    ranks, ties = midranks(np.concatenate([control, test], axis=1))
    u1 = ranks[:, :n1].sum(axis=1) - n1 * (n1 + 1) / 2.0
    mean = n1 * n2 / 2.0
    variance = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    sigma = np.sqrt(np.maximum(variance, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.maximum(np.abs(u1 - mean) - 0.5, 0.0) / sigma
    p = np.where(sigma > 0, _ERFC(z / math.sqrt(2.0)).astype(np.float64), 1.0)
    return np.asarray(np.minimum(p, 1.0), dtype=np.float64)


def verdicts(control: F64, test: F64) -> tuple[list[str], F64]:
    """``same``/``slower``/``faster``/``unclear`` per row of per-step totals (ns), and the
    p-values (module docstring)."""
    p = mann_whitney_p(control, test)
    c_median = np.median(control, axis=1) if control.shape[1] else np.zeros(len(control))
    t_median = np.median(test, axis=1) if test.shape[1] else np.zeros(len(test))
    effect = t_median - c_median
    threshold = np.maximum(MIN_RELATIVE * np.abs(c_median), MIN_ABSOLUTE_NS)
    small = np.abs(effect) < threshold
    significant = p < ALPHA
    out = np.where(small, "same", np.where(significant, "", "unclear")).astype(object)
    out[~small & significant] = np.where(effect[~small & significant] > 0, "slower", "faster")
    return [str(v) for v in out.tolist()], p
