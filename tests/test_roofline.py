"""Roofline maths, points from every source, rendering and the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from data_paths import ROOT, TRACES
from hypothesis import given, settings
from hypothesis import strategies as st

from perflab.analysis.roofline import Point, Roof, assess, attainable
from perflab.cli import main as cli
from perflab.errors import InputError
from perflab.model.timing import TimingResult

ROOF = Roof("toy", {"fp32": 100e12, "bf16_tensor": 1000e12}, {"hbm": 2e12, "l2": 8e12}, "toy")


def test_attainable_is_the_lower_roof() -> None:
    assert attainable(10, 100e12, 2e12) == 20e12
    assert attainable(1000, 100e12, 2e12) == 100e12
    assert attainable(math.inf, 100e12, 2e12) == 100e12


def test_memory_bound_point_names_its_level_and_headroom() -> None:
    v = assess(Point("axpy", 2e9, 12e9, 12e-3), ROOF)  # 1 TB/s at 1/6 FLOP/B
    assert v.bound == "memory" and v.ceiling == "HBM bandwidth"
    assert v.fraction == pytest.approx(0.5) and v.headroom == pytest.approx(2.0)
    at_l2 = assess(Point("axpy", 2e9, 12e9, 12e-3, level="l2"), ROOF)
    assert at_l2.ceiling == "L2 bandwidth" and at_l2.fraction == pytest.approx(0.125)


def test_compute_bound_point_uses_its_dtype() -> None:
    v = assess(Point("gemm", 2e12, 1e9, 0.04, dtype="fp32"), ROOF)  # 50 TFLOP/s, AI 2000
    assert v.bound == "compute" and v.ceiling == "FP32 peak"
    assert v.fraction == pytest.approx(0.5) and v.ridge == pytest.approx(50)
    best = assess(Point("gemm", 2e12, 1e9, 0.04), ROOF)  # no dtype: the highest peak
    assert best.compute_key == "bf16_tensor" and best.fraction == pytest.approx(0.05)


def test_pure_copies_compare_bandwidth() -> None:
    v = assess(Point("copy", 0, 1e9, 1e-3), ROOF)
    assert v.bound == "memory" and v.fraction == pytest.approx(0.5)


@given(st.floats(1e3, 1e15), st.floats(1e3, 1e13), st.floats(1e-7, 10))
@settings(max_examples=200, deadline=None)
def test_verdicts_are_consistent(flops: float, nbytes: float, seconds: float) -> None:
    v = assess(Point("k", flops, nbytes, seconds), ROOF)
    assert v.attainable <= v.peak * (1 + 1e-12)
    assert v.attainable <= v.bandwidth * v.point.intensity * (1 + 1e-12)
    assert v.fraction * v.headroom == pytest.approx(1.0)
    assert (v.bound == "compute") == (v.point.intensity >= v.ridge)


@pytest.mark.parametrize(
    "bad",
    [("k", -1, 1, 1), ("k", 1, 1, 0), ("k", 0, 0, 1), ("k", math.nan, 1, 1), ("k", 1, 1, math.inf)],
)
def test_bad_points_are_input_errors(bad: tuple[str, float, float, float]) -> None:
    from perflab.render.roofline import roofline

    with pytest.raises(InputError, match="roofline point 0"):
        roofline([bad], device="H200")


def test_points_from_timing_results() -> None:
    from perflab.render.roofline import roofline

    r = TimingResult(np.full(5, 1e6), "cpu", "cpu", name="mm", flops=2e9, bytes=3e6)
    chart = roofline([r], device="H100 SXM")
    (v,) = chart.verdicts
    assert v.point.seconds == pytest.approx(1e-3) and v.point.flops_per_s == pytest.approx(2e12)
    assert "spec sheet" in chart.text() and "mm" in chart.text()
    with pytest.raises(InputError, match="needs flops"):
        roofline([TimingResult(np.ones(3), "cpu", "cpu")], device="H200")


def test_measured_ceilings_replace_the_spec_sheet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ceilings = pytest.importorskip("perflab.model.ceilings")
    from perflab.render.roofline import roofline

    monkeypatch.setenv(ceilings.CACHE_ENV, str(tmp_path))
    ceilings.save_ceilings(
        ceilings.Ceilings(
            "NVIDIA H200",
            "cuda",
            flops={"bf16": 700_000.0},
            bandwidth={"HBM": 4000.0, "L2": 9000.0},
        )
    )
    chart = roofline([("k", 1e9, 1e9, 1e-3)], device="NVIDIA H200")
    assert chart.roof.measured and chart.roof.memory == {"hbm": 4e12, "l2": 9e12}
    assert "measured" in chart.text()
    spec_only = roofline([("k", 1e9, 1e9, 1e-3)], device="H200")  # not measured under this name
    assert not spec_only.roof.measured


def test_hierarchical_points_from_ncu() -> None:
    path = TRACES / "ncu" / "copy_blocked.csv"
    from perflab.io import load_ncu
    from perflab.render.roofline import points_from_ncu, roofline

    report = load_ncu(path)
    (p,) = points_from_ncu(report)  # this report has DRAM throughput only, no FLOP counters
    duration = report.metric("Duration").value
    rate = next(
        m.value for m in report.metrics if m.name == "Memory Throughput" and m.unit == "byte/s"
    )
    assert p.seconds == pytest.approx(duration * 1e-9)
    assert p.bytes == pytest.approx(rate * duration * 1e-9) and p.level == "hbm"
    assert roofline([p], device="H100 PCIe").verdicts[0].bound == "memory"


@pytest.mark.parametrize("name", ["matmul", "triton-add"])
def test_a_recorded_h200_report_gives_its_dram_point_whatever_the_rate_unit(name: str) -> None:
    """The H200 recordings give Memory Workload Analysis's throughput in Gbyte/s or Tbyte/s,
    beside the Speed Of Light section's "Memory Throughput" in percent of peak."""
    from perflab.io import load_ncu
    from perflab.render.roofline import points_from_ncu

    report = load_ncu(ROOT / "notebooks" / "recordings" / "h200" / "04-ncu" / f"{name}.csv")
    rate = next(
        m
        for m in report.metrics
        if m.name == "Memory Throughput" and m.section == "Memory Workload Analysis"
    )
    assert rate.unit in ("Gbyte/s", "Tbyte/s") and rate.value is not None
    scale = 1e9 if rate.unit == "Gbyte/s" else 1e12
    (p,) = points_from_ncu(report)
    assert p.level == "hbm" and p.bytes == pytest.approx(rate.value * scale * p.seconds)


