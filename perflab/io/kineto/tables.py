"""The Trace's tables from the joined columns of :class:`perflab.io.kineto.columns.Columns`:
the tracks and each event's track, the kernel, memcpy/memset and CPU-op tables, and the
``meta`` entries the records gave (thread and process names, NCCL collectives' arguments)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from perflab.io._common import StringTable, build_tracks
from perflab.io.kineto.parts import ColumnParts, KeyTable
from perflab.io.kineto.values import DIRECTION_CODE, Ids, id_value, memcpy_direction, translated
from perflab.model.trace import (
    KERNEL_COLUMNS,
    MEMCPY_COLUMNS,
    OP_COLUMNS,
    EventKind,
    Table,
    TrackKind,
    distinct,
    unique_rows,
)

I64 = npt.NDArray[np.int64]


def comm_meta(
    parts: ColumnParts, correlation: npt.NDArray[np.int64], groups: Sequence[str]
) -> dict[str, object]:
    """``collective_args``: the NCCL kernels' process groups and sequence numbers, keyed
    by the kernels' correlation ids (see perflab.model.trace); absent when none has
    them. ``groups``: the process group names the ``c_group`` column's ids stand for."""
    rows = parts.take("c_event", np.int64)
    group = parts.take("c_group", np.int32)
    seq = parts.take("c_seq", np.int64)
    linked = correlation[rows] >= 0  # a kernel without a correlation cannot be found
    if not linked.any():
        return {}
    return {
        "collective_args": {
            "correlation": correlation[rows[linked]].tolist(),
            "group": [groups[g] if g >= 0 else None for g in group[linked].tolist()],
            "seq": seq[linked].tolist(),
        }
    }


def name_meta(
    names: Mapping[str, Mapping[tuple[Hashable, Hashable], str]], text_ids: Ids
) -> dict[str, dict[str, str]]:
    """``thread_names`` ({"<pid>:<tid>": name}) and ``process_names`` ({"<pid>": name}),
    with pids and tids numbered as the tracks number them; absent when the trace names
    none."""
    out: dict[str, dict[str, str]] = {}
    for kind, table in names.items():
        named = {}
        for (pid, tid), text in table.items():
            key = str(id_value(pid, text_ids))
            if kind == "thread_name":
                key += f":{id_value(tid, text_ids)}"
            named[key] = text
        if named:
            out[kind.replace("_name", "_names")] = named
    return out


def event_tracks(
    parts: ColumnParts,
    events: KeyTable,
    strings: StringTable,
    code: npt.NDArray[np.int32],
    gpu: str,
) -> tuple[Table, npt.NDArray[np.int32]]:
    """Tracks and the track of every event. The lane is a function of the event key and
    the device/stream args, so it is worked out once per distinct combination."""
    group, key, device_arg, stream_arg = _key_groups(
        code,
        parts.take("device", np.int64),
        parts.take("stream", np.int64),
        len(events["kind"]),
    )
    kind, pid, tid = (events[c][key] for c in ("kind", "pid", "tid"))
    # GPU work sits on (device, stream); a cuda_sync only when it names a device
    on_gpu = events["gpu_cat"][key] & ((kind != EventKind.SYNC) | (device_arg >= 0))
    device = np.where(on_gpu, np.where(device_arg >= 0, device_arg, pid), pid)
    stream = np.where(on_gpu, np.where(stream_arg >= 0, stream_arg, tid), tid)
    track_kind = np.where(on_gpu, TrackKind.GPU, TrackKind.CPU).astype(np.int8)
    tracks, lane = build_tracks(device, stream, track_kind, strings, gpu=gpu)
    return tracks, lane[group]


def kernel_table(parts: ColumnParts, dims: KeyTable) -> Table:
    dim3 = dims["dim3"]
    grid, block = (dim3[parts.take(f"k_{name}", np.int32)] for name in ("grid", "block"))
    return Table(
        KERNEL_COLUMNS,
        {
            "event": parts.take("k_event", np.int64),
            "grid_x": grid[:, 0],
            "grid_y": grid[:, 1],
            "grid_z": grid[:, 2],
            "block_x": block[:, 0],
            "block_y": block[:, 1],
            "block_z": block[:, 2],
            "registers": parts.take("k_registers", np.int64),
            "shared_mem": parts.take("k_shared_mem", np.int64),
            "occupancy": parts.take("k_occupancy", np.float64),
        },
    )


def memcpy_table(
    parts: ColumnParts, events: KeyTable, text: Sequence[str], code: npt.NDArray[np.int32]
) -> Table:
    rows = parts.take("m_event", np.int64)
    name = events["name"][code[rows]]
    # direction per distinct name ("Memcpy HtoD (Pageable -> Device)"), then per row
    lookup = np.zeros(len(text), dtype=np.int8)
    for n in distinct(name).tolist():
        lookup[n] = memcpy_direction(text[n])
    direction = lookup[name]
    direction[events["kind"][code[rows]] == EventKind.MEMSET] = DIRECTION_CODE["memset"]
    return Table(
        MEMCPY_COLUMNS,
        {"event": rows, "bytes": parts.take("m_bytes", np.int64), "direction": direction},
    )


def op_table(
    parts: ColumnParts, strings: StringTable, op_strings: Mapping[str, StringTable]
) -> Table:
    """CPU ops' extras; their shapes' and dtypes' texts join ``strings`` here, so that
    string ids do not depend on where the file was sliced."""
    text = {
        name: translated(parts.take(f"o_{name}", np.int32), strings.add_all(table.strings))
        for name, table in op_strings.items()
    }
    return Table(
        OP_COLUMNS,
        {
            "event": parts.take("o_event", np.int64),
            "sequence": parts.take("o_sequence", np.int64),
            "flops": parts.take("o_flops", np.float64),
            **text,
        },
    )


def _key_groups(
    code: npt.NDArray[np.int32],
    device: I64,
    stream: I64,
    n_keys: int,
) -> tuple[I64, I64, I64, I64]:
    """Distinct (key, device, stream) combinations that occur: (group of every event, and
    per group its key, device and stream). Kineto gives every event of a key the same
    device and stream, which is checked in one vectorised pass; otherwise rows are sorted."""
    seen_device = np.zeros(n_keys, dtype=np.int64)
    seen_stream = np.zeros(n_keys, dtype=np.int64)
    seen_device[code], seen_stream[code] = device, stream
    if np.array_equal(seen_device[code], device) and np.array_equal(seen_stream[code], stream):
        used = np.flatnonzero(np.bincount(code, minlength=n_keys))
        group_of_key = np.zeros(n_keys, dtype=np.int64)
        group_of_key[used] = np.arange(len(used))
        return group_of_key[code], used, seen_device[used], seen_stream[used]
    rows = np.stack([code.astype(np.int64), device, stream], axis=1)
    distinct, group = unique_rows(rows)
    return group, distinct[:, 0], distinct[:, 1], distinct[:, 2]
