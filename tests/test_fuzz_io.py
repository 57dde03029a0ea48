"""Seeded mutation fuzzing of every trace reader and of saved traces.

Each test mutates a real file from tests/data/traces (or a trace saved from one) for a few
seconds (``PERFLAB_FUZZ_SECONDS`` per test, default 2) and accepts only two outcomes: a trace
whose numbers hold together (durations >= 0, busy <= span, totals >= 0, a save round trip and
a Chrome export that succeed), or a perflab error that names the file. Anything else (a raw
Python exception, a negative total) is collected and reported with the seed of the case.
Mutations: byte flips, truncations, huge/negative/NaN/inf numbers, wrong types, deep nesting,
duplicate keys and columns; for Nsight Systems exports, hostile schemas too (generated columns,
views, virtual tables, extra or missing columns, other types, huge values, triggers).

``python tests/test_fuzz_io.py [SECONDS]`` prints the counts without failing (measurement).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import random
import shutil
import sqlite3
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from data_paths import TRACES
from nsys_hostile import EXPENSIVE, columns, edit, generated, rebuilt, view_instead

from perflab.errors import PerflabError
from perflab.io import export_chrome, load_ncu, load_trace
from perflab.model.trace import Trace

SECONDS = float(os.environ.get("PERFLAB_FUZZ_SECONDS", "2"))
MAX_CASES = 100_000
KINETO_SMALL = TRACES / "kineto" / "triton_example_a100.json.gz"
KINETO_MEDIUM = TRACES / "kineto" / "alexnet_a100.json.gz"
NSYS = TRACES / "nsys" / "power_iteration.sqlite"
NCU = TRACES / "ncu" / "copy_blocked.csv"

# values that break naive readers: out of range, not finite, the wrong type, deep
ODD_NUMBERS: list[Any] = [
    -1,
    -(2**63),
    2**63 - 1,
    2**64,
    9.1e15,
    -9.1e15,
    1e308,
    1e400,
    -0.0,
    0.5,
    2**32,
    2**32 + 1,
]
ODD_VALUES: list[Any] = [
    *ODD_NUMBERS,
    "x",
    "",
    "0x0",
    "1_000",
    "１２",
    None,
    True,
    [],
    {},
    [1, 2, 3],
    {"a": 1},
]


@dataclass
class Stats:
    tried: int = 0
    ok: int = 0
    errors: int = 0
    failures: list[str] = field(default_factory=list)

    def line(self, name: str) -> str:
        return (
            f"{name}: {self.tried} tried, {self.ok} loaded, {self.errors} perflab errors, "
            f"{len(self.failures)} failures"
        )


def run(
    name: str,
    seed: int,
    make: Callable[[random.Random, Path], Path],
    load: Callable[[Path], Any],
    check: Callable[[Any, Path], None],
    workdir: Path,
    seconds: float = SECONDS,
) -> Stats:
    """Mutate and load until ``seconds`` have passed; every outcome is classified."""
    stats = Stats()
    deadline = time.monotonic() + seconds
    case = 0
    while time.monotonic() < deadline and case < MAX_CASES:
        rng = random.Random(seed * 1_000_003 + case)
        case_dir = workdir / f"case{case % 4}"
        shutil.rmtree(case_dir, ignore_errors=True)
        case_dir.mkdir(parents=True)
        path = make(rng, case_dir)
        stats.tried += 1
        try:
            result = load(path)
            check(result, case_dir)
            stats.ok += 1
        except PerflabError as exc:
            if str(path) not in str(exc):
                stats.failures.append(f"{name} case {case}: error without the file: {exc}")
            else:
                stats.errors += 1
        except (Exception, RecursionError, MemoryError) as exc:  # the bugs this hunts
            text = f"{type(exc).__name__}: {str(exc)[:200]}"
            stats.failures.append(f"{name} case {case}: {text}")
        case += 1
    return stats


# -- what a correct result is ----------------------------------------------------------------


def check_trace(trace: Trace, workdir: Path) -> None:
    """Numbers that must hold for any trace perflab accepts; then save, reload, export."""
    dur = trace.dur_ns
    assert len(dur) == 0 or int(dur.min()) >= 0, "negative duration accepted"
    doc = trace.summary().to_dict()
    _check_summary(doc)
    json.dumps(doc, allow_nan=False)
    saved = trace.save(workdir / "again.npz")
    assert Trace.load(saved).summary().to_dict() == doc, "save round trip changed the summary"
    export_chrome(trace, workdir / "again.json")


def check_kineto(trace: Trace, workdir: Path) -> None:
    """check_trace, and the kernel count and total agree with a plain reading of the file
    (whenever Python's json module reads it the same way: no duplicate keys)."""
    check_trace(trace, workdir)
    path = next(workdir.glob("t.json*"))
    raw = path.read_bytes()
    try:
        text = gzip.decompress(raw) if path.suffix == ".gz" else raw
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, OSError, EOFError):
        return
    kernels = [
        e
        for e in doc["traceEvents"]
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "kernel"
    ]
    ours = trace.summary().to_dict()["kernels"]
    assert ours["count"] == len(kernels), "kernel count differs from the file"
    total = sum(e["dur"] for e in kernels)
    assert abs(ours["total_us"] - total) <= max(1e-9 * abs(total), 1e-3), "kernel total differs"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _check_summary(doc: dict[str, Any]) -> None:
    for part in ("kernels", "comm", "memcpy"):
        assert doc[part]["total_us"] >= 0, f"negative {part} total"
    for dev in doc["devices"].values():
        assert dev["span_us"] >= 0 and dev["busy_us"] >= 0, "negative span or busy time"
        assert dev["busy_us"] <= dev["span_us"] * (1 + 1e-9) + 1e-3, "busy longer than span"
    for cat in doc["categories"].values():
        assert cat["total_us"] >= 0, "negative category total"