def test_ncu_raw_metrics_give_one_point_per_level() -> None:
    from perflab.io.ncu import NcuMetric, NcuReport
    from perflab.render.roofline import points_from_ncu

    metrics = [
        NcuMetric(0, "s", name, unit, value, str(value))
        for name, unit, value in (
            ("gpu__time_duration.sum", "usecond", 10.0),
            ("dram__bytes.sum", "byte", 1e6),
            ("lts__t_bytes.sum", "byte", 4e6),
            ("l1tex__t_bytes.sum", "byte", 9e6),
            ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", 1e6),
        )
    ]
    pts = points_from_ncu(NcuReport("x", [{"Kernel Name": "k"}], metrics))
    assert {p.level: p.bytes for p in pts} == {"hbm": 1e6, "l2": 4e6, "l1_shared": 9e6}
    assert all(p.flops == 2e6 and p.seconds == pytest.approx(1e-5) for p in pts)


def test_count_flops_bytes_of_a_matmul() -> None:
    torch = pytest.importorskip("torch")
    from perflab.render.roofline import count_flops_bytes

    a, b = torch.randn(64, 32), torch.randn(32, 16)
    flops, nbytes = count_flops_bytes(lambda: a @ b)
    assert flops == 2 * 64 * 32 * 16
    assert nbytes == (64 * 32 + 32 * 16 + 64 * 16) * 4  # read a, b once; write the result


def test_bundle_and_saved_file_escape_kernel_names(tmp_path: Path) -> None:
    from perflab.render.roofline import roofline

    name = '<img src=x onerror="window.__pwned=1">'
    chart = roofline([(name, 1e9, 1e8, 1e-4)], device="A100")
    bundle = chart._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "image/svg+xml"}
    for html in (bundle["text/html"], chart.save(tmp_path / "r.html").read_text("utf-8")):
        assert name not in html and "&lt;img src=x" in html
    assert name not in bundle["image/svg+xml"] and "&lt;img src=x" in bundle["image/svg+xml"]
    assert chart.to_pandas().loc[0, "bound"] in ("memory", "compute")


