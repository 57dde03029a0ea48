"""The one display hook that model and analysis results carry.

IPython asks an object for ``_repr_mimebundle_`` (notebooks) or ``_repr_pretty_`` (the
terminal); :class:`Shown` answers both, and ``str()``, from the registry in
:mod:`perflab.render.views`, which decides every view. The registry is imported on first
display only, so reading and analysing traces never loads the render layer (or bokeh): this
module is the single place where the model reaches render. ``Trace.summary()``,
``Trace.timeline()`` and ``Trace.idle()`` (and ``Job.summary()``, ``Job.timeline()``) are
conveniences that come through here too, to the same registry module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # names for annotations only: nothing below imports render at load time
    from perflab.model.job import Job
    from perflab.model.trace import Trace
    from perflab.render.views import IdleCauses as IdleCauses
    from perflab.render.views import JobSummary as JobSummary
    from perflab.render.views import SqlResult as SqlResult
    from perflab.render.views import Timeline as Timeline
    from perflab.render.views import TraceDiff as TraceDiff
    from perflab.render.views import TraceSummary as TraceSummary


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


def trace_summary(trace: Trace) -> TraceSummary:
    """What ``Trace.summary()`` returns: :func:`perflab.analysis.trace_summary.summarize`."""
    from perflab.render.views import trace_summary

    return trace_summary(trace)


def trace_idle(trace: Trace, **options: Any) -> IdleCauses:
    """What ``Trace.idle()`` returns: :func:`perflab.analysis.idle_causes.idle_causes`."""
    from perflab.render.views import trace_idle

    return trace_idle(trace, **options)


def trace_diff(control: Trace, test: Trace, **options: Any) -> TraceDiff:
    """What ``Trace.diff()`` returns: :func:`perflab.analysis.trace_diff.diff_traces`."""
    from perflab.render.views import trace_diff

    return trace_diff(control, test, **options)


def trace_sql(source: Trace | Job, query: str) -> SqlResult:
    """What ``Trace.sql()`` and ``Job.sql()`` return: :func:`perflab.analysis.trace_sql.run_sql`."""
    from perflab.render.views import trace_sql

    return trace_sql(source, query)


def trace_timeline(trace: Trace, **options: Any) -> Timeline:
    """What ``Trace.timeline()`` returns: :func:`perflab.render.timeline.timeline`."""
    from perflab.render.views import trace_timeline

    return trace_timeline(trace, **options)


def job_summary(job: Job) -> JobSummary:
    """What ``Job.summary()`` returns: :func:`perflab.analysis.job.summarize_job`."""
    from perflab.render.views import job_summary

    return job_summary(job)


def job_timeline(job: Job, **options: Any) -> Timeline:
    """What ``Job.timeline()`` returns: :func:`perflab.render.job.job_timeline`."""
    from perflab.render.views import job_timeline

    return job_timeline(job, **options)
