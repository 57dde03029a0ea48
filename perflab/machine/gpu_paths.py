"""What ran on a GPU, and what has changed since.

:data:`GPU_PATHS` lists the package's GPU-path source files: every module that touches a
GPU (``torch.cuda``, CuPy, a Triton kernel or ``triton.testing``, NVML, CUDA events or the
CUDA runtime), the timing engine that drives them, and gpu-check's own code (a test keeps
the list complete). Development machines have no GPU, so a change to any of them has not
run on one until a device run says otherwise.

A validation record says when they last did: ``scripts/gpu-check --record DIR`` writes one
beside its results after a run that passed on a GPU (:func:`validation_record`: device,
commit, whether the tree had uncommitted changes, date, and the sha256 of every GPU-path
file as it ran), and the package keeps the latest as ``perflab/gpu_validation.json``.
:func:`validation_status` compares it with the files of the package as installed now (no
git needed): ``perflab info`` says at which commit the GPU paths were validated and which
files changed since.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import TypedDict

PACKAGE = Path(__file__).resolve().parents[1]  # the perflab folder, in a tree or installed
RECORD = PACKAGE / "gpu_validation.json"
GIT_TIMEOUT_S = 30
RECORD_KIND = "gpu-validation"

GPU_PATHS = (
    # capture: the timing engine and everything it touches on a GPU
    "perflab/capture/env.py",
    "perflab/capture/gpu_clock.py",
    "perflab/capture/graph.py",
    "perflab/capture/nvml.py",
    "perflab/capture/nvtx.py",
    "perflab/capture/profile.py",
    "perflab/capture/compile.py",
    "perflab/capture/throttle.py",
    "perflab/capture/sampling.py",
    "perflab/capture/timer.py",
    # the microbenchmarks and the Triton kernels they launch
    "perflab/machine/_common.py",
    "perflab/machine/_bandwidth_kernels.py",
    "perflab/machine/_triton_add.py",
    "perflab/machine/_triton_chase.py",
    "perflab/machine/_triton_stream.py",
    "perflab/machine/bandwidth.py",
    "perflab/machine/collectives.py",
    "perflab/machine/h2d.py",
    "perflab/machine/latency.py",
    "perflab/machine/launch.py",
    "perflab/machine/matmul.py",
    # gpu-check and gpu-record: what a device run runs
    "perflab/machine/gpu_check.py",
    "perflab/machine/gpu_check_run.py",
    "perflab/machine/gpu_check_engine.py",
    "perflab/machine/gpu_check_do_bench.py",
    "perflab/machine/gpu_check_bench.py",
    "perflab/machine/gpu_record.py",
    "perflab/machine/gpu_record_e2e.py",
)


class ValidationRecord(TypedDict, total=False):
    """What a device run validated: the GPU, the commit (None where git was not there)
    and whether the tree had uncommitted changes, the date, and each GPU-path file's
    sha256 as it ran; ``note`` says anything else about how it was made."""

    perflab: str
    device: str
    commit: str | None
    dirty: bool | None
    date: str
    files: dict[str, str]
    note: str


class ValidationStatus(TypedDict):
    """``perflab info``'s ``gpu_validation``: the record and the GPU-path files that
    differ from it now (changed, new on a GPU path, or gone), by path."""

    device: str
    commit: str | None
    dirty: bool | None
    date: str
    files: dict[str, str]
    changed_since: list[str]


def sha256_of(path: Path) -> str | None:
    """The file's sha256 in hex, or None when it is not there."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def checksums(root: Path, paths: tuple[str, ...] = GPU_PATHS) -> dict[str, str]:
    """The sha256 of each of ``paths`` (relative to ``root``, the folder holding
    ``perflab/``) that is there."""
    found = {rel: sha256_of(root / rel) for rel in paths}
    return {rel: digest for rel, digest in found.items() if digest is not None}


def _git(root: Path, *args: str) -> str | None:
    """git's output in ``root``, or None where git or the repository is not there."""
    from perflab.capture import _proc

    try:
        done = _proc.run(["git", *args], timeout=GIT_TIMEOUT_S, cwd=root)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def commit_of(root: Path) -> tuple[str | None, bool | None]:
    """``git rev-parse HEAD`` in ``root``, and whether the tree differs from it (tracked
    files changed, or files git does not ignore added); (None, None) without git."""
    head = _git(root, "rev-parse", "HEAD")
    if head is None:
        return None, None
    status = _git(root, "status", "--porcelain")
    return head.strip(), None if status is None else bool(status.strip())