def check_ncu(report: Any, workdir: Path) -> None:
    for metric in report.metrics:
        assert metric.value is None or math.isfinite(metric.value), "non-finite metric"
    for rule in report.rules:
        assert rule.speedup is None or math.isfinite(rule.speedup), "non-finite speedup"
    json.dumps(report.to_dict(), allow_nan=False)
    str(report)
    from perflab.render.roofline import points_from_ncu

    points_from_ncu(report)


# -- JSON mutations ------------------------------------------------------------------------


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document (to a depth of 4)."""
    out = [prefix]
    if len(prefix) >= 4:
        return out
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc[:50]):
            out += _paths(value, (*prefix, i))
    return out


def _set(doc: Any, where: tuple[Any, ...], value: Any) -> Any:
    if not where:
        return value
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    parent[where[-1]] = value
    return doc


def _dumps(doc: Any) -> bytes:
    """JSON that keeps non-finite floats and huge ints (json.dumps writes them as tokens
    many readers reject, which is a mutation too)."""
    return json.dumps(doc).encode()


def mutate_json(rng: random.Random, text: bytes) -> bytes:
    """One structural or byte-level mutation of a JSON document."""
    choice = rng.randrange(8)
    if choice == 0:  # byte flips
        flipped = bytearray(text)
        for _ in range(rng.randint(1, 8)):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        return bytes(flipped)
    if choice == 1:  # truncation
        return text[: rng.randrange(len(text))]
    doc = json.loads(text)
    places = _paths(doc)
    where = rng.choice(places)
    if choice in (2, 3):  # an odd value anywhere
        return _dumps(_set(doc, where, rng.choice(ODD_VALUES)))
    if choice == 4:  # deep nesting, spliced in as text (json.dumps would recurse)
        depth = rng.choice([100, 1_000, 5_000])
        inner = rng.choice([b"{}", b"1", b'"x"'])
        opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        deep = opener * depth + inner + closer * depth
        return _dumps(_set(doc, where, "@DEEP@")).replace(b'"@DEEP@"', deep, 1)
    if choice == 5:  # odd numbers in fields every reader uses
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        for event in rng.sample(events, min(len(events), rng.choice([1, 2, 5]))) if events else []:
            if isinstance(event, dict):
                key = rng.choice(["ts", "dur", "pid", "tid", "id"])
                event[key] = rng.choice([*ODD_NUMBERS, "0x10", "12", None])
                args = event.setdefault("args", {})
                if isinstance(args, dict) and rng.random() < 0.5:
                    name = rng.choice(["device", "stream", "correlation", "bytes", "grid"])
                    args[name] = rng.choice(ODD_VALUES)
        return _dumps(doc)
    if choice == 6:  # a duplicate key inside an object
        out = _dumps(doc)
        at = out.find(b'"ts":', rng.randrange(max(len(out) // 2, 1)))
        if at < 0:
            return out
        return out[:at] + b'"ts": -9.1e15, ' + out[at:]
    return _dumps(_set(doc, where, rng.choice([float("nan"), float("inf"), -float("inf")])))


def _kineto_maker(source: Path, compress: bool) -> Callable[[random.Random, Path], Path]:
    text = gzip.decompress(source.read_bytes())

    def make(rng: random.Random, workdir: Path) -> Path:
        data = mutate_json(rng, text)
        if compress:
            data = gzip.compress(data, compresslevel=1)
            if rng.random() < 0.2:  # damage the gzip stream itself
                raw = bytearray(data)
                if rng.random() < 0.5:
                    raw = raw[: rng.randrange(1, len(raw))]
                else:
                    raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
                data = bytes(raw)
        path = workdir / ("t.json.gz" if compress else "t.json")
        path.write_bytes(data)
        return path

    return make


def fuzz_kineto_json(workdir: Path, seconds: float = SECONDS) -> Stats:
    return run(
        "kineto json",
        1,
        _kineto_maker(KINETO_SMALL, compress=False),
        load_trace,
        check_kineto,
        workdir,
        seconds,
    )


def fuzz_kineto_gzip(workdir: Path, seconds: float = SECONDS) -> Stats:
    return run(
        "kineto gzip",
        2,
        _kineto_maker(KINETO_MEDIUM, compress=True),
        load_trace,
        check_kineto,
        workdir,
        seconds,
    )


def fuzz_kineto_parallel(workdir: Path, seconds: float = SECONDS) -> Stats:
    """The parallel loader (a helper process reads ranges of the file, results come back
    as .npz) on mutated files: each case starts a helper, so fewer cases fit."""
    return run(
        "kineto parallel",
        7,
        _kineto_maker(KINETO_MEDIUM, compress=True),
        lambda path: load_trace(path, workers=1),
        check_kineto,
        workdir,
        seconds,
    )


# -- Nsight Systems SQLite ---------------------------------------------------------------------

NSYS_TABLES = {
    "CUPTI_ACTIVITY_KIND_KERNEL": [
        "start",
        "end",
        "deviceId",
        "streamId",
        "correlationId",
        "demangledName",
        "gridX",
        "registersPerThread",
    ],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "deviceId", "bytes", "copyKind"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "globalTid", "nameId"],
    "NVTX_EVENTS": ["start", "end", "text", "textId", "globalTid"],
    "StringIds": ["id", "value"],
    "TARGET_INFO_GPU": ["name", "totalMemory", "clockRate", "id"],
}
SQL_VALUES: list[Any] = [
    *[v for v in ODD_NUMBERS if isinstance(v, float) or -(2**63) <= v < 2**63],
    float("nan"),
    float("inf"),
    -float("inf"),
    "text",
    b"\xff\x00blob",
    b"nccl",
    None,
]


def _nsys_maker() -> Callable[[random.Random, Path], Path]:
    with sqlite3.connect(f"file:{NSYS}?mode=ro", uri=True) as db:
        present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    tables = {t: cols for t, cols in NSYS_TABLES.items() if t in present}
    original = NSYS.read_bytes()

    def make(rng: random.Random, workdir: Path) -> Path:
        path = workdir / "t.sqlite"
        choice = rng.randrange(5)
        if choice == 0:  # damage the file's pages
            data = bytearray(original)
            for _ in range(rng.randint(1, 20)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            path.write_bytes(bytes(data))
            return path
        if choice == 1:
            path.write_bytes(original[: rng.randrange(len(original))])
            return path
        path.write_bytes(original)
        with sqlite3.connect(path) as db:
            for _ in range(rng.randint(1, 3)):
                _mutate_table(db, rng, choice, tables)
        return path

    return make


def _mutate_table(
    db: sqlite3.Connection, rng: random.Random, choice: int, tables: dict[str, list[str]]
) -> None:
    table = rng.choice(sorted(tables))
    column = rng.choice(tables[table])
    value = rng.choice(SQL_VALUES)
    try:
        if choice == 2:  # one row
            (count,) = db.execute(f"SELECT count(*) FROM {table}").fetchone()
            db.execute(
                f"UPDATE {table} SET {column} = ? WHERE rowid = "
                f"(SELECT rowid FROM {table} LIMIT 1 OFFSET ?)",
                (value, rng.randrange(max(count, 1))),
            )
        elif choice == 3:  # every row: a whole column of the wrong kind
            db.execute(f"UPDATE {table} SET {column} = ?", (value,))
        else:  # duplicate rows, or a table gone
            if rng.random() < 0.5:
                db.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM {table} LIMIT 5")
            else:
                db.execute(f"DROP TABLE {table}")
    except sqlite3.Error:
        pass  # a type the column refuses: no mutation


def fuzz_nsys(workdir: Path, seconds: float = SECONDS) -> Stats:
    return run("nsys sqlite", 3, _nsys_maker(), load_trace, check_trace, workdir, seconds)


# -- Nsight Systems schemas made hostile -------------------------------------------------------

# the columns perflab reads from each table, and the text ones among them
SCHEMA_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "streamId", "demangledName", "gridX"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "bytes", "copyKind"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "globalTid", "nameId"],
    "NVTX_EVENTS": ["start", "end", "eventType", "text", "textId"],
    "StringIds": ["id", "value"],
    "TARGET_INFO_GPU": ["id", "name", "smCount"],
}
TEXT_COLUMNS = [("StringIds", "value"), ("NVTX_EVENTS", "text"), ("TARGET_INFO_GPU", "name")]
# what a generated column computes: constants, or huge text and long work
CHEAP = ["1", "NULL", "'text'", "-1", "2.5", "X'00ff'"]
COSTLY = ["hex(zeroblob(3000000))", "length(hex(zeroblob(100000000)))"]
TYPES = ["TEXT", "BLOB", "REAL", "", "NUMERIC"]
CASTS = ["CAST({c} AS TEXT)", "CAST({c} AS REAL) + 0.5", "CAST({c} AS BLOB)", "'x' || {c}"]


def _schema_mutation(rng: random.Random) -> list[str]:
    """One hostile change to the export's schema or values, as statements."""
    table = rng.choice(sorted(SCHEMA_COLUMNS))
    column = rng.choice(SCHEMA_COLUMNS[table])
    spelt = rng.choice([table, table.lower(), table.upper()])
    kind = rng.randrange(9)
    if kind == 0:  # a column perflab reads, generated (a stored one is computed as it is made)
        stored = rng.random() < 0.3
        expression = rng.choice(CHEAP if stored else CHEAP + COSTLY)
        return generated(table, column, expression, stored=stored, rows=rng.choice([5, None]))
    if kind == 1:
        return view_instead(table, spelt)
    if kind == 2:  # an empty virtual table in place of the table
        listed = ", ".join(name for name, _ in columns(table))
        return [
            f"ALTER TABLE {table} RENAME TO stored_rows",
            f"CREATE VIRTUAL TABLE {spelt} USING fts5({listed})",
        ]
    if kind == 3:  # a column perflab does not read: plain, or generated at any cost
        by_row = [EXPENSIVE] if "start" in SCHEMA_COLUMNS[table] else []
        extra = rng.choice(CHEAP + COSTLY + by_row)
        plain = f"DEFAULT {rng.choice(CHEAP)}"
        made = f"GENERATED ALWAYS AS ({extra}) VIRTUAL"
        return [f"ALTER TABLE {spelt} ADD COLUMN extra {rng.choice([plain, made])}"]
    if kind == 4:
        return [f"ALTER TABLE {spelt} DROP COLUMN {column}"]
    if kind == 5:  # the column declared another type, holding values of another type
        value = rng.choice(CASTS).format(c=column)
        return rebuilt(table, column, f"{column} {rng.choice(TYPES)}", value)
    if kind == 6:  # a huge value, below or above what perflab reads
        text_table, text_column = rng.choice(TEXT_COLUMNS)
        size = rng.choice([1000, 500_000, 1_100_000, 3_000_000])
        value = rng.choice([f"randomblob({size})", f"hex(zeroblob({size // 2}))"])
        return [
            f"UPDATE {text_table} SET {text_column} = {value} WHERE rowid = "
            f"(SELECT rowid FROM {text_table} LIMIT 1 OFFSET {rng.randrange(8)})"
        ]
    if kind == 7:  # a trigger that would wipe the kernels, were anything written
        event = rng.choice(["INSERT", "UPDATE", "DELETE"])
        return [
            f"CREATE TRIGGER wipe{rng.randrange(10**6)} AFTER {event} ON {table} "
            "BEGIN DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL; END"
        ]
    return [f"CREATE INDEX by_cost{rng.randrange(10**6)} ON {table} (length(hex(zeroblob(100))))"]


