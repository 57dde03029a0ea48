"""A distributed job summarised on a Dask cluster: each rank file is read and summarised by a
worker, where the files are, and only the small per-rank results come back.

A task per rank file runs :func:`rank_task`: the file is read (:func:`perflab.io.load_trace`)
and summarised by the same per-rank step as the local path
(:func:`perflab.analysis.job.summarize_rank`); the result stays on its worker. This process
gets each rank's :class:`~perflab.io.job.RankFacts` and single-file summary (a few hundred
bytes, :func:`rank_head`), puts the ranks and clocks together as the local path does
(:func:`perflab.io.job.plan_job`), and one more task matches the collectives where the ranks'
NCCL kernels are (:func:`matching_task`, the local :func:`perflab.analysis.job.match_ranks`)
and sends back only the findings (skew, stragglers, warnings). So this process's memory does
not grow with the ranks' collectives, and the summary is the local one plus an ``engine``
block: ``{"name": "dask", "workers": N, "tasks": M}``. Dask's own serialisation carries the
results between processes; nothing is saved.

A job's critical paths (:func:`critical_on_cluster`) go the same way in two rounds: a task per
rank file reads it and sends back its facts and NCCL kernels (:func:`critical_task`,
:func:`critical_head`), keeping the trace; this process ties the collectives across the ranks
(:func:`perflab.analysis.critical_job.tie_ranks`); a second task per rank builds its graph
where its trace is (:func:`graph_task`) and sends it back with only the events the paths are
named from; this process joins the graphs, walks the paths and replays the what-ifs, so the
answer is the local one.

Faults: a file that fails to read is named with its error (``engine.failed`` and a warning),
as is an entry of the job's directory named like a rank file that is not a readable regular
file (found here, by :func:`perflab.io.job.list_job`), and the others are summarised (a
partial result; if none can be read, an InputError lists them all); a worker that dies is
retried (:data:`RETRIES` times) before its file is reported; an interrupt cancels the
outstanding tasks. The workers read the paths this process gives (made absolute), so the
files must be where the workers can read them (a shared file system).

This module joins io and analysis (as the front-ends do), which neither layer may do itself.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from perflab.analysis.critical_gpu import TiedCollectives
from perflab.analysis.critical_graph import RankGraph, rank_graph
from perflab.analysis.critical_job import RankSide, join_ranks, portable, rank_side, tie_ranks
from perflab.analysis.critical_path import CriticalPaths, analysed
from perflab.analysis.critical_whatif import parse_change
from perflab.analysis.job import (
    CollectiveFindings,
    EngineDoc,
    FailedDoc,
    JobSummary,
    RankClock,
    RankPart,
    job_document,
    match_ranks,
    summarize_rank,
)
from perflab.analysis.job_activity import (
    Grid,
    JobActivity,
    RankActivity,
    group_activity,
    job_grid,
    rank_activity,
    rank_groups,
)
from perflab.analysis.trace_summary import TraceSummary
from perflab.errors import InputError, PerflabError, import_extra
from perflab.io import job as io_job
from perflab.io import load_trace
from perflab.io.job import JobPlan, RankFacts, left_out_note, list_job, plan_job, rank_facts
from perflab.model.job import Job
from perflab.model.trace import Trace

if TYPE_CHECKING:
    from perflab.render.timeline import Timeline

FEATURE = "a job summary on a Dask cluster"
RETRIES = 2  # a task whose worker died is run again this many times
CONNECT_TIMEOUT_S = 10
MAX_LOCAL_WORKERS = 256
_LOCAL = re.compile(r"local:([0-9]{1,9})")
T = TypeVar("T")
_ADDRESS = re.compile(r"(?:(?:tcp|tls|ucx)://)?(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}")


@dataclass(frozen=True)
class RankFailure:
    """A rank file a worker could not read or summarise, and why."""

    file: str
    error: str


def load_job(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    workers: int | None = None,
    client: Any = None,
) -> Job | DaskJob:
    """:func:`perflab.io.job.load_job`; with a Dask ``client``, a :class:`DaskJob` whose files
    are read on the cluster when it is summarised."""
    if client is None:
        return io_job.load_job(source, workers=workers)
    import_extra("distributed", FEATURE)
    listing = list_job(source)
    return DaskJob(listing.files, client, listing.unreadable)


@dataclass
class DaskJob:
    """A job's rank files, to be read and summarised on a Dask cluster (``client``), and
    the entries of its directory named like rank files that cannot be read (path -> why)."""

    files: list[Path]
    client: Any
    unreadable: dict[Path, str] = field(default_factory=dict)

    def summary(self, client: Any = None) -> JobSummary:
        """The job summary (as :meth:`Job.summary`), each rank worked out on the cluster."""
        return summarize_on_cluster(
            self.files, self.client if client is None else client, unreadable=self.unreadable
        )

    def activity(self, client: Any = None, *, groups: int = 64, bins: int = 4096) -> JobActivity:
        """The job's overview data (:mod:`perflab.analysis.job_activity`): per group of
        ranks, GPU busy and NCCL fractions in ``bins`` bins, worked out on the cluster."""
        return activity_on_cluster(
            self.files,
            self.client if client is None else client,
            groups=groups,
            bins=bins,
            unreadable=self.unreadable,
        )

    def timeline(
        self, client: Any = None, *, groups: int = 64, bins: int = 4096, **options: Any
    ) -> Timeline:
        """The job's overview timeline (:func:`perflab.render.job_overview.job_overview`):
        a lane per group of ranks, refining on zoom down to ``bins`` bins of the span; the
        ranks' events stay on the workers. ``options``: ``title``, ``width``."""
        from perflab.render.job_overview import job_overview

        return job_overview(self.activity(client, groups=groups, bins=bins), **options)

    def critical(
        self, client: Any = None, *, step: int | None = None, what_if: Sequence[str] = ()
    ) -> CriticalPaths:
        """Each step's critical path over every rank and the what-ifs replayed (as
        :meth:`Job.critical`), each rank read and its graph built on the cluster."""
        return critical_on_cluster(
            self.files,
            self.client if client is None else client,
            step=step,
            what_if=what_if,
            unreadable=self.unreadable,
        )

    def describe(self) -> str:
        return f"Job of {len(self.files)} rank files, read on a Dask cluster"

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


