"""Kineto / torch.profiler Chrome-trace JSON (plain or gzip) -> :class:`Trace`.

msgspec decodes the events into compact typed records that declare only the fields perflab
uses (the decoder skips everything else), and each slice of records becomes numpy columns at
once; no dict per event is built. Bad input ends in an InputError naming the file and, where
it can, the event: times outside the model's window (see :mod:`perflab.model.trace`), values
that do not fit their columns, nesting too deep to decode.

The modules, each with one job:

- :mod:`.load`: reading a file (:func:`load_kineto`, :func:`loads_kineto`): streamed, in
  chunks of it shared with helper processes (:func:`run_helper`), or decoded whole;
- :mod:`.fast`: cutting the decompressed text into slices (and chunks) of ``traceEvents``;
- :mod:`.helper`: the helper process's entry point (``python -m perflab.io.kineto.helper``);
- :mod:`.decode`: text -> typed records, and malformed text -> errors;
- :mod:`.records`: the typed records themselves, the fields that are read and their ranges;
- :mod:`.columns`: records -> numpy columns;
- :mod:`.memory`: the allocator's ``[memory]`` instant events -> the columns of
  ``trace.memory_events``;
- :mod:`.parts`: the pieces each slice adds to a column, and the lookup tables over
  interned keys that their codes index;
- :mod:`.keys`: what an event's (ph, cat, name, pid, tid) key stands for, decoded once per
  distinct key;
- :mod:`.tables`: the joined columns -> the Trace's tables (tracks, kernels, copies, CPU ops)
  and the ``meta`` the records gave;
- :mod:`.values`: single field values -> what their columns hold;
- :mod:`.times`: microseconds, as floats or JSON text -> exact int64 nanoseconds;
- :mod:`.meta`: the trace's ``meta`` from the file's top level.

A new event field is declared once, on ``records.Args`` (or ``records.Event``), from which
every decoder's types are derived; :mod:`.columns` then reads it into its column
(``Columns._add_side_tables`` for the kernel, memcpy and CPU-op tables).
"""

from __future__ import annotations

from perflab.io.kineto.load import load_kineto, loads_kineto, run_helper
from perflab.io.kineto.records import DECODERS as _DECODERS  # noqa: F401  benchmarks' floor
from perflab.io.kineto.times import exact_ns

__all__ = ["exact_ns", "load_kineto", "loads_kineto", "run_helper"]
