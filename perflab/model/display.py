"""The display hook that model and analysis results carry, and the model's conveniences.

IPython asks an object for ``_repr_mimebundle_`` (notebooks) or ``_repr_pretty_`` (the
terminal); :class:`Shown` answers both, and ``str()``, from the registry in
:mod:`perflab.render.views`, which decides every view. The registry is imported on first
display only, so reading and analysing traces never loads the render layer (or bokeh).

``Trace.idle()``, ``Trace.diff()``, ``Trace.memory()``, ``Trace.sql()``, ``Trace.timeline()``,
``Trace.critical()``, ``MemorySnapshot.summary()`` and ``Job.summary()``, ``Job.sql()``,
``Job.timeline()``, ``Job.critical()`` are
conveniences that come through here: each function below imports the one analysis (or view)
it returns on first call, so that the model imports no layer above it at load time.
(``Trace.summary()`` imports its analysis itself.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # names for annotations only: nothing below imports a layer at load time
    from perflab.analysis.critical_path import CriticalPaths as CriticalPaths
    from perflab.analysis.idle_causes import IdleCauses as IdleCauses
    from perflab.analysis.job import JobSummary as JobSummary
    from perflab.analysis.memory import MemoryReport as MemoryReport
    from perflab.analysis.memory_snapshot import SnapshotSummary as SnapshotSummary
    from perflab.analysis.trace_diff import TraceDiff as TraceDiff
    from perflab.analysis.trace_sql import SqlResult as SqlResult
    from perflab.model.job import Job
    from perflab.model.memory import MemorySnapshot
    from perflab.model.trace import Trace
    from perflab.render.timeline import Timeline as Timeline


class _Printer(Protocol):
    def text(self, text: str) -> None: ...


class Shown:
    """Mixin: show this object through :func:`perflab.render.views.to_bundle` and
    :func:`perflab.render.views.to_text` (a class may keep its own shorter ``__str__``)."""

    __slots__ = ()

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, Any]:
        from perflab.render.views import to_bundle

        return to_bundle(self)

    def _repr_pretty_(self, p: _Printer, cycle: bool) -> None:
        from perflab.render.views import to_text

        p.text(to_text(self))

    def __str__(self) -> str:
        from perflab.render.views import to_text

        return to_text(self)


def trace_idle(trace: Trace, **options: Any) -> IdleCauses:
    """``Trace.idle()``: :func:`perflab.analysis.idle_causes.idle_causes`."""
    from perflab.analysis.idle_causes import idle_causes

    return idle_causes(trace, **options)


def trace_diff(control: Trace, test: Trace, **options: Any) -> TraceDiff:
    """``Trace.diff()``: :func:`perflab.analysis.trace_diff.diff_traces`."""
    from perflab.analysis.trace_diff import diff_traces

    return diff_traces(control, test, **options)


def trace_memory(trace: Trace) -> MemoryReport:
    """``Trace.memory()``: :func:`perflab.analysis.memory.memory_report`."""
    from perflab.analysis.memory import memory_report

    return memory_report(trace)


def snapshot_summary(snapshot: MemorySnapshot, top: int) -> SnapshotSummary:
    """``MemorySnapshot.summary()``: :func:`perflab.analysis.memory_snapshot.summarize_snapshot`."""
    from perflab.analysis.memory_snapshot import summarize_snapshot

    return summarize_snapshot(snapshot, top=top)


def trace_sql(source: Trace | Job, query: str, timeout: float | None) -> SqlResult:
    """``Trace.sql()`` and ``Job.sql()``: :func:`perflab.render.views.trace_sql`, which runs
    :func:`perflab.analysis.trace_sql.run_sql` (kept there: see its docstring); ``timeout``:
    its time limit in seconds (None: the default)."""
    from perflab.render.views import trace_sql

    return trace_sql(source, query, timeout)


def trace_timeline(trace: Trace, **options: Any) -> Timeline:
    """``Trace.timeline()``: the interactive timeline (:func:`perflab.render.timeline.timeline`)."""
    from perflab.render.timeline import timeline

    return timeline(trace, **options)


def trace_critical(trace: Trace, **options: Any) -> CriticalPaths:
    """``Trace.critical()``: :func:`perflab.analysis.critical_path.critical_path`."""
    from perflab.analysis.critical_path import critical_path

    return critical_path(trace, **options)


def job_critical(job: Job, **options: Any) -> CriticalPaths:
    """``Job.critical()``: :func:`perflab.analysis.critical_path.job_critical_path`."""
    from perflab.analysis.critical_path import job_critical_path

    return job_critical_path(job, **options)


def job_summary(job: Job) -> JobSummary:
    """``Job.summary()``: :func:`perflab.analysis.job.summarize_job`."""
    from perflab.analysis.job import summarize_job

    return summarize_job(job)


def job_timeline(job: Job, **options: Any) -> Timeline:
    """``Job.timeline()``: ranks as groups of lanes, collectives linked across them
    (:func:`perflab.render.job.job_timeline`)."""
    from perflab.render.job import job_timeline

    return job_timeline(job, **options)
