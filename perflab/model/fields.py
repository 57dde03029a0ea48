"""The bounds of saved-result fields: a file whose values lie outside them is not one
perflab wrote (the declared types of :mod:`perflab.model.saved` carry them)."""

from __future__ import annotations

MAX_TEXT = 100_000
MAX_ITEMS = 50_000_000
MAX_INT = 2**53  # exact in a float64 and in JSON readers everywhere
MAX_FLOAT = 1e300
