"""Kernel categories from one ordered rule table that users can extend.

A rule is ``(category, regular expression)``, searched for case-insensitively in the kernel
name; the first matching rule wins, and names that match none are ``"other"``. Extend by
putting your rules first::

    rules = [("my_fused_op", r"my_fused"), *DEFAULT_RULES]
    kernel_categories(trace, rules)

A rule of yours is a user's pattern: RE2 matches it, in time linear in the name
(:mod:`perflab.analysis.patterns` says what RE2 does not take, such as lookaround). The rules
of :data:`DEFAULT_RULES` are perflab's own, written to match in linear time with Python's
``re`` (one needs a lookahead, which RE2 lacks).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from perflab.analysis.patterns import compile_pattern
from perflab.errors import InputError
from perflab.model.trace import EventKind, Trace, distinct

OTHER = "other"

# Order matters: communication and attention kernels are often built from GEMM pieces
# (e.g. CUTLASS-based FMHA), and convolutions run as implicit GEMMs. Normalisation (batch,
# layer, group, instance, RMS norm; cuDNN's bn_fw/bn_bw; Welford statistics) comes before
# reduction, which would otherwise take it for its "norm"; a vector norm (a reduce kernel
# with NormTwoOps, ...) and a normal distribution ("normal") stay out of it. The lookahead
# finds "norm...ops" within a word from the word's first "norm" only ((?=(...))\1 is an
# atomic group), so a long name of repeated "norm" costs linear time, not quadratic.
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    ("communication", r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall"),
    ("attention", r"flash|fmha|attention|attn|sdpa|\bmha"),
    ("convolution", r"conv|winograd|implicit_convolve|dgrad|wgrad"),
    # nvjet_*: cuBLAS's own Hopper matmul kernels (nvjet_sm90_tst_256x128_64x4_1x2_h_bz_...)
    ("gemm", r"gemm|gemv|cublas|cutlass|xmma|wgmma|hgmma|matmul|\bmm_|_mm\b|^nvjet_"),
    ("triton", r"^triton_|triton"),
    ("memory", r"memcpy|memset|copy|fill|catarray|transpose|gather|scatter|index_select"),
    (
        "normalization",
        r"bn_fw|bn_bw|batch_?norm|layer_?norm|group_?norm|instance_?norm|rms_?norm|welford"
        r"|rowwise_?moments|^(?!.*(?:normal|\b(?=(\w*?norm))\1\w*ops)).*norm",
    ),
    ("reduction", r"reduce|reduction|softmax|argmax|argmin|topk|cumsum|scan"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|foreach|apply_kernel"),
)

Rules = Sequence[tuple[str, str]]


class Searcher(Protocol):
    def search(self, name: str, /) -> object:
        """Truthy when the rule's pattern is found in ``name``."""
        ...


def category_names(rules: Rules = DEFAULT_RULES) -> list[str]:
    """Distinct categories in rule order, then ``"other"``."""
    names = list(dict.fromkeys(cat for cat, _ in _checked(rules)))
    return [*names, OTHER] if OTHER not in names else names


_BUILT_IN = frozenset(pattern for _, pattern in DEFAULT_RULES)


def _checked(rules: Rules) -> list[tuple[str, str]]:
    """``rules`` as (category, pattern) pairs of text, or InputError naming a bad rule."""
    out = []
    for rule in rules:
        if not (isinstance(rule, tuple | list) and len(rule) == 2):
            raise InputError(f"a category rule is (category, pattern), not {rule!r}")
        category, pattern = rule
        if not isinstance(category, str) or not isinstance(pattern, str):
            raise InputError(f"a category rule is (category, pattern) of text, not {rule!r}")
        out.append((category, pattern))
    return out


def _compile_rule(category: str, pattern: str) -> Searcher:
    """perflab's own rules by Python's ``re`` (module docstring); any other by RE2."""
    if pattern in _BUILT_IN:
        return re.compile(pattern, re.IGNORECASE)
    where = f"the category rule ({category!r}, {pattern!r})"
    return compile_pattern(pattern, where, ignore_case=True)


def categorize(names: Sequence[str], rules: Rules = DEFAULT_RULES) -> list[str]:
    """The category of each name (first matching rule, else ``"other"``)."""
    compiled = [(cat, _compile_rule(cat, pattern)) for cat, pattern in _checked(rules)]
    out = []
    for name in names:
        out.append(next((cat for cat, rx in compiled if rx.search(name)), OTHER))
    return out


def kernel_categories(
    trace: Trace, rules: Rules = DEFAULT_RULES
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """For every kernel event (in event order): its category code, and the list of
    category names the codes index. Names are matched once per distinct name."""
    is_kernel = trace.kind == EventKind.KERNEL
    name_ids = trace.name[is_kernel]
    labels = category_names(rules)
    code_of = {c: i for i, c in enumerate(labels)}
    names = distinct(name_ids)
    cats = categorize([trace.strings[i] for i in names.tolist()], rules)
    lookup = np.zeros(len(trace.strings), dtype=np.int64)
    lookup[names] = [code_of[c] for c in cats]
    return lookup[name_ids], labels


def is_comm_name(names: Sequence[str]) -> npt.NDArray[np.bool_]:
    """The summary's definition of communication: the name starts with "nccl"."""
    return np.array([n.lower().startswith("nccl") for n in names], dtype=bool)
