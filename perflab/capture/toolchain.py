"""Find the CUDA tools: ``PERFLAB_<TOOL>`` overrides, the pip wheels, Triton's copies, PATH."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = ("nvcc", "ptxas", "nvdisasm", "cuobjdump")
VERSION_TIMEOUT_S = 20


@dataclass(frozen=True)
class Tool:
    name: str
    path: Path
    origin: str  # "env", "wheel", "triton" or "path"

    @functools.cached_property
    def version(self) -> str | None:
        return tool_version(self.path)


def _wheel_bin_dirs() -> list[Path]:
    """``site-packages/nvidia/cu*/bin`` and ``nvidia/cuda_*/bin`` in every sys.path entry."""
    dirs: list[Path] = []
    for entry in sys.path:
        root = Path(entry) / "nvidia"
        if not root.is_dir():
            continue
        for sub in sorted(root.iterdir()):
            if (sub / "bin").is_dir():
                dirs.append(sub / "bin")
    return dirs


def _triton_bin_dirs() -> list[Path]:
    for entry in sys.path:
        d = Path(entry) / "triton" / "backends" / "nvidia" / "bin"
        if d.is_dir():
            return [d]
    return []


def find_tool(name: str) -> Tool | None:
    """Locate one tool; the first hit in override, wheel, Triton, PATH order wins."""
    override = os.environ.get(f"PERFLAB_{name.upper()}")
    if override:
        p = Path(override)
        return Tool(name, p, "env") if p.is_file() else None
    for origin, dirs in (("wheel", _wheel_bin_dirs()), ("triton", _triton_bin_dirs())):
        for d in dirs:
            candidate = d / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return Tool(name, candidate, origin)
    found = shutil.which(name)
    return Tool(name, Path(found), "path") if found else None


def tool_version(path: Path) -> str | None:
    try:
        out = subprocess.run(
            [str(path), "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    full = re.search(r"release \d+\.\d+, V([\d.]+)", out)
    if full:
        return full.group(1)
    short = re.search(r"release (\d+\.\d+)", out)
    return short.group(1) if short else None


def describe() -> dict[str, Any]:
    """``{tool: {"path", "origin", "version"}}``, or ``None`` for a tool not found."""
    result: dict[str, Any] = {}
    for name in TOOLS:
        tool = find_tool(name)
        result[name] = (
            None
            if tool is None
            else {"path": str(tool.path), "origin": tool.origin, "version": tool.version}
        )
    return result
