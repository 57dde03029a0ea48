"""What an event's key stands for. Per event, (ph, cat, name, pid, tid) is one of few distinct
combinations: :class:`perflab.io.kineto.columns.Columns` interns it as one tuple and decodes
each distinct key once, here, into the lookup columns its events' codes index (kept or not,
an ac2g flow end, a thread or process name, the kind, on a GPU track or not, the name's and
the ids' codes, an allocator's ``[memory]`` event)."""

from __future__ import annotations

import functools
import operator
from itertools import compress
from operator import attrgetter
from typing import Any

import numpy as np

from perflab.io._common import StringTable
from perflab.io.kineto.parts import KeyTable
from perflab.io.kineto.values import Ids, id_column
from perflab.model.trace import EventKind

# Kineto "cat" -> (kind, on a GPU track)
CATEGORIES: dict[str, tuple[EventKind, bool]] = {
    "kernel": (EventKind.KERNEL, True),
    "gpu_memcpy": (EventKind.MEMCPY, True),
    "gpu_memset": (EventKind.MEMSET, True),
    "gpu_user_annotation": (EventKind.ANNOTATION, True),
    "cuda_sync": (EventKind.SYNC, True),  # on the GPU track when it names a device
    "cpu_op": (EventKind.CPU_OP, False),
    "user_annotation": (EventKind.ANNOTATION, False),
    "cuda_runtime": (EventKind.RUNTIME, False),
    "cuda_driver": (EventKind.RUNTIME, False),
    "python_function": (EventKind.PYTHON, False),
}
SKIPPED_CATEGORIES = frozenset({"Trace"})  # the profiler's own span


def skipped_categories(python: bool) -> frozenset[str]:
    """The categories a load does not keep: python_function events too unless ``python``."""
    return SKIPPED_CATEGORIES if python else SKIPPED_CATEGORIES | {"python_function"}


NAME_EVENTS = ("thread_name", "process_name")
MEMORY_EVENT = "[memory]"  # the name of the allocator's instant events
_OTHER = (EventKind.OTHER, False)

# Each attribute read costs about as much as numpy's work on the value, so every field of
# the key is read once per event
EVENT_KEY = attrgetter("ph", "cat", "name", "pid", "tid")
_EVENT_KEY_COLUMNS = {
    "keep": np.bool_,
    "flow": np.bool_,
    "names": np.bool_,
    "memory": np.bool_,
    "kind": np.int8,
    "gpu_cat": np.bool_,
    "name": np.int32,
    "pid": np.int64,
    "tid": np.int64,
}


def event_key_table(skip: frozenset[str], strings: StringTable, text_ids: Ids) -> KeyTable:
    """The lookup table of event keys: events of the ``skip`` categories are not kept; kept
    events' names join ``strings`` and their pids and tids given as text join ``text_ids``."""
    describe = functools.partial(_describe_events, skip, strings, text_ids)
    return KeyTable(describe, _EVENT_KEY_COLUMNS)


def _describe_events(
    skip: frozenset[str], strings: StringTable, text_ids: Ids, keys: list[Any]
) -> dict[str, list[Any]]:
    """Lookup columns for new (ph, cat, name, pid, tid) keys."""
    ph, cat, name, pid, tid = zip(*keys, strict=True)
    keep = [p == "X" and c not in skip for p, c in zip(ph, cat, strict=True)]
    memory = [p == "i" and n == MEMORY_EVENT for p, n in zip(ph, name, strict=True)]
    kind_gpu = [CATEGORIES.get(c, _OTHER) for c in cat]
    # text ids only for the events read (in the order of their keys, as every path reads them)
    kept = list(compress(range(len(keys)), map(operator.or_, keep, memory)))
    pids, tids = [0] * len(keys), [0] * len(keys)
    for values, out in ((pid, pids), (tid, tids)):
        ids = id_column([values[i] for i in kept], text_ids).tolist()
        for i, v in zip(kept, ids, strict=True):
            out[i] = v
    names = [strings.add(n) if k else -1 for n, k in zip(name, keep, strict=True)]
    return {
        "keep": keep,
        "flow": [p in ("s", "f") and c == "ac2g" for p, c in zip(ph, cat, strict=True)],
        "names": [p == "M" and n in NAME_EVENTS for p, n in zip(ph, name, strict=True)],
        "memory": memory,
        "kind": [int(k) for k, _ in kind_gpu],
        "gpu_cat": [g for _, g in kind_gpu],
        "name": names,
        "pid": pids,
        "tid": tids,
    }
