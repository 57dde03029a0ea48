"""Exercises of notebooks/12-low-latency-inference.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, choice, number

NOTEBOOK = "12-low-latency-inference"
SLO_TIMES_MEDIAN = 1.5


def _percentiles_met(values: Values) -> str:
    slo = SLO_TIMES_MEDIAN * values["p50_us"]
    met = (values["p99_us"] <= slo, values["p999_us"] <= slo)
    return {(True, True): "both", (True, False): "p99 only"}.get(met, "neither")


EXERCISES = (
    Spec(
        "slo",
        NOTEBOOK,
        "The cell below times 2,000 batch-1 calls of the model. A service level objective says: "
        "latency below 1.5x the median. Predict which percentiles will meet it: 'both' (p99 "
        "and p99.9), 'p99 only' or 'neither'.",
        choice(
            _percentiles_met,
            ["both", "p99 only", "neither"],
            why={
                "both": "The slowest 1 in 1,000 calls meets the worst of what else runs on the "
                "machine (interrupts, other processes, frequency changes): can it stay within "
                "half the median of the typical call?",
                "p99 only": "Think about the slowest 1% of the calls, not only the slowest 0.1%: "
                "how far from the median does what else runs on the machine push them?",
                "neither": "The median call here takes around a hundred microseconds of "
                "repeatable work: on a quiet machine even its slow calls stay close to it.",
            },
            right="Tails come from what else happens on the machine, not from the work: "
            "measure them, and write objectives against them with the sample count that "
            "supports them.",
        ),
        "Compare each percentile with 1.5 x p50. Tails on a shared machine (interrupts, other "
        "processes, frequency changes) are often several times the median, even for identical "
        "work; on a quiet, dedicated machine they stay closer. The answer is whatever this "
        "machine measured: the point is to predict the tail before you see it, and then to "
        "write the objective against the measured percentiles.",
        worked=_percentiles_met,
        measured={"p50_us": "positive", "p99_us": "positive", "p999_us": "positive"},
    ),
    Spec(
        "ops-per-call",
        NOTEBOOK,
        "The cell below records one forward call of this 7-module model (three Linear, two GELU, "
        "two LayerNorm) with torch.profiler. Predict how many operator calls it records "
        "(within a factor of 2).",
        number(
            lambda v: v["ops"],
            factor=2,
            low="A module is more than one operator: an nn.Linear dispatches aten::linear, "
            "which calls a transposed view and aten::addmm, each with small helper ops.",
            high="Count only what one forward call records: a handful of operators per "
            "module, not dozens.",
        ),
        "Some forty: a handful per module. Each nn.Linear dispatches aten::linear, which calls "
        "aten::t (a transposed view: a transpose and an as_strided) and aten::addmm (with "
        "helpers such as resolve_conj and an empty output); each GELU and LayerNorm is an "
        "operator with its own output to allocate. On a GPU every leaf operator that does work "
        "is at least one kernel launch: that is what CUDA graphs replay in one call.",
        worked=42,
        measured={"ops": "count"},
        answer_as="a whole number",
    ),
)
