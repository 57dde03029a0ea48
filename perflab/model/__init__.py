"""Plain data objects; imports numpy and the standard library only."""

from perflab.model.optable import OpTable
from perflab.model.timing import Comparison, TimingResult

__all__ = ["Comparison", "OpTable", "TimingResult"]
