"""The one-line rule of each idle cause and the note that they are heuristics: what help
texts and views print beside the causes. Kept free of numpy so that the command line can
show them without loading the analysis; :mod:`perflab.analysis.idle_causes` has the rules in
full, with their thresholds."""

from __future__ import annotations

#: one line per cause: its rule, for help texts and views (the module docstring has all)
RULES: dict[str, str] = {
    "host-busy": "the launching thread ran other recorded work between the GPU going idle "
    "(or its sync returning) and the launch; evidence: the host events over that time",
    "after-sync": "the launching thread was blocked in a synchronising call (stream/device/"
    "event sync, a blocking copy, aten::item) within 10 us of the GPU going idle: the "
    "queue drained, then the GPU waited for the host",
    "launch-overhead": "queued on the same stream and started within 5 us; or its launch "
    "call was under way when the GPU went idle; or it began within 10 us of the thread's "
    "previous launch returning (back-to-back launches)",
    "launch-blocked": "launch calls of 100 us or more (a launch returns in microseconds) ran "
    "for at least half the time from the GPU going idle to the next work's launch returning: "
    "the launch path blocked (a full launch queue, the driver, lazy module loading), not "
    "other host work",
    "gpu-dependency": "queued before the gap began, or waited over 50 us in the queue after "
    "its launch returned: the GPU side held it (another stream's event, a collective's "
    "peers, a copy engine)",
    "unknown": "no launch call links to the next work, or the launching thread recorded "
    "only CUDA runtime calls: the trace cannot say what the host did",
}
HEURISTIC_NOTE = (
    "causes are heuristics over the trace's events (rules: perflab.analysis.idle_causes); "
    "the evidence shows what each verdict rests on"
)


def rules_text(indent: str = "  ") -> str:
    """Every cause and its rule, one per line, then the note."""
    lines = [f"{indent}{cause}: {rule}" for cause, rule in RULES.items()]
    return "\n".join([*lines, HEURISTIC_NOTE])