def rank_task(path: str) -> tuple[RankFacts, RankPart] | RankFailure:
    """One worker's work on one rank file: read it, summarise it (the local per-rank step).
    Its result stays on the worker; only its :func:`rank_head` travels to this process."""
    return _on_rank_file(path, summarize_rank)


def _on_rank_file(path: str, work: Callable[[Trace], T]) -> tuple[RankFacts, T] | RankFailure:
    """Read one rank file and do ``work`` on its trace, or say why that failed."""
    try:
        trace = load_trace(path, workers=0)
        return rank_facts(Path(path), trace), work(trace)
    except InputError as exc:  # the report names the file: its error need not
        return RankFailure(path, exc.detail if exc.source == path else str(exc))
    except (PerflabError, OSError) as exc:
        return RankFailure(path, str(exc))


def rank_head(
    outcome: tuple[RankFacts, RankPart] | RankFailure,
) -> tuple[RankFacts, TraceSummary] | RankFailure:
    """What this process needs of a rank: its facts (to put the clocks together) and its
    single-file summary, a few hundred bytes; its NCCL kernels stay on the worker."""
    if isinstance(outcome, RankFailure):
        return outcome
    facts, part = outcome
    return facts, part.summary


def matching_task(
    outcomes: dict[int, tuple[RankFacts, RankPart]], offsets: dict[int, int]
) -> CollectiveFindings:
    """The collectives matched across the ranks, on a worker (the local path's
    :func:`perflab.analysis.job.match_ranks`): the rank x collective table is built and
    read there, and only the findings come back."""
    return match_ranks({rank: part.comm for rank, (_, part) in outcomes.items()}, offsets)[1]


