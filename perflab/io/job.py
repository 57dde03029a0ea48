"""The traces of a distributed job (a directory of rank files, or a list of files) -> :class:`Job`.

Rank files are read at the same time by this process and a helper process per spare core, as a
large single file is (see :mod:`perflab.io._parallel`): the files are claimed one at a time,
largest first; a helper is a ``python -m perflab.io.job JOB`` subprocess (an argument list, its
own process group, no fork of a possibly threaded Jupyter kernel) that saves each trace's
columns as ``.npz`` with a JSON header (the layout of :meth:`Trace.save`, no pickle), read back
with :meth:`Trace.load`. A file a helper did not deliver (bad input, a helper that failed) is
read by this process, which then names what is wrong with it.

A rank's number comes from the file's ``distributedInfo.rank``, else from ``rank-N`` in its
name; its clock offset from its ``baseTimeNanoseconds`` (see :mod:`perflab.model.job`).

An entry of a job's directory named like a trace file that is not a readable regular file (a
FIFO, a socket, a directory, a dangling or looping symbolic link, a file without read
permission) is left out and named in the job's warnings; it is found with ``stat``, never
opened (opening a FIFO waits for a writer).
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from perflab.errors import InputError, PerflabError
from perflab.io import _parallel, load_trace
from perflab.model.job import Job, RankTrace, rank_in_file_name
from perflab.model.serialize import SCHEMA_VERSION, regular_size
from perflab.model.trace import KIND as TRACE_KIND
from perflab.model.trace import Trace

TRACE_SUFFIXES = (".json", ".json.gz", ".npz")  # files of a directory that are read
_HELPER_MODULE = "perflab.io.job"
MAX_RANK = 1 << 24  # ranks above this are not ranks but damage
MAX_BASE_NS = 1 << 62  # base times beyond this (year 2116) are damage, and could wrap
_I64_MAX = (1 << 63) - 1
_TABLES = ("events", "tracks", "kernels", "memcpy", "ops")  # Trace.save's layout


def load_job(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    workers: int | None = None,
) -> Job:
    """Read every rank of a job: a directory (its ``.json``, ``.json.gz`` and saved ``.npz``
    traces) or a list of trace files, one per rank.

    ``workers``: helper processes that read rank files at the same time as this one (None:
    one per spare core, up to 7; 0: this process only).
    """
    listing = list_job(source)
    traces = load_files(listing.files, workers)
    return assemble(listing.files, traces, listing.notes())


@dataclass(frozen=True)
class JobListing:
    """The trace files a job source names, and the entries of its directories named like
    trace files that cannot be read (path -> why), which are left out."""

    files: list[Path]
    unreadable: dict[Path, str]

    def notes(self) -> list[str]:
        """A warning per entry left out."""
        return [left_out_note(str(path), why) for path, why in self.unreadable.items()]


def left_out_note(file: str, error: str) -> str:
    """The warning naming a rank file that could not be read (here or on a cluster)."""
    return f"{file} could not be read ({error}); its rank is left out"


def job_files(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The readable trace files a job source names (:func:`list_job`)."""
    return list_job(source).files


