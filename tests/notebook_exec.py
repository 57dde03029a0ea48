"""Execute the notebooks in notebooks/ and check their stored outputs.

Shared by the tests (tests/test_notebooks.py, tests/test_binder.py) and by `make notebooks`,
which runs ``python tests/notebook_exec.py`` to re-execute every notebook in place, with outputs.
A notebook executed this way records a digest of its cells' sources in its metadata, so a test
can tell stored outputs that belong to the current sources from stale ones.
"""

from __future__ import annotations

import hashlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
from data_paths import ROOT
from nbclient import NotebookClient

NOTEBOOK_DIR = ROOT / "notebooks"
CELL_TIMEOUT_S = 300
MAX_NOTEBOOK_BYTES = 3 * 1024 * 1024
METADATA_KEY = "perflab"


def notebook_paths(directory: Path = NOTEBOOK_DIR) -> list[Path]:
    return sorted(directory.glob("*.ipynb"))


def sources_digest(nb: Any) -> str:
    """A digest of every cell's type and source, in order (outputs excluded)."""
    digest = hashlib.sha256()
    for cell in nb.cells:
        digest.update(cell.cell_type.encode() + b"\0" + cell.source.encode() + b"\0")
    return digest.hexdigest()


def kernelspec(kernel_name: str = "python3") -> dict[str, str]:
    """The installed kernel's spec as a notebook records it. A notebook whose recorded
    display name differs from the running kernel's is changed by JupyterLab as soon as the
    kernel starts, so it opens with unsaved changes."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(kernel_name)
    return {"display_name": spec.display_name, "language": spec.language, "name": kernel_name}


def execute(path: Path, kernel_name: str = "python3") -> tuple[Any, float]:
    """Run the notebook at ``path`` from its own folder; (executed notebook, seconds)."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = kernelspec(kernel_name)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    return nb, time.perf_counter() - start


def execute_all(paths: list[Path], workers: int = 2, **kwargs: Any) -> dict[Path, Any]:
    """Execute several notebooks, ``workers`` kernels at a time: much of a notebook's time
    is spent waiting (kernel start, subprocesses, timed sleeps), not computing."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {path: pool.submit(_execute_or_error, path, **kwargs) for path in paths}
        return {path: future.result() for path, future in futures.items()}


def _execute_or_error(path: Path, **kwargs: Any) -> Any:
    try:
        return execute(path, **kwargs)
    except Exception as exc:  # reported per notebook by the caller
        return exc


def output_problems(nb: Any, name: str) -> list[str]:
    """Error outputs and tracebacks in a notebook's outputs."""
    problems = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(
                    f"{name} cell {index}: {output.get('ename')}: {output.get('evalue')}"
                )
            text = "".join(output.get("text", "")) + str(
                output.get("data", {}).get("text/plain", "")
            )
            if "Traceback (most recent call last)" in text:
                problems.append(f"{name} cell {index}: a traceback in its output")
            if "the check on this solution: ✘" in text or "the check on this solution: ?" in text:
                problems.append(f"{name} cell {index}: an exercise's check rejects its solution")
    return problems


def stored_problems(path: Path) -> list[str]:
    """What is wrong with the outputs committed in ``path``: missing or out-of-order runs,
    outputs of older sources, errors, a file too large to share."""
    name = path.name
    problems = []
    size = path.stat().st_size
    if size >= MAX_NOTEBOOK_BYTES:
        problems.append(
            f"{name}: {size / 2**20:.2f} MiB, over the {MAX_NOTEBOOK_BYTES >> 20} MiB limit"
        )
    nb = nbformat.read(path, as_version=4)
    recorded = nb.metadata.get(METADATA_KEY, {}).get("sources_sha256")
    if recorded != sources_digest(nb):
        problems.append(
            f"{name}: the stored outputs are not from the current cells (make notebooks)"
        )
    counts = [cell.get("execution_count") for cell in nb.cells if cell.cell_type == "code"]
    if None in counts:
        problems.append(f"{name}: {counts.count(None)} code cell(s) not executed")
    elif counts != list(range(1, len(counts) + 1)):
        problems.append(f"{name}: code cells not executed once each, top to bottom: {counts}")
    return problems + output_problems(nb, name)


def write_executed(path: Path, nb: Any) -> None:
    nb.metadata[METADATA_KEY] = {"sources_sha256": sources_digest(nb)}
    nbformat.write(nb, path)


def main(argv: list[str]) -> int:
    """``make notebooks``: re-execute the notebooks (all, or those named) in place, one
    kernel at a time: the measurements a notebook stores (ceilings, latencies, timings) are
    then not taken beside another notebook's work (the roofline notebook's ceilings came out
    at half this machine's rate with two kernels at once, below its own kernels)."""
    paths = [NOTEBOOK_DIR / name for name in argv] if argv else notebook_paths()
    failed = 0
    for path, result in execute_all(paths, workers=1).items():
        if isinstance(result, BaseException):
            print(f"{path.name}: FAILED: {str(result)[-2000:]}", file=sys.stderr)
            failed += 1
            continue
        nb, seconds = result
        write_executed(path, nb)
        problems = stored_problems(path)
        size = path.stat().st_size / 2**20
        print(
            f"{path.name}: executed in {seconds:.0f} s, {size:.2f} MiB"
            + "".join(f"\n  problem: {p}" for p in problems)
        )
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