def _nsys_schema_maker() -> Callable[[random.Random, Path], Path]:
    def make(rng: random.Random, workdir: Path) -> Path:
        path = workdir / "t.sqlite"
        shutil.copyfile(NSYS, path)
        edit(path, [_schema_mutation(rng) for _ in range(rng.randint(1, 3))], strict=False)
        return path

    return make


def fuzz_nsys_schema(workdir: Path, seconds: float = SECONDS) -> Stats:
    """Exports whose schema computes values on reading (generated columns, views, virtual
    tables), lacks or adds columns, declares other types, holds huge values or triggers: a
    correct trace or perflab's error naming the file, never a hang or a raw exception."""
    return run("nsys schema", 7, _nsys_schema_maker(), load_trace, check_trace, workdir, seconds)


# -- Nsight Compute CSV ------------------------------------------------------------------------

CSV_VALUES = [
    "inf",
    "-inf",
    "nan",
    "NaN",
    "1e400",
    "-1",
    "1_000",
    "１２３",
    "٣",
    "1,2,3",
    "",
    "0x10",
    "9" * 400,
    "(1, 2, 3)",
    '"',
]


def _ncu_maker() -> Callable[[random.Random, Path], Path]:
    text = NCU.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))

    def make(rng: random.Random, workdir: Path) -> Path:
        path = workdir / "r.csv"
        choice = rng.randrange(5)
        if choice == 0:
            data = bytearray(text.encode())
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            path.write_bytes(bytes(data))
            return path
        if choice == 1:
            path.write_text(text[: rng.randrange(len(text))], encoding="utf-8")
            return path
        table = [list(r) for r in rows]
        if choice == 2:  # a duplicated or dropped header column
            col = rng.randrange(len(table[0]))
            if rng.random() < 0.5:
                other = rng.randrange(len(table[0]))
                table[0][other] = table[0][col]
            else:
                table = [r[:col] + r[col + 1 :] for r in table]
        else:  # odd cell values
            for _ in range(rng.randint(1, 10)):
                row = rng.choice(table[1:])
                if row:
                    row[rng.randrange(len(row))] = rng.choice(CSV_VALUES)
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL).writerows(table)
        path.write_text(out.getvalue(), encoding="utf-8")
        return path

    return make


