from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perflab.cli import main


def test_info_json_has_backend_devices_versions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] in ("cuda", "cpu")
    assert doc["devices"] and doc["devices"][0]["name"]
    for pkg in ("torch", "triton", "nvtx", "numpy"):
        assert pkg in doc["versions"], pkg
    assert set(doc["cuda_tools"]) == {"nvcc", "ptxas", "nvdisasm", "cuobjdump"}
    nvcc = doc["cuda_tools"]["nvcc"]
    assert nvcc is not None and nvcc["version"], "the nvcc wheel should be found"


def test_info_text_says_no_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from perflab.capture.env import cuda_available

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "backend:" in out and "nvcc" in out
    if not cuda_available():
        assert "no GPU" in out


def test_info_text_reads_sizes_as_sizes() -> None:
    from perflab.commands.info import device_text

    cpu = {
        "name": "AMD EPYC",
        "kind": "cpu",
        "cores": 2,
        "cache_bytes": {"L1d": 32768, "L3": 1 << 25},
    }
    assert device_text(cpu) == "AMD EPYC (cpu), cores 2, cache L1d 32 KiB / L3 32 MiB"
    gpu = {"index": 0, "name": "NVIDIA H200", "kind": "cuda", "memory_bytes": 150_117_269_504,
           "l2_bytes": 52_428_800, "sms": 132, "clock": None}  # fmt: skip
    text = device_text(gpu)
    assert text.startswith("NVIDIA H200 (cuda), index 0, memory 140 GiB, l2 50 MiB, sms 132")
    assert "clock" not in text


def test_time_json_round_trips(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["time", "-s", "x = list(range(300))", "sorted(x)", "--budget", "10", "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["n"] == len(doc["samples_ns"]) > 0
    assert doc["summary"]["median_ns"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["time", "def ("], "syntax error"),
        (["time", "x = 1", "--budget", "-1"], "budget"),
        (["time", "x = 1", "-r", "0"], "-r/repeat"),
    ],
)
def test_time_bad_input_is_a_clean_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and message in err
    assert "Traceback" not in err


def test_time_user_exception_shows_only_user_frames(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["time", "1 / 0"]) == 1
    err = capsys.readouterr().err
    assert "ZeroDivisionError" in err and '"<statement>", line 1' in err
    assert "perflab" not in err


def test_console_script_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "perflab.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "info" in out and "time" in out


def test_python_m_perflab_runs_the_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "perflab", "machine", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "usage: perflab machine" in out and "memory hierarchy" in out


def test_machine_lists_every_microbenchmark(capsys: pytest.CaptureFixture[str]) -> None:
    from perflab.machine import MICROBENCHMARKS

    with pytest.raises(SystemExit):
        main(["machine", "--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in MICROBENCHMARKS)


def test_an_error_message_cannot_drive_the_terminal(tmp_path: Path, capsys: Any) -> None:
    """A file name with an escape sequence reaches the error message escaped; the message's
    own lines and tabs stay as they are."""
    from perflab.cli import main, terminal_safe

    bad = tmp_path / "trace\x1b[2J\x07.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main(["trace", "summary", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "trace\\x1b[2J\\x07.json" in err
    assert terminal_safe("a\tb\nc\x00") == "a\tb\nc\\x00"