def test_cli_roofline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert (
        cli(
            [
                "roofline",
                "--device",
                "L4",
                "--point",
                "gemm,1e12,1e9,0.05",
                "-o",
                str(out),
                "--text",
            ]
        )
        == 0
    )
    assert "gemm" in capsys.readouterr().out and out.stat().st_size > 100_000
    assert cli(["roofline", "--device", "Tesla T4", "-o", str(out)]) == 2
    assert cli(["roofline", "--device", "H200", "--point", "x,1,2", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not in the spec table" in err and "NAME,FLOPS,BYTES,SECONDS" in err


def test_ceiling_and_point_labels_never_overlap() -> None:
    from perflab.render.labels import LabelPlacer, overlap
    from perflab.render.roofline import roofline

    # H200's peaks are 2x apart (FP8 / BF16 / TF32), close on a log axis; points "a" and "b"
    # sit almost on top of each other, and "c" next to the ceilings' labels
    points = [("a", 1e12, 1e9, 1e-3), ("b", 1.05e12, 1e9, 1e-3), ("c", 9e14, 1e9, 1e-3)]
    fig = roofline(points, device="H200").figure()
    placer = LabelPlacer(
        (fig.x_range.start, fig.x_range.end), (fig.y_range.start, fig.y_range.end), 760, 480
    )
    boxes = []
    for labels in [m for m in fig.center if type(m).__name__ == "LabelSet"]:
        data = labels.source.data
        left = labels.text_align == "right"
        n = len(data["x"])
        dxs = data["dx"] if "dx" in data else [labels.x_offset] * n
        for x, y, text, dx, dy in zip(
            data["x"], data["y"], data.get("text", data.get("label")), dxs, data["dy"], strict=True
        ):
            boxes.append(placer.box(x, y, text, dx, dy, left))
    assert len(boxes) == 5 + 3  # five distinct peaks, three points
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not overlap(a, b), (a, b)


def test_a_point_above_its_ceiling_is_explained() -> None:
    from perflab.render.roofline import roofline

    # 1e18 FLOP/s: far above any spec-sheet peak
    chart = roofline([("too fast", 1e15, 1e9, 1e-3), ("fine", 1e12, 1e9, 1e-3)], device="H200")
    text = chart.text()
    assert "note: too fast is at" in text and "counts or time are off" in text
    assert "fine is at" not in text
    assert "counts or time are off" in chart._repr_mimebundle_()["text/html"]


def test_performance_axis_reads_in_si_units() -> None:
    import xml.etree.ElementTree as ET

    from perflab.render.roofline import roofline

    svg = roofline([("a", 1e12, 1e9, 1e-3)], device="H200")._repr_mimebundle_()["image/svg+xml"]
    words = {t.text for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")}
    assert {"1 TFLOP/s", "1 PFLOP/s"} <= words


def test_ceilings_alone_say_no_points_instead_of_an_empty_table(tmp_path: Path) -> None:
    from perflab.render.roofline import roofline

    chart = roofline([], device="H200")
    html = chart._repr_mimebundle_()["text/html"]
    saved = chart.save(tmp_path / "r.html").read_text("utf-8")
    for page in (html, saved):
        assert "no points" in page and "<th>bound by</th>" not in page
    assert "no points" in chart._repr_mimebundle_()["text/plain"]


class _CountedPasses(list):  # type: ignore[type-arg]
    """A list that counts the passes made over it."""

    passes = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.passes += 1
        return super().__iter__()


def test_points_from_ncu_pass_over_the_metrics_once() -> None:
    # a pass per kernel made `perflab roofline --ncu` of 3,000 kernels take over a minute
    from perflab.model.ncu import NcuMetric, NcuReport
    from perflab.render.roofline import points_from_ncu

    metrics = _CountedPasses(
        NcuMetric(k, "s", name, unit, value, str(value))
        for k in range(200)
        for name, unit, value in (
            ("gpu__time_duration.sum", "ns", 1000.0 + k),
            ("dram__bytes.sum", "byte", 1e6),
        )
    )
    kernels = [{"Kernel Name": f"k{k}"} for k in range(200)]
    points = points_from_ncu(NcuReport("x.csv", kernels, metrics))
    assert [p.name for p in points] == [f"k{k}" for k in range(200)]
    assert points[7].seconds == pytest.approx(1007e-9)
    assert metrics.passes == 1


def test_a_chart_of_many_points_names_the_longest_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # naming every point placed each label clear of every marker and label before it: time
    # grew with the square of the points (1,000 ncu kernels: 9 s; 3,000: over a minute)
    from perflab.render import labels
    from perflab.render.roofline import MAX_LABELS, roofline

    checks = []
    overlap = labels.overlap

    def counted_overlap(a: labels.Box, b: labels.Box) -> bool:
        checks.append(1)
        return overlap(a, b)

    n = 300
    points = [(f"k{i}", 1e9 * (1 + i % 17), 1e8 * (1 + i % 13), 1e-4 * (1 + i)) for i in range(n)]
    chart = roofline(points, device="H200")
    monkeypatch.setattr(labels, "overlap", counted_overlap)
    fig = chart.figure()
    named = [
        text
        for layout in fig.center
        if type(layout).__name__ == "LabelSet" and "label" in layout.source.data
        for text in layout.source.data["label"]
    ]
    assert sorted(named) == sorted(f"k{i}" for i in range(n - MAX_LABELS, n))  # the longest
    assert f"names beside the {MAX_LABELS} longest of {n} points" in fig.title.text
    # each label is checked against the markers and labels taken: linear in the points
    assert len(checks) <= len(labels.CANDIDATES) * MAX_LABELS * (n + MAX_LABELS + 10)
