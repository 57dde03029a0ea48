"""The typed records msgspec decodes a Kineto file into.

They declare only the fields perflab uses (the decoder skips everything else), each with the
range its column holds, so a value that does not fit is a decode error naming the event. A
new field of complete events is declared here once (on :class:`Args` or :class:`Event`): their
whole-file, streamed and exact-time types all derive from these two, and :mod:`.columns` reads
the field into its column. Metadata, instant and flow events have small records of their own
(instant events share :class:`Args`, where the allocator's ``[memory]`` events keep theirs).

Start times come in two flavours (see :data:`FastTime`): the fast types hold them as numbers,
the exact ones (``*Exact``) as their JSON text, for times beyond FAST_LIMIT_US whose fraction
a float cannot hold (see :mod:`.times`).
"""

from __future__ import annotations

import functools
import math
import operator
import re
from typing import Annotated, ClassVar

import msgspec

from perflab.io.kineto.times import FAST_LIMIT_US
from perflab.model.memory import MAX_BYTES, MAX_DEVICE_TYPE

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MAX = 2**31 - 1

# device and stream ids given as text: decimal, hexadecimal (a pointer, as ROCm's Kineto
# writes "0x0"), or glibc's "(nil)" for a null pointer
LANE_TEXT = re.compile(r"^(?:-?[0-9]{1,19}|0[xX][0-9a-fA-F]{1,16}|\(nil\))$")

I64 = Annotated[int, msgspec.Meta(ge=I64_MIN, le=I64_MAX)]
I32 = Annotated[int, msgspec.Meta(ge=-1, le=I32_MAX)]  # int32 columns; -1: unknown
# memory events' amounts (see perflab.model.memory); MISSING is no value of theirs
MISSING = I64_MIN
Amount = Annotated[int, msgspec.Meta(ge=-MAX_BYTES, le=MAX_BYTES)]
Total = Annotated[int, msgspec.Meta(ge=0, le=MAX_BYTES)]
Address = Annotated[int, msgspec.Meta(ge=I64_MIN + 1, le=I64_MAX)]
DeviceType = Annotated[int, msgspec.Meta(ge=0, le=MAX_DEVICE_TYPE)]
# ROCm's Kineto writes stream (and device) ids as pointers: "0x0"
LaneText = Annotated[str, msgspec.Meta(pattern=LANE_TEXT.pattern)]
NO_RAW = msgspec.Raw(b"")


class Args(msgspec.Struct, frozen=True, gc=False):
    # in the order Kineto writes them: the decoder tries the next field first
    external_id: I64 = msgspec.field(default=-1, name="External id")
    device: I64 | LaneText = -1
    stream: I64 | LaneText = -1
    correlation: I64 = -1
    registers: I32 = msgspec.field(default=-1, name="registers per thread")
    shared_memory: I64 = msgspec.field(default=-1, name="shared memory")
    # Inductor's cpu_op rows carry a launcher text such as "grid(100,)"
    grid: tuple[I32, ...] | str | None = None  # tuples: hashable, see columns._GRID
    block: tuple[I32, ...] | str | None = None
    occupancy: float = msgspec.field(default=math.nan, name="est. achieved occupancy %")
    bytes: I64 = -1
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    sequence: I64 = msgspec.field(default=-1, name="Sequence number")
    flops: float = math.nan
    # a metadata event's text (thread_name, process_name): any JSON value, checked later
    label: msgspec.Raw = msgspec.field(default=NO_RAW, name="name")
    # NCCL kernels' collective metadata (PyTorch's record_param_comms, copied by Kineto)
    group: str | I64 = msgspec.field(default="", name="Process Group Name")
    seq: I64 | str = msgspec.field(default=-1, name="Seq")
    # the allocator's [memory] instant events (profile_memory=True), in Kineto's order; the
    # defaults lie outside the ranges: a missing field is told apart (see .memory)
    total_reserved: Total = msgspec.field(default=-1, name="Total Reserved")
    total_allocated: Total = msgspec.field(default=-1, name="Total Allocated")
    amount: Amount = msgspec.field(default=MISSING, name="Bytes")
    device_id: I32 = msgspec.field(default=-1, name="Device Id")
    device_type: DeviceType = msgspec.field(default=-1, name="Device Type")
    addr: Address = msgspec.field(default=MISSING, name="Addr")


_EMPTY_ARGS = Args()

# Start times that are integers, or within FAST_LIMIT_US, decode as numbers that hold
# them to the nanosecond; a larger one with a fraction fails the fast types and its slice
# is decoded by the exact ones, which keep the number's text (see times.exact_ns). Durations
# stay floats: exact to the ns up to 101 days.
FastTime = int | Annotated[float, msgspec.Meta(ge=-FAST_LIMIT_US, le=FAST_LIMIT_US)]


class Event(msgspec.Struct, gc=False):
    """An event of any phase, as the whole-file decode reads them."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: I64 | str = -1
    tid: I64 | str = -1
    ts: FastTime = math.nan
    dur: float = math.nan
    id: I64 | str = -1
    args: Args = _EMPTY_ARGS  # shared, frozen: events without args cost nothing


def _exact_fields(
    struct: type[msgspec.Struct], skip: tuple[str, ...] = ()
) -> list[tuple[str, object, object]]:
    """A struct's fields with its start time as JSON text (``msgspec.Raw``)."""
    return [
        (f.name, msgspec.Raw, NO_RAW) if f.name == "ts" else (f.name, f.type, f.default)
        for f in msgspec.structs.fields(struct)
        if f.name not in skip
    ]


EventExact = msgspec.defstruct("EventExact", _exact_fields(Event), gc=False)


