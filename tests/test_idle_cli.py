"""``perflab trace idle`` and ``Trace.idle()``: the causes with their shares, the longest gaps
with evidence, JSON of every gap on the trace's clock, and views that escape names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_paths import TRACES
from kineto_gen import injected_trace

from perflab.analysis.idle_rules import RULES
from perflab.cli import main
from perflab.io import load_trace
from perflab.io.kineto import loads_kineto

NCCL = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"
T4 = TRACES / "nsys" / "power_iteration.sqlite"
PAYLOAD = "<img src=x onerror=alert(1)>"


def _written(tmp_path: Path, seed: int = 0) -> tuple[Path, list]:  # type: ignore[type-arg]
    injected = injected_trace(seed)
    path = tmp_path / "gen.json"
    path.write_bytes(injected.data())
    return path, injected.gaps


def test_json_gives_every_gap_with_its_cause_and_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, gaps = _written(tmp_path)
    assert main(["trace", "idle", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["gaps"]) == len(gaps)
    by_start = {g["start_ns"] // 1000: g for g in doc["gaps"]}
    for gap in gaps:
        found = by_start[gap.start_us]  # the trace's own clock: Kineto's microseconds
        assert found["cause"] == gap.cause
        assert found["dur_ns"] == (gap.end_us - gap.start_us) * 1000
        assert found["device"] == "0" and found["evidence"]
    assert sum(c["gaps"] for c in doc["by_cause"].values()) == len(gaps)
    assert doc["rules"] == RULES


def test_text_lists_causes_shares_and_longest_gaps_with_evidence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["trace", "idle", str(T4), "--min-us", "1000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("idle GPU time by cause (gaps longer than 1 ms): ")
    assert "after-sync" in out and "100.0%" in out
    assert "the longest 10 gaps and their evidence:" in out
    assert "the thread was blocked in cudaMemcpyAsync_v3020" in out
    assert "the copy it waited for: Memcpy DtoH (Device -> Pageable) (64 KiB)" in out
    assert "then cudaStreamSynchronize_v3020" in out
    assert "heuristics" in out  # said, with where the rules are


def test_step_selects_a_profiler_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "idle", str(NCCL), "--step", "5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["step"] == 5 and 0 < len(doc["gaps"]) < 3480
    whole = load_trace(NCCL).idle()
    assert len(doc["gaps"]) < len(whole)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--min-us", "-1"], "--min-us must be"),
        (["--min-us", "nan"], "--min-us must be"),
        (["--min-us", "inf"], "--min-us must be"),
        (["--step", "-2"], "--step must be"),
        (["--step", "99"], "no ProfilerStep#99 range"),
    ],
)
def test_bad_options_are_clean_errors(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _written(tmp_path)
    assert main(["trace", "idle", str(path), *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and message in err and "Traceback" not in err


def test_help_gives_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["trace", "idle", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for cause, rule in RULES.items():
        assert f"{cause}: {' '.join(rule.split())}" in out


def test_trace_idle_views_escape_names() -> None:
    doc = injected_trace(0, segments=["host-busy"]).doc
    for event in doc["traceEvents"]:
        if "preprocess_batch" in event["name"]:
            event["name"] = PAYLOAD
    trace = loads_kineto(json.dumps(doc).encode(), python=True)
    result = trace.idle()
    bundle = result._repr_mimebundle_()
    assert PAYLOAD in bundle["text/plain"]
    html = bundle["text/html"]
    assert PAYLOAD not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "host-busy" in html and "<table>" in html


def test_summary_shows_the_by_cause_split() -> None:
    summary = load_trace(T4).summary()
    text = str(summary)
    assert "idle by cause: " in text and "after-sync 656 ms (99.6%)" in text
    assert "idle by cause: " in summary._repr_mimebundle_()["text/html"]


def test_bundle_has_a_static_strip_and_the_step_table() -> None:
    result = load_trace(NCCL).idle()
    bundle = result._repr_mimebundle_()
    svg = bundle["image/svg+xml"]
    assert svg.startswith("<svg") and svg.count("<rect") > 10 and "host-busy" in svg
    assert 'src="data:image/svg+xml;base64,' in bundle["text/html"]  # shown when sanitised
    assert "each step's GPU time" in bundle["text/plain"]
    assert "each step&#x27;s GPU time" in bundle["text/html"]
