"""Exercises of notebooks/06-occupancy-vs-ilp.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import Values, choice, number

NOTEBOOK = "06-occupancy-vs-ilp"


def _kib_per_sm(v: Values) -> float:
    return float(v["bandwidth_gbps"] * v["latency_ns"] / v["sms"] / 1024)


def _cost(v: Values) -> str:
    spills = v["spill_bytes"] > 0
    fewer = v["loads_in_flight"] < v["uncapped_in_flight"]
    if spills and fewer:
        return "both"
    return "spills" if spills else "fewer loads in flight" if fewer else "nothing"


EXERCISES = (
    Spec(
        "bytes-in-flight",
        NOTEBOOK,
        lambda v: (
            f"Little's law with the recorded H200 figures: HBM copy bandwidth "
            f"{v['bandwidth_gbps']:.0f} GB/s, load latency {v['latency_ns']:.0f} ns (HBM, with "
            f"TLB misses), {v['sms']:.0f} SMs sharing the traffic. How many KiB must each SM "
            "keep in flight to sustain that bandwidth? (Within 10%.)"
        ),
        number(
            _kib_per_sm,
            unit="KiB",
            rel=0.10,
            low="Multiply the bandwidth by the latency (GB/s x ns gives bytes), then share the "
            "result among the SMs: divide by their number once, and by 1,024 for KiB.",
            high="Bandwidth x latency is what the whole GPU keeps in flight: each SM carries "
            "only its share. Check the units too: 1 GB/s x 1 ns = 1 byte, 1 KiB = 1,024 bytes.",
        ),
        lambda v: (
            f"{v['bandwidth_gbps']:.0f} GB/s x {v['latency_ns']:.0f} ns = "
            f"{v['bandwidth_gbps'] * v['latency_ns'] / 1e6:.2f} MB in flight on the whole GPU; "
            f"over {v['sms']:.0f} SMs that is {_kib_per_sm(v):.1f} KiB per SM, about "
            f"{_kib_per_sm(v) * 1024 / 128:.0f} lines of 128 bytes. The latency is the idle "
            "pointer chase's: under load it grows, so this is a floor, not a target."
        ),
        worked=lambda v: f"{_kib_per_sm(v):.2f} KiB",
        given={"bandwidth_gbps": "positive", "latency_ns": "positive", "sms": "positive count"},
        answer_as='e.g. "4 KiB"',
    ),
    Spec(
        "bounds-warps",
        NOTEBOOK,
        "Without a register budget, sum_acc<16> keeps 16 warps per SM (the %%ptx cell above). "
        "Compiled with __launch_bounds__(256, 4), how many warps per SM will be resident? "
        "The cell after your answer compiles it.",
        number(
            lambda v: v["warps_per_sm"],
            unit="warps",
            abs=0.5,
            low="minBlocksPerSM = 4 asks ptxas to fit at least 4 blocks of 256 threads on an SM: "
            "how many warps do they make together?",
            high="ptxas budgets registers so that 4 blocks fit, and spends that budget: would a "
            "fifth block of 256 threads still fit in the SM's 65,536 registers?",
        ),
        "4 blocks x 256 threads = 1,024 threads = 32 warps. ptxas gives each thread 65,536 / "
        "1,024 = 64 registers and no more, so a fifth block does not fit: half of the 64 warps "
        "an sm_90 SM can hold.",
        worked=lambda v: v["warps_per_sm"],
        measured={"warps_per_sm": "count"},
        answer_as="a number of warps, e.g. 8",
    ),
    Spec(
        "register-cap-cost",
        NOTEBOOK,
        "With __launch_bounds__(256, 8) ptxas must fit sum_acc<16> into 32 registers per "
        "thread, far fewer than it uses unbounded. What does the kernel pay for its full "
        "occupancy: 'spills' (STL/LDL to local memory), 'fewer loads in flight' per thread, "
        "'both' or 'nothing'?",
        choice(
            _cost,
            ["spills", "fewer loads in flight", "both", "nothing"],
            why={
                "spills": "Look at the loads too: can a thread keep 16 float4 loads in flight "
                "(64 registers for their results) within 32 registers?",
                "fewer loads in flight": "The 16 float4 accumulators are 64 values that stay "
                "live across the whole loop: where do they go with 32 registers?",
                "both": "Read the table's spill and in-flight columns for the 32-register row: "
                "which of the two changed?",
                "nothing": "The unbounded kernel needs far more than 32 registers: something "
                "has to give when ptxas may not use them.",
            },
            right="The accumulators spill and the loads are issued in smaller batches.",
        ),
        "Both: the 64 accumulator values no longer fit, so ptxas stores and reloads them in "
        "local memory (STL/LDL), and it issues the 16 loads a few at a time, since their results "
        "need registers too. Full occupancy was bought with less ILP and extra memory traffic.",
        worked=_cost,
        measured={
            "spill_bytes": "count",
            "loads_in_flight": "count",
            "uncapped_in_flight": "count",
        },
    ),
)
