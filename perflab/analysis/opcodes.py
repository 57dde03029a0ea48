"""What a SASS opcode does, in a sentence or two, and its latency class.

Sources: the opcode names and their one-line meanings are NVIDIA's "CUDA Binary
Utilities" documentation, section "Instruction Set Reference" (the opcode tables for
Turing, Ampere, Hopper and Blackwell), and NVIDIA's "PTX ISA" for what the PTX
instructions that compile to them do. The sentences are written for perflab, not
copied. An opcode missing here is reported as "undocumented".

Latency classes, as the scheduler sees them:

- ``fixed``: the result is ready after a fixed number of cycles, which the stall counts
  of the instructions in between cover (integer and FP32 arithmetic, moves, predicates;
  ``HMMA``/``IMMA``/``DMMA`` too: ptxas schedules them by stall counts, not barriers).
- ``variable``: the instruction sets a scoreboard barrier that its consumers wait on,
  and the wait is short (shared memory, constants, special registers, MUFU, conversions,
  shuffles) or asynchronous work the kernel waits for explicitly (warpgroup MMA, TMA).
- ``long``: variable latency of hundreds of cycles: global and local memory, texture,
  atomics through L2.

These classes were checked against ptxas' own choices on kernels compiled for sm_75 to
sm_121: every opcode that sets a write barrier there is ``variable`` or ``long`` here
(tests/test_ptx_control.py).
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = (
    'NVIDIA "CUDA Binary Utilities", Instruction Set Reference; NVIDIA "PTX ISA" '
    "(descriptions written for perflab)"
)
LATENCIES = ("fixed", "variable", "long")
UNDOCUMENTED = "undocumented"


@dataclass(frozen=True)
class OpcodeInfo:
    mnemonic: str
    summary: str  # one or two sentences; "undocumented" when unknown
    latency: str  # "fixed", "variable", "long", or "" when unknown
    unit: str  # what does the work: "FP32", "integer", "shared memory", "MUFU", ...

    @property
    def documented(self) -> bool:
        return self.summary != UNDOCUMENTED

    def to_dict(self) -> dict[str, object]:
        from perflab.model.schema import encode

        return encode(self)

    def __str__(self) -> str:
        if not self.documented:
            return f"{self.mnemonic}: undocumented"
        return f"{self.mnemonic}: {self.summary} (latency: {self.latency}, {self.unit})"


_F, _V, _L = LATENCIES

# mnemonic -> (summary, latency, unit)
TABLE: dict[str, tuple[str, str, str]] = {
    # FP32
    "FADD": ("FP32 add.", _F, "FP32"),
    "FMUL": ("FP32 multiply.", _F, "FP32"),
    "FFMA": ("FP32 fused multiply-add (a * b + c with one rounding).", _F, "FP32"),
    "FMNMX": ("FP32 minimum or maximum.", _F, "FP32"),
    "FSETP": ("FP32 compare, setting a predicate register.", _F, "FP32"),
    "FSET": ("FP32 compare, writing the result to a register.", _F, "FP32"),
    "FSEL": ("Selects one of two FP32 values by a predicate.", _F, "FP32"),
    "FCHK": (
        "Checks whether an FP32 division needs the slow path (denormals, overflow).",
        _V,
        "FP32",
    ),
    "FSWZADD": ("FP32 add with operands swizzled across a quad of lanes.", _F, "FP32"),
    "FRND": ("Rounds an FP32 value to an integral value in FP format.", _V, "conversion"),
    "MUFU": (
        "Multi-function unit: approximate reciprocal, reciprocal square root, sine, "
        "cosine, log2, exp2 and the like, at a quarter of the FMA rate or less.",
        _V,
        "MUFU",
    ),
    # FP16/BF16 pairs
    "HADD2": ("Adds two pairs of FP16 (or BF16) values.", _F, "FP16"),
    "HMUL2": ("Multiplies two pairs of FP16 (or BF16) values.", _F, "FP16"),
    "HFMA2": (
        "Fused multiply-add on two pairs of FP16 (or BF16) values; with .MMA it runs on "
        "the tensor-core pipe, and ptxas also uses it to move constants.",
        _F,
        "FP16",
    ),
    "HMNMX2": ("Minimum or maximum of two pairs of FP16 values.", _F, "FP16"),
    "HSETP2": ("Compares two pairs of FP16 values, setting predicates.", _F, "FP16"),
    "HSET2": ("Compares two pairs of FP16 values, writing a register.", _F, "FP16"),
    # FP64: ptxas gives these barriers on most targets (fixed latency on sm_90 only)
    "DADD": ("FP64 add (full rate only on data-centre GPUs).", _V, "FP64"),
    "DMUL": ("FP64 multiply (full rate only on data-centre GPUs).", _V, "FP64"),
    "DFMA": ("FP64 fused multiply-add (full rate only on data-centre GPUs).", _V, "FP64"),
    "DSETP": ("FP64 compare, setting a predicate register.", _V, "FP64"),
    "DMNMX": ("FP64 minimum or maximum.", _V, "FP64"),
    # tensor cores
    "HMMA": (
        "Warp-level matrix multiply-accumulate on FP16/BF16/TF32 tiles (mma.sync, WMMA).",
        _F,
        "tensor core",
    ),
    "IMMA": ("Warp-level integer matrix multiply-accumulate (int8/int4).", _F, "tensor core"),
    "DMMA": ("Warp-level FP64 matrix multiply-accumulate.", _F, "tensor core"),
    "BMMA": ("Warp-level binary (1-bit) matrix multiply-accumulate.", _F, "tensor core"),
    "HGMMA": (
        "Warpgroup matrix multiply-accumulate (wgmma, FP16/BF16/TF32) on Hopper: "
        "asynchronous, waited for with WARPGROUP.DEPBAR.",
        _V,
        "tensor core",
    ),
    "QGMMA": ("Warpgroup matrix multiply-accumulate on FP8 (wgmma).", _V, "tensor core"),
    "IGMMA": ("Warpgroup matrix multiply-accumulate on int8 (wgmma).", _V, "tensor core"),
    "BGMMA": ("Warpgroup matrix multiply-accumulate on binary data (wgmma).", _V, "tensor core"),
    "UTCHMMA": ("Blackwell tensor-core MMA on FP16/BF16 (tcgen05.mma).", _V, "tensor core"),
    "UTCQMMA": ("Blackwell tensor-core MMA on FP8/FP6/FP4 (tcgen05.mma).", _V, "tensor core"),
    "UTCIMMA": ("Blackwell tensor-core MMA on int8 (tcgen05.mma).", _V, "tensor core"),
    "UTCOMMA": ("Blackwell block-scaled tensor-core MMA (tcgen05.mma).", _V, "tensor core"),
    "WARPGROUP": (
        "Warpgroup synchronisation around wgmma: ARRIVE before, DEPBAR to wait for results.",
        _V,
        "tensor core",
    ),
    # integer
    "IADD3": ("Adds three 32-bit integers.", _F, "integer"),
    "IADD": ("Adds two 32-bit integers.", _F, "integer"),
    "VIADD": ("Adds two 32-bit integers (Hopper and later).", _F, "integer"),
    "IMAD": (
        "Integer multiply-add (a * b + c); also ptxas' move and shift-add. .WIDE gives a "
        "64-bit result, as in pointer arithmetic.",
        _F,
        "integer",
    ),
    "IMUL": ("Integer multiply.", _F, "integer"),
    "LEA": ("Load effective address: (a << shift) + b, as in pointer arithmetic.", _F, "integer"),
    "LOP3": ("Any logic function of three inputs (a lookup table of 8 bits).", _F, "integer"),
    "LOP": ("Logic operation on two inputs.", _F, "integer"),
    "SHF": ("Funnel shift: shifts a 64-bit pair of registers left or right.", _F, "integer"),
    "SHL": ("Shift left.", _F, "integer"),
    "SHR": ("Shift right.", _F, "integer"),
    "ISETP": ("Integer compare, setting a predicate register.", _F, "integer"),
    "IMNMX": ("Integer minimum or maximum.", _F, "integer"),
    "VIMNMX": ("Integer minimum or maximum (Hopper and later).", _F, "integer"),
    "IABS": ("Integer absolute value.", _F, "integer"),
    "IDP": ("Integer dot product of packed bytes or halves (dp4a, dp2a).", _F, "integer"),
    "SEL": ("Selects one of two values by a predicate.", _F, "integer"),
    "PRMT": ("Permutes bytes from a pair of registers.", _F, "integer"),
    "SGXT": ("Sign-extends a bit field.", _F, "integer"),
    "BMSK": ("Builds a bit mask.", _F, "integer"),
    "FLO": ("Finds the leading one bit.", _V, "integer"),
    "POPC": ("Counts the bits set.", _V, "integer"),
    "BREV": ("Reverses the bits.", _V, "integer"),
    "BFE": ("Extracts a bit field.", _F, "integer"),
    "BFI": ("Inserts a bit field.", _F, "integer"),
    "PLOP3": ("Any logic function of three predicates.", _F, "predicate"),
    "P2R": ("Copies predicate registers into a general register.", _F, "predicate"),
    "R2P": ("Copies bits of a register into predicate registers.", _F, "predicate"),
    "MOV": ("Copies a register or a constant.", _F, "move"),
    "MOV32I": ("Copies a 32-bit constant into a register.", _F, "move"),
    "CS2R": (
        "Reads a fixed-latency special register (a clock, or zero) into registers.",
        _F,
        "move",
    ),
    "S2R": (
        "Reads a special register (thread or block index, lane id, clock) into a register.",
        _V,
        "special register",
    ),
    "S2UR": ("Reads a special register into a uniform register.", _V, "special register"),
    "R2UR": ("Copies a register to a uniform register.", _V, "uniform datapath"),
    # conversions
    "I2F": ("Converts an integer to floating point.", _V, "conversion"),
    "F2I": ("Converts floating point to an integer.", _V, "conversion"),
    "F2F": ("Converts between floating-point precisions.", _V, "conversion"),
    "I2I": ("Converts between integer sizes with saturation.", _V, "conversion"),
    "I2FP": ("Converts an integer to FP32 on the FMA pipe.", _F, "conversion"),
    "F2IP": ("Converts FP32 to a packed narrow integer.", _F, "conversion"),
    "F2FP": ("Converts and packs two FP32 values into FP16/BF16 (or FP8) pairs.", _F, "conversion"),
    # warp-level
    "SHFL": ("Warp shuffle: reads a register from another lane of the warp.", _V, "warp"),
    "VOTE": ("Warp vote: combines a predicate across the warp's lanes.", _F, "warp"),
    "VOTEU": ("Warp vote into a uniform register or predicate.", _F, "warp"),
    "MATCH": ("Finds the lanes of the warp holding the same value.", _V, "warp"),
    "REDUX": ("Reduces a register across the warp's lanes (Ampere and later).", _V, "warp"),
    "ELECT": ("Elects one active lane of the warp.", _F, "warp"),
    # memory: constants and shared
    "LDC": ("Loads from a constant bank (kernel parameters, __constant__).", _V, "constant"),
    "LDCU": ("Loads from a constant bank into a uniform register.", _V, "constant"),
    "ULDC": ("Loads from a constant bank into a uniform register.", _V, "constant"),
    "LDS": ("Loads from shared memory.", _V, "shared memory"),
    "STS": ("Stores to shared memory.", _V, "shared memory"),
    "LDSM": (
        "Loads matrix fragments from shared memory for the tensor cores (ldmatrix).",
        _V,
        "shared memory",
    ),
    "STSM": ("Stores matrix fragments to shared memory (stmatrix).", _V, "shared memory"),
    "ATOMS": ("Atomic operation on shared memory.", _V, "shared memory"),
    # memory: global, local, generic
    "LDG": ("Loads from global memory.", _L, "global memory"),
    "STG": ("Stores to global memory.", _L, "global memory"),
    "LD": ("Loads through a generic address (global, shared or local).", _L, "memory"),
    "ST": ("Stores through a generic address (global, shared or local).", _L, "memory"),
    "LDL": (
        "Loads from per-thread local memory (register spills, stack, indexed arrays).",
        _L,
        "local memory",
    ),
    "STL": (
        "Stores to per-thread local memory (register spills, stack, indexed arrays).",
        _L,
        "local memory",
    ),
    "ATOM": ("Atomic operation through a generic address.", _L, "global memory"),
    "ATOMG": ("Atomic operation on global memory, returning the old value.", _L, "global memory"),
    "RED": ("Atomic reduction to memory without a returned value.", _L, "global memory"),
    "REDG": ("Atomic reduction to global memory without a returned value.", _L, "global memory"),
    "LDGSTS": (
        "Asynchronous copy from global to shared memory without registers (cp.async).",
        _L,
        "global memory",
    ),
    "LDGDEPBAR": ("Marks a group of cp.async copies to wait for later.", _F, "global memory"),
    "UTMALDG": (
        "Tensor memory accelerator: bulk tensor copy from global to shared memory.",
        _L,
        "TMA",
    ),
    "UTMASTG": ("Tensor memory accelerator: bulk tensor copy from shared to global.", _L, "TMA"),
    "UTMAPF": ("Tensor memory accelerator: prefetch of a tensor tile into L2.", _L, "TMA"),
    "UTMAREDG": ("Tensor memory accelerator: bulk reduction into global memory.", _L, "TMA"),
    "UBLKCP": ("Bulk copy between global and shared memory (cp.async.bulk).", _L, "TMA"),
    "CCTL": ("Cache control: invalidates or writes back cache lines.", _L, "memory"),
    "MEMBAR": ("Memory barrier: orders this thread's memory accesses.", _L, "memory"),
    "FENCE": ("Memory fence (proxy or scope ordering).", _L, "memory"),
    "ERRBAR": ("Waits for outstanding memory errors to be reported.", _L, "memory"),
    "TEX": ("Texture fetch with filtering.", _L, "texture"),
    "TLD": ("Texture load without filtering.", _L, "texture"),
    "TLD4": ("Texture gather of four texels.", _L, "texture"),
    "TXQ": ("Texture query.", _L, "texture"),
    "SULD": ("Surface load.", _L, "texture"),
    "SUST": ("Surface store.", _L, "texture"),
    # synchronisation and control flow
    "BAR": ("Thread-block barrier (__syncthreads, named barriers).", _V, "barrier"),
    "SYNCS": (
        "Shared-memory barrier (mbarrier) arrive and wait, as in TMA pipelines.",
        _V,
        "barrier",
    ),
    "DEPBAR": ("Waits until a scoreboard's count of pending operations drops.", _V, "barrier"),
    "BSSY": ("Marks where diverged lanes reconverge (with BSYNC).", _F, "control"),
    "BSYNC": ("Waits for diverged lanes to reconverge.", _F, "control"),
    "BMOV": ("Moves a convergence-barrier state.", _F, "control"),
    "WARPSYNC": ("Synchronises the lanes of a warp named by a mask (__syncwarp).", _F, "control"),
    "BRA": ("Branch (relative); predicated, it is the branch of an if or a loop.", _F, "control"),
    "BRX": ("Indirect branch (a jump table).", _F, "control"),
    "JMP": ("Absolute jump.", _F, "control"),
    "JMX": ("Absolute indirect jump.", _F, "control"),
    "CALL": ("Calls a function.", _F, "control"),
    "RET": ("Returns from a function.", _F, "control"),
    "EXIT": ("Ends the thread.", _F, "control"),
    "KILL": ("Ends the thread (discard).", _F, "control"),
    "NANOSLEEP": ("Suspends the warp for about the given time (__nanosleep).", _V, "control"),
    "YIELD": ("Hints the scheduler to switch warps.", _F, "control"),
    "BPT": ("Breakpoint or trap.", _F, "control"),
    "NOP": ("No operation: padding after the kernel's end, or a scheduling gap.", _F, "control"),
    "ACQBULK": ("Waits for bulk asynchronous copies to complete.", _V, "barrier"),
    "PMTRIG": ("Triggers a performance-monitor event.", _F, "control"),
}

# the uniform datapath: U + an integer opcode computes once per warp, in uniform registers
_UNIFORM_OF = {"ISETP", "IADD3", "IMAD", "LEA", "LOP3", "SHF", "MOV", "SEL", "PRMT", "SGXT"}
_UNIFORM_OF |= {"FLO", "POPC", "BREV", "BMSK", "PLOP3", "IABS", "IMNMX", "VIMNMX", "P2R"}
_UNIFORM_OF |= {"R2P", "BFE", "BFI", "SHL", "SHR", "IADD"}


def opcode_info(opcode: str) -> OpcodeInfo:
    """What ``opcode`` (``LDG.E.128`` or ``LDG``) does; "undocumented" when not known."""
    mnemonic = opcode.split(".", 1)[0]
    entry = TABLE.get(mnemonic)
    if entry is not None:
        return OpcodeInfo(mnemonic, *entry)
    base = mnemonic[1:]
    if mnemonic.startswith("U") and base in _UNIFORM_OF:
        summary, latency, _ = TABLE[base]
        what = summary[0].lower() + summary[1:]
        return OpcodeInfo(
            mnemonic, f"Uniform datapath (one value per warp): {what}", latency, "uniform datapath"
        )
    return OpcodeInfo(mnemonic, UNDOCUMENTED, "", "")


def latency_of(opcode: str) -> str:
    """``fixed``, ``variable``, ``long``, or ``""`` for an undocumented opcode."""
    return opcode_info(opcode).latency
