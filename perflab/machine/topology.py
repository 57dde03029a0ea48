"""What links the GPUs: ``nvidia-smi topo -m`` (NVLink, PCIe switch, host bridge, NUMA
crossing) and, when given NCCL's ``NCCL_DEBUG=INFO`` output, which transport NCCL chose
for each channel (P2P over NVLink/PCIe, SHM, NET over InfiniBand/RoCE or sockets, NVLS).

Both parsers are pure functions over text, so recorded output can be read anywhere.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

from perflab.capture import env
from perflab.errors import InputError, ToolchainError, no_gpu
from perflab.model.machine import Topology

NVIDIA_SMI_TIMEOUT_S = 30
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+)$")
_CHANNEL = re.compile(
    r"NCCL INFO Channel \d+(?:/\d+)?\s*:\s*(\d+)\[[^\]]*\]\s*->\s*(\d+)\[[^\]]*\]"
    r"(?:\s*\[\w+\])?\s*via\s+(\S+)"
)
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
LINK_MEANING = {
    "X": "self",
    "SYS": "PCIe + SMP interconnect between NUMA nodes",
    "NODE": "PCIe + interconnect between host bridges in one NUMA node",
    "PHB": "PCIe + a host bridge (the CPU)",
    "PXB": "several PCIe bridges, no host bridge",
    "PIX": "at most one PCIe bridge",
}


def describe_link(code: str) -> str:
    """``"NV18"`` -> ``"18 bonded NVLinks"``; the PCIe codes from nvidia-smi's legend."""
    match = re.fullmatch(r"NV(\d+)", code)
    if match:
        return f"{match.group(1)} bonded NVLinks"
    return LINK_MEANING.get(code, code)


def parse_topo_matrix(text: str) -> tuple[list[str], list[list[str]]]:
    """Devices and the link matrix from ``nvidia-smi topo -m`` output.

    The indented header row lists devices (``GPU0``, ``NIC0``, ``mlx5_0``) before the
    affinity columns; each following row starts with a device name. Ends at the legend.
    """
    rows = [ln.rstrip() for ln in _ANSI.sub("", text).splitlines() if ln.strip()]
    # the header is indented (its first cell is empty); device rows start at column 0
    header_at = next(
        (
            i
            for i, ln in enumerate(rows)
            if ln[:1].isspace() and any(_DEVICE.match(tok) for tok in ln.split())
        ),
        None,
    )
    if header_at is None:
        raise InputError("no device header row (GPU0 GPU1 ...) found", source="nvidia-smi topo -m")
    devices = [tok for tok in rows[header_at].split() if _DEVICE.match(tok)]
    links: list[list[str]] = []
    for number, line in enumerate(rows[header_at + 1 :], start=header_at + 2):
        tokens = line.split()
        if not tokens or tokens[0].startswith("Legend") or not _DEVICE.match(tokens[0]):
            break
        cells = tokens[1 : 1 + len(devices)]
        if len(cells) < len(devices):
            raise InputError(
                f"row {tokens[0]} has {len(cells)} links for {len(devices)} devices",
                source="nvidia-smi topo -m",
                position=f"line {number}",
            )
        links.append(cells)
    if len(links) != len(devices):
        raise InputError(
            f"{len(devices)} devices in the header but {len(links)} rows",
            source="nvidia-smi topo -m",
        )
    return devices, links


def parse_nccl_debug(text: str) -> tuple[dict[str, int], str | None]:
    """Channels per transport (``{"P2P/CUMEM/read": 24, "NET/IB/0": 8}``) and the
    network NCCL reported using, from ``NCCL_DEBUG=INFO`` output."""
    transports = Counter(m.group(3) for m in _CHANNEL.finditer(text))
    network = _NETWORK.search(text)
    return dict(transports), (network.group(1) if network else None)


def run(*, nccl_log: str | None = None) -> Topology:
    """Read this machine's topology with ``nvidia-smi topo -m``; ``nccl_log`` is the text
    of an ``NCCL_DEBUG=INFO`` run to add NCCL's transport choices."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise no_gpu("topology", "it reads nvidia-smi topo -m, and nvidia-smi is not on PATH")
    env.require_gpu("topology")
    try:
        done = subprocess.run(
            [smi, "topo", "-m"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"nvidia-smi topo -m took over {NVIDIA_SMI_TIMEOUT_S} s") from None
    if done.returncode != 0:
        raise ToolchainError(f"nvidia-smi topo -m failed: {done.stderr.strip()[-300:]}")
    return from_text(done.stdout, nccl_log, source="nvidia-smi topo -m")


def from_text(topo_text: str, nccl_log: str | None = None, source: str = "recorded") -> Topology:
    devices, links = parse_topo_matrix(topo_text)
    transports, network = parse_nccl_debug(nccl_log) if nccl_log else ({}, None)
    return Topology(devices, links, transports, network, source)
