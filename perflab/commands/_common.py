"""Helpers shared by subcommands."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, indent=2, allow_nan=False, default=str)
    sys.stdout.write("\n")
