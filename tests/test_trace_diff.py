"""``perflab trace diff`` and ``Trace.diff``: a generated pair with known changes and noise,
the real traces in tests/data, and bad input."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

import diff_gen
import kineto_gen
import numpy as np
import pytest
from bench_scripts import load_script
from data_paths import TRACES
from test_trace_model import small_trace

from perflab.analysis.diff_names import Rename, family, short_name
from perflab.analysis.diff_stats import mann_whitney_p, verdicts
from perflab.analysis.idle_classify import CAUSES
from perflab.analysis.trace_diff import diff_traces, grouped_sum
from perflab.cli import main
from perflab.errors import InputError
from perflab.io import load_trace
from perflab.model.trace import GPU_WORK_KINDS, EventKind, Trace
from perflab.model.units import format_ns
from perflab.render.views import to_bundle, to_text

SAMPLED = TRACES / "kineto" / "sampled_4streams.json.gz"
ALEXNET = TRACES / "kineto" / "alexnet_a100.json.gz"


def _write(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("pair")
    control, test = diff_gen.pair()
    return _write(control, folder / "control.json"), _write(test, folder / "test.json")


@pytest.fixture(scope="module")
def pair_traces(pair_files: tuple[Path, Path]) -> tuple[Trace, Trace]:
    return load_trace(pair_files[0]), load_trace(pair_files[1])


def _by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in rows}


# -- the generated pair: every injected change found ------------------------------------------


def test_injected_changes_get_their_verdicts(pair_traces: tuple[Trace, Trace]) -> None:
    result = pair_traces[0].diff(pair_traces[1])
    assert result.per_step and result.scope == "whole traces"
    rows = _by_name(result.to_dict()["kernels"])
    assert {name: rows[name]["verdict"] for name in diff_gen.EXPECTED} == diff_gen.EXPECTED
    slow = rows["slow_kernel"]
    assert slow["control_count"] == slow["test_count"] == 8
    assert slow["p_value"] < 0.05
    assert len(slow["control_per_step_us"]) == len(slow["test_per_step_us"]) == 8
    assert slow["control_step_median_us"] == pytest.approx(
        float(np.median(slow["control_per_step_us"]))
    )
    assert slow["test_step_median_us"] == pytest.approx(2 * slow["control_step_median_us"], 0.1)
    assert rows["new_kernel"]["control_count"] == 0 and rows["new_kernel"]["test_count"] == 8
    assert rows["gone_kernel"]["test_us"] == 0.0
    # the change per step adds up to the injected one, within the noise
    change = result.to_dict()["gpu"]["change_us"]
    assert change == pytest.approx(diff_gen.CHANGE_PER_STEP_US, abs=10)
    # the largest change first, and the headline names it
    assert result.kernels.names[0] == "new_kernel"
    assert "new_kernel" in result.headline and "slow_kernel" in result.headline
    assert result.headline.startswith("+")


def test_rename_makes_one_row(pair_traces: tuple[Trace, Trace]) -> None:
    result = pair_traces[0].diff(pair_traces[1], renames=[diff_gen.RENAME])
    rows = _by_name(result.kernels.records())
    assert "old_name_kernel" not in rows
    assert rows["new_name_kernel"]["verdict"] == "same"
    assert rows["new_name_kernel"]["control_count"] == rows["new_name_kernel"]["test_count"] == 8
    regex = pair_traces[0].diff(pair_traces[1], renames=["re:^(old|new)_name_kernel$=renamed"])
    assert _by_name(regex.kernels.records())["renamed"]["verdict"] == "same"


def test_one_step_gives_no_noise_verdict(pair_traces: tuple[Trace, Trace]) -> None:
    result = pair_traces[0].diff(pair_traces[1], step=3)
    assert not result.per_step and result.scope == "ProfilerStep#3"
    rows = _by_name(result.kernels.records())
    assert rows["slow_kernel"]["verdict"] == "changed"
    assert rows["new_kernel"]["verdict"] == "new" and rows["gone_kernel"]["verdict"] == "gone"
    assert rows["slow_kernel"]["control_count"] == 1
    assert "p_value" not in rows["slow_kernel"]
    assert any("one step" in n for n in result.notes)
    assert {v for r in rows.values() for v in [r["verdict"]]} <= {
        "new",
        "gone",
        "changed",
        "unchanged",
    }
    # step 2 of the control against step 5 of the test
    other = pair_traces[0].diff(pair_traces[1], step=(2, 5))
    assert other.scope == "ProfilerStep#2 vs #5" and other.test.steps == [5]


def test_step_assigns_gpu_work_by_its_launch(pair_traces: tuple[Trace, Trace]) -> None:
    """Every step holds one of each kernel, though kernels run after their step's host range
    ends (the GPU is behind): a kernel belongs to the step that launched it."""
    control = pair_traces[0]
    for step in (1, 4, 8):
        rows = control.diff(control, step=step).kernels
        assert set(rows.control_count.tolist()) == {1}
        assert set(rows.status) == {"unchanged"}


def test_noise_alone_is_rarely_a_change() -> None:
    """Pairs that differ only by noise (10%, uniform): a per-name test at p < 0.05 calls
    about 5% of such names slower or faster; 30 seeded pairs stay under 10%."""
    control = trace_from(diff_gen.pair(seed=0, noise=0.1)[0])
    called = total = 0
    for seed in range(100, 130):
        again = trace_from(diff_gen.side(diff_gen.CONTROL_KERNELS, 8, seed=seed, noise=0.1))
        verdict = control.diff(again).kernels.verdict
        assert set(verdict) <= {"same", "unclear", "slower", "faster"}
        called += sum(v in ("slower", "faster") for v in verdict)
        total += len(verdict)
    assert total == 150 and called <= 15


def trace_from(doc: dict[str, Any]) -> Trace:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        return load_trace(_write(doc, Path(folder) / "t.json"))


def test_two_steps_a_side_say_so() -> None:
    control, test = (trace_from(d) for d in diff_gen.pair(steps=2))
    result = control.diff(test)
    assert result.per_step
    assert result.to_dict()["kernels"][0]["verdict"] in ("new", "unclear")
    assert _by_name(result.kernels.records())["slow_kernel"]["verdict"] == "unclear"
    assert any("fewer than 4 steps" in n for n in result.notes)


def test_views_escape_names(tmp_path: Path) -> None:
    control, test = diff_gen.pair(steps=4)
    hostile = '<img src=x onerror="alert(1)">\x1b[31m'
    for event in test["traceEvents"]:
        if event["name"] == "new_kernel":
            event["name"] = hostile
    a = load_trace(_write(control, tmp_path / "c.json"))
    b = load_trace(_write(test, tmp_path / "t.json"))
    result = a.diff(b)
    bundle = to_bundle(result)
    assert set(bundle) == {"text/plain", "text/html", "image/svg+xml"}
    assert "<img src=x" not in bundle["text/html"] and "&lt;img src=x" in bundle["text/html"]
    assert "<img src=x" not in bundle["image/svg+xml"]
    assert "\x1b" not in to_text(result) and "\\x1b" in to_text(result)
    assert bundle["image/svg+xml"].startswith("<svg") and "<rect" in bundle["image/svg+xml"]
    assert "data:image/svg+xml;base64," in bundle["text/html"]


# -- the real traces ---------------------------------------------------------------------------


def test_a_trace_against_itself_is_unchanged() -> None:
    trace = load_trace(SAMPLED)
    result = trace.diff(trace)
    assert set(result.kernels.status) == {"unchanged"} and set(result.ops.status) == {"unchanged"}
    assert result.to_dict()["gpu"]["change_us"] == 0.0
    assert result.headline.endswith("no change")
    # its GPU rows account for every kernel, memcpy and memset
    summary = trace.summary().to_dict()
    assert int(result.kernels.control_count.sum()) >= summary["kernels"]["count"]


def test_two_different_real_traces(capsys: pytest.CaptureFixture[str]) -> None:
    """No steps in either: whole traces, names in one trace only are new or gone."""
    assert main(["trace", "diff", str(ALEXNET), str(SAMPLED), "--json", "--top", "500"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not doc["per_step"] and doc["scope"] == "whole traces"
    verdicts_seen = {r["verdict"] for r in doc["kernels"]}
    assert {"new", "gone"} <= verdicts_seen <= {"new", "gone", "changed", "unchanged"}
    alexnet = load_trace(ALEXNET).summary().to_dict()["kernels"]
    gone_or_both = [r for r in doc["kernels"] if r["kind"] == "kernel"]
    assert sum(r["control_count"] for r in gone_or_both) == alexnet["count"]
    assert sum(r["control_us"] for r in gone_or_both) == pytest.approx(alexnet["total_us"])
    for key in ("name", "control_count", "test_count", "control_us", "test_us", "verdict"):
        assert key in doc["kernels"][0]
    assert doc["ops"] and doc["by_category"] and doc["by_stream"] and doc["headline"]
    assert any("ProfilerStep" in n for n in doc["notes"])


def test_cli_text(pair_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    control, test = (str(p) for p in pair_files)
    assert main(["trace", "diff", control, test, "--top", "3", "--rename", diff_gen.RENAME]) == 0
    out = capsys.readouterr().out
    assert "per step over 8 and 8 ProfilerSteps" in out
    assert "GPU time by category" in out and "GPU time by stream" in out
    assert "slower" in out and "Mann-Whitney" in out and "count in trace" in out
    assert main(["trace", "diff", control, test, "--step", "2:3", "--short-names", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["scope"] == "ProfilerStep#2 vs #3" and len(doc["kernels"]) == 7


# -- bad input -----------------------------------------------------------------------------------


def test_step_in_a_trace_without_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "diff", str(ALEXNET), str(SAMPLED), "--step", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and "Traceback" not in err
    assert str(ALEXNET) in err and "no ProfilerStep ranges at all" in err


def test_step_one_side_lacks(pair_traces: tuple[Trace, Trace]) -> None:
    short = trace_from(diff_gen.pair(steps=3)[1])
    with pytest.raises(InputError, match=r"ProfilerStep#5.*its steps are 1, 2, 3"):
        pair_traces[0].diff(short, step=5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--step", "x"], "--step takes a step number"),
        (["--step", "-1"], "--step takes a step number"),
        (["--top", "0"], "--top must be at least 1"),
        (["--rename", "no-equals"], "--rename needs OLD=NEW"),
        (["--rename", "re:(unclosed=x"], "not a usable regular expression"),
        (["--rename", r"re:a=\9"], "not a usable replacement"),
        (["--rename", r"re:(a)\1=x"], "no backreferences"),
        (["--rename", "re:(?<=a)b=x"], "no lookaround"),
    ],
)
def test_bad_options(
    pair_files: tuple[Path, Path],
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["trace", "diff", *map(str, pair_files), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_step_from_python(pair_traces: tuple[Trace, Trace]) -> None:
    for bad in (-1, True, "3", 1.5):
        with pytest.raises(InputError, match="ProfilerStep number"):
            diff_traces(*pair_traces, step=bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="'kernels' or 'ops'"):
        pair_traces[0].diff(pair_traces[1]).to_pandas("events")


def test_missing_file(pair_files: tuple[Path, Path], tmp_path: Path) -> None:
    assert main(["trace", "diff", str(pair_files[0]), str(tmp_path / "none.json")]) == 2


# -- the pieces ---------------------------------------------------------------------------------


def test_mann_whitney_by_hand() -> None:
    """p-values worked out by hand from the textbook formulas (normal approximation, tie and
    continuity corrected, two-sided)."""
    x = np.array([[1.0, 2, 3, 4], [1, 2, 3, 4], [5, 5, 5, 5]])
    y = np.array([[5.0, 6, 7, 8], [1, 2, 3, 4], [5, 5, 5, 5]])
    p = mann_whitney_p(x, y)
    # row 0: U = 0, mean 8, variance 4 * 4 / 12 * 9 = 12
    assert p[0] == pytest.approx(math.erfc((8 - 0.5) / math.sqrt(12) / math.sqrt(2)))
    assert p[1] == pytest.approx(1.0) and p[2] == 1.0
    # ranks 1.5 1.5 4 4 7 | 4 7 7 9.5 9.5: U = 18 - 15 = 3, mean 12.5; tied groups of
    # 2, 3, 3, 2 give t**3 - t = 60: variance 25 / 12 * (11 - 60 / 90)
    ties = mann_whitney_p(np.array([[1.0, 1, 2, 2, 3]]), np.array([[2.0, 3, 3, 4, 4]]))
    sigma = math.sqrt(25 / 12 * (11 - 60 / 90))
    assert ties[0] == pytest.approx(math.erfc((9.5 - 0.5) / sigma / math.sqrt(2)))
    assert ties[0] == pytest.approx(0.0524, abs=1e-4)


def test_verdict_rules() -> None:
    control = np.tile(np.arange(100_000.0, 106_000.0, 1000.0), (4, 1))
    test = control.copy()
    test[0] *= 2  # slower, significant
    test[1] *= 0.5  # faster
    control[2] = np.arange(100_000.0, 100_600.0, 100.0)  # steady: a 2% shift is told apart
    test[2] = control[2] + 2_000  # significant but under 5%: same
    test[3] = test[3][::-1] * 1.5  # large change
    names, p = verdicts(control, test)
    assert names == ["slower", "faster", "same", "slower"]
    assert p[2] < 0.05  # the test tells the 1% shift apart, the minimum effect keeps it same
    few, _ = verdicts(control[:, :2], test[:, :2])
    assert few[:2] == ["unclear", "unclear"]


def test_grouped_sum_cannot_wrap() -> None:
    big = np.array([2**62 - 1] * 4, dtype=np.int64)
    sums = grouped_sum(np.zeros(4, dtype=np.int64), big, 1)
    assert sums[0] == pytest.approx(4.0 * (2**62 - 1))


def test_names() -> None:
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::Add<float> >(int, float)"
    assert short_name(name) == "at::native::vectorized_elementwise_kernel"
    assert short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert family("triton_poi_fused_add_mul_0") == "triton_poi_fused_*"
    assert family("volta_sgemm_128x64_nn") == "volta_sgemm_*x*_nn"
    assert Rename.parse("a=b").apply("a") == "b" and Rename.parse("a=b").apply("ab") == "ab"
    assert Rename.parse(r"re:_\d+$=_N").apply("k_12") == "k_N"


def test_two_ranks_of_a_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two rank files of one job diff as two traces: the straggler's collective waits less,
    its GEMM takes longer; one step a side, so no verdict from noise."""
    load_script("job").generate_job(tmp_path, 2, 4, seed=3)
    ranks = [str(tmp_path / f"rank-{r}.json.gz") for r in (0, 1)]
    assert main(["trace", "diff", *ranks, "--json", "--short-names"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = _by_name(doc["kernels"])
    assert {r["verdict"] for r in rows.values()} <= {"changed", "unchanged"}
    assert all(r["control_count"] == r["test_count"] == 4 for r in rows.values())
    assert sum(r["change_us"] for r in rows.values()) == pytest.approx(doc["gpu"]["change_us"])
    assert len(doc["notes"]) == 2


def _random_trace(seed: int) -> Trace:
    """Random events on test_trace_model's GPU and CPU tracks: kernels, copies, ops, runtime
    calls sharing correlation ids, and a few ProfilerStep ranges (maybe none, maybe
    overlapping)."""
    from perflab.model.trace import EVENT_COLUMNS, Table

    tracks = small_trace().tracks  # labels: strings 0 and 1
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    labels = ["GPU 0 stream 7", "process 1 thread 1"]
    names = labels + [f"k{i}" for i in range(6)] + [f"ProfilerStep#{i}" for i in range(4)]
    kind = rng.choice([0, 1, 2, 3, 4, 5, 6], size=n).astype(np.int8)
    name = rng.integers(2, 8, size=n)
    steps = kind == EventKind.ANNOTATION
    name[steps] = rng.integers(8, 12, size=int(steps.sum()))
    long, short = rng.integers(10**4, 10**6, size=n), rng.integers(0, 10**4, size=n)
    events = Table(
        EVENT_COLUMNS,
        {
            "start_ns": rng.integers(0, 10**6, size=n),
            "dur_ns": np.where(steps, long, short),
            "kind": kind,
            "track": np.where(np.isin(kind, [0, 1, 2]), 0, 1),
            "name": name,
            "correlation": rng.integers(-1, 50, size=n),
        },
    )
    return Trace(events, tracks, names)


@pytest.mark.parametrize("seed", range(20))
def test_random_traces(seed: int) -> None:
    """Seeded random traces: every GPU event is counted once, the JSON is strict, and a trace
    against itself is unchanged."""
    a, b = _random_trace(seed), _random_trace(seed + 1000)
    result = a.diff(b)
    gpu = a.mask(*GPU_WORK_KINDS)
    assert int(result.kernels.control_count.sum()) == int(gpu.sum())
    assert float(result.kernels.control_ns.sum()) == float(a.dur_ns[gpu].sum())
    json.dumps(result.to_dict(), allow_nan=False)
    assert set(a.diff(a).kernels.status) <= {"unchanged"}
    to_text(result)
    to_bundle(result)


# -- the idle time by cause -------------------------------------------------------------------

HTA_CONTROL = Path(__file__).parent / "data" / "trace_diff" / "control.json.gz"
HTA_TEST = Path(__file__).parent / "data" / "trace_diff" / "test.json.gz"


@pytest.fixture(scope="module")
def host_busy_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[int]]:
    """The same kernels on both sides; the test ends every step with an injected host-busy
    gap (kineto_gen's segment). Returns both files and each injected gap's length (us)."""
    injected: list[int] = []

    def host_busy(b: kineto_gen.Builder, rng: random.Random) -> None:
        kineto_gen.host_busy(b, rng)
        gap = b.gaps[-1]
        injected.append(gap.end_us - gap.start_us)

    folder = tmp_path_factory.mktemp("idle_pair")
    control = diff_gen.side(diff_gen.CONTROL_KERNELS, 8, 0, 0.03)
    test = diff_gen.side(diff_gen.CONTROL_KERNELS, 8, 1, 0.03, segment=host_busy)
    paths = _write(control, folder / "control.json"), _write(test, folder / "test.json")
    return paths[0], paths[1], injected


def _cause_sum(block: dict[str, dict[str, float]], key: str) -> float:
    return sum(entry[key] for entry in block.values())


def test_idle_split_shows_injected_host_busy(
    host_busy_pair: tuple[Path, Path, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    control, test, injected = host_busy_pair
    assert main(["trace", "diff", str(control), str(test), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    block = doc["idle_by_cause"]
    assert list(block) == list(CAUSES)  # every cause, in their order
    busy = block["host-busy"]
    # per step: the mean of the injected gaps (the control has none), medians beside
    assert busy["control_us"] == 0.0
    assert busy["test_us"] == pytest.approx(sum(injected) / len(injected))
    assert busy["delta_us"] == busy["test_us"]
    assert busy["test_step_median_us"] == pytest.approx(float(np.median(injected)))
    assert all(block[c]["delta_us"] == 0.0 for c in block if c != "host-busy")
    assert _cause_sum(block, "delta_us") == pytest.approx(doc["idle"]["change_us"])
    # among the largest changes: the headline says so
    assert (
        f"{format_ns(busy['delta_us'] * 1e3)} more idle while the host was busy"
        in (doc["headline"])
    )
    # text and HTML views show the split
    result = load_trace(control).diff(load_trace(test))
    text = to_text(result)
    assert "GPU idle time per step by cause:" in text
    assert re.search(r"host-busy\s+0 ns\s+259 us\s+\+259 us", text)
    html = to_bundle(result)["text/html"]
    assert '<td class="l">host-busy</td>' in html and "GPU idle time per step" in html


def test_idle_split_of_one_step(host_busy_pair: tuple[Path, Path, list[int]]) -> None:
    control, test, injected = host_busy_pair
    result = load_trace(control).diff(load_trace(test), step=3)
    block = result.to_dict()["idle_by_cause"]
    assert block["host-busy"] == {
        "control_us": 0.0,
        "test_us": injected[2],
        "delta_us": injected[2],
    }
    assert "more idle while the host was busy" in result.headline
    assert "GPU idle time by cause:" in to_text(result)


def test_idle_split_of_the_hta_pair() -> None:
    """The real pair: the split sums to the idle difference, and it agrees with Trace.idle
    (step by step, the per-step means)."""
    control, test = load_trace(HTA_CONTROL), load_trace(HTA_TEST)
    for step in (None, 1010):
        result = control.diff(test, step=step)
        doc = result.to_dict()
        block = doc["idle_by_cause"]
        assert len(block) == 6  # every cause
        assert _cause_sum(block, "delta_us") == pytest.approx(doc["idle"]["change_us"], abs=0.01)
        assert _cause_sum(block, "delta_us") == pytest.approx(
            _cause_sum(block, "test_us") - _cause_sum(block, "control_us"), abs=0.01
        )
        json.dumps(doc, allow_nan=False)
        to_bundle(result)
    one = control.diff(test, step=1010).to_dict()["idle_by_cause"]
    idle = control.idle(step=1010).by_cause()
    assert {c: one[c]["control_us"] for c in one} == pytest.approx(
        {c: idle[c].idle_us for c in idle}
    )
    whole = control.diff(test).to_dict()
    steps = whole["control"]["steps"]
    mean = sum(control.idle(step=n).total_ns for n in steps) / len(steps) / 1e3
    assert whole["idle"]["control_us"] == pytest.approx(mean, abs=0.01)


def test_idle_split_of_a_trace_against_itself() -> None:
    """A trace without ProfilerSteps: every gap of the whole trace, as Trace.idle finds them."""
    trace = load_trace(ALEXNET)
    block = trace.diff(trace).to_dict()["idle_by_cause"]
    assert all(entry["delta_us"] == 0.0 for entry in block.values())
    assert _cause_sum(block, "control_us") == pytest.approx(trace.idle().total_ns / 1e3, abs=0.01)


def test_json_holds_every_row_whatever_top_the_text_takes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--top shortens the text's tables; the JSON a script reads has every row, and says
    how many there are."""
    assert main(["trace", "diff", str(ALEXNET), str(SAMPLED), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    whole = diff_traces(load_trace(ALEXNET), load_trace(SAMPLED))
    assert len(whole.kernels) > 25 and len(whole.ops) > 25  # more than the default --top
    assert doc["rows"] == {"kernels": len(whole.kernels), "ops": len(whole.ops)}
    assert [r["name"] for r in doc["kernels"]] == whole.kernels.names
    assert len(doc["ops"]) == len(whole.ops)
    assert main(["trace", "diff", str(ALEXNET), str(SAMPLED), "--json", "--top", "3"]) == 0
    assert len(json.loads(capsys.readouterr().out)["kernels"]) == len(whole.kernels)
    # a library caller that asks for the top rows is told how many there were
    cut = whole.to_dict(top=3)
    assert len(cut["kernels"]) == 3 and cut["rows"] == doc["rows"]
