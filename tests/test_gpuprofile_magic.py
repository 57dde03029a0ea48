"""%%gpuprofile, run in-process through IPython's InteractiveShell."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from perflab.capture.env import cuda_available
from perflab.model.timing import TimingResult

FAST = "--budget 5 --warmup 1"


@pytest.fixture(scope="module")
def ip() -> InteractiveShell:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "perflab")
    return shell


def cell(ip: InteractiveShell, text: str, history: bool = False) -> Any:
    """Run ``text`` as a cell (with history: numbered as in a notebook)."""
    return ip.run_cell(text, store_history=history)  # type: ignore[no-untyped-call]


def run(ip: InteractiveShell, line: str, body: str) -> Any:
    return cell(ip, f"%%gpuprofile {line}\n{body}")


def test_cell_names_persist_and_result_is_returned(ip: InteractiveShell) -> None:
    res = run(ip, f"{FAST} -o", "counter = globals().get('counter', 0) + 1\ny = counter * 2")
    assert res.success, res.error_in_exec
    assert isinstance(res.result, TimingResult)
    assert ip.user_ns["counter"] > 1  # ran once untimed, then timed repeatedly
    assert ip.user_ns["y"] == 2 * ip.user_ns["counter"]


def test_store_and_compare(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(ip, f"{FAST} -v fast --name fast", "sum(range(10))").success
    assert isinstance(ip.user_ns["fast"], TimingResult)
    assert ip.user_ns["fast"].name == "fast"
    assert run(ip, f"{FAST} --name slow --compare fast", "sum(range(20000))").success
    out = capsys.readouterr().out
    assert "slow vs fast" in out and "slower" in out


def test_compare_with_missing_name_is_a_usage_error(ip: InteractiveShell) -> None:
    res = run(ip, "--compare nothing_here", "x = 1")
    assert not res.success
    assert "expected a TimingResult" in str(res.error_in_exec)


def test_user_exception_points_at_user_line(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run(ip, FAST, "a = 1\nb = 2\n1 / 0")
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    tb = res.error_in_exec.__traceback__
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    # the cell body's "1 / 0" is line 4 of the cell as shown (line 1 is %%gpuprofile)
    assert frames[-1][1] == 4
    # perflab's own frames are hidden from what the user sees
    shown = capsys.readouterr().out
    assert "line 4" in shown and "ZeroDivisionError" in shown
    assert "perflab" not in shown and "timer.py" not in shown
    # and the next %%gpuprofile works
    assert run(ip, FAST, "z = 3").success


def shown_text(capsys: pytest.CaptureFixture[str]) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # no terminal colours


def test_the_traceback_starts_at_the_users_code(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not at the call of the magic IPython makes of a %%gpuprofile cell."""
    res = cell(ip, f"%%gpuprofile {FAST}\ndef f():\n    return 1 / 0\nf()", history=True)
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    shown = shown_text(capsys)
    frames = re.findall(r"^Cell In\[(\d+)\], line (\d+)", shown, re.MULTILINE)
    prompt = str(res.execution_count)
    assert frames == [(prompt, "4"), (prompt, "3")], shown
    assert "run_cell_magic" not in shown and "skipping hidden" not in shown
    assert shown.index("ZeroDivisionError") < shown.index("Cell In[")


