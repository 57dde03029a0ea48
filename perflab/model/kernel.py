"""Compiled kernels as plain data: PTX, SASS with source lines, resources.

A :class:`CompileResult` holds one :class:`KernelArtifacts` per kernel. SASS is
disassembled lazily (on first use) through a loader the compiler supplies, so code that
only wants PTX or resources never runs the disassembler.
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from perflab.errors import InputError, SchemaError
from perflab.model.display import Shown
from perflab.model.serialize import dump_json, load_json

KIND = "compile"


@dataclass
class Resources:
    """Per-kernel resources as ptxas reports them (bytes, except ``registers`` and
    ``barriers``). ``shared_dynamic`` is known for Triton kernels (launch-time for CUDA)."""

    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    shared_static: int = 0
    shared_dynamic: int = 0
    stack: int = 0
    constant: int = 0
    barriers: int = 0

    @property
    def shared_bytes(self) -> int:
        return self.shared_static + self.shared_dynamic

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Resources:
        names = {f.name for f in fields(cls)}
        return cls(**{k: int(v) for k, v in doc.items() if k in names})


# Bounds of the values a saved SASS line may carry (a file outside them is refused).
CONTROL_BOUNDS = {"stall": 15, "wait_mask": 0x3F, "reuse": 0xF}
BARRIER_MAX = 6  # a 3-bit field: 0-5 are the six scoreboards, 7 (none) is stored as None
LIVE_MAX = 255  # registers of one kind per thread


def _bounded(doc: dict[str, Any], key: str, top: int) -> int:
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise ValueError(f"{key} must be an integer 0..{top}, not {value!r}")
    return value


@dataclass(frozen=True)
class Control:
    """The scheduling control bits of one Volta-or-later instruction, as ptxas set them
    (decoded by :mod:`perflab.analysis.sass_control`).

    ``yields`` is True where the instruction's yield bit is clear: the hint to switch to
    another warp after it (the raw bit is set for "stay on this warp"; see the decoder).
    A barrier is 0-5, or None where the field reads 7 (no barrier)."""

    stall: int  # cycles before the warp's next instruction may issue (0-15)
    yields: bool
    write_barrier: int | None  # set when the result is written (variable-latency ops)
    read_barrier: int | None  # set when the source registers have been read
    wait_mask: int  # bit b: wait for barrier b before issuing
    reuse: int  # bit i: keep source operand i (a, b, c, d) in the reuse cache

    @property
    def waits_on(self) -> tuple[int, ...]:
        return tuple(b for b in range(6) if self.wait_mask >> b & 1)

    @property
    def sets(self) -> tuple[int, ...]:
        """The barriers this instruction sets (write, then read; each once)."""
        found = [b for b in (self.write_barrier, self.read_barrier) if b is not None]
        return tuple(dict.fromkeys(found))

    def compact(self) -> str:
        """``S:4 Y W2 R- w:0b000100 reuse:a``: stall, yield (``-`` for none), write and
        read barrier, wait mask (bit 0 rightmost) and the operands kept for reuse."""
        reuse = "".join("abcd"[i] for i in range(4) if self.reuse >> i & 1) or "-"
        return (
            f"S:{self.stall} {'Y' if self.yields else '-'} W{_barrier(self.write_barrier)} "
            f"R{_barrier(self.read_barrier)} w:0b{self.wait_mask:06b} reuse:{reuse}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "stall": self.stall,
            "yield": self.yields,
            "write_barrier": self.write_barrier,
            "read_barrier": self.read_barrier,
            "wait_mask": self.wait_mask,
            "reuse": self.reuse,
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Control:
        """The saved form, every field range-checked (ValueError otherwise)."""
        if not isinstance(doc, dict) or not isinstance(doc.get("yield"), bool):
            raise ValueError(f"control must be a dict with a boolean 'yield', not {doc!r}")
        barriers = []
        for key in ("write_barrier", "read_barrier"):
            barriers.append(None if doc.get(key) is None else _bounded(doc, key, BARRIER_MAX))
        return cls(
            _bounded(doc, "stall", CONTROL_BOUNDS["stall"]),
            doc["yield"],
            barriers[0],
            barriers[1],
            _bounded(doc, "wait_mask", CONTROL_BOUNDS["wait_mask"]),
            _bounded(doc, "reuse", CONTROL_BOUNDS["reuse"]),
        )


def _barrier(value: int | None) -> str:
    return "-" if value is None else str(value)


@dataclass(frozen=True)
class LiveRegisters:
    """Registers live at an instruction, as ``nvdisasm --print-life-ranges`` counts them:
    general (``gpr``), predicate, uniform and uniform predicate registers."""

    gpr: int = 0
    pred: int = 0
    ugpr: int = 0
    upred: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LiveRegisters:
        if not isinstance(doc, dict):
            raise ValueError(f"live_registers must be a dict, not {doc!r}")
        names = [f.name for f in fields(cls)]
        unknown = set(doc) - set(names)
        if unknown:
            raise ValueError(f"live_registers: unknown fields {sorted(unknown)}")
        return cls(**{k: _bounded(doc, k, LIVE_MAX) for k in names if k in doc})


SPILL_MARK = '(*"SpillRefill"*)'  # how nvdisasm marks the local-memory traffic of spills


@dataclass(frozen=True)
class SassLine:
    """One line of a kernel's SASS: an instruction (with ``offset``) or a label.

    ``control`` and ``live`` are None where the disassembly did not give them (a result
    saved before perflab read them, an architecture whose control layout is unknown)."""

    offset: int | None  # byte offset in the function; None for a label
    text: str  # "@P0 LDG.E.128 R4, desc[UR6][R2.64]" or ".L_x_2:"
    opcode: str = ""  # full opcode with modifiers ("LDG.E.128"); "" for a label
    line: int | None = None  # line in the user's source (see analysis.sass)
    ptx_line: int | None = None  # line in the module's PTX, where ptxas recorded it
    control: Control | None = None  # scheduling controls (analysis.sass_control)
    live: LiveRegisters | None = None  # registers live here (nvdisasm -plr)

    @property
    def is_label(self) -> bool:
        return self.offset is None

    @property
    def predicated(self) -> bool:
        return self.text.startswith("@")

    @property
    def mnemonic(self) -> str:
        """The opcode's first part: ``LDG`` for ``LDG.E.128``."""
        return self.opcode.split(".", 1)[0]

    @property
    def is_spill(self) -> bool:
        """A store or load that nvdisasm marks as spill traffic."""
        return SPILL_MARK in self.text

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset": self.offset,
            "text": self.text,
            "opcode": self.opcode,
            "line": self.line,
            "ptx_line": self.ptx_line,
            "control": None if self.control is None else self.control.to_dict(),
            "live_registers": None if self.live is None else self.live.to_dict(),
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SassLine:
        """The saved form; ``control`` and ``live_registers`` may be absent (older files)."""
        control, live = doc.get("control"), doc.get("live_registers")
        return cls(
            doc.get("offset"),
            str(doc["text"]),
            str(doc.get("opcode", "")),
            doc.get("line"),
            doc.get("ptx_line"),
            None if control is None else Control.from_dict(control),
            None if live is None else LiveRegisters.from_dict(live),
        )


