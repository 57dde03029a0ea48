"""Every view perflab shows, chosen in one registry.

``to_text(obj)`` is the plain-text view (terminals, ``str()``, the CLI) and ``to_bundle(obj)``
the MIME bundle a notebook displays (``text/plain`` plus ``text/html`` and, for charts, a static
``image/svg+xml``). Model and analysis results reach these only through the
:class:`perflab.model.display.Shown` mixin, so a new result type needs three things: inherit
``Shown``, write its text/HTML functions in a render module, and register them below.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import singledispatch
from typing import Any, TypeVar

from perflab.analysis.job import JobSummary
from perflab.analysis.trace_stats import Frame, IdleBreakdown
from perflab.analysis.trace_summary import TraceSummary
from perflab.analysis.trace_summary import summarize as trace_summary
from perflab.model.ceilings import Ceilings
from perflab.model.kernel import CompileResult
from perflab.model.machine import BenchResult, CollectiveResult, Topology
from perflab.model.ncu import NcuReport
from perflab.model.optable import OpTable
from perflab.model.timing import TimingResult
from perflab.model.trace import Trace
from perflab.render import job, machine_view, ptx_view, tables, timing
from perflab.render.html import esc, wrap
from perflab.render.timeline import Timeline, timeline

T = TypeVar("T")

__all__ = [
    "Timeline",
    "TraceSummary",
    "register",
    "to_bundle",
    "to_text",
    "trace_summary",
    "trace_timeline",
]


def trace_timeline(trace: Trace, **options: Any) -> Timeline:
    """``Trace.timeline()``: the interactive timeline (:func:`perflab.render.timeline.timeline`)."""
    return timeline(trace, **options)


@singledispatch
def to_text(obj: object) -> str:
    """The plain-text view of a perflab result."""
    raise TypeError(f"perflab.render has no view of {type(obj).__name__}")


@singledispatch
def to_bundle(obj: object) -> dict[str, Any]:
    """The MIME bundle of a perflab result (what a notebook displays)."""
    raise TypeError(f"perflab.render has no view of {type(obj).__name__}")


def register(
    cls: type[T],
    text: Callable[[T], str],
    html: Callable[[T], str] | None = None,
    bundle: Callable[[T], dict[str, Any]] | None = None,
) -> None:
    """Show ``cls`` as ``text``; in notebooks as ``bundle`` (charts with a static image build
    their own), else ``text`` beside ``html``, else ``text`` alone."""
    to_text.register(cls)(text)
    if bundle is None:
        bundle = _text_and_html(text, html)
    to_bundle.register(cls)(bundle)


def _text_and_html(
    text: Callable[[T], str], html: Callable[[T], str] | None
) -> Callable[[T], dict[str, Any]]:
    def bundle(obj: T) -> dict[str, Any]:
        shown = {"text/plain": text(obj)}
        if html is not None:
            shown["text/html"] = html(obj)
        return shown

    return bundle


def _trace_text(trace: Trace) -> str:
    return trace.describe()


def _trace_html(trace: Trace) -> str:
    return wrap(f"<div>{esc(trace.describe())}</div>")


register(Trace, _trace_text, _trace_html)
register(TraceSummary, tables.trace_summary_text, tables.trace_summary_html)
register(Frame, tables.frame_text, tables.frame_html)
register(IdleBreakdown, tables.idle_breakdown_text, tables.idle_breakdown_html)
register(OpTable, tables.optable_text, tables.optable_html)
register(NcuReport, tables.ncu_text, tables.ncu_html)
register(JobSummary, job.summary_text, bundle=job.summary_bundle)
register(TimingResult, timing.timing_text, bundle=timing.timing_bundle)
register(CompileResult, ptx_view.compile_text, bundle=ptx_view.compile_bundle)
register(BenchResult, machine_view.bench_text, bundle=machine_view.bench_bundle)
register(CollectiveResult, machine_view.collectives_text, bundle=machine_view.collectives_bundle)
register(Ceilings, machine_view.ceilings_text, bundle=machine_view.ceilings_bundle)
register(Topology, machine_view.topology_text)
