"""The device spec table: complete, cited, consistent, and found by the names drivers use."""

from __future__ import annotations

import pytest

from perflab.analysis.specs import (
    BANDWIDTH_KEYS,
    COMPUTE_KEYS,
    SHARED_BYTES_PER_CLOCK_PER_SM,
    SPECS,
    describe_cpu,
    find_spec,
    parse_cpuinfo,
)

REQUIRED = ("H100 SXM", "H100 PCIe", "H200", "A100 SXM4 80GB", "L4", "B200")


def test_every_required_device_has_every_key_with_a_source() -> None:
    names = {s.name for s in SPECS}
    assert set(REQUIRED) <= names
    for spec in SPECS:
        assert set(spec.compute) == set(COMPUTE_KEYS), spec.name
        assert set(spec.bandwidth) == set(BANDWIDTH_KEYS), spec.name
        for what, _value, source, _ in spec.rows():
            assert source.strip(), f"{spec.name} {what} has no source"
        assert spec.bandwidth["hbm"].value, f"{spec.name}: device memory bandwidth missing"
        assert spec.compute["fp32"].value, f"{spec.name}: FP32 peak missing"


def test_dense_tensor_figures_are_half_the_sparse_datasheet_numbers() -> None:
    h100 = find_spec("H100 SXM")
    assert h100 is not None
    assert h100.compute["bf16_tensor"].value == pytest.approx(989.5)
    assert "sparsity" in h100.compute["bf16_tensor"].derived
    # ordering that holds on every Hopper part: FP8 > BF16 > TF32 > FP32
    for spec in SPECS:
        f = spec.flops()
        keys = [k for k in ("fp8_tensor", "bf16_tensor", "tf32_tensor", "fp32") if k in f]
        assert [f[k] for k in keys] == sorted((f[k] for k in keys), reverse=True), spec.name


def test_derived_l1_matches_its_derivation() -> None:
    for spec in SPECS:
        l1 = spec.bandwidth["l1_shared"]
        if l1.value is None:
            continue
        assert spec.sms and spec.boost_mhz
        expected = spec.sms * SHARED_BYTES_PER_CLOCK_PER_SM * spec.boost_mhz * 1e6 / 1e12
        assert l1.value == pytest.approx(expected, rel=0.01)
        assert l1.value > spec.bandwidth["hbm"].value  # type: ignore[operator]


@pytest.mark.parametrize(
    ("reported", "row"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200"),
        ("h200", "H200"),
        ("NVIDIA A100-PG509-200", "A100 SXM4 80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA B200", "B200"),
    ],
)
def test_find_spec_by_driver_names(reported: str, row: str) -> None:
    spec = find_spec(reported)
    assert spec is not None and spec.name == row


def test_unknown_devices_are_not_guessed() -> None:
    assert find_spec("Tesla T4") is None
    assert find_spec("NVIDIA L40S") is None


def test_cpu_description_from_cpuinfo_text() -> None:
    text = (
        "processor\t: 0\nmodel name\t: Example CPU 9000\ncpu MHz\t\t: 2600.000\n"
        "flags\t\t: fpu sse4_2 avx avx2 fma avx512f\n\nprocessor\t: 1\n"
        "model name\t: Example CPU 9000\n"
    )
    cpu = parse_cpuinfo(text)
    assert cpu.model == "Example CPU 9000" and cpu.logical_cpus == 2
    assert cpu.simd == ("sse4_2", "avx", "avx2", "fma", "avx512f")
    assert cpu.mhz == 2600.0 and "Example CPU 9000" in cpu.describe()
    arm = parse_cpuinfo("processor : 0\nFeatures : fp asimd sve\nCPU part : 0xd4f\n")
    assert arm.simd == ("asimd", "sve")


def test_this_cpu_is_described() -> None:
    cpu = describe_cpu()
    assert cpu.logical_cpus >= 1 and cpu.model
