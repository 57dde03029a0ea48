"""Typed records -> numpy columns -> one :class:`Trace`.

:class:`Columns` turns each slice of records into column parts at once (no dict per event),
keeps only the kept events' parts between slices, and builds the Trace's events, tracks and
kernel, memcpy and CPU-op tables (and the allocator's ``[memory]`` events: :mod:`.memory`) at
the end. The columns of a chunk that a helper process read are exported and absorbed as if
this process had read them. ``ac2g`` flow events fill in a missing launch<->kernel
correlation and are then dropped; ``python_function`` events are skipped unless
``python=True``. Metadata events that name threads and processes become
``meta["thread_names"]`` (``{"<pid>:<tid>": name}``) and ``meta["process_names"]``
(``{"<pid>": name}``): text only, at most 256 characters each.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import compress, repeat
from operator import attrgetter, itemgetter
from types import SimpleNamespace
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from perflab.errors import InputError
from perflab.io._common import StringTable, events_table, renumber, sort_order
from perflab.io.kineto.decode import Doc
from perflab.io.kineto.keys import EVENT_KEY, NAME_EVENTS, event_key_table, skipped_categories
from perflab.io.kineto.memory import memory_columns, memory_parts
from perflab.io.kineto.meta import gpu_word, trace_meta
from perflab.io.kineto.parts import ColumnParts, KeyTable, S, return_freed_memory
from perflab.io.kineto.records import (
    EXACT_FLOW_TYPES,
    EXACT_TYPES,
    FLOW_TYPES,
    NO_RAW,
    Complete,
    CompleteExact,
    Instant,
    InstantExact,
    Metadata,
    streamed,
)
from perflab.io.kineto.tables import (
    comm_meta,
    event_tracks,
    kernel_table,
    memcpy_table,
    name_meta,
    op_table,
)
from perflab.io.kineto.times import DUR_MAX_US, TS_MAX_US, TS_MIN_US, exact_ns, ns_of, us_to_ns
from perflab.io.kineto.values import (
    Ids,
    dim3,
    hashable,
    id_value,
    lane_id,
    name_text,
    raw_strings,
    sequence_number,
    translated,
)
from perflab.model.memory import MEMORY_COLUMNS
from perflab.model.trace import (
    MAX_NAME_TABLE,
    MAX_NAME_TEXT,
    EventKind,
    Table,
    Trace,
    kind_mask,
)
from perflab.model.trace_part import Part

T = TypeVar("T")
Codes = npt.NDArray[np.int32]
# a slice's memory events: their records, key codes and positions in the slice (or None)
Memory = tuple[list[Any], Codes, npt.NDArray[np.int64]] | None

# return_freed_memory lives in .parts; load.py imports it from here
__all__ = ["Columns", "build", "return_freed_memory"]

_LINKABLE = (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET, EventKind.RUNTIME)


def build(doc: Doc, source: str, *, python: bool) -> Trace:
    columns = Columns(source, python)
    for events in doc.events:
        columns.add(events)
    return columns.finish(doc, lambda: doc.events)


# read once per kept event (``args`` only for kept events)
_ARGS = attrgetter("args")
_TS, _DUR = attrgetter("ts"), attrgetter("dur")  # one numpy pass each beats one of pairs
_FLOW = attrgetter("pid", "tid", "ts")
# read on args; grid and block are interned (few distinct values)
_GRID, _BLOCK = attrgetter("grid"), attrgetter("block")
_OP_EXTRAS = attrgetter("flops", "input_dims", "input_types")
_COMM_ARGS = attrgetter("group", "seq")  # on kernels: NCCL collective metadata
_NO_COMM_ARGS = ("", -1)
_OP_TEXT = ("input_dims", "input_types")
_DIM3_COLUMNS = {"dim3": np.dtype((np.int64, 3))}  # rows of three


class Columns:
    """Turns slices of decoded events into numpy columns (``add``), then one Trace
    (``finish``). Only the kept events' columns stay alive between slices."""

    def __init__(self, source: str, python: bool, part: Part | None = None) -> None:
        self.source = source
        self.python = python
        self.part = part  # only the events that overlap it are kept (see .part)
        self.skip = skipped_categories(python)
        self.strings = StringTable()
        # CPU ops' shapes and dtypes, one table each, joined to ``strings`` at the end so that
        # string ids do not depend on where the file was sliced
        self.op_strings = {name: StringTable() for name in _OP_TEXT}
        self.comm_groups = StringTable()  # process group names of NCCL kernels
        self.text_ids = Ids()  # pids/tids given as names
        self.events = event_key_table(self.skip, self.strings, self.text_ids)
        self.dims = KeyTable(lambda keys: {"dim3": dim3(keys)}, _DIM3_COLUMNS)
        self.events_read = 0
        self.kept = 0
        # records that may be ac2g flow ends (for streamed slices, every record that is not a
        # complete event): with none, the file is not read again for flows
        self.maybe_flows = 0
        self.parts = ColumnParts()
        # thread_name / process_name -> {(pid, tid) as written: name}
        self.names: dict[str, dict[tuple[Hashable, Hashable], str]] = {k: {} for k in NAME_EVENTS}

    def export(self) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
        """The columns read so far and what their ids stand for (JSON-able), for ``absorb``.
        The columns are handed over: this reader lets go of its parts at once, since a load
        exports one reader per chunk and a reader can outlive its export."""
        arrays = self.parts.handover()
        meta = {
            "keys": list(self.events.ids),
            "dims": list(self.dims.ids),
            "op_strings": {name: table.strings for name, table in self.op_strings.items()},
            "comm_groups": self.comm_groups.strings,
            "events_read": self.events_read,
            "kept": self.kept,
            "maybe_flows": self.maybe_flows,
            "names": {k: [[*key, text] for key, text in t.items()] for k, t in self.names.items()},
        }
        return arrays, meta

    def absorb(self, arrays: dict[str, npt.NDArray[Any]], meta: dict[str, Any]) -> None:
        """Take in the columns that another reader exported for the next part of the file,
        as if this one had read that part: ids are translated to this reader's."""
        keys = [tuple(key) for key in meta["keys"]]
        dims = [hashable(dim) for dim in meta["dims"]]
        dim_id = self.dims.ids.codes(dims, len(dims))
        code_id = self.events.ids.codes(keys, len(keys))
        new_id = {
            "code": code_id,
            "mem_code": code_id,
            "k_grid": dim_id,
            "k_block": dim_id,
            "c_group": self.comm_groups.add_all(meta["comm_groups"]),
            **{
                f"o_{name}": table.add_all(meta["op_strings"][name])
                for name, table in self.op_strings.items()
            },
        }
        for key, values in arrays.items():
            if key in new_id:
                values = translated(values, new_id[key])
            elif key.endswith("_event"):
                values = values.astype(np.int64) + self.kept  # rows of this reader's kept events
            self.parts.put(**{key: values})
        self.events_read += meta["events_read"]
        self.kept += meta["kept"]
        self.maybe_flows += meta["maybe_flows"]
        for kind, entries in meta["names"].items():
            self._note_names(
                SimpleNamespace(name=kind, pid=pid, tid=tid, args=SimpleNamespace(label=text))
                for pid, tid, text in entries
            )

    # -- one slice ---------------------------------------------------------------------
    def add(self, events: list[Any]) -> None:
        try:
            self._add(events)
        except InputError:
            raise
        except (OverflowError, ValueError, TypeError) as exc:
            # values the typed records let through that a column cannot hold (an id written
            # as a 30-digit text)
            raise InputError(
                f"a field has the wrong type or does not fit in 64 bits: {exc}",
                source=self.source,
            ) from None

    def _add(self, events: list[Any]) -> None:
        offset, n = self.events_read, len(events)
        self.events_read += n
        if n == 0:
            return
        table = self.events
        kept, code, position, memory = self._kept(events)
        if memory is not None:
            records, memory_code, where = memory
            parts = memory_parts(records, memory_code, where + offset, self.source)
            self.parts.put(**self._memory_in_part(parts))
        start_ns, dur_ns = self._times(kept, lambda k: offset + position(k))
        if self.part is not None:
            inside = self.part.keeps(start_ns, dur_ns, table["gpu_cat"][code])
            kept, code = list(compress(kept, inside.tolist())), code[inside]
            start_ns, dur_ns = start_ns[inside], dur_ns[inside]
        args = list(map(_ARGS, kept))
        kind = table["kind"][code].astype(np.int8)
        self._add_side_tables(args, kind)
        self.parts.put(
            code=code,
            start_ns=start_ns,
            dur_ns=dur_ns,
            # one plain pass per field: a structured fromiter of pairs measured slower
            correlation=_numbers(args, "correlation", np.int64),
            external_id=_numbers(args, "external_id", np.int64),
            **self._gpu_lanes(args, table["gpu_cat"][code]),
        )
        self.kept += len(kept)

    def _memory_in_part(self, parts: dict[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
        """A slice's allocator events, less those outside the part being read."""
        if self.part is None:
            return parts
        inside = self.part.keeps_instants(parts["mem_ts"])
        return {key: values[inside] for key, values in parts.items()}

    def _kept(self, events: list[Any]) -> tuple[list[Any], Codes, Callable[[int], int], Memory]:
        """The records that become rows (complete events of categories not skipped), their
        key codes, a function from a row's index to its event's position in ``events``
        (for error messages: worked out only when asked) and the allocator's memory events
        (None when there are none); thread and process names are noted."""
        table = self.events
        complete_mask: list[bool] | None = None  # None: every record is a complete event
        memory: Memory = None
        if streamed(events):  # typed by phase: only complete and instant events are keyed
            types = list(map(type, events))
            if Metadata in types:
                self._note_names(compress(events, map(operator.is_, types, repeat(Metadata))))
            exact = CompleteExact in types or InstantExact in types
            complete = CompleteExact if exact else Complete
            is_complete = list(map(operator.is_, types, repeat(complete)))
            complete_mask = is_complete
            instant = InstantExact if exact else Instant
            if instant in types:
                events, code, memory = self._with_instants(events, types, instant, is_complete)
            else:
                events = list(compress(events, is_complete))
                self.maybe_flows += len(is_complete) - len(events)
                code = table.ids.codes(map(EVENT_KEY, events), len(events))
        else:
            code = table.ids.codes(map(EVENT_KEY, events), len(events))
            self.maybe_flows += int(np.count_nonzero(table["flow"][code]))
            named = np.flatnonzero(table["names"][code])
            if len(named):
                self._note_names(_pick(events, named))
            memory = _memory_of(events, code, table["memory"][code], np.arange(len(events)))
        keep = table["keep"][code]
        position = functools.partial(_position, complete_mask, keep)
        return list(compress(events, keep.tolist())), code[keep], position, memory

    def _with_instants(
        self, events: list[Any], types: list[type], instant: type, is_complete: list[bool]
    ) -> tuple[list[Any], Codes, Memory]:
        """A streamed slice's complete events and their codes, and its memory events. Complete
        and instant events are keyed together, in the file's order, so that text ids are
        numbered as a whole-file read numbers them."""
        keyed = list(map(operator.or_, is_complete, map(operator.is_, types, repeat(instant))))
        at = np.flatnonzero(np.array(keyed, dtype=bool))  # positions in the slice
        records = list(compress(events, keyed))
        code = self.events.ids.codes(map(EVENT_KEY, records), len(records))
        complete = np.array(is_complete, dtype=bool)[at]
        self.maybe_flows += len(events) - len(records)
        memory = _memory_of(records, code, self.events["memory"][code] & ~complete, at)
        return list(compress(records, complete.tolist())), code[complete], memory

    def _note_names(self, records: Iterable[Any]) -> None:
        """Thread and process names from metadata events (the last one given wins, as in
        trace viewers); a name that is not text is ignored, a long one is cut."""
        for e in records:
            table = self.names.get(e.name)
            if table is None or (len(table) >= MAX_NAME_TABLE and (e.pid, e.tid) not in table):
                continue
            text = name_text(e.args.label)
            if text:
                table[(e.pid, e.tid)] = text

    def _times(
        self, kept: list[Any], position: Callable[[int], int]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Start and duration of every kept event in integer ns, checked (see _check_times).
        Floats (times within FAST_LIMIT_US) convert exactly; larger times come as text."""
        n = len(kept)
        dur = np.fromiter(map(_DUR, kept), np.float64, count=n)
        if n and type(kept[0]) in EXACT_TYPES:
            start_ns, ts = exact_ns(list(map(_TS, kept)))
            self._check_times(ts, dur, position)
        else:
            ts = np.fromiter(map(_TS, kept), np.float64, count=n)
            self._check_times(ts, dur, position)
            start_ns = us_to_ns(ts)
        return start_ns, np.rint(dur * 1000.0).astype(np.int64)

    def _gpu_lanes(
        self, args: list[Any], gpu_cat: npt.NDArray[np.bool_]
    ) -> dict[str, npt.NDArray[np.int64]]:
        """device and stream args, read only where they place the event (GPU categories);
        -1 elsewhere."""
        rows = np.flatnonzero(gpu_cat)
        on_gpu = _pick(args, rows)
        lanes = {}
        for name in ("device", "stream"):
            column = np.full(len(args), -1, dtype=np.int64)
            try:
                column[rows] = _numbers(on_gpu, name, np.int64)
            except ValueError:  # ids given as hex text: parsed one by one
                column[rows] = [lane_id(getattr(a, name), name) for a in on_gpu]
            lanes[name] = column
        return lanes

    def _check_times(
        self,
        ts: npt.NDArray[np.float64],
        dur: npt.NDArray[np.float64],
        position: Callable[[int], int],
    ) -> None:
        """Every complete event needs a finite ts and a finite, non-negative dur, both
        inside the model's time window."""
        # NaN fails every comparison, so four reductions clear a good slice
        if ((ts >= TS_MIN_US) & (ts <= TS_MAX_US)).all() and (
            (dur >= 0) & (dur <= DUR_MAX_US)
        ).all():
            return
        problems = (
            (~np.isfinite(ts), "missing or non-finite 'ts'"),
            (
                (np.nan_to_num(ts) < TS_MIN_US) | (np.nan_to_num(ts) > TS_MAX_US),
                "'ts' outside the time window (-2**60 to 2**62 - 2**60 ns)",
            ),
            (~np.isfinite(dur), "missing or non-finite 'dur'"),
            (np.nan_to_num(dur) < 0, "negative duration"),
            (np.nan_to_num(dur) > DUR_MAX_US, "'dur' longer than 146 years"),
        )
        for bad, what in problems:
            if bad.any():
                raise InputError(
                    f"{what} in a complete ('X') event",
                    source=self.source,
                    position=f"traceEvents[{position(int(np.flatnonzero(bad)[0]))}]",
                )

    def _add_side_tables(self, args: list[Any], kind: npt.NDArray[np.int8]) -> None:
        """Kernel, memcpy/memset and CPU-op rows from the kept events' ``args``."""
        base = self.kept
        rows = np.flatnonzero(kind == EventKind.KERNEL)
        kernels, n = _pick(args, rows), len(rows)
        self.parts.put(
            k_event=rows + base,
            k_grid=self.dims.ids.codes(map(_GRID, kernels), n),
            k_block=self.dims.ids.codes(map(_BLOCK, kernels), n),
            k_registers=_numbers(kernels, "registers", np.int64),
            k_shared_mem=_numbers(kernels, "shared_memory", np.int64),
            k_occupancy=_numbers(kernels, "occupancy", np.float64),
        )
        comm = list(map(_COMM_ARGS, kernels))
        if comm.count(_NO_COMM_ARGS) != n:  # NCCL kernels with collective metadata
            self._add_comm_args(rows + base, comm)
        rows = np.flatnonzero((kind == EventKind.MEMCPY) | (kind == EventKind.MEMSET))
        self.parts.put(m_event=rows + base, m_bytes=_numbers(_pick(args, rows), "bytes", np.int64))
        rows = np.flatnonzero(kind == EventKind.CPU_OP)
        ops = _pick(args, rows)
        sequence = _numbers(ops, "sequence", np.int64)
        flops, dims, types = self._op_extras(ops)
        keep = (sequence >= 0) | np.isfinite(flops) | (dims >= 0) | (types >= 0)
        self.parts.put(
            o_event=rows[keep] + base,
            o_sequence=sequence[keep],
            o_flops=flops[keep],
            o_input_dims=dims[keep],
            o_input_types=types[keep],
        )

    def _add_comm_args(self, rows: npt.NDArray[np.intp], comm: list[tuple[object, object]]) -> None:
        """Process group and sequence number of the kernels that carry them."""
        keep = [c != _NO_COMM_ARGS for c in comm]
        kept = list(compress(comm, keep))
        self.parts.put(
            c_event=rows[np.array(keep, dtype=bool)],
            c_group=np.array(
                [self.comm_groups.add(str(g)[:MAX_NAME_TEXT]) if g != "" else -1 for g, _ in kept],
                dtype=np.int32,
            ),
            c_seq=np.array([sequence_number(q) for _, q in kept], dtype=np.int64),
        )

    def _op_extras(
        self, ops: Sequence[Any]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """flops, input dims and input types from CPU ops' args; most traces record none."""
        extras = list(map(_OP_EXTRAS, ops))
        # the decoders' shared defaults: a tuple compare finds them by identity
        absent = (math.nan, NO_RAW, NO_RAW)
        if extras.count(absent) == len(extras):
            missing = np.full(len(ops), -1, np.int32)
            return np.full(len(ops), np.nan), missing, missing
        flops, dims, types = zip(*extras, strict=True)
        return (
            np.array(flops, dtype=np.float64).reshape(-1),
            raw_strings(list(dims), self.op_strings["input_dims"]),
            raw_strings(list(types), self.op_strings["input_types"]),
        )

    # -- the whole trace -------------------------------------------------------------------
    def finish(self, doc: Doc, reread: Callable[[], Iterable[list[Any]]]) -> Trace:
        """``reread`` gives the events again: flows are only read when some launch or GPU
        activity lacks its correlation, which current Kineto versions always record."""
        code = self.parts.take("code", np.int32)
        table = self.events
        tracks, track = event_tracks(self.parts, table, self.strings, code, gpu_word(doc.devices))
        start_ns = self.parts.take("start_ns", np.int64)
        correlation = self.parts.take("correlation", np.int64)
        self._link_flows(code, table["kind"][code], correlation, start_ns, reread)
        comm = comm_meta(self.parts, correlation, self.comm_groups.strings)
        kernels = kernel_table(self.parts, self.dims)
        memcpy = memcpy_table(self.parts, table, self.strings.strings, code)
        ops = op_table(self.parts, self.strings, self.op_strings)
        order = sort_order(start_ns, track)
        new_row = renumber(order)
        for side in (kernels, memcpy, ops):
            side.columns["event"] = new_row[side["event"]]
        del new_row
        # sorted one column at a time: the unsorted one is freed before the next is made
        code = code[order]
        columns = {"start_ns": start_ns[order]}
        del start_ns
        columns["dur_ns"] = self.parts.take("dur_ns", np.int64)[order]
        columns["kind"] = table["kind"][code]
        columns["track"] = track[order]
        del track
        columns["name"] = table["name"][code].astype(np.int32)
        del code
        columns["correlation"] = correlation[order]
        del correlation
        columns["external_id"] = self.parts.take("external_id", np.int64)[order]
        del order
        events = events_table(columns)
        return Trace(
            events,
            tracks,
            self.strings.strings,
            kernels=kernels,
            memcpy=memcpy,
            ops=ops,
            memory_events=Table(MEMORY_COLUMNS, memory_columns(self.parts, table)),
            meta={
                **trace_meta(doc, self.source, self.python, self.events_read),
                **name_meta(self.names, self.text_ids),
                **comm,
            },
        )

    def _link_flows(
        self,
        code: npt.NDArray[np.int32],
        kind: npt.NDArray[np.int8],
        correlation: npt.NDArray[np.int64],
        start_ns: npt.NDArray[np.int64],
        reread: Callable[[], Iterable[list[Any]]],
    ) -> None:
        """Fill missing correlations of launches and GPU work from ``ac2g`` flow events,
        whose endpoints sit on (pid, tid, ts) of the events they bind to."""
        if self.maybe_flows == 0:
            return
        missing = np.flatnonzero(kind_mask(kind, _LINKABLE) & (correlation < 0))
        if len(missing) == 0:
            return
        ends = self._flow_ends(reread())
        pid, tid = self.events["pid"][code], self.events["tid"][code]
        for i in missing.tolist():
            found = ends.get((int(pid[i]), int(tid[i]), int(start_ns[i])))
            if found is not None:
                correlation[i] = found

    def _flow_ends(self, slices: Iterable[list[Any]]) -> dict[tuple[int, int, int], int]:
        """``ac2g`` flow ends by the (pid, tid, start in ns) they sit on -> their id."""
        ends: dict[tuple[int, int, int], int] = {}
        flow_types = (*FLOW_TYPES, *EXACT_FLOW_TYPES)
        for events in slices:
            if streamed(events):
                flows = [e for e in events if type(e) in flow_types and e.cat == "ac2g"]
            else:
                code = self.events.ids.codes(map(EVENT_KEY, events), len(events))
                flows = list(compress(events, self.events["flow"][code].tolist()))
            flows = [f for f in flows if type(f.id) is int]  # ids given as text do not link
            for f, ns in zip(flows, ns_of(list(map(_TS, flows))).tolist(), strict=True):
                pid, tid, _ = _FLOW(f)
                ends[(id_value(pid, self.text_ids), id_value(tid, self.text_ids), ns)] = f.id
        return ends


def _memory_of(
    records: list[Any], code: Codes, memory: npt.NDArray[np.bool_], at: npt.NDArray[np.intp]
) -> Memory:
    """The memory events among ``records`` (``memory``: which), their codes and positions
    (``at``: each record's position in its slice); None when there are none."""
    rows = np.flatnonzero(memory)
    if len(rows) == 0:
        return None
    return list(_pick(records, rows)), code[rows], at[rows].astype(np.int64)


def _position(complete: list[bool] | None, keep: npt.NDArray[np.bool_], row: int) -> int:
    """Where a slice's kept row ``row`` was among its records (see Columns._kept)."""
    rows = np.flatnonzero(keep)
    at = rows if complete is None else np.flatnonzero(complete)[rows]
    return int(at[row])


def _pick(records: list[T], rows: npt.NDArray[np.intp]) -> Sequence[T]:
    """``records[rows]`` for a list."""
    if len(rows) < 2:
        return [records[i] for i in rows.tolist()]
    picked: tuple[T, ...] = itemgetter(*rows.tolist())(records)
    return picked


def _numbers(records: Sequence[object], name: str, dtype: type[S]) -> npt.NDArray[S]:
    """Attribute ``name`` of every record, as one numpy column."""
    return np.fromiter(map(attrgetter(name), records), dtype, count=len(records))
