"""``perflab trace summary|kernels|export`` and ``perflab.capture.profile``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_paths import TRACES

from perflab.cli import main
from perflab.io import load_trace
from perflab.model.trace import EventKind

TRACE = TRACES / "kineto" / "sampled_4streams.json.gz"


def test_summary_json_has_exactly_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "summary", str(TRACE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["events", "kernels", "devices", "comm", "memcpy", "categories", "idle"]
    assert set(doc["kernels"]) == {"count", "total_us"}
    assert set(doc["comm"]) == {"count", "total_us", "overlapped_us"}
    assert set(doc["memcpy"]) == {"count", "total_us", "bytes", "by_kind"}
    for dev in doc["devices"].values():
        assert set(dev) == {"busy_us", "span_us", "idle_us", "kernels"}
        assert isinstance(dev["busy_us"], float)
    assert doc["events"] == 4855


def test_kernels_and_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "kernels", str(TRACE), "-n", "3"]) == 0
    out = capsys.readouterr().out
    assert "GPU kernels" in out and "... " in out
    target = tmp_path / "out.json"
    assert main(["trace", "export", str(TRACE), "-o", str(target)]) == 0
    doc = json.loads(target.read_text())
    assert {"ph", "ts", "dur", "pid", "tid", "name"} <= set(doc["traceEvents"][-1])
    original, exported = load_trace(TRACE).summary().to_dict(), load_trace(target).summary()
    exported_doc = exported.to_dict()
    for key in ("kernels", "devices", "comm", "memcpy", "categories"):
        assert exported_doc[key] == original[key]


def test_bad_file_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.json"
    path.write_text("{not json")
    assert main(["trace", "summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and str(path) in err and "Traceback" not in err
    assert main(["trace", "summary", str(tmp_path / "missing.json")]) == 2


@pytest.mark.parametrize("command", [["trace", "summary"], ["trace", "kernels"], ["timeline"]])
def test_workers_option(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--workers reaches the loader: 1 gives what 0 gives, a negative count is a clean error."""
    out = [] if command[0] == "trace" else ["-o", str(tmp_path / "t.html")]
    outputs = []
    for workers in ("0", "1"):
        assert main([*command, str(TRACE), "--workers", workers, *out]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert main([*command, str(TRACE), "--workers", "-1", *out]) == 2
    assert "workers must be a whole number >= 0, not -1" in capsys.readouterr().err


def test_profile_cpu_returns_a_trace_and_cleans_up() -> None:
    torch = pytest.importorskip("torch")
    from perflab.analysis.trace_stats import kernel_table
    from perflab.capture.profile import profile

    a = torch.randn(64, 64)
    trace = profile(
        lambda: torch.mm(a, a).relu(), cuda=None if torch.cuda.is_available() else False
    )
    assert int((trace.kind == EventKind.CPU_OP).sum()) >= 2
    table = kernel_table(trace)
    assert "aten::mm" in table.names
    if not torch.cuda.is_available():
        assert table.kind == "cpu_op"

    def boom() -> None:
        torch.mm(a, a)
        raise RuntimeError("user code failed")

    with pytest.raises(RuntimeError, match="user code failed"):
        profile(boom, cuda=False)
    assert not torch.autograd._profiler_enabled()  # nothing left running


@pytest.mark.gpu
def test_profile_gpu_records_kernels() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    from perflab.analysis.trace_stats import kernel_table
    from perflab.capture.profile import profile

    a = torch.randn(1024, 1024, device="cuda")
    trace = profile(lambda: torch.mm(a, a), cuda=True)
    table = kernel_table(trace)
    assert table.kind == "kernel" and len(table) >= 1
    assert trace.summary().to_dict()["kernels"]["count"] >= 1
