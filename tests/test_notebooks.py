"""Every notebook in notebooks/ executes headless on this machine, with no error output."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 300


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_without_errors(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", (
                f"{path.name} cell {index}: {output.get('ename')}: {output.get('evalue')}"
            )
            text = "".join(output.get("text", "")) + str(
                output.get("data", {}).get("text/plain", "")
            )
            assert "Traceback (most recent call last)" not in text, f"{path.name} cell {index}"
