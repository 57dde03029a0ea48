"""A Kineto file that cannot fit in memory is refused before it is read, with perflab's error
naming the memory it needs, the budget, and what works instead; ``--memory-budget`` sets the
budget (default: the memory available now), and a trace that fits reads as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_paths import TRACES

from perflab.cli import main
from perflab.commands import _common, _fit
from perflab.io.kineto import fast

NCCL = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"  # 0.75 MB of gzip, 15 MB of JSON
ALEXNET = TRACES / "kineto" / "alexnet_a100.json.gz"
COMMANDS = [
    ["trace", "summary"],
    ["trace", "kernels"],
    ["trace", "idle"],
    ["trace", "memory"],
    ["trace", "critical"],
    ["trace", "export", "-o", "out.json"],
    ["timeline", "-o", "out.html"],
]


def _never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the trace was read although it does not fit")

    monkeypatch.setattr("perflab.io.kineto.load_kineto", refuse)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_trace_over_the_budget_is_refused_before_it_is_read(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _never_read(monkeypatch)
    cut = 2 if command[0] == "trace" else 1
    words, options = command[:cut], command[cut:]
    assert main([*words, str(NCCL), *options, "--memory-budget", "100M"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"perflab: error: {NCCL}: this trace needs about 0.")
    assert f"for 'perflab {' '.join(words)}'" in err
    assert "more than --memory-budget 100M (0.1 GB)" in err
    assert "What works instead" in err and "--scheduler" in err and "schedule(active=N)" in err


def test_the_memory_available_is_the_default_budget(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _never_read(monkeypatch)
    monkeypatch.setattr(_fit, "available_memory", lambda: 50_000_000)
    assert main(["trace", "summary", str(NCCL), "--json"]) == 2
    assert "more than the memory available now (0.1 GB)" in capsys.readouterr().err


def test_a_diff_counts_both_traces(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    one = _common.needed_memory(str(NCCL), "diff")
    assert one is not None
    budget = str(one[0] + 1_000_000)  # room for the control alone, not for both
    _never_read(monkeypatch)
    assert main(["trace", "diff", str(NCCL), str(NCCL), "--memory-budget", budget]) == 2
    assert f"{NCCL}, {NCCL}: these traces need about" in capsys.readouterr().err


def test_a_trace_within_the_budget_reads_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "summary", str(ALEXNET), "--json"]) == 0
    plain = capsys.readouterr().out
    assert main(["trace", "summary", str(ALEXNET), "--json", "--memory-budget", "2GiB"]) == 0
    assert capsys.readouterr().out == plain


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("800M", 800_000_000),
        ("1.5G", 1_500_000_000),
        ("2GiB", 2 << 30),
        ("4096", 4096),
        ("64 kb", 64_000),
        (".5T", 500_000_000_000),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert _common.memory_size(text) == size


@pytest.mark.parametrize("text", ["lots", "0", "-1G", "1.2.3G", "1X", ""])
def test_bad_sizes_are_refused(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "summary", str(ALEXNET), f"--memory-budget={text}"]) == 2
    assert "perflab: error: --memory-budget must be" in capsys.readouterr().err


def test_gzip_of_more_than_4_gib_is_not_taken_for_a_small_one(tmp_path: Path) -> None:
    """gzip's trailer holds the size modulo 2**32: a 4.4 GB text of 70 members whose last
    one says 64 MiB is estimated from the compression ratio of its start."""
    import zlib

    member = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = member.compress(b" " * (64 << 20)) + member.flush()
    path = tmp_path / "big.json.gz"
    path.write_bytes(block * 70)
    assert fast.text_size(path) == 64 << 20  # what the trailer says
    estimate = fast.estimated_text_size(path)
    assert abs(estimate - 70 * (64 << 20)) < 2**31  # the wrap nearest the sampled ratio
