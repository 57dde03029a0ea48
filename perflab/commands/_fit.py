"""Will the trace fit? A command's peak memory estimated from each format's own sizes before
anything is read, and the refusal, naming what works instead, when it is over the budget.

Every factor below is peak memory (resident, with the helper processes') of whole ``perflab``
processes, less :data:`BASE_BYTES`, measured with benchmarks/big_traces.py's runner on the
files named, then given a margin. The estimate is meant to be above the measured peak and
within about 1.5x of it on traces like those.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import zipfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from perflab.errors import InputError

BASE_BYTES = 150 << 20  # the interpreter, numpy, msgspec (and bokeh for a timeline)

# Kineto JSON: peak per byte of JSON text, measured on generated traces of dense events (about
# 194 bytes of text each) at 1M, 10M and 20M events by benchmarks/big_traces.py: the summary
# 0.39-0.42, the timeline 0.57-0.62 (its levels of detail and page), the idle causes 1.0-1.4
# (every gap with its evidence, and its JSON). Traces of larger events need less per byte.
# Other commands are taken to need what the summary does.
BYTES_PER_TEXT_BYTE = {"timeline": 0.75, "idle": 1.5}
BYTES_PER_TEXT_BYTE_ELSE = 0.55  # reading the trace and one analysis of it

# Saved traces (.npz): peak per byte of the arrays (their size once read, which the archive's
# directory gives exactly), measured on Trace.save of the generated traces of 1M, 2M and 10M
# events (41, 83 and 413 MB of arrays): trace summary 1.54-1.61, trace kernels 1.19, the
# timeline 2.10, trace idle 4.83-5.0. trace idle's part depends on the gaps' evidence: these
# traces' gaps are short (see NSYS_IDLE_PER_KERNEL for a trace whose gaps cost more).
BYTES_PER_ARRAY_BYTE = {"timeline": 2.4, "idle": 5.5}
BYTES_PER_ARRAY_BYTE_ELSE = 1.8

# Nsight Systems SQLite: its rows are fetched table by table as Python tuples, turned into
# columns, then the tuples freed; so the peak is the columns of every row read so far plus
# the tuples of the largest table. Measured on the test export (tests/data/traces/nsys,
# 12k activity rows) with its activity rows repeated: 600x its kernels only (2.2M rows,
# 974 MB), 300x its runtime calls only (2.2M rows, 689 MB), 300x every table (3.6M rows,
# 916 MB), 100x (1.2M rows, 337 MB): 163 bytes a row held, and 256 bytes a kernel row and 125
# a runtime row while its table is read; trace kernels and the timeline peak within 1% of the
# summary. Other tables' rows are taken to cost per column what those two do (20-26 bytes).
NSYS_HELD_PER_ROW = 180
NSYS_ROW_BYTES = {  # while a table's rows are read (the largest such table counts)
    "CUPTI_ACTIVITY_KIND_KERNEL": 280,  # 14 columns read
    "CUPTI_ACTIVITY_KIND_RUNTIME": 140,  # 5
    "CUPTI_ACTIVITY_KIND_MEMCPY": 190,  # 7
    "CUPTI_ACTIVITY_KIND_MEMSET": 160,  # 6
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": 160,  # 6
    "NVTX_EVENTS": 140,  # 5
    "StringIds": 300,  # 2: an id and a name (34 characters on average in the test export)
}
# trace idle's gaps and their evidence come on top, about one gap per kernel: 100x the test
# export (369k kernels) peaked at 2013 MB against the summary's 337 MB, 4540 bytes a kernel
# (its gaps' JSON alone is 1.6 kB each: long kernel names, four pieces of evidence).
NSYS_IDLE_PER_KERNEL = 5000
MIN_ROW_FILE_BYTES = 8  # a stored row of these tables takes at least this much of the file

# A job (a directory of rank files, or several files) read here: every rank is held at once,
# so its need is the sum of its files' (as a trace diff's two files are), except the
# timeline, whose lanes and links across ranks need more per rank than one file's page:
# measured on 4 ranks of the 1M-event generated trace, 0.85 per byte of JSON (Kineto) and
# 3.6 per byte of arrays (.npz), against 0.57-0.62 and 2.1 for one file.
JOB_TIMELINE = {"kineto": 1.0, "perflab": 4.0}


@dataclass(frozen=True)
class Need:
    """A file's estimated peak memory (bytes, BASE_BYTES included), what it was estimated
    from (``amount`` of ``unit``), and its format."""

    bytes: int
    amount: float
    unit: str
    format: str


def needed_memory(path: str, command: str, job: bool = False) -> tuple[int, int] | None:
    """The estimated peak memory of ``command`` on the Kineto file ``path`` and the size of
    its JSON text; None for other formats (see :func:`file_need`)."""
    need = file_need(path, command, job)
    if need is None or need.format != "kineto":
        return None
    return need.bytes, int(need.amount)


def file_need(path: str, command: str, job: bool = False) -> Need | None:
    """The estimated peak memory of ``command`` on the trace file ``path`` (``job``: as one
    rank of a job read here); None for a file that reading will report on, or a format
    without an estimate (Nsight Compute's)."""
    from perflab.io import detect_format

    try:
        fmt = detect_format(path)
        if fmt == "kineto":
            return _kineto_need(path, command, job)
        if fmt == "perflab":
            return _saved_need(path, command, job)
        if fmt == "nsys":
            return _nsys_need(path, command)
    except (OSError, InputError):
        pass
    return None


def _kineto_need(path: str, command: str, job: bool) -> Need:
    from perflab.io.kineto.fast import estimated_text_size

    text = estimated_text_size(path)
    per_byte = BYTES_PER_TEXT_BYTE.get(command, BYTES_PER_TEXT_BYTE_ELSE)
    if job and command == "timeline":
        per_byte = JOB_TIMELINE["kineto"]
    return Need(BASE_BYTES + int(text * per_byte), text, "of JSON", "kineto")


def _saved_need(path: str, command: str, job: bool) -> Need | None:
    arrays = saved_array_bytes(path)
    if arrays is None:
        return None
    per_byte = BYTES_PER_ARRAY_BYTE.get(command, BYTES_PER_ARRAY_BYTE_ELSE)
    if job and command == "timeline":
        per_byte = JOB_TIMELINE["perflab"]
    return Need(BASE_BYTES + int(arrays * per_byte), arrays, "of arrays", "perflab")


def saved_array_bytes(path: str) -> int | None:
    """Bytes of a saved trace's arrays once read, from its archive's directory (nothing is
    decompressed); a member is counted at most at the most deflate can expand what it
    holds (the loader refuses one that claims more). None when it is no zip archive."""
    from perflab.model.serialize import DEFLATE_MAX_RATIO

    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        return None
    ceiling = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: DEFLATE_MAX_RATIO}
    return sum(
        min(m.file_size, m.compress_size * ceiling.get(m.compress_type, 1) + 4096)
        for m in members
        if m.filename.endswith(".npy")
    )


