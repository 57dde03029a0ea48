"""Entries of a job's directory named like rank files that cannot be read (a FIFO, a dangling
or looping symbolic link, a directory) are named in the summary's warnings, and are never
opened (a FIFO would wait for a writer). On a Dask cluster: tests/test_job_dask.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_scripts import load_script

from perflab.analysis.job import summarize_job
from perflab.errors import InputError
from perflab.io.job import list_job, load_job
from perflab.render.job import summary_bundle

ENTRIES = {  # name -> what the warning says of it
    "rank-3.json": "is a FIFO (named pipe)",
    "rank-4.json": "is a symbolic link to rank-9.json, which does not exist",
    "rank-5.json": "is a symbolic link in a loop",
    "rank-6.json.gz": "is a directory",
}


def generate(directory: Path, ranks: int = 3) -> None:
    directory.mkdir(exist_ok=True)
    load_script("job").generate_job(directory, ranks, 10, seed=3, straggler=None)


def spoil(directory: Path) -> dict[str, str]:
    """Put every kind of unreadable entry in ``directory``: name -> the warning's words."""
    os.mkfifo(directory / "rank-3.json")
    (directory / "rank-4.json").symlink_to("rank-9.json")
    (directory / "rank-5.json").symlink_to("rank-5.json")
    (directory / "rank-6.json.gz").mkdir()
    return ENTRIES


def named_in(warnings: list[str], directory: Path, expected: dict[str, str]) -> None:
    for name, words in expected.items():
        path = str(directory / name)
        assert any(path in w and words in w and "left out" in w for w in warnings), (name, warnings)


def spoiled_job(directory: Path) -> Path:
    """A job of 3 readable ranks in ``directory``, beside every kind of unreadable entry."""
    generate(directory)
    spoil(directory)
    return directory


@pytest.fixture
def spoiled(tmp_path: Path) -> Path:
    return spoiled_job(tmp_path)


def test_unreadable_entries_are_named_in_every_view_of_the_local_summary(spoiled: Path) -> None:
    listing = list_job(spoiled)
    assert [p.name for p in listing.files] == ["rank-0.json.gz", "rank-1.json.gz", "rank-2.json.gz"]
    assert sorted(p.name for p in listing.unreadable) == sorted(ENTRIES)
    summary = summarize_job(load_job(spoiled, workers=0))
    doc = summary.to_dict()
    assert list(doc["ranks"]) == ["0", "1", "2"]
    named_in(doc["warnings"], spoiled, ENTRIES)
    text = str(summary)
    html = summary_bundle(summary)["text/html"]
    for name in ENTRIES:
        assert f"warning: {spoiled / name} could not be read" in text
        assert str(spoiled / name) in html


def test_a_directory_of_only_unreadable_entries_names_them(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "rank-0.json")
    (tmp_path / "rank-1.json").symlink_to("nowhere.json")
    with pytest.raises(InputError, match="no readable trace files") as err:
        load_job(tmp_path)
    assert "rank-0.json: is a FIFO" in str(err.value) and "rank-1.json: is a symbolic" in str(
        err.value
    )


def test_a_fifo_named_on_its_own_is_refused_without_being_opened(tmp_path: Path) -> None:
    generate(tmp_path, ranks=1)
    fifo = tmp_path / "rank-1.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is a FIFO") as err:
        load_job([tmp_path / "rank-0.json.gz", fifo])
    assert str(fifo) in str(err.value)


def test_the_cli_summary_names_them_and_does_not_wait_on_the_fifo(spoiled: Path) -> None:
    command = [sys.executable, "-m", "perflab", "trace", "summary", str(spoiled)]
    # a FIFO opened for reading would wait for a writer forever: a bound, not a speed
    text = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "3 ranks" in text.stdout
    for name in ENTRIES:
        assert f"warning: {spoiled / name} could not be read" in text.stdout
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=120)
    named_in(json.loads(done.stdout)["warnings"], spoiled, ENTRIES)