def summarize_on_cluster(
    files: Sequence[Path], client: Any, *, unreadable: Mapping[Path, str] | None = None
) -> JobSummary:
    """The job summary of ``files`` (one per rank), each read and summarised by a task on
    ``client``'s cluster, the collectives matched by another; this process puts the clocks
    together and writes the document, so its memory does not grow with the collectives.
    ``unreadable``: rank files found unreadable before (path -> why), named as failed."""
    import_extra("distributed", FEATURE)
    left_out = dict(unreadable or {})
    futures, heads = _per_rank(client, rank_task, rank_head, files)
    try:
        outcomes = [_outcome(head) for head in heads]
        read, plan, notes = _plan(files, outcomes, left_out)
        by_path = dict(zip(files, futures, strict=True))
        ranks = {rank: by_path[path] for rank, path in plan.files.items()}
        findings = _outcome(
            client.submit(matching_task, ranks, plan.offsets, retries=RETRIES, pure=False)
        )
    finally:
        client.cancel([*heads, *futures])  # nothing left running after an interrupt or an error
    _raise_failed("matching the collectives", [findings])
    failed = _failures(files, outcomes, left_out)
    return _summary(files, failed, read, plan, notes, findings, len(client.nthreads()))


def _per_rank(
    client: Any, task: Callable[[str], object], head: Callable[[Any], object], files: Sequence[Path]
) -> tuple[list[Any], list[Any]]:
    """A ``task`` per rank file (its result stays on its worker) and a ``head`` of each,
    the small part of it that comes to this process."""
    if not files:
        raise InputError("no trace files given")
    paths = [str(Path(f).absolute()) for f in files]
    futures = client.map(task, paths, retries=RETRIES, pure=False)
    return futures, client.map(head, futures, retries=RETRIES, pure=False)


def _raise_failed(what: str, outcomes: Sequence[object]) -> None:
    """A task of the merge that failed fails the whole answer, saying what it was doing."""
    failed = [o for o in outcomes if isinstance(o, RankFailure)]
    if failed:
        raise PerflabError(f"{what} on the Dask cluster failed: {failed[0].error}")


def _outcome(future: Any) -> Any:
    """A task's result, or what went wrong with it (a worker that died every time, an
    error the task did not expect) as a :class:`RankFailure`."""
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker:
        return RankFailure("", f"the worker reading it died ({RETRIES + 1} tries)")
    except Exception as exc:  # a task's own error, raised again here: reported per file
        return RankFailure("", f"{type(exc).__name__}: {exc}")


def _plan(
    files: Sequence[Path],
    outcomes: Sequence[tuple[RankFacts, T] | RankFailure],
    unreadable: Mapping[Path, str],
) -> tuple[dict[Path, T], JobPlan, list[str]]:
    """The ranks that were read (their summaries by file), the job's plan of them (ranks,
    clocks) and a note per file that was not (``unreadable`` ones first, as locally)."""
    failed = _failures(files, outcomes, unreadable)
    read = {p: o for p, o in zip(files, outcomes, strict=True) if not isinstance(o, RankFailure)}
    if not read:
        listed = "; ".join(f"{f['file']}: {f['error']}" for f in failed)
        raise InputError(f"no rank file could be read on the Dask cluster ({listed})")
    # the facts name the file as given here (the workers were given absolute paths)
    plan = plan_job([replace(facts, path=path) for path, (facts, _) in read.items()])
    notes = [left_out_note(f["file"], f["error"]) for f in failed]
    return {path: rest for path, (_, rest) in read.items()}, plan, notes


def _failures(
    files: Sequence[Path], outcomes: Sequence[object], unreadable: Mapping[Path, str]
) -> list[FailedDoc]:
    """The files left out: those found unreadable here, then those the workers could not
    read."""
    found = [FailedDoc(file=str(path), error=why) for path, why in unreadable.items()]
    return found + [
        FailedDoc(file=str(path), error=o.error)
        for path, o in zip(files, outcomes, strict=True)
        if isinstance(o, RankFailure)
    ]


