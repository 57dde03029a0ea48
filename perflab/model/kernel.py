"""Compiled kernels as plain data: PTX, SASS with source lines, resources.

A :class:`CompileResult` holds one :class:`KernelArtifacts` per kernel. SASS is
disassembled lazily (on first use) through a loader the compiler supplies, so code that
only wants PTX or resources never runs the disassembler.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from perflab.errors import InputError
from perflab.model.display import Shown
from perflab.model.serialize import dump_json, load_json

if TYPE_CHECKING:
    from perflab.model.saved import (
        CompileDoc,
        ControlDoc,
        DiagnosticDoc,
        KernelDoc,
        LiveDoc,
        ResourcesDoc,
        SassLineDoc,
    )

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

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self)

    def document(self) -> ResourcesDoc:
        from perflab.model.saved import ResourcesDoc

        return ResourcesDoc(**_counts(self, Resources))

    @classmethod
    def from_dict(cls, doc: object) -> Resources:
        from perflab.model.saved import ResourcesDoc
        from perflab.model.schema import check

        return cls.from_document(check(doc, ResourcesDoc))

    @classmethod
    def from_document(cls, doc: ResourcesDoc) -> Resources:
        return cls(**_counts(doc, cls))


def _counts(of: object, kind: type[Resources | LiveRegisters]) -> dict[str, int]:
    """The counts of a Resources or LiveRegisters (or of its saved form), by name."""
    return {f.name: int(getattr(of, f.name)) for f in fields(kind)}


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

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> ControlDoc:
        from perflab.model.saved import ControlDoc

        return ControlDoc(
            stall=self.stall,
            yields=self.yields,
            write_barrier=self.write_barrier,
            read_barrier=self.read_barrier,
            wait_mask=self.wait_mask,
            reuse=self.reuse,
        )

    @classmethod
    def from_dict(cls, doc: object) -> Control:
        """The saved form, every field range-checked (a ValueError names the field)."""
        from perflab.model.saved import ControlDoc
        from perflab.model.schema import check

        return cls.from_document(check(doc, ControlDoc))

    @classmethod
    def from_document(cls, doc: ControlDoc) -> Control:
        barriers = doc.write_barrier, doc.read_barrier
        return cls(doc.stall, doc.yields, *barriers, doc.wait_mask, doc.reuse)


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

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self)

    def document(self) -> LiveDoc:
        from perflab.model.saved import LiveDoc

        return LiveDoc(**_counts(self, LiveRegisters))

    @classmethod
    def from_dict(cls, doc: object) -> LiveRegisters:
        from perflab.model.saved import LiveDoc
        from perflab.model.schema import check

        return cls.from_document(check(doc, LiveDoc))

    @classmethod
    def from_document(cls, doc: LiveDoc) -> LiveRegisters:
        return cls(**_counts(doc, cls))


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

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document())

    def document(self) -> SassLineDoc:
        from perflab.model.saved import SassLineDoc

        return SassLineDoc(
            offset=self.offset,
            text=self.text,
            opcode=self.opcode,
            line=self.line,
            ptx_line=self.ptx_line,
            control=None if self.control is None else self.control.document(),
            live=None if self.live is None else self.live.document(),
        )

    @classmethod
    def from_dict(cls, doc: object) -> SassLine:
        """The saved form; ``control`` and ``live_registers`` may be absent (older files)."""
        from perflab.model.saved import SassLineDoc
        from perflab.model.schema import check

        return cls.from_document(check(doc, SassLineDoc))

    @classmethod
    def from_document(cls, doc: SassLineDoc) -> SassLine:
        control = None if doc.control is None else Control.from_document(doc.control)
        live = None if doc.live is None else LiveRegisters.from_document(doc.live)
        return cls(doc.offset, doc.text, doc.opcode, doc.line, doc.ptx_line, control, live)


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

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self)

    def document(self) -> DiagnosticDoc:
        from perflab.model.saved import DiagnosticDoc

        return DiagnosticDoc(
            file=self.file, line=self.line, severity=self.severity, message=self.message
        )

    @classmethod
    def from_dict(cls, doc: object) -> Diagnostic:
        from perflab.model.saved import DiagnosticDoc
        from perflab.model.schema import check

        return cls.from_document(check(doc, DiagnosticDoc))

    @classmethod
    def from_document(cls, doc: DiagnosticDoc) -> Diagnostic:
        return cls(doc.file, doc.line, doc.severity, doc.message)


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

    def to_dict(self, *, sass: bool = True) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self.document(sass=sass))

    def document(self, *, sass: bool = True) -> KernelDoc:
        from msgspec import UNSET

        from perflab.model.saved import KernelDoc

        return KernelDoc(
            name=self.name,
            mangled=self.mangled,
            arch=self.arch,
            ptx_span=self.ptx_span,
            ptx_lines_source=self.ptx_lines_source,
            resources=self.resources.document(),
            sass_lines=[s.document() for s in self.sass_lines] if sass else UNSET,
        )

    @classmethod
    def from_dict(cls, doc: object, module_ptx: str) -> KernelArtifacts:
        from perflab.model.saved import KernelDoc
        from perflab.model.schema import check

        return cls.from_document(check(doc, KernelDoc), module_ptx)

    @classmethod
    def from_document(cls, doc: KernelDoc, module_ptx: str) -> KernelArtifacts:
        kernel = cls(
            name=doc.name,
            mangled=doc.mangled,
            arch=doc.arch,
            module_ptx=module_ptx,
            ptx_span=doc.ptx_span,
            ptx_lines_source=doc.ptx_lines_source,
            resources=Resources.from_document(doc.resources),
        )
        if isinstance(doc.sass_lines, list):
            kernel._sass_lines = [SassLine.from_document(s) for s in doc.sass_lines]
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

    def to_dict(self, *, sass: bool = True) -> dict[str, object]:
        """JSON-ready; ``sass=False`` leaves SASS out (it can be rebuilt from the cubin)."""
        from perflab.model.schema import encode

        return encode(self.document(sass=sass))

    def document(self, *, sass: bool = True) -> CompileDoc:
        from perflab.model.saved import CompileDoc

        return CompileDoc(
            lang=self.lang,
            arch=self.arch,
            source=self.source,
            source_name=self.source_name,
            source_path=self.source_path,
            flags=self.flags,
            ptx=self.ptx,
            cubin=self.cubin,
            stages=self.stages,
            log=self.log,
            warnings=[w.document() for w in self.warnings],
            versions=self.versions,
            compile_s=self.compile_s,
            kernels=[k.document(sass=sass) for k in self.kernels],
        )

    @classmethod
    def from_dict(cls, doc: object, source: str = "<dict>") -> CompileResult:
        from perflab.model.saved import CompileDoc
        from perflab.model.schema import decode

        saved = decode(doc, CompileDoc, source, what="compile result")
        return cls(
            lang=saved.lang,
            arch=saved.arch,
            source=saved.source,
            source_name=saved.source_name,
            kernels=[KernelArtifacts.from_document(k, saved.ptx) for k in saved.kernels],
            ptx=saved.ptx,
            cubin=saved.cubin,
            source_path=saved.source_path,
            flags=saved.flags,
            stages=saved.stages,
            log=saved.log,
            warnings=[Diagnostic.from_document(w) for w in saved.warnings],
            versions=saved.versions,
            compile_s=saved.compile_s,
        )

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
