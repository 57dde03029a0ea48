"""The ``meta`` of a saved trace, checked where it is read (:meth:`perflab.model.trace.Trace.load`):
the entries perflab itself reads have the types and bounds it writes, so a damaged or
hand-edited file is refused naming the entry."""

from __future__ import annotations

from typing import Any

from perflab.errors import SchemaError

# meta entries that analyses read as numbers, and their lower bounds
_META_COUNTS = {"events_read": 0, "rank": 0, "world_size": 1}


def check_meta(meta: Any, source: str) -> None:
    """The meta entries that perflab itself reads have the types it writes."""
    if not isinstance(meta, dict):
        raise SchemaError("damaged trace file: meta is not an object", source=source)
    for key, low in _META_COUNTS.items():
        value = meta.get(key, low)
        if type(value) is not int or not low <= value < 2**63:
            raise SchemaError(
                f"damaged trace file: {value!r} is not a count",
                source=source,
                position=f"meta.{key}",
            )
    devices = meta.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise SchemaError(
            "damaged trace file: not a list of objects", source=source, position="meta.devices"
        )
    ranks = meta.get("ranks", [])
    if not isinstance(ranks, list) or not all(type(r) is int for r in ranks):
        raise SchemaError(
            "damaged trace file: not a list of ranks", source=source, position="meta.ranks"
        )
    for key in NAME_TABLES:
        _check_name_table(meta.get(key, {}), source, f"meta.{key}")
    _check_collective_args(meta.get("collective_args", {}), source)


# meta entries naming threads ({"<pid>:<tid>": name}) and processes ({"<pid>": name}); the
# timeline shows them as lane names
NAME_TABLES = ("thread_names", "process_names")
MAX_NAME_TABLE = 1 << 16
MAX_NAME_TEXT = 256


def _check_collective_args(args: Any, source: str) -> None:
    """``meta["collective_args"]``: NCCL kernels' process group (text or None) and sequence
    number (-1: none) by the kernel's correlation id, three lists of one length."""
    position = "meta.collective_args"
    if args == {}:
        return
    lists: list[Any] = (
        [args.get(k) for k in ("correlation", "group", "seq")] if isinstance(args, dict) else []
    )
    if not all(isinstance(v, list) for v in lists) or len({len(v) for v in lists}) != 1:
        raise SchemaError(
            "damaged trace file: not three lists of one length", source=source, position=position
        )
    correlation, group, seq = lists
    if not (
        all(type(c) is int and 0 <= c < 2**63 for c in correlation)
        and all(g is None or (isinstance(g, str) and len(g) <= MAX_NAME_TEXT) for g in group)
        and all(type(q) is int and -1 <= q < 2**63 for q in seq)
    ):
        raise SchemaError(
            "damaged trace file: a value of the wrong type", source=source, position=position
        )


def _check_name_table(table: Any, source: str, position: str) -> None:
    """A name table is an object of at most MAX_NAME_TABLE short texts, keyed by ids."""
    if not isinstance(table, dict) or len(table) > MAX_NAME_TABLE:
        raise SchemaError(
            "damaged trace file: not a table of names", source=source, position=position
        )
    for key, name in table.items():
        if not (isinstance(name, str) and len(name) <= MAX_NAME_TEXT and len(key) <= 64):
            raise SchemaError(
                "damaged trace file: a name is not a short text",
                source=source,
                position=f"{position}[{key[:64]!r}]",
            )