@dataclass(frozen=True)
class Diagnostic:
    """A compiler message, its line mapped to the user's source where it had one."""

    file: str
    line: int | None
    severity: str  # "error", "warning", "note", "info"
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.severity}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Diagnostic:
        return cls(str(doc["file"]), doc.get("line"), str(doc["severity"]), str(doc["message"]))


SassLoader = Callable[[], list[SassLine]]


@dataclass
class KernelArtifacts:
    """Everything the compiler produced for one kernel.

    ``ptx_span`` is the kernel's ``.entry`` (first, last line, 1-based) within the
    module's PTX; ``ptx_lines_source[i]`` is the user's source line of PTX line
    ``ptx_span[0] + i`` (from ``.loc``), or None.
    """

    name: str  # demangled
    mangled: str
    arch: str
    module_ptx: str
    ptx_span: tuple[int, int]
    ptx_lines_source: list[int | None]
    resources: Resources
    _sass_loader: SassLoader | None = field(default=None, repr=False, compare=False)
    _sass_lines: list[SassLine] | None = field(default=None, repr=False, compare=False)

    @property
    def ptx(self) -> str:
        first, last = self.ptx_span
        return "\n".join(self.module_ptx.splitlines()[first - 1 : last])

    @property
    def sass_lines(self) -> list[SassLine]:
        if self._sass_lines is None:
            self._sass_lines = self._sass_loader() if self._sass_loader else []
        return self._sass_lines

    def defer_sass(self, loader: SassLoader) -> None:
        """Let ``loader`` supply the SASS on first use (the compiler's disassembler runs
        only when SASS is asked for), unless the SASS is already known."""
        if self._sass_lines is None:
            self._sass_loader = loader

    @property
    def sass(self) -> str:
        return "\n".join(
            s.text if s.is_label else f"/*{s.offset:04x}*/ {s.text}" for s in self.sass_lines
        )

    def _instructions(self) -> list[SassLine]:
        # NOPs only pad the function to its alignment: they are not the kernel's work
        return [s for s in self.sass_lines if s.opcode and s.opcode != "NOP"]

    @property
    def opcodes(self) -> dict[str, int]:
        """Full opcode (``LDG.E.128``) -> count, most frequent first (padding NOPs out)."""
        return dict(Counter(s.opcode for s in self._instructions()).most_common())

    @property
    def instruction_mix(self) -> dict[str, int]:
        """Opcode family (``LDG``) -> count, most frequent first (padding NOPs out)."""
        return dict(Counter(s.mnemonic for s in self._instructions()).most_common())

    @property
    def instruction_count(self) -> int:
        return len(self._instructions())

    def to_dict(self, *, sass: bool = True) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "mangled": self.mangled,
            "arch": self.arch,
            "ptx_span": list(self.ptx_span),
            "ptx_lines_source": self.ptx_lines_source,
            "resources": self.resources.to_dict(),
        }
        if sass:
            doc["sass_lines"] = [s.to_dict() for s in self.sass_lines]
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any], module_ptx: str) -> KernelArtifacts:
        first, last = (int(v) for v in doc["ptx_span"])
        kernel = cls(
            name=str(doc["name"]),
            mangled=str(doc["mangled"]),
            arch=str(doc["arch"]),
            module_ptx=module_ptx,
            ptx_span=(first, last),
            ptx_lines_source=[None if v is None else int(v) for v in doc["ptx_lines_source"]],
            resources=Resources.from_dict(doc["resources"]),
        )
        if "sass_lines" in doc:
            kernel._sass_lines = [SassLine.from_dict(s) for s in doc["sass_lines"]]
        return kernel


