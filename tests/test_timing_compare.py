"""What a TimingResult ran on (backend, device, Triton's interpreter, precision), kept in its
file, and comparisons that refuse what is not a speed-up: results of other devices or one run
in Triton's interpreter are not comparable (no ratio), other precisions are said."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from data_paths import ROOT

import perflab
from perflab.cli import main as cli
from perflab.model.timing import TimingResult

HERE = "CPU: test"


def timed(name: str, ns: float, **ran_on: object) -> TimingResult:
    rng = np.random.default_rng(len(name))
    samples = ns * (1 + 0.01 * rng.standard_normal(40))
    fields: dict[str, object] = {"backend": "cpu", "device": HERE, **ran_on}
    return TimingResult(samples, name=name, **fields)  # type: ignore[arg-type]


def test_triton_in_its_interpreter_is_not_compared_with_compiled_code() -> None:
    """The notebook's case: 'torch-add 3,620x faster' than a Triton add that ran in
    Triton's CPU interpreter."""
    triton_add = timed("triton-add", 22e6, interpreter="triton")
    torch_add = timed("torch-add", 6e3, interpreter="none")
    c = torch_add.compare(triton_add)
    assert not c.comparable and math.isnan(c.ratio) and c.verdict == "not comparable"
    assert c.why == (
        "torch-add ran on the CPU without Triton's interpreter, triton-add on the CPU in "
        "Triton's interpreter: a ratio would time the interpreter, not the kernels"
    )
    text = str(c)
    assert text == f"torch-add vs triton-add: not comparable: {c.why}"
    assert "faster" not in text and "ratio 0" not in text
    html = c._repr_mimebundle_()["text/html"]
    assert "<b>not comparable</b>" in html and "faster" not in html
    assert c.to_dict()["comparable"] is False and c.to_dict()["ratio"] is None
    json.dumps(c.to_dict(), allow_nan=False)  # no NaN in what the panel receives


def test_other_devices_and_backends_are_not_compared() -> None:
    gpu = timed("gpu", 5e3, backend="cuda", device="NVIDIA H200")
    other_gpu = timed("old", 9e3, backend="cuda", device="NVIDIA H100 PCIe")
    c = gpu.compare(other_gpu)
    assert not c.comparable
    assert c.why.startswith("gpu ran on NVIDIA H200, old on NVIDIA H100 PCIe: a ratio would")
    cpu = timed("cpu", 5e3)
    assert not cpu.compare(gpu).comparable
    assert cpu.compare(gpu).why.startswith("cpu ran on the CPU, gpu on NVIDIA H200")
    elsewhere = timed("laptop", 5e3, device="CPU: other")
    assert "the CPU (CPU: test)" in cpu.compare(elsewhere).why


def test_the_same_machine_compares_and_other_precisions_are_said() -> None:
    fast = timed("bf16", 1e3, interpreter="none", dtype="bf16")
    slow = timed("fp32", 2e3, interpreter="none", dtype="fp32")
    c = fast.compare(slow)
    assert c.comparable and c.verdict == "2x faster"
    assert c.notes == [
        "the precisions differ (bf16: bf16, fp32: fp32): the ratio measures the change of "
        "precision as well as of the code"
    ]
    lines = str(c).splitlines()
    assert lines[0].startswith("bf16 vs fp32: time ratio 0.5") and lines[0].endswith("2x faster")
    assert lines[1] == f"  note: {c.notes[0]}"
    assert "the precisions differ" in c._repr_mimebundle_()["text/html"]
    assert fast.compare(timed("unknown", 2e3)).notes == []  # precision not known: nothing said


