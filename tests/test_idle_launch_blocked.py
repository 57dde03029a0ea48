"""A launch call that blocks for hundreds of microseconds (a full launch queue, the driver,
lazy module loading) is the launch path, not other host work: its gaps read
``launch-blocked``, with the call as evidence and the reading said to be a heuristic, in the
text, the JSON and the rules; a launch call of ordinary length inside the same op is not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_paths import TRACES
from kineto_gen import Builder, injected_trace

from perflab.analysis.idle_causes import CAUSES, LAUNCH_BLOCKED_NS, RULES, idle_causes
from perflab.cli import main
from perflab.io import load_trace
from perflab.io.kineto import loads_kineto
from perflab.render.views import to_text

# HTA's trace-diff pair: in the control, a backward op's cudaLaunchKernel took 1.14 ms
CONTROL = TRACES.parent / "trace_diff" / "control.json.gz"
GAP_START_NS = 1661203462728023000  # the 711 us gap it held ("mostly in cudaLaunchKernel")


def test_the_cause_and_its_rule_are_listed() -> None:
    assert CAUSES.index("launch-blocked") == CAUSES.index("launch-overhead") + 1
    rule = RULES["launch-blocked"]
    assert "100 us" in rule and "launch path blocked" in rule and "not other host work" in rule


def test_a_long_launch_call_inside_an_op_is_the_launch_path_blocking() -> None:
    """The gap the user saw read as host-busy, 'mostly in cudaLaunchKernel (1.14 ms)'."""
    result = idle_causes(load_trace(CONTROL))
    gap = result.gaps.start.tolist().index(GAP_START_NS)
    assert result.cause_of(gap) == "launch-blocked"
    evidence = result.evidence(gap)
    first = evidence[0]
    assert first.role == "blocked-launch" and first.name == "cudaLaunchKernel"
    assert first.dur_ns == 1_143_000
    assert first.text.startswith("cudaLaunchKernel took 1.14 ms: launch calls of 100 us or more")
    assert "ran 673 us of the 709 us" in first.text
    assert "blocked in the launch path" in first.text
    assert "not running other host work" in first.text
    assert "(a heuristic)" in first.text
    # the context stays: the op it was in, and the next work's own launch
    roles = [(e.role, e.name) for e in evidence]
    assert ("deepest", "cudaLaunchKernel") in roles and roles[-1][0] == "launch"
    doc = result.gap_dict(gap)
    assert doc["cause"] == "launch-blocked" and doc["evidence"][0]["role"] == "blocked-launch"
    by_cause = result.by_cause()
    assert by_cause["launch-blocked"].gaps == 2  # this one, and the 2 us its own kernel ended


def test_trace_idle_says_so_in_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "idle", str(CONTROL), "--json", "--min-us", "500"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (gap,) = [g for g in doc["gaps"] if g["start_ns"] == GAP_START_NS]
    assert gap["cause"] == "launch-blocked"
    assert "(a heuristic)" in gap["evidence"][0]["text"]
    assert doc["by_cause"]["launch-blocked"]["gaps"] == 1  # the 2 us one is under --min-us
    assert doc["rules"]["launch-blocked"] == RULES["launch-blocked"]
    assert main(["trace", "idle", str(CONTROL)]) == 0
    text = capsys.readouterr().out
    assert "launch-blocked" in text and "blocked in the launch path" in text
    assert "launch-blocked: launch calls of 100 us or more" in text  # the rule under the table


def _blocked_op(call_us: int) -> bytes:
    """One CPU op whose launch call (``call_us`` long) was under way when the GPU went idle,
    followed at once by the next launch."""
    b = Builder()
    b.host = b.launch("first_kernel", b.host, b.host + 7, 800)
    g0 = b.gpu_end
    at = g0 - 10  # the call began while the GPU still ran, and returns call_us later
    b.launch("add_kernel", at, g0 + 2, 20)
    b.events[-2]["dur"] = call_us
    b.x("cpu_op", "aten::add", at - 1, call_us + 2)
    nxt = at + call_us + 3
    b.launch("relu_kernel", nxt, nxt + 7, 30)
    return json.dumps(b.document()).encode()


@pytest.mark.parametrize(
    ("call_us", "cause"),
    [(LAUNCH_BLOCKED_NS // 1000 + 200, "launch-blocked"), (60, "launch-overhead")],
)
def test_only_a_launch_call_past_the_threshold_reads_as_blocked(call_us: int, cause: str) -> None:
    result = idle_causes(loads_kineto(_blocked_op(call_us), python=True))
    last = len(result) - 1  # the gap before relu_kernel
    assert result.trace.strings[int(result.trace.name[result.gaps.next[last]])] == "relu_kernel"
    assert result.cause_of(last) == cause, [e.text for e in result.evidence(last)]


def test_the_generated_segment_is_found_with_its_evidence(tmp_path: Path) -> None:
    injected = injected_trace(0, segments=["launch-blocked", "host-busy"])
    result = idle_causes(loads_kineto(injected.data(), python=True))
    causes = sorted(result.cause_of(i) for i in range(len(result)))
    assert causes == ["host-busy", "launch-blocked"]
    summary = to_text(result)
    assert "launch-blocked" in summary and "(a heuristic)" in summary