def _summary(
    files: Sequence[Path],
    failed: list[FailedDoc],
    read: dict[Path, TraceSummary],
    plan: JobPlan,
    notes: list[str],
    findings: CollectiveFindings,
    workers: int,
) -> JobSummary:
    summaries = {rank: read[path] for rank, path in plan.files.items()}
    clocks = {r: RankClock(plan.offsets[r], plan.aligned_on[r]) for r in plan.files}
    doc = job_document(summaries, clocks, plan.clock, [*plan.warnings, *notes], findings)
    engine = EngineDoc(name="dask", workers=workers, tasks=len(files))
    if failed:
        engine["failed"] = failed
    doc["engine"] = engine
    return JobSummary(doc, summaries, None)


def activity_task(path: str) -> tuple[RankFacts, RankActivity] | RankFailure:
    """One worker's work on one rank file for the overview: read it, keep its GPU work and
    NCCL kernels as unions (:func:`perflab.analysis.job_activity.rank_activity`)."""
    return _on_rank_file(path, rank_activity)


def activity_head(
    outcome: tuple[RankFacts, RankActivity] | RankFailure,
) -> tuple[RankFacts, tuple[int, int] | None] | RankFailure:
    """What this process needs of a rank for the overview: its facts and its GPU span."""
    if isinstance(outcome, RankFailure):
        return outcome
    facts, activity = outcome
    return facts, activity.span


def group_task(
    outcomes: list[tuple[RankFacts, RankActivity]], offsets: list[int], grid: Grid
) -> npt.NDArray[np.float64]:
    """One group's fractions, on a worker: 2 x bins numbers come back."""
    return group_activity([activity for _, activity in outcomes], offsets, grid)


def activity_on_cluster(
    files: Sequence[Path],
    client: Any,
    *,
    groups: int = 64,
    bins: int = 4096,
    unreadable: Mapping[Path, str] | None = None,
) -> JobActivity:
    """The overview of ``files`` (one per rank): each rank read by a task, each group of
    ranks binned by another, where the ranks are; this process gets spans and fractions.
    ``unreadable``: rank files found unreadable before (path -> why), named in the notes."""
    import_extra("distributed", FEATURE)
    futures, heads = _per_rank(client, activity_task, activity_head, files)
    tasks: list[Any] = []
    try:
        outcomes = [_outcome(head) for head in heads]
        spans, plan, notes = _plan(files, outcomes, unreadable or {})
        ranks = sorted(plan.files)
        offsets = [plan.offsets[r] for r in ranks]
        grid = job_grid([spans[plan.files[r]] for r in ranks], offsets, bins)
        if grid is None:
            raise InputError("no rank has GPU work to draw")
        by_path = dict(zip(files, futures, strict=True))
        lanes = rank_groups(ranks, groups)
        tasks = [
            client.submit(
                group_task,
                [by_path[plan.files[r]] for r in lane],
                [plan.offsets[r] for r in lane],
                grid,
                retries=RETRIES,
                pure=False,
            )
            for lane in lanes
        ]
        rows = [_outcome(task) for task in tasks]
    finally:
        client.cancel([*tasks, *heads, *futures])
    _raise_failed("binning the ranks' activity", rows)
    return JobActivity(lanes, grid, np.stack(rows), [*plan.warnings, *notes])


# -- connecting -------------------------------------------------------------------------------


@contextmanager
def cluster_client(scheduler: str) -> Iterator[Any]:
    """A Dask client of ``scheduler``: ``local:N`` (a LocalCluster of N worker processes,
    closed afterwards) or a scheduler's address (``tcp://host:8786`` or ``host:8786``)."""
    distributed = import_extra("distributed", FEATURE)
    local = _LOCAL.fullmatch(scheduler)
    if local:
        n = int(local.group(1))
        if not 1 <= n <= MAX_LOCAL_WORKERS:
            raise InputError(
                f"local:N takes from 1 to {MAX_LOCAL_WORKERS} workers, not {n} "
                "(a scheduler on a host named local: tcp://local:PORT)"
            )
        with _local_cluster(distributed, n) as cluster, distributed.Client(cluster) as client:
            yield client
        return
    if not _ADDRESS.fullmatch(scheduler):
        raise InputError(
            f"--scheduler {scheduler!r} is neither a scheduler address (tcp://HOST:PORT or "
            "HOST:PORT) nor local:N"
        )
    try:
        client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise InputError(
            f"cannot reach the Dask scheduler at {scheduler} within {CONNECT_TIMEOUT_S} s "
            f"({exc}); is `dask scheduler` running there?"
        ) from None
    with client:
        yield client