def test_results_saved_before_their_interpreter_was_kept_still_compare() -> None:
    old_gpu = timed("recorded", 4e3, backend="cuda", device="NVIDIA H200")
    new_gpu = timed("now", 4e3, backend="cuda", device="NVIDIA H200", interpreter="none")
    assert new_gpu.compare(old_gpu).comparable and new_gpu.compare(old_gpu).notes == []
    interpreted = timed("interpreted", 9e6, interpreter="triton")
    c = interpreted.compare(timed("older", 5e3))
    assert c.comparable
    assert c.notes == [
        "older does not record whether it ran in Triton's interpreter (saved before perflab "
        "kept it), the other did: if it did not, the ratio times the interpreter"
    ]


def test_what_it_ran_on_is_saved_and_older_files_load_it_as_unknown(tmp_path: Path) -> None:
    r = timed("mm", 1e3, interpreter="triton", dtype="tf32", dtype_why="--dtype")
    path = r.save(tmp_path / "r.json")
    doc = json.loads(path.read_text())
    assert (doc["interpreter"], doc["dtype"], doc["dtype_why"]) == ("triton", "tf32", "--dtype")
    back = TimingResult.load(path)
    assert (back.interpreter, back.dtype, back.dtype_why) == ("triton", "tf32", "--dtype")
    assert "in Triton's interpreter (tf32)" in back.summary_line()
    unknown = timed("old", 1e3).to_dict()
    assert not {"interpreter", "dtype", "dtype_why"} & set(unknown)  # written as before
    recorded = TimingResult.load(
        ROOT / "notebooks" / "recordings" / "h200" / "00-quickstart" / "triton-add.json"
    )
    assert (recorded.interpreter, recorded.dtype, recorded.dtype_why) == (None, None, "")


def test_bench_and_perflab_time_record_what_they_ran_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    r = perflab.bench(lambda: sum(range(100)), backend="cpu", budget_ms=5)
    assert r.interpreter in ("none", None)  # None only where a test loaded Triton's interpreter
    assert cli(["time", "--budget", "5", "--json", "--dtype", "bf16", "x = 1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["dtype"], doc["dtype_why"]) == ("bf16", "--dtype")


TRITON_ADD = textwrap.dedent(
    """
    import json, os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton
    import triton.language as tl
    from perflab.capture.interpreter import watch_interpreter
    from perflab.frontend import bench

    with watch_interpreter() as before_any_kernel:
        pass

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)

    x, y = torch.rand(256), torch.rand(256)
    out = torch.empty_like(x)
    add[(1,)](x, y, out, 256, BLOCK=256)  # decorated and run once: the interpreter is loaded
    executor = sys.modules["triton.runtime.interpreter"].GridExecutor
    call = executor.__call__
    with watch_interpreter() as seen:
        add[(2,)](x, y, out, 256, BLOCK=128)
        add[(1,)](x, y, out, 256, BLOCK=256)
    with watch_interpreter() as torch_only:
        torch.add(x, y, out=out)
    triton_add = bench(lambda: add[(1,)](x, y, out, 256, BLOCK=256), backend="cpu", budget_ms=5)
    torch_add = bench(lambda: torch.add(x, y, out=out), backend="cpu", budget_ms=5)
    print(json.dumps({
        "before": before_any_kernel.interpreter,
        "launches": seen.launches,
        "seen": seen.interpreter,
        "torch_only": torch_only.interpreter,
        "restored": executor.__call__ is call,
        "bench": [triton_add.interpreter, torch_add.interpreter],
        "compare": str(torch_add.compare(triton_add)),
    }))
    """
)


def test_the_watch_sees_launches_in_tritons_interpreter(tmp_path: Path) -> None:
    """The interpreter is chosen when Triton is imported: a process of its own, bounded."""
    pytest.importorskip("triton")
    script = tmp_path / "triton_add.py"
    script.write_text(TRITON_ADD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["before"] == "none"  # Triton imported, its interpreter not loaded: none ran
    assert (got["launches"], got["seen"], got["torch_only"]) == (2, "triton", "none")
    assert got["restored"] and got["bench"] == ["triton", "none"]
    assert "not comparable" in got["compare"] and "faster" not in got["compare"]
