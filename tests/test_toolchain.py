"""Finding and running the CUDA tools: overrides, errors, timeouts, scratch folders."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from perflab.capture import toolchain
from perflab.capture.toolchain import Arch, Tool
from perflab.errors import InputError, ToolchainError


def test_describe_lists_every_tool_with_a_version() -> None:
    found = toolchain.describe()
    assert set(found) == set(toolchain.TOOLS)
    for info in found.values():
        assert info is not None, "the CUDA tool wheels are dependencies"
        assert info["origin"] in ("env", "wheel", "triton", "path")
        assert info["version"] and info["version"][0].isdigit()


def test_override_wins_and_missing_override_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    nvcc = toolchain.find_tool("nvcc")
    assert nvcc is not None
    monkeypatch.setenv("PERFLAB_NVCC", str(nvcc.path))
    assert toolchain.find_tool("nvcc") == Tool("nvcc", nvcc.path, "env")
    monkeypatch.setenv("PERFLAB_NVCC", str(tmp_path / "nope"))
    assert toolchain.find_tool("nvcc") is None
    with pytest.raises(ToolchainError, match=r"PERFLAB_NVCC=.*not a file"):
        toolchain.require_tool("nvcc")


def test_missing_tool_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolchain, "find_tool", lambda name: None)
    with pytest.raises(ToolchainError, match="pip install nvidia-cuda-nvdisasm"):
        toolchain.require_tool("nvdisasm")


def test_timeout_is_a_toolchain_error(tmp_path: Path) -> None:
    sleep = Tool("sleep", Path("/bin/sleep"), "path")
    with pytest.raises(ToolchainError, match=r"sleep timed out after 0\.2 s"):
        toolchain.run_tool(sleep, ["5"], cwd=tmp_path, timeout=0.2)
    with pytest.raises(InputError, match="timeout must be a positive"):
        toolchain.run_tool(sleep, ["0"], cwd=tmp_path, timeout=0)


def test_unstartable_tool_is_a_toolchain_error(tmp_path: Path) -> None:
    ghost = Tool("ghost", tmp_path / "ghost", "env")
    with pytest.raises(ToolchainError, match="cannot run"):
        toolchain.run_tool(ghost, [], cwd=tmp_path)


def test_private_tempdir_is_removed_even_on_error() -> None:
    seen: list[Path] = []

    def failing_step() -> None:
        with toolchain.private_tempdir() as tmp:
            seen.append(tmp)
            (tmp / "x.cu").write_text("boom")
            raise RuntimeError("user code failed")

    with pytest.raises(RuntimeError):
        failing_step()
    assert seen and not seen[0].exists()
    assert seen[0].parent == Path(tempfile.gettempdir())


@pytest.mark.parametrize(
    ("text", "arch"),
    [
        ("sm_90a", Arch(90, "a")),
        ("90a", Arch(90, "a")),
        ("9.0", Arch(90)),
        ("SM_80", Arch(80)),
        ("compute_89", Arch(89)),
        ("sm100f", Arch(100, "f")),
        ("12.0a", Arch(120, "a")),
    ],
)
def test_parse_arch(text: str, arch: Arch) -> None:
    assert toolchain.parse_arch(text) == arch


@pytest.mark.parametrize("text", ["hopper", "sm_9", "sm_90x", "", "sm_90a;rm -rf /"])
def test_bad_arch_text(text: str) -> None:
    with pytest.raises(InputError, match="not a GPU architecture"):
        toolchain.parse_arch(text)


def test_check_arch_against_nvcc() -> None:
    nvcc = toolchain.require_tool("nvcc")
    assert toolchain.check_arch("sm_90a", nvcc).name == "sm_90a"
    assert toolchain.check_arch("sm_100a", nvcc).name == "sm_100a"
    with pytest.raises(InputError, match=r"sm_70 is not supported by nvcc .*sm_75"):
        toolchain.check_arch("sm_70", nvcc)
    with pytest.raises(InputError, match="start at sm_90a"):
        toolchain.check_arch("sm_80a", nvcc)


def test_demangle_keeps_unmangled_names() -> None:
    names = toolchain.demangle(["_Z5copy4PK6float4PS_i", "red", "matmul_kernel"])
    assert names["red"] == "red" and names["matmul_kernel"] == "matmul_kernel"
    if toolchain.find_tool("cu++filt") or toolchain.find_tool("c++filt"):
        assert names["_Z5copy4PK6float4PS_i"] == "copy4(float4 const*, float4*, int)"
