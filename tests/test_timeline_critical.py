"""The critical path the timeline page carries: every stretch of each step's path, placed on
the lane of the event it was, adding up to the step; absent (with the reason) where no path
can be shown; and the CLI's --no-critical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from data_paths import TRACES
from kineto_gen import injected_trace

from perflab.analysis.critical_path import critical_path
from perflab.analysis.critical_walk import KINDS
from perflab.io import load_trace
from perflab.model.trace import Trace
from perflab.render import timeline_critical
from perflab.render.timeline_critical import CriticalView, critical_view
from perflab.render.timeline_data import assign_lanes

CPU_MEMORY = TRACES / "cpu" / "cpu_memory_train.json.gz"
NO_STEPS = TRACES / "kineto" / "alexnet_a100.json.gz"


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated trace of every kind of step (kernels, copies, a collective, syncs,
    launches held up, a gap no dependency explains), twice over."""
    path = tmp_path_factory.mktemp("critical") / "injected.json"
    path.write_bytes(injected_trace(0).data())
    return path


def view_of(trace: Trace) -> CriticalView:
    return critical_view(trace, assign_lanes(trace), int(trace.start_ns.min()))


def test_each_steps_stretches_add_up_to_the_step(injected: Path) -> None:
    trace = load_trace(injected)
    segments = view_of(trace).segments
    assert segments is not None
    paths = critical_path(trace)
    assert segments.steps == [s.step for s in paths.steps]
    assert len(segments.steps) == 20
    for i, step in enumerate(paths.steps):
        mine = segments.step == i
        assert int(segments.dur_ns[mine].sum()) == step.duration_ns == segments.step_ns[i]
        # in time order and end to end: each starts where the one before ended
        start_ns = segments.start_ms[mine] * 1e6
        ends = start_ns + segments.dur_ns[mine]
        assert np.allclose(start_ns[1:], ends[:-1], atol=1.0)
    assert segments.total == len(segments.dur_ns) == sum(len(s.path.dur) for s in paths.steps)


def test_stretches_sit_on_the_lanes_of_their_events(injected: Path) -> None:
    trace = load_trace(injected)
    lanes = assign_lanes(trace)
    origin = int(trace.start_ns.min())
    s = critical_view(trace, lanes, origin).segments
    assert s is not None
    assert (s.lane >= 0).all()  # every stretch is drawn somewhere
    kinds = [s.kinds[k] for k in s.kind.tolist()]
    gpu_kinds = {"kernel", "copy", timeline_critical.LABELS["collective"]}
    for i, kind in enumerate(kinds):
        on_gpu = bool(lanes.gpu[s.lane[i]])
        if kind in gpu_kinds or kind == timeline_critical.LATENCY:
            assert on_gpu, (kind, s.names[s.name[i]])  # a latency holds up the GPU work after it
        if kind in ("host work", "launch call"):
            assert not on_gpu or s.names[s.name[i]] == "(untraced host time)"
    # a kernel's stretch ends where the kernel of its name on its lane ends
    kernels = [i for i, k in enumerate(kinds) if k == "kernel"]
    assert kernels
    ends_ns = np.rint((s.start_ms * 1e6 + s.dur_ns) + origin).astype(np.int64)
    for i in kernels:
        name = s.names[s.name[i]]
        rows = np.flatnonzero((lanes.of_event == s.lane[i]) & (trace.end_ns == ends_ns[i]))
        assert [trace.strings[int(trace.name[r])] for r in rows] == [name]


def test_waiting_is_told_apart_from_work(injected: Path) -> None:
    s = view_of(load_trace(injected)).segments
    assert s is not None
    kinds = np.array([s.kinds[k] for k in s.kind.tolist()])
    waiting = {
        timeline_critical.LATENCY,
        timeline_critical.LABELS["unexplained"],
        timeline_critical.LABELS["collective"],
    }
    assert set(kinds[s.wait]) == waiting  # the generated steps have all three
    assert not set(kinds[~s.wait]) & waiting
    assert {"kernel", "copy", "host work", "launch call"} <= set(kinds[~s.wait])
    assert len(s.kinds) == len(KINDS) + 1  # every kind of the analysis, and the latency