@dataclass
class CompileResult(Shown):
    """One compilation: the source, its kernels, the intermediate texts and the log.

    ``stages`` holds the texts other than PTX and SASS (Triton: ``ttir``, ``ttgir``,
    ``llir``). ``source_name`` is how diagnostics and views name the source.
    """

    lang: str  # "cuda" or "triton"
    arch: str
    source: str
    source_name: str
    kernels: list[KernelArtifacts]
    ptx: str
    cubin: bytes = b""
    source_path: str = ""  # the path the compiler saw; line info in PTX/SASS names it
    flags: list[str] = field(default_factory=list)
    stages: dict[str, str] = field(default_factory=dict)
    log: str = ""
    warnings: list[Diagnostic] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    compile_s: float = 0.0
    cached: bool = False

    def kernel(self, name: str | None = None) -> KernelArtifacts:
        """The kernel called ``name`` (demangled, mangled, or a unique prefix of the
        demangled name); the only kernel when ``name`` is None."""
        if not self.kernels:
            raise InputError("the source defines no kernel (__global__ function)")
        if name is None:
            return self.kernels[0]
        for k in self.kernels:
            if name in (k.name, k.mangled) or k.name.split("(")[0] == name:
                return k
        starts = [k for k in self.kernels if k.name.startswith(name)]
        if len(starts) == 1:
            return starts[0]
        known = ", ".join(k.name for k in self.kernels)
        raise InputError(f"no kernel named {name!r} (kernels: {known})")

    def to_dict(self, *, sass: bool = True) -> dict[str, Any]:
        """JSON-ready; ``sass=False`` leaves SASS out (it can be rebuilt from the cubin)."""
        return {
            "lang": self.lang,
            "arch": self.arch,
            "source": self.source,
            "source_name": self.source_name,
            "source_path": self.source_path,
            "flags": self.flags,
            "ptx": self.ptx,
            "cubin_b64": base64.b64encode(self.cubin).decode("ascii"),
            "stages": self.stages,
            "log": self.log,
            "warnings": [w.to_dict() for w in self.warnings],
            "versions": self.versions,
            "compile_s": self.compile_s,
            "kernels": [k.to_dict(sass=sass) for k in self.kernels],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = "<dict>") -> CompileResult:
        try:
            ptx = str(doc["ptx"])
            return cls(
                lang=str(doc["lang"]),
                arch=str(doc["arch"]),
                source=str(doc["source"]),
                source_name=str(doc["source_name"]),
                kernels=[KernelArtifacts.from_dict(k, ptx) for k in doc["kernels"]],
                ptx=ptx,
                cubin=base64.b64decode(doc.get("cubin_b64", ""), validate=True),
                source_path=str(doc.get("source_path", "")),
                flags=[str(f) for f in doc.get("flags", [])],
                stages={str(k): str(v) for k, v in doc.get("stages", {}).items()},
                log=str(doc.get("log", "")),
                warnings=[Diagnostic.from_dict(w) for w in doc.get("warnings", [])],
                versions={str(k): str(v) for k, v in doc.get("versions", {}).items()},
                compile_s=float(doc.get("compile_s", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SchemaError(f"malformed compile result: {exc!r}", source=source) from None

    def save(self, path: str | os.PathLike[str]) -> Path:
        return dump_json(KIND, self.to_dict(), path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CompileResult:
        return cls.from_dict(load_json(KIND, path), source=str(path))

    def summary_line(self) -> str:
        names = ", ".join(k.name for k in self.kernels) or "no kernels"
        how = "cached" if self.cached else f"{self.compile_s:.2f} s"
        return f"{self.lang} for {self.arch}: {names} ({how})"

    def __str__(self) -> str:
        return self.summary_line()
