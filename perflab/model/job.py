"""A distributed job: one :class:`Trace` per rank, with how each rank's clock was aligned.

Every rank's trace is kept exactly as its importer built it (``start_ns`` on that rank's own
recording clock), so a rank's summary is the single-file summary of its file. The job's common
clock is ``start_ns + clock_offset_ns`` of each rank: :meth:`Job.aligned_start_ns` and
:meth:`Job.merged` apply it.

``aligned_on`` says, per rank, what the offset rests on:

- ``"baseTimeNanoseconds"``: the rank's own Kineto ``baseTimeNanoseconds`` (its timestamps
  are relative to it; the offset makes them wall-clock nanoseconds);
- ``"timestamps"``: the rank's timestamps as recorded (no base time; they are taken to be on
  the same clock as the others');
- ``"first event"``: no base time while other ranks have one and its timestamps do not fall
  within theirs: its first event is put at the earliest first event of the others (a guess,
  said so in ``Job.clock``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from perflab.model import display
from perflab.model.trace import Table, Trace

if TYPE_CHECKING:
    from perflab.model.display import CriticalPaths, JobSummary, SqlResult, Timeline

ALIGNED_ON = ("baseTimeNanoseconds", "timestamps", "first event")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def rank_in_file_name(name: str) -> int | None:
    """The rank a file's name gives (``rank-3``, ``rank_3``, ``RANK3``), or None."""
    match = _RANK_IN_NAME.search(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class RankTrace:
    """One rank of a job: its trace, the file it came from and its clock offset."""

    rank: int
    trace: Trace
    source: str
    clock_offset_ns: int  # added to the trace's start_ns to put it on the job's clock
    aligned_on: str  # one of ALIGNED_ON

    def aligned_start_ns(self) -> npt.NDArray[np.int64]:
        start: npt.NDArray[np.int64] = self.trace.start_ns + np.int64(self.clock_offset_ns)
        return start


@dataclass
class Job:
    """Ranks (sorted by rank number) -> :class:`RankTrace`; ``clock`` says in words what the
    ranks' clocks were aligned on; ``warnings`` lists what looked wrong while loading."""

    ranks: dict[int, RankTrace]
    clock: str
    warnings: list[str] = field(default_factory=list)
    world_size: int | None = None

    def __post_init__(self) -> None:
        self.ranks = dict(sorted(self.ranks.items()))

    def __getitem__(self, rank: int) -> Trace:
        return self.ranks[rank].trace

    def __len__(self) -> int:
        return len(self.ranks)

    def __iter__(self) -> Iterator[RankTrace]:
        return iter(self.ranks.values())

    @property
    def rank_numbers(self) -> list[int]:
        return list(self.ranks)

    def aligned_start_ns(self, rank: int) -> npt.NDArray[np.int64]:
        """Rank ``rank``'s event starts on the job's common clock."""
        return self.ranks[rank].aligned_start_ns()

    def merged(self) -> Trace:
        """One trace of every rank on the job's clock (ranks as track groups), e.g. for a
        timeline. Correlation ids stay per rank (see :meth:`Trace.merge`)."""
        shifted = []
        for r in self:  # the other columns are shared, not copied: merge copies them once
            events = Table(r.trace.events.schema, r.trace.events.columns)
            events.columns["start_ns"] = r.aligned_start_ns()
            memory = Table(r.trace.memory_events.schema, r.trace.memory_events.columns)
            memory.columns["ts_ns"] = memory["ts_ns"] + np.int64(r.clock_offset_ns)
            shifted.append(
                Trace(
                    events,
                    r.trace.tracks,
                    r.trace.strings,
                    kernels=r.trace.kernels,
                    memcpy=r.trace.memcpy,
                    ops=r.trace.ops,
                    memory_events=memory,
                    meta=r.trace.meta,
                )
            )
        merged = Trace.merge(shifted, ranks=self.rank_numbers)
        merged.meta["clock"] = self.clock
        merged.meta["source"] = f"a job of {len(self)} ranks"  # what describe() names
        return merged

    # -- analyses (pure functions live in perflab.analysis), through perflab.model.display --
    def summary(self) -> JobSummary:
        """Per rank busy, idle, kernels and communication; collectives matched across ranks
        and the stragglers, worst first (:func:`perflab.analysis.job.summarize_job`)."""
        return display.job_summary(self)

    def sql(self, query: str, *, timeout: float | None = None) -> SqlResult:
        """A DuckDB SQL query over every rank's events as one set of tables, on the job's
        clock, with a ``rank`` column, stopped after ``timeout`` s (:meth:`Trace.sql`)."""
        return display.trace_sql(self, query, timeout)

    def critical(self, **options: Any) -> CriticalPaths:
        """Each step's critical path over every rank, collectives tied across ranks, and
        what-ifs replayed (:func:`perflab.analysis.critical_path.job_critical_path`;
        ``options`` as for ``Trace.critical``)."""
        return display.job_critical(self, **options)

    def timeline(self, **options: Any) -> Timeline:
        """An interactive timeline of every rank, collectives linked across ranks
        (:func:`perflab.render.job.job_timeline`; ``options`` as for ``Trace.timeline``)."""
        return display.job_timeline(self, **options)

    def describe(self) -> str:
        events = sum(len(r.trace) for r in self)
        size = f" of {self.world_size}" if self.world_size is not None else ""
        return f"Job of {len(self)}{size} ranks, {events} events; clocks: {self.clock}"

    def __repr__(self) -> str:
        return f"<{self.describe()}>"
