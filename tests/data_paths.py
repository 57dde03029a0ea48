"""Where the suite's data lives: tests/data, in the repository (provenance and licences in
the README of each folder). Tests name these paths instead of working them out."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TRACES = DATA / "traces"  # real traces recorded on GPUs by other projects
PTX = DATA / "ptx"  # compiler output samples for the PTX/SASS parsers
