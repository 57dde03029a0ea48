"""Every view perflab shows, chosen in one registry.

``to_text(obj)`` is the plain-text view (terminals, ``str()``, the CLI) and ``to_bundle(obj)``
the MIME bundle a notebook displays (``text/plain`` plus ``text/html`` and, for charts, a static
``image/svg+xml``). Model and analysis results reach these only through the
:class:`perflab.model.display.Shown` mixin, so a new result type needs three things: inherit
``Shown``, write its text/HTML functions in a render module, and add a line to :data:`VIEWS`
(or call :func:`register`).

The registry is keyed by class name and names the render module that holds each view, imported
when an object of that type is first shown (as IPython's ``for_type_by_name`` does): printing a
trace summary loads the summary's table code, not the timeline, the compile view and every
result type besides.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from perflab.model.terminal import printable_lines

if TYPE_CHECKING:
    from perflab.analysis.trace_sql import SqlResult
    from perflab.model.job import Job
    from perflab.model.trace import Trace


@dataclass(frozen=True)
class View:
    """How one type is shown: functions of ``module`` by name, the text view and either the
    HTML shown beside it or a whole bundle (charts build their own, with a static picture)."""

    module: str
    text: str
    html: str | None = None
    bundle: str | None = None


_TABLES, _MACHINE = "perflab.render.tables", "perflab.render.machine_view"
_EXERCISES = "perflab.render.exercise_view"
_MEMORY = "perflab.render.memory_view"
VIEWS: dict[str, View] = {
    "perflab.model.trace.Trace": View("perflab.render.views", "trace_text", "trace_html"),
    "perflab.analysis.trace_summary.TraceSummary": View(
        _TABLES, "trace_summary_text", "trace_summary_html"
    ),
    "perflab.analysis.trace_stats.Frame": View(_TABLES, "frame_text", "frame_html"),
    "perflab.analysis.trace_stats.IdleBreakdown": View(
        _TABLES, "idle_breakdown_text", "idle_breakdown_html"
    ),
    "perflab.analysis.idle_causes.IdleCauses": View(
        "perflab.render.idle_view", "idle_text", bundle="idle_bundle"
    ),
    "perflab.analysis.idle_causes.IdleWithoutGpu": View(
        "perflab.render.host_view", "no_gpu_idle_text", "no_gpu_idle_html"
    ),
    "perflab.analysis.trace_diff.TraceDiff": View(
        "perflab.render.trace_diff_view", "diff_text", bundle="diff_bundle"
    ),
    "perflab.analysis.trace_sql.SqlResult": View("perflab.render.sql_view", "sql_text", "sql_html"),
    "perflab.analysis.memory.MemoryReport": View(_MEMORY, "memory_text", bundle="memory_bundle"),
    "perflab.analysis.memory_snapshot.SnapshotSummary": View(
        _MEMORY, "snapshot_text", "snapshot_html"
    ),
    "perflab.model.optable.OpTable": View(_TABLES, "optable_text", "optable_html"),
    "perflab.model.ncu.NcuReport": View(_TABLES, "ncu_text", "ncu_html"),
    "perflab.analysis.critical_path.CriticalPaths": View(
        "perflab.render.critical_view", "critical_text", "critical_html"
    ),
    "perflab.analysis.job.JobSummary": View(
        "perflab.render.job", "summary_text", bundle="summary_bundle"
    ),
    "perflab.model.timing.TimingResult": View(
        "perflab.render.timing", "timing_text", bundle="timing_bundle"
    ),
    "perflab.model.timing.Comparison": View(
        "perflab.render.timing", "comparison_text", "comparison_html"
    ),
    "perflab.model.kernel.CompileResult": View(
        "perflab.render.ptx_view", "compile_text", bundle="compile_bundle"
    ),
    "perflab.model.machine.BenchResult": View(_MACHINE, "bench_text", bundle="bench_bundle"),
    "perflab.model.machine.CollectiveResult": View(
        _MACHINE, "collectives_text", bundle="collectives_bundle"
    ),
    "perflab.model.ceilings.Ceilings": View(_MACHINE, "ceilings_text", bundle="ceilings_bundle"),
    "perflab.model.machine.Topology": View(_MACHINE, "topology_text"),
    "perflab.exercises.Exercise": View(_EXERCISES, "exercise_text", "exercise_html"),
    "perflab.exercises.Verdict": View(_EXERCISES, "verdict_text", "verdict_html"),
    "perflab.exercises._Solution": View(_EXERCISES, "solution_text", "solution_html"),
}


def register(cls: type, view: View) -> None:
    """Show ``cls`` (and its subclasses without a view of their own) with ``view``."""
    VIEWS[type_name(cls)] = view


def type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def to_text(obj: object) -> str:
    """The plain-text view of a perflab result, every character a terminal would act on
    (from a name in a file) written as its escape, its lines and tabs kept: done here, so
    that no view can forget it."""
    view = view_of(type(obj))
    return printable_lines(_function(view.module, view.text, str)(obj))


def to_bundle(obj: object) -> dict[str, object]:
    """The MIME bundle of a perflab result (what a notebook displays); its ``text/plain`` is
    escaped as :func:`to_text`'s is."""
    view = view_of(type(obj))
    if view.bundle is not None:
        bundle: dict[str, object] = _function(view.module, view.bundle, dict)(obj)
        text = bundle.get("text/plain")
        if isinstance(text, str):
            bundle["text/plain"] = printable_lines(text)
        return bundle
    shown: dict[str, object] = {"text/plain": to_text(obj)}
    if view.html is not None:
        shown["text/html"] = _function(view.module, view.html, str)(obj)
    return shown


def view_of(cls: type) -> View:
    """The view of ``cls`` or of its nearest base class that has one."""
    for base in cls.__mro__:
        view = VIEWS.get(type_name(base))
        if view is not None:
            return view
    raise TypeError(f"perflab.render has no view of {cls.__name__}")


T = TypeVar("T")


def _function(module: str, name: str, returns: type[T]) -> Callable[[object], T]:
    """View function ``name`` of ``module``: it takes the viewed object and returns a
    ``returns`` (the registry pairs each class with functions that take it)."""
    found: Callable[[object], T] = getattr(importlib.import_module(module), name)
    return found


# -- the trace's own views ---------------------------------------------------------------


def trace_text(trace: Trace) -> str:
    return trace.describe()


def trace_html(trace: Trace) -> str:
    from perflab.render.html import esc, wrap

    return wrap(f"<div>{esc(trace.describe())}</div>")


def trace_sql(source: Trace | Job, query: str, timeout: float | None = None) -> SqlResult:
    """``Trace.sql()`` and ``Job.sql()`` (through :mod:`perflab.model.display`):
    :func:`perflab.analysis.trace_sql.run_sql`, with its default time limit when ``timeout``
    is None. It stays behind the render layer, which scripts/gpu-check's import reach does
    not follow: from the model, that reach would count DuckDB among the packages a GPU
    machine needs (perflab.machine.gpu_modules.NOT_RUN)."""
    from perflab.analysis.trace_sql import DEFAULT_TIMEOUT_S, run_sql

    return run_sql(source, query, timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout)