def _local_cluster(distributed: Any, n: int) -> Any:
    """A LocalCluster of ``n`` worker processes, one thread each, no dashboard."""
    with warnings.catch_warnings():  # its health-check HTTP port moving is not the user's
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        return distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
        )


# -- critical paths ---------------------------------------------------------------------------


@dataclass
class CriticalRank:
    """A rank's trace, held on the worker that read it until its graph is built, and what
    tying its collectives to the other ranks' needs of it."""

    trace: Trace
    side: RankSide


def critical_task(path: str) -> tuple[RankFacts, CriticalRank] | RankFailure:
    """One worker's first work on one rank file for the critical path: read it and take
    its NCCL kernels; the trace stays on the worker for :func:`graph_task`."""
    return _on_rank_file(path, _critical_rank)


def _critical_rank(trace: Trace) -> CriticalRank:
    return CriticalRank(trace, rank_side(trace))


def critical_head(
    outcome: tuple[RankFacts, CriticalRank] | RankFailure,
) -> tuple[RankFacts, RankSide] | RankFailure:
    """What this process needs of a rank to tie the collectives: its facts and its side
    (a few numbers per NCCL kernel), not its trace."""
    if isinstance(outcome, RankFailure):
        return outcome
    facts, held = outcome
    return facts, held.side


def graph_task(
    outcome: tuple[RankFacts, CriticalRank],
    rank: int,
    offset: int,
    split: TiedCollectives | None,
) -> RankGraph:
    """A rank's dependency graph, built on the worker that holds its trace with its share
    of the ties; what comes back keeps of the trace only what the paths are named from."""
    return portable(rank_graph(outcome[1].trace, rank, offset, split))


def critical_on_cluster(
    files: Sequence[Path],
    client: Any,
    *,
    step: int | None = None,
    what_if: Sequence[str] = (),
    unreadable: Mapping[Path, str] | None = None,
) -> CriticalPaths:
    """:func:`perflab.analysis.critical_path.job_critical_path` of ``files`` (one per
    rank): each rank read and its graph built by tasks where its file is read; this process
    ties the collectives, joins the graphs, walks the paths and replays the what-ifs, so the
    answer is the local one. A file that could not be read is named in the warnings and its
    rank left out (``unreadable``: such files found before, path -> why)."""
    import_extra("distributed", FEATURE)
    changes = [parse_change(text) for text in what_if]  # refused before any file is read
    futures, heads = _per_rank(client, critical_task, critical_head, files)
    graphs: list[Any] = []
    try:
        outcomes = [_outcome(head) for head in heads]
        sides, plan, notes = _plan(files, outcomes, unreadable or {})
        clocks = {r: RankClock(plan.offsets[r], plan.aligned_on[r]) for r in plan.files}
        ties = tie_ranks({r: sides[path] for r, path in plan.files.items()}, clocks)
        by_path = dict(zip(files, futures, strict=True))
        graphs = [
            client.submit(
                graph_task,
                by_path[path],
                rank,
                plan.offsets[rank],
                ties.split(rank),
                retries=RETRIES,
                pure=False,
            )
            for rank, path in plan.files.items()
        ]
        parts = [_outcome(graph) for graph in graphs]
    finally:
        client.cancel([*graphs, *heads, *futures])
    for (rank, path), part in zip(plan.files.items(), parts, strict=True):
        if isinstance(part, RankFailure):
            raise PerflabError(
                f"building the dependency graph of rank {rank} ({path}) on the Dask cluster "
                f"failed: {part.error}"
            )
    g, said = join_ranks(parts, ties)  # the job's warnings first, as locally
    return analysed(g, step, changes, job=True, warnings=[*plan.warnings, *notes, *said])
