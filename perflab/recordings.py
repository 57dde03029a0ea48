"""Results recorded on a GPU for the course's notebooks, replayed where there is no GPU.

``scripts/gpu-record`` and ``scripts/gpu-check --record`` write them (one folder per
notebook, a ``MANIFEST.json`` with the device, driver, date and versions); a notebook
loads one with :func:`recorded` and prints :func:`label` beside it, so that a recorded
number is never mistaken for one measured now.

>>> from pathlib import Path
>>> label(Path("no-such-folder")).startswith("no recording")
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.errors import InputError

if TYPE_CHECKING:
    from perflab.model.ceilings import Ceilings
    from perflab.model.machine import BenchResult, CollectiveResult
    from perflab.model.timing import TimingResult
    from perflab.model.trace import Trace

    Recording = TimingResult | BenchResult | CollectiveResult | Ceilings | Trace

# the notebooks' recordings, relative to the notebooks folder (where they run)
RECORDINGS = Path("recordings") / "h200"


def recorded(path: str | os.PathLike[str], root: str | os.PathLike[str] = RECORDINGS) -> Recording:
    """The result saved at ``root/path``, loaded as what it is: a TimingResult, a
    microbenchmark's BenchResult, measured Ceilings, or a trace (``.json.gz``). Each says
    where it came from (``replayed from ...: device, date, versions (not measured now)``)."""
    target = Path(root) / path
    if not target.is_file():
        raise InputError(f"no recording at {target}", source=str(target))
    if target.name.endswith((".json.gz", ".pt.trace.json")):
        from perflab.io import load_trace

        return load_trace(target)
    kind = _kind_of(target)
    if kind == "TimingResult":
        from perflab.model.timing import TimingResult

        return TimingResult.load(target)
    if kind == "Ceilings":
        from perflab.model.ceilings import all_ceilings

        (found,) = all_ceilings(target).values()
        return found
    from perflab.model.machine import load_result

    return load_result(target)


def _kind_of(path: Path) -> str:
    """The kind a perflab result file names in its header (``"perflab": "TimingResult"``)."""
    from perflab.model.serialize import MAX_JSON_BYTES, parse_json, read_limited

    doc = parse_json(read_limited(path, MAX_JSON_BYTES), str(path))
    kind = doc.get("perflab") if isinstance(doc, dict) else None
    if not isinstance(kind, str):
        raise InputError("not a perflab result: no 'perflab' kind field", source=str(path))
    return kind


def label(root: str | os.PathLike[str] = RECORDINGS) -> str:
    """One line naming the recordings' GPU, driver, date and versions, and saying that
    they were recorded, not measured now."""
    import json

    manifest = Path(root) / "MANIFEST.json"
    try:
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        env = doc["environment"]
        versions = env["versions"]
        date = str(doc["created"])[:10]
        device = str(doc["device"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"no recording found at {root}"
    tools = ", ".join(
        f"{name} {versions[key]}"
        for name, key in (("CUDA", "torch_cuda"), ("torch", "torch"), ("triton", "triton"))
        if key in versions
    )
    return (
        f"recorded on an {device} (driver {env.get('driver')}, {tools}) on {date} by "
        "scripts/gpu-record: recorded, not measured now"
    )


MANIFEST = "MANIFEST.json"


def checksums(root: str | os.PathLike[str]) -> dict[str, str]:
    """The sha256 of every file under ``root`` but the manifest, by path relative to it
    (``/``-separated, sorted): what a recording's MANIFEST.json lists as ``checksums``."""
    import hashlib

    base = Path(root)
    out = {}
    for path in sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = path.relative_to(base).as_posix()
        if rel != MANIFEST:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def manifest_problems(root: str | os.PathLike[str] = RECORDINGS) -> list[str]:
    """What does not match between a recording folder and its MANIFEST.json: a file present
    but not listed, a file listed but absent (unless the manifest says it was not kept),
    or a checksum that differs (a file edited after it was recorded)."""
    import json

    doc = json.loads((Path(root) / MANIFEST).read_text(encoding="utf-8"))
    listed = doc.get("checksums")
    if not isinstance(listed, dict):
        return [f"{MANIFEST} has no checksums"]
    present = checksums(root)
    not_kept = set(doc.get("not_kept", {}))
    problems = [f"{rel}: present but not in {MANIFEST}" for rel in present if rel not in listed]
    for rel, digest in listed.items():
        if rel not in present:
            problems.append(f"{rel}: in {MANIFEST} but absent")
        elif present[rel] != digest:
            problems.append(f"{rel}: its checksum differs from the one recorded")
    problems += [
        f"{rel}: written but neither kept nor listed as not kept"
        for rel in doc.get("files", [])
        if rel not in listed and rel not in not_kept
    ]
    return problems