def test_runs_are_joined_past_the_budget_and_still_add_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace = load_trace(CPU_MEMORY)
    whole = view_of(trace).segments
    assert whole is not None
    monkeypatch.setattr(timeline_critical, "SEGMENT_BUDGET", len(whole.dur_ns) - 1)
    held = view_of(trace).segments
    assert held is not None and held.complete
    assert held.total == whole.total == len(whole.dur_ns)
    assert len(held.dur_ns) < len(whole.dur_ns)
    for i, ns in enumerate(whole.step_ns):
        assert int(held.dur_ns[held.step == i].sum()) == ns
    # a run stands for stretches of one lane and kind, under its longest one's name
    assert set(held.lane.tolist()) <= set(whole.lane.tolist())
    assert "joined into" in held.describe()


def test_past_the_budget_once_joined_the_longest_runs_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace = load_trace(CPU_MEMORY)
    monkeypatch.setattr(timeline_critical, "SEGMENT_BUDGET", 10**9)
    runs = timeline_critical.joined(view_of(trace).segments)  # type: ignore[arg-type]
    monkeypatch.setattr(timeline_critical, "SEGMENT_BUDGET", 20)
    held = view_of(trace).segments
    assert held is not None and not held.complete and len(held.dur_ns) == 20
    assert sorted(held.dur_ns.tolist()) == sorted(runs.dur_ns.tolist())[-20:]
    assert (np.diff(held.start_ms) > 0).all()  # still in time order
    assert "the page holds the longest 20 runs" in held.describe()
    assert timeline_critical.page_meta(CriticalView(held))["complete"] is False


def test_no_path_without_profiler_steps() -> None:
    view = view_of(load_trace(NO_STEPS))
    assert view.segments is None
    assert "ProfilerStep#N" in view.reason


def test_no_single_trace_path_across_ranks(injected: Path) -> None:
    trace = load_trace(injected)
    trace.tracks["rank"][:] = np.arange(len(trace.tracks)) % 2  # as in a merged job
    view = view_of(trace)
    assert view.segments is None
    assert "ranks" in view.reason and "job.critical()" in view.reason


def critical_meta(view: object) -> list[dict[str, object]]:
    """The ``cmeta`` argument of every page script that has one."""
    from bokeh.models import CustomJS

    layout = view.layout  # type: ignore[attr-defined]
    scripts = [m for m in layout.references() if isinstance(m, CustomJS)]
    return [m.args["cmeta"] for m in scripts if "crit_shown" in m.args]


def test_the_page_carries_the_toggle_only_when_asked(injected: Path) -> None:
    trace = load_trace(injected)
    assert critical_meta(trace.timeline()) == []  # Python: off unless asked
    [meta] = critical_meta(trace.timeline(critical=True))
    assert meta["reason"] == "" and len(meta["steps"]) == 20  # type: ignore[arg-type]
    [meta] = critical_meta(load_trace(NO_STEPS).timeline(critical=True))
    assert "ProfilerStep#N" in str(meta["reason"])
    assert "no critical path" in load_trace(NO_STEPS).timeline(critical=True).text


def test_the_cli_draws_the_path_unless_told_not_to(injected: Path, tmp_path: Path) -> None:
    from perflab.cli import main as cli

    with_path, without = tmp_path / "with.html", tmp_path / "without.html"
    assert cli(["timeline", str(injected), "-o", str(with_path)]) == 0
    assert cli(["timeline", str(injected), "-o", str(without), "--no-critical"]) == 0
    # the toggle's script takes the stretches drawn as its argument crit_shown
    assert "crit_shown" in with_path.read_text(encoding="utf-8")
    assert "crit_shown" not in without.read_text(encoding="utf-8")


def test_the_cli_leaves_the_path_out_of_a_large_trace_unless_asked(
    injected: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from perflab.cli import main as cli
    from perflab.commands import timeline as command

    monkeypatch.setattr(command, "CRITICAL_AUTO_EVENTS", 10)  # the test trace counts as large
    default, asked = tmp_path / "default.html", tmp_path / "asked.html"
    assert cli(["timeline", str(injected), "-o", str(default)]) == 0
    assert "critical path left out" in capsys.readouterr().err
    assert cli(["timeline", str(injected), "-o", str(asked), "--critical"]) == 0
    assert "critical path left out" not in capsys.readouterr().err
    assert "crit_shown" not in default.read_text(encoding="utf-8")
    assert "crit_shown" in asked.read_text(encoding="utf-8")
