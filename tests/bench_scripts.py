"""The benchmark scripts as modules, for tests that reuse their generators (one loader,
benchmarks/_scripts.py, serves the benchmarks and the tests)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.append(str(BENCHMARKS))  # last: benchmarks/trace.py must not hide stdlib's trace

from _scripts import load_script  # noqa: E402

__all__ = ["load_script"]