def list_job(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> JobListing:
    """The trace files a job source names, in a stable order, and its directories' entries
    that cannot be read; InputError when there are no files, or a file named on its own
    cannot be read."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not items:
        raise InputError("no trace files given")
    files: list[Path] = []
    unreadable: dict[Path, str] = {}
    for item in items:
        path = Path(item)
        if path.is_dir():
            files += _directory_files(path, unreadable)
            continue
        why = unreadable_reason(path)
        if why is not None:
            raise InputError(why, source=str(path))
        files.append(path)
    _check_distinct(files)
    return JobListing(files, unreadable)


def _directory_files(directory: Path, unreadable: dict[Path, str]) -> list[Path]:
    """The directory's trace files, sorted; those named like one that cannot be read go to
    ``unreadable``. InputError when it has no readable one."""
    named = sorted(p for p in directory.iterdir() if _named_like_trace(p))
    found = []
    for path in named:
        why = unreadable_reason(path)
        if why is None:
            found.append(path)
        else:
            unreadable[path] = why
    if found:
        return found
    kinds = ", ".join(TRACE_SUFFIXES)
    if not named:
        raise InputError(f"no trace files ({kinds}) in this directory", source=str(directory))
    listed = "; ".join(f"{p.name}: {unreadable[p]}" for p in named)
    raise InputError(f"no readable trace files in this directory ({listed})", source=str(directory))


def _named_like_trace(path: Path) -> bool:
    return not path.name.startswith(".") and path.name.endswith(TRACE_SUFFIXES)


def unreadable_reason(path: Path) -> str | None:
    """Why ``path`` cannot be read as a trace file, found without opening it; None when it
    is a regular file (or a link to one) that this process may read."""
    try:
        os.stat(path)
    except FileNotFoundError:
        if not path.is_symlink():
            return "no such file or directory"
        return f"is a symbolic link to {os.readlink(path)}, which does not exist"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link in a loop (it leads back to itself)"
        return f"cannot read: {exc.strerror or exc}"
    try:
        regular_size(path)  # a FIFO, a socket, a device or a directory: said here
    except InputError as exc:
        return exc.detail
    if not os.access(path, os.R_OK):
        return "cannot read: permission denied"
    return None


def _check_distinct(files: list[Path]) -> None:
    """InputError when two of ``files`` are one file: named twice, or reached through a
    symbolic or hard link (``rank-1.json -> rank-0.json`` would be a second rank of the same
    data)."""
    seen: dict[tuple[int, int], Path] = {}
    for path in files:
        try:
            info = path.stat()
        except OSError:
            continue  # reading it will say what is wrong
        other = seen.setdefault((info.st_dev, info.st_ino), path)
        if other is path:
            continue
        if other == path:
            raise InputError("the same file is given twice", source=str(path))
        raise InputError(
            f"is the same file as {other} (one is a link to the other): one file cannot be "
            "two ranks",
            source=str(path),
        )


# -- reading the files, in parallel -----------------------------------------------------------


def helper_count(n_files: int, workers: int | None) -> int:
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
            raise InputError(f"workers must be a whole number >= 0, not {workers!r}")
        return min(workers, n_files - 1)
    spare = min(_parallel.available_cores() - 1, _parallel.MAX_HELPERS)
    return max(0, min(spare, n_files - 1))


def load_files(files: list[Path], workers: int | None) -> list[Trace]:
    """The trace of every file, in the order given."""
    if len(files) == 1:  # one file: its own loader shares it out with helpers
        return [load_trace(files[0], workers=workers)]
    helpers = helper_count(len(files), workers)
    if helpers == 0:
        return [load_trace(f, workers=0) for f in files]
    # largest first: the last files claimed are the quickest, so no process idles long
    order = sorted(range(len(files)), key=lambda i: (-_size(files[i]), i))
    traces = _load_parallel([files[i] for i in order], helpers)
    by_file: list[Trace | None] = [None] * len(files)
    for i, trace in zip(order, traces, strict=True):
        by_file[i] = trace
    return [t for t in by_file if t is not None]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # reading it will say what is wrong


def _load_parallel(files: list[Path], helpers: int) -> list[Trace]:
    with tempfile.TemporaryDirectory(prefix="perflab-job-") as tmp:
        claims = _parallel.Claims(tmp, len(files))
        job = {"files": [str(f) for f in files], "dir": tmp, "parent": os.getpid()}
        started = [
            _parallel.start_helper(_HELPER_MODULE, job, Path(tmp, f"helper-{i}.log"))
            for i in range(helpers)
        ]
        running = [h for h in started if h is not None]
        own: dict[int, Trace] = {}
        try:
            slowest = 0.0
            while (k := claims.claim()) is not None:
                began = time.perf_counter()
                own[k] = load_trace(files[k], workers=0)
                slowest = max(slowest, time.perf_counter() - began)
            # a helper is busy with one file at most by now
            _parallel.finish_helpers(running, _parallel.HELPER_START_S + 10 * slowest)
        finally:
            _parallel.stop_helpers(running)
        return [own[k] if k in own else _delivered(claims, k, files[k]) for k in range(len(files))]


def _delivered(claims: _parallel.Claims, k: int, path: Path) -> Trace:
    """File k as a helper saved it, else read here (which names the problem if it is bad)."""
    result = claims.result_path(k)
    if result.exists():
        try:
            return Trace.load(result)
        except PerflabError:
            pass  # unreadable: read the file here
    return load_trace(path, workers=0)


class RankReadJob(msgspec.Struct):
    """What a helper process is given (as JSON, by :func:`_load_parallel`)."""

    files: list[str]
    dir: str
    parent: int


def run_helper(job: RankReadJob) -> int:
    """A helper process's work (``python -m perflab.io.job JOB``): claim files, read them,
    save their traces. Its exit status."""
    files = job.files
    claims = _parallel.Claims(job.dir, len(files))
    while os.getppid() == job.parent and (k := claims.claim()) is not None:
        try:
            trace = load_trace(files[k], workers=0)
        except PerflabError:
            return _parallel.DATA_ERROR  # the caller reads it again and says what is wrong
        save_uncompressed(trace, claims.result_path(k))
    return 0


def save_uncompressed(trace: Trace, path: Path) -> None:
    """:meth:`Trace.save`'s file without compression: it is read back at once."""
    header = {
        "perflab": TRACE_KIND,
        "schema_version": SCHEMA_VERSION,
        "strings": trace.strings,
        "meta": trace.meta,
    }
    arrays = {
        f"{table}.{column}": values
        for table in _TABLES
        for column, values in getattr(trace, table).columns.items()
    }
    _parallel.save_result(path, arrays, header)


# -- ranks and clocks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RankFacts:
    """What assembling a job needs of one rank file, and no more (it is small, so a cluster
    worker that read the file sends it back instead of the trace): the file, the trace's
    ``rank``/``world_size``/``base_time_ns`` meta, and the span of its events (own clock)."""

    path: Path
    meta: dict[str, object]
    span: tuple[int, int] | None


@dataclass
class JobPlan:
    """Ranks (sorted) -> file, clock offset and what it rests on; the clock in words; and
    what looked wrong (``warnings``)."""

    files: dict[int, Path]
    offsets: dict[int, int]
    aligned_on: dict[int, str]
    clock: str
    warnings: list[str]
    world_size: int | None


def rank_facts(path: Path, trace: Trace) -> RankFacts:
    keys = ("rank", "world_size", "base_time_ns")
    meta: dict[str, object] = {k: trace.meta[k] for k in keys if k in trace.meta}
    return RankFacts(path, meta, _span(trace))


def assemble(files: Sequence[Path], traces: Sequence[Trace], notes: Sequence[str] = ()) -> Job:
    """A Job from each file's trace: ranks numbered, clocks aligned, oddities noted (after
    the plan's, ``notes``: what else was found wrong, such as files left out)."""
    plan = plan_job([rank_facts(p, t) for p, t in zip(files, traces, strict=True)])
    by_path = dict(zip(files, traces, strict=True))
    ranks = {
        rank: RankTrace(rank, by_path[path], str(path), plan.offsets[rank], plan.aligned_on[rank])
        for rank, path in plan.files.items()
    }
    return Job(ranks, plan.clock, [*plan.warnings, *notes], plan.world_size)


def plan_job(facts: Sequence[RankFacts]) -> JobPlan:
    """Ranks numbered, clocks aligned, oddities noted, from each file's :class:`RankFacts`
    (the local and the cluster paths both come here)."""
    notes: list[str] = []
    ranks: dict[int, RankFacts] = {}
    for fact in facts:
        rank = rank_of(fact.path, fact.meta, notes)
        if rank in ranks:
            other = ranks[rank].path
            raise InputError(f"rank {rank} is also the rank of {other}", source=str(fact.path))
        ranks[rank] = fact
    ranks = dict(sorted(ranks.items()))
    world_size = _world_size(ranks, notes)
    bases = {rank: _base_time(fact) for rank, fact in ranks.items()}
    spans = {rank: fact.span for rank, fact in ranks.items()}
    offsets, aligned_on, clock = align_clocks(spans, bases)
    notes += _overlap_notes(spans, offsets)
    files = {rank: fact.path for rank, fact in ranks.items()}
    return JobPlan(files, offsets, aligned_on, clock, notes, world_size)


def rank_of(path: Path, meta: Mapping[str, object], notes: list[str]) -> int:
    """The file's ``distributedInfo.rank`` (``meta["rank"]``), else ``rank-N`` in its name."""
    named = rank_in_file_name(path.name)
    given = meta.get("rank")
    if given is None:
        if named is None:
            raise InputError(
                "no rank: the trace has no distributedInfo.rank and the file name has no 'rank-N'",
                source=str(path),
            )
        return _checked_rank(named, path, "the file name's rank")
    rank = _checked_rank(given, path, "distributedInfo.rank")
    if named is not None and named != rank:
        notes.append(f"{path.name}: distributedInfo says rank {rank}, the name says {named}")
    return rank


def _checked_rank(value: object, path: Path, what: str) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_RANK:
        raise InputError(f"{what} {value!r} is not a rank number", source=str(path))
    return value


def _world_size(ranks: dict[int, RankFacts], notes: list[str]) -> int | None:
    sizes = {}
    for rank, fact in ranks.items():
        path, size = fact.path, fact.meta.get("world_size")
        if size is None:
            continue
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_RANK:
            raise InputError(f"distributedInfo.world_size {size!r} is not a size", source=str(path))
        sizes[rank] = size
    distinct = sorted(set(sizes.values()))
    if len(distinct) > 1:
        notes.append(f"the ranks disagree on the world size ({', '.join(map(str, distinct))})")
        return None
    if not distinct:
        return None
    size = distinct[0]
    present = sorted(r for r in ranks if r < size)
    absent = _spans_text(_gaps(present, size))
    beyond = [r for r in ranks if r >= size]
    if beyond:  # a rank that cannot be in a job of that size: the size is not to be believed
        what = f"ranks {_ranges(beyond)} are" if len(beyond) > 1 else f"rank {beyond[0]} is"
        valid = _spans_text([(0, size - 1)])
        missing = f"; of ranks {valid}, missing: {absent}" if absent else ""
        notes.append(
            f"{what} outside the world size {size} that distributedInfo gives (ranks {valid}): "
            "the files are not of one job, or their distributedInfo is wrong, so the world "
            f"size is taken as unknown{missing}"
        )
        return None
    if absent:
        notes.append(f"{len(present)} of {size} ranks present (missing: {absent})")
    return size


def _gaps(present: list[int], size: int) -> list[tuple[int, int]]:
    """The spans of 0..size-1 that the sorted ``present`` leaves out (without listing every
    missing number: a world size may claim millions)."""
    gaps, expected = [], 0
    for r in [*present, size]:
        if r > expected:
            gaps.append((expected, r - 1))
        expected = r + 1
    return gaps


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    spans: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if spans and spans[-1][1] == n - 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    return _spans_text(spans)


def _spans_text(spans: list[tuple[int, int]]) -> str:
    """``[(0, 2), (5, 5)]`` -> ``"0-2, 5"``."""
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _base_time(fact: RankFacts) -> int | None:
    """The rank's ``baseTimeNanoseconds``, range-checked; None when it has none."""
    path, base = fact.path, fact.meta.get("base_time_ns")
    if base is None:
        return None
    if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base <= MAX_BASE_NS:
        raise InputError(f"baseTimeNanoseconds {base!r} is out of range", source=str(path))
    if fact.span is not None and fact.span[1] > _I64_MAX - base:
        raise InputError(
            "baseTimeNanoseconds plus the timestamps do not fit in 64-bit nanoseconds",
            source=str(path),
        )
    return base


def align_clocks(
    spans: dict[int, tuple[int, int] | None], bases: dict[int, int | None]
) -> tuple[dict[int, int], dict[int, str], str]:
    """Per rank: clock offset (ns) and what it rests on; and the whole choice in words, from
    each rank's span of events on its own clock (None: no events) and base time."""
    based = [r for r, b in bases.items() if b is not None]
    offsets = {r: bases[r] or 0 for r in spans}
    aligned_on = {r: "baseTimeNanoseconds" if bases[r] is not None else "timestamps" for r in spans}
    if len(based) == len(spans):
        return offsets, aligned_on, "each rank's baseTimeNanoseconds"
    if not based:
        clock = "the recorded timestamps (no rank has baseTimeNanoseconds; taken as one clock)"
        return offsets, aligned_on, clock
    known = [_shifted(span, offsets[r]) for r in based if (span := spans[r]) is not None]
    lo = min((s[0] for s in known), default=0)
    hi = max((s[1] for s in known), default=0)
    for r in spans:
        own = spans[r]
        if r in based or own is None or (own[0] < hi and own[1] > lo):
            continue  # on the others' clock already, as far as can be told
        offsets[r] = lo - own[0]
        aligned_on[r] = "first event"
    parts = [f"baseTimeNanoseconds on ranks {_ranges(based)}"]
    for how, words in (
        ("timestamps", "recorded timestamps as they are on ranks"),
        ("first event", "first event put at the others' first on ranks"),
    ):
        which = [r for r in spans if aligned_on[r] == how]
        if which:
            parts.append(f"{words} {_ranges(which)}")
    return offsets, aligned_on, "; ".join(parts) + " (the ranks' clocks disagree)"


def _span(trace: Trace) -> tuple[int, int] | None:
    """The first start and the last end of the trace's events, on its own clock."""
    if len(trace) == 0:
        return None
    return int(trace.start_ns.min()), int(trace.end_ns.max())


def _shifted(span: tuple[int, int], offset: int) -> tuple[int, int]:
    return span[0] + offset, span[1] + offset


def _overlap_notes(spans: dict[int, tuple[int, int] | None], offsets: dict[int, int]) -> list[str]:
    """A note when some ranks' spans do not overlap in time on the job's clock."""
    known = {r: _shifted(s, offsets[r]) for r, s in spans.items() if s is not None}
    if len(known) < 2:
        return []
    late = max(known, key=lambda r: known[r][0])
    early = min(known, key=lambda r: known[r][1])
    if known[early][1] <= known[late][0]:
        return [
            f"rank {early}'s trace ends before rank {late}'s begins: their clocks disagree "
            "or the files are not from one job, so cross-rank times mean little"
        ]
    return []


if __name__ == "__main__":
    sys.exit(run_helper(msgspec.json.decode(sys.argv[1], type=RankReadJob)))