def test_an_exception_raised_again_shows_where_it_was_raised_last(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(ip, f"%%gpuprofile {FAST}\nkept = ValueError('kept')\nraise kept", history=True)
    capsys.readouterr()
    res = cell(ip, f"%%gpuprofile {FAST}\nx = 1\n\nraise kept", history=True)
    assert res.error_in_exec is ip.user_ns["kept"]
    shown = shown_text(capsys)
    assert re.search(rf"^Cell In\[{res.execution_count}\], line 4", shown, re.MULTILINE), shown


def test_a_users_chained_exception_keeps_its_cause(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run(ip, FAST, "raise ValueError('outer') from KeyError('inner')")
    assert isinstance(res.error_in_exec, ValueError)
    assert isinstance(res.error_in_exec.__cause__, KeyError)
    shown = shown_text(capsys)
    assert "KeyError: 'inner'" in shown and "direct cause" in shown


def test_a_perflab_error_is_one_line_without_a_traceback(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    res = run(ip, "--budget -3", "x = 1")
    assert isinstance(res.error_in_exec, UsageError)
    shown = shown_text(capsys)
    assert shown.startswith("perflab: error: budget (--budget) must be a number of ms")
    assert len(shown.strip().splitlines()) == 1 and "Traceback" not in shown


def test_bad_options_are_usage_errors(ip: InteractiveShell) -> None:
    for line in ("--budget -3", "-n 0", "--backend tpu", "--flops -1"):
        res = run(ip, line, "x = 1")
        assert not res.success, line
        assert isinstance(res.error_in_exec, UsageError), (line, res.error_in_exec)


def test_help_lists_options(ip: InteractiveShell) -> None:
    doc = ip.find_cell_magic("gpuprofile").__doc__  # type: ignore[no-untyped-call]
    for flag in (
        "--budget",
        "--flush-l2",
        "--no-flush-l2",
        "--graph",
        "--trace",
        "--record",
        "--compare",
        "-v NAME",
        "--no-nvtx",
        "--name",
    ):
        assert flag in doc, flag


def test_nvtx_range_named_after_name(ip: InteractiveShell) -> None:
    from perflab.capture.nvtx import clear_spans, host_spans

    clear_spans()
    assert run(ip, f"{FAST} --name my-range", "x = 1").success
    assert [s.name for s in host_spans()] == ["my-range"]
    clear_spans()
    assert run(ip, f"{FAST} --no-nvtx --name quiet", "x = 1").success
    assert [s.name for s in host_spans()] == ["quiet"]  # host span kept, NVTX skipped


@pytest.mark.skipif(cuda_available(), reason="checks the no-GPU replay path")
def test_record_without_gpu_replays_file(
    ip: InteractiveShell, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"
    assert run(ip, f"{FAST} --record {missing}", "x = 1").success
    assert not missing.exists()
    assert "not written" in capsys.readouterr().err
    recorded = TimingResult(
        samples_ns=np.array([1e6, 1.1e6, 1.2e6]),
        backend="cuda",
        device="NVIDIA H200",
        created="2026-01-01T00:00:00+00:00",
        versions={"torch": "2.11.0"},
    )
    path = recorded.save(tmp_path / "rec.json")
    ip.user_ns.pop("never_set", None)
    res = run(ip, f"--record {path} -o", "never_set = 1")
    assert res.success
    assert "never_set" not in ip.user_ns  # replayed, not run
    assert res.result.device == "NVIDIA H200"
    err = capsys.readouterr().err
    assert "replayed" in err and "NVIDIA H200" in err and "2026-01-01" in err
    assert json.loads(path.read_text())["backend"] == "cuda"


def test_trace_shows_op_table(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    res = run(ip, f"{FAST} --trace -o", "import torch\nt = torch.ones(64, 64) @ torch.ones(64, 64)")
    assert res.success, res.error_in_exec
    table = res.result.kernels
    assert table is not None and len(table) > 0
    if not cuda_available():
        assert table.kind == "cpu_op"
        assert any("mm" in n for n in table.names), table.names
    shown = capsys.readouterr().out
    assert "Trace of torch.profiler" in shown  # the timeline sits under the table


def test_keyboard_interrupt_cleans_up(ip: InteractiveShell) -> None:
    res = run(ip, FAST, "raise KeyboardInterrupt")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert run(ip, FAST, "x = 1").success  # the autouse fixture checks for leaks too


def test_roofline_counts_flops_and_bytes(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(ip, "import torch\nra = torch.randn(128, 128)")
    res = run(ip, f"{FAST} --roofline -o", "rc = ra @ ra")
    assert res.success, res.error_in_exec
    assert res.result.flops == 2 * 128**3
    assert res.result.bytes >= 128 * 128 * 4  # at least the input it read
    captured = capsys.readouterr()
    assert "counted per call: 4.194 MFLOP (torch FlopCounterMode)" in captured.out  # 2 x 128^3
    if not cuda_available():  # no measured ceilings for this CPU in the test cache
        assert "roofline: no ceilings for device" in captured.err


def test_roofline_judges_a_float32_cell_against_the_fp32_ceiling(
    ip: InteractiveShell,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A float32 `torch.relu(x @ w)` read 'bound by bf16 peak': the highest ceiling of a
    device whose measured bf16 peak is above its fp32 one."""
    from perflab.model.ceilings import Ceilings, save_ceilings

    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path))
    here = run(ip, f"{FAST} -o", "x = 1").result
    save_ceilings(Ceilings(here.device, here.backend, {"fp32": 50.0, "bf16": 400.0}, {"DRAM": 9.0}))
    cell(ip, "import torch\nrx, rw = torch.randn(256, 128), torch.randn(128, 64)")
    capsys.readouterr()
    res = run(ip, f"{FAST} --roofline -o", "torch.relu(rx @ rw)")
    assert res.success, res.error_in_exec
    assert (res.result.dtype, res.result.dtype_why) == ("fp32", "the cell's matmuls ran in float32")
    out = capsys.readouterr().out
    assert "precision fp32 (the cell's matmuls ran in float32)" in out  # the counting note
    assert ": FP32 peak (the cell's matmuls ran in float32)" in out
    assert "BF16 peak" not in out
    assert run(ip, f"{FAST} --roofline --dtype bf16", "torch.relu(rx @ rw)").success
    assert ": BF16 peak (--dtype)" in capsys.readouterr().out
    assert run(ip, f"{FAST} --roofline --dtype fp8", "torch.relu(rx @ rw)").success
    assert "has no such ceiling" in capsys.readouterr().err


def test_compare_with_a_result_of_tritons_interpreter_is_refused(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    here = run(ip, f"{FAST} -o", "x = 1").result
    ip.user_ns["interpreted"] = TimingResult(
        np.full(20, 2e7), here.backend, here.device, name="triton-add", interpreter="triton"
    )
    capsys.readouterr()
    assert run(ip, f"{FAST} --name torch-add --compare interpreted", "x = 1").success
    line = next(ln for ln in capsys.readouterr().out.splitlines() if " vs interpreted" in ln)
    assert "not comparable" in line and "in Triton's interpreter" in line
    assert "faster" not in line and "time ratio" not in line


# --- help, names and numbers the user sees ---------------------------------------------


def test_help_in_line_and_cell_form(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    for text in ("%gpuprofile --help", "%%gpuprofile --help\nx = 1", "%gpuprofile -h"):
        res = cell(ip, text)
        assert res.success, (text, res.error_in_exec)
        out = capsys.readouterr().out
        assert "--budget" in out and "--compare" in out and "--max-noise" in out, text
    res = cell(ip, "%gpuprofile --budget 5")
    assert type(res.error_in_exec).__name__ == "UsageError"
    assert "%%gpuprofile" in str(res.error_in_exec)


def test_results_are_named_after_the_prompt_the_user_sees(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    """With history on (as in a notebook), the cell under prompt [N] names its result
    In[N], and --compare says which stored result it compared against."""
    first = ip.execution_count
    res = cell(ip, f"%%gpuprofile {FAST} -v base\nx = 1", history=True)
    assert res.success and res.execution_count == first
    assert ip.user_ns["base"].name == f"In[{first}]"
    res = cell(ip, f"%%gpuprofile {FAST} --compare base\nsum(range(5000))", history=True)
    assert res.success
    out = capsys.readouterr().out
    assert f"In[{first + 1}] vs base (In[{first}]): time ratio" in out


def test_traceback_names_the_prompt_number(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    res = cell(ip, f"%%gpuprofile {FAST}\na = 1\n1 / 0", history=True)
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # no terminal colours
    assert f"In[{res.execution_count}], line 3" in shown
    assert f"In[{res.execution_count + 1}]" not in shown


@pytest.mark.parametrize(
    "line",
    [
        "-v 1abc",
        "-v class",
        "--compare 9x",
        "--budget 1e308",
        "--warmup 1e400",
        "-n 1180591620717411303424",
    ],
)
def test_bad_names_and_huge_numbers_are_usage_errors(ip: InteractiveShell, line: str) -> None:
    res = run(ip, line, "x = 1")
    assert isinstance(res.error_in_exec, UsageError), (line, res.error_in_exec)


def test_tiny_ratio_in_compare_output(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    here = run(ip, f"{FAST} -o", "x = 1").result  # the baseline ran where this run does
    ip.user_ns["slow_one"] = TimingResult(
        np.full(20, 1e9), here.backend, here.device, name="slow_one"
    )
    assert run(ip, f"{FAST} --compare slow_one", "x = 1").success
    line = next(ln for ln in capsys.readouterr().out.splitlines() if " vs slow_one" in ln)
    assert "0.000" not in line and "e-0" in line and "x faster" in line
