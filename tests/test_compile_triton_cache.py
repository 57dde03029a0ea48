"""Triton source <-> PTX/SASS line links survive a warm Triton cache.

Two Jupyter kernels run one after the other (nbclient) with one TRITON_CACHE_DIR: the
first compiles the kernel, the second (as after a kernel restart) gets Triton's cached
PTX, whose line info names the first kernel's cell file (ipykernel names cell files per
process). Both must link the same number of source lines. Two plain Python processes do
not show this: their file names are the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

pytest.importorskip("triton")
pytest.importorskip("nbclient")

CELL_TIMEOUT_S = 300

TRITON_CELL = """%%ptx -v res -o --signature "*fp32,*fp32,*fp32,i32" --constexprs BLOCK=1024
import triton
import triton.language as tl

@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
"""

COUNT_CELL = """import json
k = res.kernel()
linked = {s.line for s in k.sass_lines if s.line} | {n for n in k.ptx_lines_source if n}
cell_file = add.fn.__code__.co_filename
print(json.dumps({"linked": sorted(linked), "cell_file": cell_file, "ptx_file": res.source_path}))
"""


def run_kernel(workdir: Path) -> dict[str, Any]:
    from nbclient import NotebookClient

    v4: Any = nbformat.v4  # untyped
    nb = v4.new_notebook()
    nb.cells = [v4.new_code_cell(c) for c in ("%load_ext perflab", TRITON_CELL, COUNT_CELL)]
    NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    ).execute()
    doc: dict[str, Any] = json.loads("".join(o.get("text", "") for o in nb.cells[2].outputs))
    return doc


@pytest.mark.slow
def test_links_are_the_same_with_a_cold_and_a_warm_triton_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path / "perflab"))
    cold = run_kernel(tmp_path)
    assert any((tmp_path / "triton").rglob("*.ptx")), "the first kernel filled Triton's cache"
    warm = run_kernel(tmp_path)
    print("cold:", cold, "warm:", warm)  # shown when the test fails
    # each kernel named its cell file itself; the warm one got PTX naming the first's
    assert warm["cell_file"] != cold["cell_file"]
    assert warm["ptx_file"] == cold["cell_file"]
    assert len(cold["linked"]) > 1
    # the same lines: the kernel's body, numbered as the cell (line 1 is the magic's)
    assert warm["linked"] == cold["linked"]
    assert set(cold["linked"]) <= set(range(6, 13))