# Streamed slices decode each phase into its own type (a union tagged by "ph"): flow ends
# keep five fields and the phases perflab drops none, so they cost little to decode and
# are never keyed. A phase outside the Chrome trace format's list fails the slice, and the
# file is decoded whole.
class Phased(msgspec.Struct, tag_field="ph", gc=False):
    """Base of the streamed record types."""


Complete = msgspec.defstruct(  # Event's fields but ph, which the tag holds
    "Complete",
    [(f.name, f.type, f.default) for f in msgspec.structs.fields(Event) if f.name != "ph"],
    bases=(Phased,),
    tag="X",
    namespace={"ph": "X"},
)
CompleteExact = msgspec.defstruct(
    "CompleteExact",
    _exact_fields(Event, skip=("ph",)),
    bases=(Phased,),
    tag="X",
    namespace={"ph": "X"},
)
EXACT_TYPES = (EventExact, CompleteExact)


class MetadataArgs(msgspec.Struct, frozen=True, gc=False):
    label: msgspec.Raw = msgspec.field(default=NO_RAW, name="name")  # checked later


class Metadata(Phased, tag="M"):
    """Thread and process names (and sort orders, which perflab does not use)."""

    name: str = ""
    pid: I64 | str = -1
    tid: I64 | str = -1
    args: MetadataArgs = MetadataArgs()


class Instant(Phased, tag="i"):
    """Instant events: the allocator's ``[memory]`` events are read (see .memory), the
    others are not kept."""

    ph: ClassVar[str] = "i"  # as Event's field: the key reads it
    cat: str = ""
    name: str = ""
    pid: I64 | str = -1
    tid: I64 | str = -1
    ts: FastTime = math.nan
    args: Args = _EMPTY_ARGS


InstantExact = msgspec.defstruct(
    "InstantExact",
    _exact_fields(Instant),
    bases=(Phased,),
    tag="i",
    namespace={"ph": "i"},
)
INSTANT_TYPES = (Instant, InstantExact)


class Flow(Phased, tag="s"):
    cat: str = ""
    pid: I64 | str = -1
    tid: I64 | str = -1
    ts: FastTime = math.nan
    id: I64 | str = -1


FLOW_TYPES = (Flow, msgspec.defstruct("_FlowEnd", [], bases=(Flow,), tag="f"))
FlowExact = msgspec.defstruct("FlowExact", _exact_fields(Flow), bases=(Phased,), tag="s", gc=False)
EXACT_FLOW_TYPES = (
    FlowExact,
    msgspec.defstruct("_FlowEndExact", [], bases=(FlowExact,), tag="f"),
)
# The first pass only notes that flows are there: they are read (a second pass, with the
# types above and complete events left empty) only when a correlation is missing.
FLOW_MARKS = [
    msgspec.defstruct(f"_FlowMark{i}", [], bases=(Phased,), tag=phase)
    for i, phase in enumerate("sf")
]
COMPLETE_MARK = msgspec.defstruct("_CompleteMark", [], bases=(Phased,), tag="X")
DROPPED = [
    msgspec.defstruct(f"_Phase{i}", [], bases=(Phased,), tag=phase)
    for i, phase in enumerate("BEICbnetPONDVvRc()")
]
INSTANT_MARK = msgspec.defstruct("_InstantMark", [], bases=(Phased,), tag="i")
METADATA_MARK = msgspec.defstruct("_MetadataMark", [], bases=(Phased,), tag="M")


class File(msgspec.Struct):
    traceEvents: list[Event]
    # None when absent, so that a streamed file's head and tail can be merged
    deviceProperties: list[dict[str, object]] | None = None
    distributedInfo: dict[str, object] | None = None
    baseTimeNanoseconds: I64 | None = None


FileExact = msgspec.defstruct(
    "FileExact",
    [
        ("traceEvents", list[EventExact]),  # type: ignore[valid-type]
        *[(f.name, f.type, f.default) for f in msgspec.structs.fields(File)[1:]],
    ],
)
# each decode tries the fast types first, then the exact ones (see FastTime)
Records = list[msgspec.Struct]  # a slice of decoded events
RecordsDecoder = msgspec.json.Decoder[Records]
TopDecoder = msgspec.json.Decoder[msgspec.Struct]
DECODERS: tuple[TopDecoder, TopDecoder] = (
    msgspec.json.Decoder(File),
    msgspec.json.Decoder(FileExact),
)
SKIPPER = msgspec.json.Decoder(msgspec.defstruct("_Nothing", []))  # checks syntax only


def slice_decoder(*types: type[msgspec.Struct]) -> RecordsDecoder:
    return msgspec.json.Decoder(list.__class_getitem__(functools.reduce(operator.or_, types)))


SLICE_DECODERS: tuple[RecordsDecoder, RecordsDecoder] = (
    slice_decoder(Complete, Metadata, Instant, *FLOW_MARKS, *DROPPED),
    slice_decoder(CompleteExact, Metadata, InstantExact, *FLOW_MARKS, *DROPPED),
)
FLOW_SLICE_DECODERS: tuple[RecordsDecoder, RecordsDecoder] = (
    slice_decoder(COMPLETE_MARK, METADATA_MARK, INSTANT_MARK, *FLOW_TYPES, *DROPPED),
    slice_decoder(COMPLETE_MARK, METADATA_MARK, INSTANT_MARK, *EXACT_FLOW_TYPES, *DROPPED),
)


def streamed(events: Records) -> bool:
    """Whether a slice holds records typed by phase (see ``Phased``)."""
    return bool(events) and isinstance(events[0], Phased)