def _nsys_need(path: str, command: str) -> Need | None:
    rows = nsys_rows(path)
    if rows is None:
        return None
    total = sum(rows.values())
    largest = max((n * NSYS_ROW_BYTES[t] for t, n in rows.items()), default=0)
    need = BASE_BYTES + total * NSYS_HELD_PER_ROW + largest
    if command == "idle":
        need += rows.get("CUPTI_ACTIVITY_KIND_KERNEL", 0) * NSYS_IDLE_PER_KERNEL
    return Need(need, total, "rows", "nsys")


def nsys_rows(path: str) -> dict[str, int] | None:
    """Rows of each table that perflab reads from the Nsight Systems export ``path``: its
    largest rowid (read from the table's index, not counted row by row), at most the rows
    the file can hold. Only stored tables are asked (a view's rows would be computed by SQL
    of the file's); None when the file cannot be asked (reading it will say why)."""
    size = os.stat(path).st_size
    uri = Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
    rows = {}
    try:
        with closing(sqlite3.connect(uri, uri=True)) as db:
            db.execute("PRAGMA query_only = ON")
            db.execute("PRAGMA trusted_schema = OFF")
            known = {name.lower(): name for name in NSYS_ROW_BYTES}
            master = db.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
            for kind, name, sql in master:
                table = known.get(str(name).lower())
                if (
                    table is None
                    or kind != "table"
                    or str(sql).lstrip().upper().startswith("CREATE VIRTUAL")
                ):
                    continue
                # the name is one of NSYS_ROW_BYTES's, never the file's own text
                (top,) = db.execute(f"SELECT max(rowid) FROM {table}").fetchone()  # noqa: S608
                rows[table] = max(0, min(int(top or 0), size // MIN_ROW_FILE_BYTES))
    except (sqlite3.Error, TypeError, ValueError, OverflowError):
        return None
    return rows


# -- the budget ---------------------------------------------------------------------------------

_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(i?)b?", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def memory_size(text: str) -> int:
    """Bytes of a size such as ``800M``, ``1.5G``, ``2GiB`` or ``1000000`` (K, M, G, T are
    powers of 1000; KiB, MiB, GiB, TiB of 1024)."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise InputError(f"--memory-budget must be a size such as 800M or 4G, not {text!r}")
    number, prefix, binary = found.groups()
    size = int(float(number) * (1024 if binary else 1000) ** _POWERS[prefix.lower()])
    if size <= 0:
        raise InputError(f"--memory-budget must be more than 0 bytes, not {text!r}")
    return size


def available_memory() -> int | None:
    """Bytes this process can still take: the system's available memory, less where a
    cgroup's limit is nearer; None when neither can be read."""
    found = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    cgroup = Path("/sys/fs/cgroup")
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int((cgroup / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return max(0, min(found)) if found else None


# -- the check ----------------------------------------------------------------------------------


def check_fits(args: argparse.Namespace, *paths: str) -> None:
    """Refuse, before reading them, trace files that the command is estimated to need more
    memory for than ``--memory-budget`` (default: the memory available now), naming what
    works instead. ``paths``: files held in memory together (default: the command's file, or
    every rank file of the job it names)."""
    budget_text = getattr(args, "memory_budget", None)
    budget = memory_size(budget_text) if budget_text is not None else available_memory()
    if budget is None:
        return
    from perflab.commands.job import is_job

    command = str(getattr(args, "trace_command", None) or getattr(args, "command", ""))
    job = not paths and is_job(args)
    workers = workers_here(args) if job else 0
    if workers is None:
        return
    if workers:  # each worker reads a rank and reduces it to a summary or a lane's activity
        command = "summary"
    files = list(paths) if paths else (job_files(args) if job else [args.file])
    needs = [n for f in files if (n := file_need(f, command, job and not workers)) is not None]
    if not needs:
        return
    need = together(needs, workers)
    if need <= budget:
        return
    limit = f"--memory-budget {budget_text}" if budget_text else "the memory available now"
    raise InputError(
        f"{_subject(needs, job)} about {need / 1e9:.1f} GB of memory for 'perflab "
        f"{_command_words(args)}' ({_amounts(needs)}), more than {limit} ({_size(budget)}). "
        f"What works instead: {_part_offer(args, needs, job)}{_instead(needs, job, workers)}; "
        "--memory-budget SIZE says how "
        "much this command may use",
        source=", ".join(paths) if paths else args.file,
    )


def job_files(args: argparse.Namespace) -> list[str]:
    """The rank files of the job the command names ([] when it names none that can be
    read: reading it will say why)."""
    from perflab.io.job import list_job

    try:
        return [str(p) for p in list_job([args.file, *getattr(args, "more", [])]).files]
    except (InputError, OSError):
        return []


def workers_here(args: argparse.Namespace) -> int | None:
    """How the job's ranks are read: 0 when all are held at once by this process (no
    ``--scheduler``); N for ``--scheduler local:N`` (N worker processes here, each reading
    one rank at a time); None for a cluster elsewhere, whose memory is not this machine's."""
    scheduler = getattr(args, "scheduler", None)
    if scheduler is None:
        return 0
    head, _, count = str(scheduler).partition(":")
    if head != "local" or not (count.isascii() and count.isdigit()):
        return None
    return max(1, int(count))


def together(needs: list[Need], workers: int = 0) -> int:
    """The peak of reading ``needs``' files: all held at once (``workers`` 0; the
    interpreter counted once), or one per worker process at a time (``workers`` N: the N
    largest, each in its own interpreter, and this one's)."""
    if workers == 0:
        return sum(n.bytes for n in needs) - BASE_BYTES * (len(needs) - 1)
    largest = sorted((n.bytes for n in needs), reverse=True)[:workers]
    return sum(largest) + BASE_BYTES


def _size(n: int) -> str:
    """Bytes in GB to a tenth, or in MB below 50 MB (which would show as 0.0 GB)."""
    return f"{n / 1e9:.1f} GB" if n >= 50_000_000 else f"{n / 1e6:.3g} MB"


def _subject(needs: list[Need], job: bool) -> str:
    if job:
        return "this job needs"
    return "these traces need" if len(needs) > 1 else "this trace needs"


def _amounts(needs: list[Need]) -> str:
    """What the estimate rests on, per format: ``0.8 GB of JSON, 3,621,600 rows``."""
    files = f"{len(needs)} files: " if len(needs) > 1 else ""
    totals: dict[str, float] = {}
    for n in needs:
        totals[n.unit] = totals.get(n.unit, 0.0) + n.amount
    parts = [
        f"{int(amount):,} {unit}" if unit == "rows" else f"{_size(int(amount))} {unit}"
        for unit, amount in totals.items()
    ]
    return files + ", ".join(parts)


_INSTEAD = {
    "kineto": "record fewer steps per trace (torch.profiler's schedule(active=N)) or one "
    "trace per rank (then 'perflab trace summary DIR --scheduler ADDRESS' splits a job "
    "across Dask workers), or run on a machine with more memory",
    "perflab": "a saved trace is read whole: save a part of it (Trace.select(rows).save(...)) "
    "on a machine where it fits, or one trace per rank (then 'perflab trace summary DIR "
    "--scheduler ADDRESS' splits a job across Dask workers), or run on a machine with more "
    "memory",
    "nsys": "export a shorter capture (nsys profile --capture-range=cudaProfilerApi, or "
    "--delay/--duration), or run on a machine with more memory",
}
_JOB_INSTEAD = (
    "'perflab trace summary DIR --scheduler local:N' reads one rank at a time in each of N "
    "worker processes (or --scheduler ADDRESS on a Dask cluster; 'perflab timeline DIR "
    "--scheduler ...' draws the job's overview), or name fewer rank files, or run on a "
    "machine with more memory"
)


def _part_offer(args: argparse.Namespace, needs: list[Need], job: bool) -> str:
    """Reading only part of a Kineto file holds only that part (see
    perflab.model.trace_part); the options a command has for it."""
    if job or any(n.format != "kineto" for n in needs) or not hasattr(args, "window"):
        return ""
    step = "--step N (ProfilerStep#N) or " if hasattr(args, "part_step") else ""
    return (
        f"read only part of the trace with {step}--window A:B (e.g. 30s:32.5s), which holds "
        "only that part; or "
    )


def _instead(needs: list[Need], job: bool, workers: int) -> str:
    if workers:
        return f"fewer worker processes (--scheduler local:M, M < {workers}), or {_JOB_INSTEAD}"
    if job:
        return _JOB_INSTEAD
    return "; ".join(_INSTEAD[f] for f in dict.fromkeys(n.format for n in needs))


def _command_words(args: argparse.Namespace) -> str:
    sub = getattr(args, "trace_command", None)
    return f"{args.command} {sub}" if sub else str(getattr(args, "command", ""))
