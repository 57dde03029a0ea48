"""A roofline point is judged against the ceiling of the precision it ran in: inferred from
the dtypes of the counted ops (TF32 where torch allows it), given with --dtype / dtype=, or
the highest ceiling when unknown, and the chart says which and why. Memory levels are spelled
one way, in saved ceilings and on the chart."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perflab.analysis.precision import OpFlops, Tf32, ceiling_key, cell_precision
from perflab.analysis.roofline import Point
from perflab.cli import main as cli
from perflab.errors import InputError, SchemaError
from perflab.model.ceilings import Ceilings, all_ceilings, level_name, save_ceilings
from perflab.model.timing import TimingResult

torch = pytest.importorskip("torch")

# a CPU measured the way `perflab ceilings` keys it: bf16 is its highest compute ceiling
CPU = "CPU: test"
CPU_CEILINGS = Ceilings(CPU, "cpu", {"fp32": 100.0, "bf16": 400.0, "fp64": 50.0}, {"DRAM": 20.0})


def _chart(*points: object, **kwargs: object):  # type: ignore[no-untyped-def]
    from perflab.render.roofline import roofline

    return roofline(list(points), device=CPU, ceilings=CPU_CEILINGS, **kwargs)


# --- the precision a cell ran in ----------------------------------------------------------


def test_a_float32_cell_is_judged_against_the_fp32_ceiling() -> None:
    """The reported case: `torch.relu(x @ w)` in float32 read 'bound by bf16 peak'."""
    from perflab.render.work import count_work

    x, w = torch.randn(256, 64), torch.randn(64, 128)
    work = count_work(lambda: torch.relu(x @ w))
    assert work.flops == 2 * 256 * 64 * 128
    assert (work.precision.name, work.precision.why) == (
        "fp32",
        "the cell's matmuls ran in float32",
    )
    r = TimingResult(np.full(5, 1e6), "cpu", CPU, name="mm", flops=work.flops, bytes=work.bytes)
    r.dtype, r.dtype_why = work.precision.name, work.precision.why
    chart = _chart(r)
    (v,) = chart.verdicts
    assert v.compute_key == "fp32" and v.peak == 100e9
    assert v.compute_why == "FP32 peak (the cell's matmuls ran in float32)"
    assert "compute ceiling for mm: FP32 peak (the cell's matmuls ran in float32)" in chart.text()
    assert "the cell&#x27;s matmuls ran in float32" in chart._repr_mimebundle_()["text/html"]
    assert chart.to_dict()["points"][0]["compute_ceiling"] == v.compute_why  # type: ignore[index]


def test_the_precision_that_did_most_of_the_flops_wins() -> None:
    from perflab.render.work import count_work

    small = torch.randn(16, 16)
    big = torch.randn(256, 256, dtype=torch.bfloat16)
    image = torch.randn(1, 3, 32, 32, dtype=torch.bfloat16)
    kernel = torch.randn(8, 3, 3, 3, dtype=torch.bfloat16)
    work = count_work(lambda: (small @ small, big @ big, torch.nn.functional.conv2d(image, kernel)))
    assert work.precision.name == "bf16"
    assert work.precision.why.startswith(
        "the cell's convolutions and matmuls ran in bfloat16 (100% of its FLOPs; the rest in fp32)"
    )
    assert count_work(lambda: big.double() @ big.double()).precision.name == "fp64"


def test_no_counted_flops_is_an_unknown_precision_said_so() -> None:
    from perflab.render.work import count_work

    x = torch.randn(1000)
    precision = count_work(lambda: x + x).precision
    assert precision.name is None
    assert precision.why == "the cell's precision is unknown: torch counted no FLOPs in it"


def test_tf32_is_float32_on_a_gpu_where_torch_allows_it() -> None:
    """CUDA tensors cannot be made here: the rule is tested on what the counter records."""
    on_gpu = {OpFlops("matmul", "float32", "cuda"): 8e9, OpFlops("matmul", "float16", "cuda"): 1e9}
    assert cell_precision(on_gpu, Tf32()).name == "fp32"
    allowed = Tf32(matmul="torch.backends.cuda.matmul.allow_tf32 is on")
    tf32 = cell_precision(on_gpu, allowed)
    assert tf32.name == "tf32"
    assert tf32.why.startswith(
        "the cell's matmuls ran in float32 on TF32 tensor cores "
        "(torch.backends.cuda.matmul.allow_tf32 is on)"
    )
    # a convolution follows cuDNN's setting, and the CPU has no TF32 at all
    conv = {OpFlops("convolution", "float32", "cuda"): 1e9}
    assert cell_precision(conv, allowed).name == "fp32"
    assert cell_precision(conv, Tf32(convolution="cudnn")).name == "tf32"
    on_cpu = {OpFlops("matmul", "float32", "cpu"): 1e9}
    assert cell_precision(on_cpu, Tf32("on", "on")).name == "fp32"
    ints = cell_precision({OpFlops("matmul", "int8", "cpu"): 1e9}, Tf32())
    assert ints.name is None and "int8, which no ceiling is named for" in ints.why


def test_tf32_settings_are_read_from_torch() -> None:
    from perflab.render.work import tf32_settings

    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert tf32_settings().matmul is None
        torch.set_float32_matmul_precision("high")
        assert tf32_settings().matmul == "torch.get_float32_matmul_precision() is 'high'"
    finally:
        torch.set_float32_matmul_precision(before)


def test_each_precision_finds_its_ceiling_measured_or_on_the_spec_sheet() -> None:
    from perflab.analysis.specs import find_spec

    spec = find_spec("H100 SXM")
    assert spec is not None
    keys = spec.flops()
    assert [ceiling_key(p, keys) for p in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")] == [
        "fp64_tensor",
        "fp32",
        "tf32_tensor",
        "bf16_tensor",
        "bf16_tensor",
        "fp8_tensor",
    ]
    measured = {"fp32": 1.0, "tf32": 1.0, "bf16": 1.0, "fp16": 1.0}
    assert ceiling_key("fp16", measured) == "fp16" and ceiling_key("fp8", measured) is None
    assert ceiling_key("bf16_tensor", keys) == "bf16_tensor"  # a key stands for itself


# --- which ceiling, and why, on the chart --------------------------------------------------


def test_unknown_precision_takes_the_highest_ceiling_and_says_why() -> None:
    chart = _chart(TimingResult(np.full(5, 1e6), "cpu", CPU, name="cell", flops=1e9, bytes=1e6))
    (v,) = chart.verdicts
    assert v.compute_key == "bf16"
    assert v.compute_why == "the highest ceiling (BF16 peak): the cell's precision is unknown"
    (tuple_point,) = _chart(("k", 1e9, 1e6, 1e-3)).verdicts
    assert tuple_point.compute_why == "the highest ceiling (BF16 peak): its precision is unknown"


def test_dtype_given_overrides_and_must_be_a_ceiling_the_device_has() -> None:
    r = TimingResult(np.full(5, 1e6), "cpu", CPU, name="cell", flops=1e9, bytes=1e6)
    (v,) = _chart(r, dtype="bf16").verdicts
    assert v.compute_why == "BF16 peak (dtype=)"
    (cli_said,) = _chart(r, dtype="fp32", dtype_why="--dtype").verdicts
    assert cli_said.compute_why == "FP32 peak (--dtype)"
    with pytest.raises(InputError, match=r"dtype='fp8': CPU: test has no such ceiling"):
        _chart(r, dtype="fp8")


def test_a_precision_the_device_lacks_falls_back_to_the_highest_saying_so() -> None:
    point = Point("k", 1e9, 1e6, 1e-3, dtype="tf32", dtype_why="the cell's matmuls ran in tf32")
    (v,) = _chart(point).verdicts
    assert v.compute_key == "bf16"
    assert v.compute_why == (
        "the highest ceiling (BF16 peak): CPU: test has no tf32 ceiling (the cell's matmuls "
        "ran in tf32) (known: fp32, bf16, fp64)"
    )
    with pytest.raises(InputError, match="no 'fp31' compute ceiling"):
        _chart(Point("k", 1e9, 1e6, 1e-3, dtype="fp31"))


def test_cli_roofline_takes_dtype(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    args = ["roofline", "--device", "H200", "--point", "gemm,1e12,1e9,0.05", "-o", str(out)]
    assert cli([*args, "--text", "--dtype", "fp32"]) == 0
    assert "compute ceiling for gemm: FP32 peak (--dtype)" in capsys.readouterr().out
    assert cli([*args, "--text"]) == 0
    assert "the highest ceiling (FP8 tensor peak): its precision is unknown" in (
        capsys.readouterr().out
    )
    with pytest.raises(SystemExit):
        cli([*args, "--dtype", "fp12"])


# --- one spelling of each memory level -----------------------------------------------------


@pytest.mark.parametrize(
    ("given", "name"),
    [("l3", "L3"), ("L2", "L2"), ("L1d", "L1"), ("hbm", "HBM"), ("dram", "DRAM"),
     (" hbm  far ", "HBM far"), ("HBM far", "HBM far"), ("level 2", "level 2"), ("cache", "cache")],
)  # fmt: skip
def test_level_names_have_one_spelling(given: str, name: str) -> None:
    assert level_name(given) == name


def test_measured_levels_read_alike_in_the_file_and_on_the_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chart read 'l1', 'L2', 'l3': a measured CPU's levels, lower-cased, labelled only
    where the spec table had a label."""
    from perflab.render.roofline import roofline

    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path))
    cache = tmp_path / "ceilings.json"
    levels = {"DRAM": 20.0, "l3": 60.0, "L2": 90.0, "l1": 200.0}
    cache.write_text(
        json.dumps(
            {
                "perflab": "Ceilings",
                "schema_version": 1,
                "devices": {
                    CPU: {
                        "device": CPU,
                        "backend": "cpu",
                        "flops": {"fp32": 100.0},
                        "bandwidth": levels,
                    }
                },
            }
        )
    )
    (loaded,) = all_ceilings().values()  # a file saved with other spellings still loads
    assert list(loaded.bandwidth) == ["DRAM", "L3", "L2", "L1"]
    save_ceilings(loaded)
    saved = json.loads(cache.read_text())["devices"][CPU]["bandwidth"]
    assert list(saved) == ["DRAM", "L3", "L2", "L1"]
    chart = roofline([("k", 1e9, 1e9, 1e-3)], device=CPU)
    ceilings_line = chart.text().splitlines()[1]
    assert "L1 200 GB/s" in ceilings_line and "L3 60 GB/s" in ceilings_line
    assert "l1" not in ceilings_line and "l3" not in ceilings_line
    (at_l3,) = roofline([Point("k", 1e9, 1e9, 1e-3, level="L3")], device=CPU).verdicts
    assert at_l3.ceiling == "L3 bandwidth"


def test_two_spellings_of_one_level_in_a_file_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path))
    entry = {"device": CPU, "backend": "cpu", "bandwidth": {"L2": 90.0, "l2": 80.0}}
    (tmp_path / "ceilings.json").write_text(
        json.dumps({"perflab": "Ceilings", "schema_version": 1, "devices": {CPU: entry}})
    )
    with pytest.raises(SchemaError, match=r"'L2' and 'l2' name one memory level, L2") as info:
        all_ceilings()
    assert "ceilings.json" in str(info.value)
