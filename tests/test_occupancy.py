"""Occupancy against hand-worked cuda_occupancy.h arithmetic for Hopper and Ampere."""

from __future__ import annotations

import pytest

from perflab.analysis.occupancy import occupancy
from perflab.errors import InputError
from perflab.model.arch import LIMITS, Arch, cc_of, limits_for, parse_arch


def test_light_kernel_is_limited_by_warps() -> None:
    occ = occupancy("sm_90a", 256, registers=24)
    # 64 warps per SM / 8 warps per block = 8 blocks; 24 regs would allow 80 warps
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.occupancy) == (8, 64, 1.0)
    assert occ.limiting == ("warps",)


def test_ties_name_every_limiting_factor() -> None:
    # 32 regs: 1024 per warp, 16 warps per partition = exactly 64 warps as well
    assert occupancy("sm_90a", 256, registers=32).limiting == ("warps", "registers")


def test_register_heavy_kernel_is_limited_by_registers() -> None:
    # 128 regs x 32 lanes = 4096 per warp; 16384 per partition -> 4 warps x 4 partitions
    occ = occupancy("sm_90a", 128, registers=128)
    assert (occ.blocks_per_sm, occ.warps_per_sm) == (4, 16)
    assert occ.limiting == ("registers",)
    assert "25%" in occ.summary() and "registers" in occ.summary()


def test_register_rounding_to_allocation_unit() -> None:
    # 33 regs -> 1056 per warp, rounded to 1280: 12 warps per partition -> 48 warps
    occ = occupancy("sm_90", 32, registers=33)
    assert occ.limits["registers"] == 48


def test_shared_memory_limit_counts_reserved_kilobyte() -> None:
    # 48 KiB + 1 KiB reserved = 50176 B; 228 KiB per SM -> 4 blocks
    occ = occupancy("sm_90a", 128, registers=32, shared_dynamic=48 * 1024)
    assert occ.blocks_per_sm == 4
    assert occ.limiting == ("shared memory",)
    assert occ.shared_per_block == 50176


def test_ampere_has_fewer_bytes_and_blocks() -> None:
    occ = occupancy("sm_80", 128, registers=32, shared_static=48 * 1024)
    assert occ.blocks_per_sm == 164 * 1024 // (49 * 1024)  # 3
    assert occupancy("sm_86", 64, registers=16).limits["blocks"] == 16


def test_too_much_shared_memory_does_not_fit() -> None:
    occ = occupancy("sm_90a", 128, registers=32, shared_dynamic=228 * 1024)
    assert occ.blocks_per_sm == 0 and "does not fit" in occ.summary()


def test_too_many_registers_per_block_does_not_fit() -> None:
    occ = occupancy("sm_90a", 1024, registers=255)
    assert occ.blocks_per_sm == 0 and occ.limiting == ("registers",)


@pytest.mark.parametrize("block", [0, 1025, -4])
def test_bad_block_sizes(block: int) -> None:
    with pytest.raises(InputError, match="block size"):
        occupancy("sm_90a", block, registers=32)


def test_unknown_arch_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="no SM limits"):
        limits_for("sm_70")
    with pytest.raises(InputError, match="not a GPU architecture"):
        cc_of("hopper")


def test_table_is_consistent() -> None:
    for cc, sm in LIMITS.items():
        assert sm.cc == cc
        assert sm.shared_per_block <= sm.shared_per_sm
        assert sm.max_warps * sm.warp_size <= 2048


@pytest.mark.parametrize(
    ("cc", "target"),
    [
        (75, "sm_75"),
        (86, "sm_86"),
        (89, "sm_89"),
        (90, "sm_90a"),
        (100, "sm_100a"),
        (121, "sm_121a"),
    ],
)
def test_preferred_target_per_compute_capability(cc: int, target: str) -> None:
    assert Arch.preferred(cc).name == target


def test_suffix_rules_come_from_the_table() -> None:
    assert (
        parse_arch("sm_80a").suffix_error() == "sm_80a: arch-specific 'a' targets start at sm_90a"
    )
    assert parse_arch("sm_90f").suffix_error() == "sm_90f: family 'f' targets start at sm_100f"
    assert parse_arch("sm_90a").suffix_error() is None
    assert cc_of("9.0") == cc_of("compute_90") == cc_of("sm_90a") == 90


def test_default_arch_follows_the_current_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import perflab.capture.env as env
    from perflab.frontend import default_arch

    devices = [{"compute_capability": "?"}, {"compute_capability": "10.3"}]
    monkeypatch.setattr(env, "gpu_devices", lambda: devices)
    assert default_arch() == "sm_103a"
    monkeypatch.setattr(env, "gpu_devices", lambda: [{"compute_capability": "8.9"}])
    assert default_arch() == "sm_89"
    monkeypatch.setattr(env, "gpu_devices", list)
    assert default_arch() == "sm_90a"