def validation_record(device: str, date: str, root: Path) -> ValidationRecord:
    """The record of a run on ``device`` at ``date`` from the source tree at ``root``."""
    commit, dirty = commit_of(root)
    return {
        "perflab": RECORD_KIND,
        "device": device,
        "commit": commit,
        "dirty": dirty,
        "date": date,
        "files": checksums(root),
    }


def adopt(record: ValidationRecord, root: Path) -> ValidationRecord:
    """The record to keep in the package, from one a device run wrote: a run from a copy
    of the tree without git has no commit, which is taken from this checkout when every
    GPU-path file it recorded is the one committed here (unchanged since HEAD and of the
    same sha256). Raises ValueError when they differ: the record is then not of HEAD."""
    if record.get("commit"):
        return record
    commit, _ = commit_of(root)
    if commit is None:
        raise ValueError(f"the record has no commit and {root} is not a git checkout")
    files = record.get("files", {})
    differ = sorted(changed_since(record, root))
    edited = _git(root, "status", "--porcelain", "--", *files)
    if differ or edited is None or edited.strip():
        what = ", ".join(differ) or "uncommitted changes to its files"
        raise ValueError(f"the record is not of this checkout's HEAD ({commit[:12]}): {what}")
    note = f"commit taken from the checkout the run's tree was copied from ({commit[:12]})"
    return {**record, "commit": commit, "note": note}


def write_record(record: ValidationRecord, path: Path) -> None:
    from perflab.model.serialize import write_text

    write_text(path, json.dumps(record, indent=1, sort_keys=True) + "\n")


def read_record(path: Path = RECORD) -> ValidationRecord | None:
    """The record at ``path``; None when there is none. A record of another shape is a
    ValueError saying what is wrong."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if not isinstance(doc, dict) or doc.get("perflab") != RECORD_KIND:
        raise ValueError(f"{path}: not a GPU validation record")
    files = doc.get("files")
    texts = [doc.get("device"), doc.get("date")]
    if not all(isinstance(t, str) for t in texts) or not isinstance(files, dict):
        raise ValueError(f"{path}: a GPU validation record needs device, date and files")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ValueError(f"{path}: files must map paths to sha256 digests")
    record: ValidationRecord = doc  # type: ignore[assignment]  # checked field by field above
    return record


def changed_since(record: ValidationRecord, root: Path) -> list[str]:
    """The GPU-path files under ``root`` (the folder holding ``perflab/``) whose sha256
    differs from the record's, that the record does not have (new on a GPU path), or that
    are gone; sorted by path."""
    recorded = record.get("files", {})
    now = checksums(root, tuple(sorted(set(GPU_PATHS) | set(recorded))))
    return sorted(path for path in set(now) | set(recorded) if now.get(path) != recorded.get(path))


def validation_status(path: Path = RECORD, root: Path = PACKAGE.parent) -> ValidationStatus | None:
    """The record at ``path`` with the files changed since, against the package as it is
    under ``root``; None when there is no record."""
    record = read_record(path)
    if record is None:
        return None
    return {
        "device": record["device"],
        "commit": record.get("commit"),
        "dirty": record.get("dirty"),
        "date": record["date"],
        "files": record["files"],
        "changed_since": changed_since(record, root),
    }


def status_line(status: ValidationStatus | None) -> str:
    """One line for ``perflab info``: where and when the GPU paths were validated, and
    the files changed since (not validated on a GPU)."""
    if status is None:
        return "GPU paths: no validation record (never run on a GPU by gpu-check --record)"
    commit = (status["commit"] or "an unknown commit")[:12]
    if status["dirty"]:
        commit += " with uncommitted changes"
    head = f"GPU paths validated on {status['device']} at {commit} ({status['date'][:10]})"
    changed = status["changed_since"]
    if not changed:
        return f"{head}; no file changed since"
    return f"{head}; {len(changed)} files changed since, not validated on a GPU: " + ", ".join(
        changed
    )