def fuzz_ncu(workdir: Path, seconds: float = SECONDS) -> Stats:
    return run("ncu csv", 4, _ncu_maker(), load_ncu, check_ncu, workdir, seconds)


# -- saved traces ------------------------------------------------------------------------------


def _npz_members(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    with zipfile.ZipFile(path) as z:
        return {n[:-4]: np.load(z.open(n), allow_pickle=False) for n in z.namelist()}


def _fake_npy(shape: tuple[int, ...], dtype: str) -> bytes:
    """A .npy header claiming ``shape`` followed by a few bytes: not what it claims."""
    out = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue() + b"\0" * 64


def _npz_maker(workdir0: Path) -> Callable[[random.Random, Path], Path]:
    saved = load_trace(KINETO_SMALL).save(workdir0 / "base.npz")
    original = saved.read_bytes()
    members = _npz_members(saved)
    header = json.loads(members["header"].tobytes())

    def make(rng: random.Random, workdir: Path) -> Path:
        path = workdir / "t.npz"
        choice = rng.randrange(6)
        if choice == 0:
            data = bytearray(original)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            path.write_bytes(bytes(data))
            return path
        if choice == 1:
            path.write_bytes(original[: rng.randrange(len(original))])
            return path
        arrays: dict[str, Any] = dict(members)
        head = json.loads(json.dumps(header))
        if choice == 2:  # the header
            place = rng.choice(_paths(head))
            value = rng.choice([*ODD_VALUES, "@DEEP@", float("nan")])
            head = _set(head, place, value)
            deep = b"[" * 5_000 + b"]" * 5_000
            text = json.dumps(head).encode().replace(b'"@DEEP@"', deep)
            arrays["header"] = np.frombuffer(text, np.uint8)
            with open(path, "wb") as fh:
                np.savez(fh, **arrays)
            return path
        elif choice == 3:  # an array's values
            name = rng.choice([n for n in arrays if n != "header"])
            values = arrays[name].copy()
            if len(values):
                if values.dtype.kind == "i":
                    info = np.iinfo(values.dtype)
                    odd = [-1, -(2**31), 2**31 - 1, -(2**62), 2**62, 9 * 10**18, 2**32]
                    pool: list[Any] = [v for v in odd if info.min <= v <= info.max]
                    pool += [info.min, info.max]
                else:
                    pool = [np.nan, np.inf, -1.0]
                values[rng.randrange(len(values))] = rng.choice(pool)
            arrays[name] = values
        elif choice == 4:  # an array's type or length, or an extra member
            name = rng.choice([n for n in arrays if n != "header"])
            pick = rng.randrange(3)
            if pick == 0:
                with np.errstate(invalid="ignore"):  # NaN to integers: garbage, on purpose
                    arrays[name] = arrays[name].astype(rng.choice([np.float64, np.int8, np.uint64]))
            elif pick == 1:
                arrays[name] = arrays[name][: rng.randrange(len(arrays[name]) + 1)]
            else:
                arrays["unused"] = np.zeros(rng.randrange(1, 1000))
        else:  # a member that claims a huge shape
            name = rng.choice(sorted(arrays))
            raw = io.BytesIO()
            with zipfile.ZipFile(raw, "w") as z:
                for key, values in arrays.items():
                    member = io.BytesIO()
                    np.save(member, values, allow_pickle=False)
                    npy = member.getvalue()
                    if key == name:
                        npy = _fake_npy((rng.choice([10**11, 2**40, 2**62]),), "<i8")
                    z.writestr(key + ".npy", npy)
            path.write_bytes(raw.getvalue())
            return path
        arrays["header"] = np.frombuffer(json.dumps(head).encode(), np.uint8)
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
        return path

    return make


def fuzz_saved_npz(workdir: Path, seconds: float = SECONDS) -> Stats:
    workdir.mkdir(parents=True, exist_ok=True)
    return run("saved npz", 5, _npz_maker(workdir), Trace.load, check_trace, workdir, seconds)


def _export_maker(workdir0: Path) -> Callable[[random.Random, Path], Path]:
    exported = export_chrome(load_trace(KINETO_SMALL), workdir0 / "export.json")
    text = exported.read_bytes()

    def make(rng: random.Random, workdir: Path) -> Path:
        path = workdir / "t.json"
        path.write_bytes(mutate_json(rng, text))
        return path

    return make


def fuzz_saved_json(workdir: Path, seconds: float = SECONDS) -> Stats:
    """Traces saved as JSON (the Chrome export, which perflab reads back)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return run("saved json", 6, _export_maker(workdir), load_trace, check_trace, workdir, seconds)


FUZZERS = {
    "kineto_json": fuzz_kineto_json,
    "kineto_gzip": fuzz_kineto_gzip,
    "kineto_parallel": fuzz_kineto_parallel,
    "nsys": fuzz_nsys,
    "nsys_schema": fuzz_nsys_schema,
    "ncu": fuzz_ncu,
    "saved_npz": fuzz_saved_npz,
    "saved_json": fuzz_saved_json,
}


@pytest.mark.parametrize("name", sorted(FUZZERS))
def test_fuzz_reader(name: str, tmp_path: Path) -> None:
    """One test per reader and saved-file kind: only good traces or perflab errors."""
    stats = FUZZERS[name](tmp_path)
    print(stats.line(name))
    assert stats.tried > 0
    assert not stats.failures, "\n".join(stats.failures[:20])


if __name__ == "__main__":  # counts for a report: python tests/test_fuzz_io.py [SECONDS]
    import tempfile
    from collections import Counter

    budget = float(sys.argv[1]) if len(sys.argv) > 1 else SECONDS
    for key, fuzz in FUZZERS.items():
        with tempfile.TemporaryDirectory() as tmp:
            result = fuzz(Path(tmp), budget)
        print(result.line(key))
        kinds = Counter(f.split(": ", 1)[1].split(":")[0][:60] for f in result.failures)
        for kind, n in kinds.most_common(8):
            print(f"    {n} x {kind}")
