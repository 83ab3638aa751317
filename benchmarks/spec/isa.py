"""Instruction-set profiles: another machine's verdict previewed on this one (issue 34.5).

A profile caps the instruction sets the kernels may use, through oneDNN's
``ONEDNN_MAX_CPU_ISA`` (read once, at oneDNN's first dispatch: a capped profile is timed in a
process of its own). Only oneDNN's kernels obey it, so whether a cell is a preview is read
from the kernels it ran, not assumed per runtime: a PyTorch cell's (eager, compile) from
oneDNN's verbose log in the profile's process (``benchmarks.measure.onednn``: PyTorch also
runs FBGEMM's quantized kernels and MKL's float matmuls, which dispatch on the CPU's own
flags). What that log cannot see is known from measurement (``KNOWN``,
docs/performance-notes.md): OpenVINO obeys through its own oneDNN; ONNX Runtime's MLAS
dispatches on CPUID alone, so its cell under a cap would be the native one mislabelled.

``native`` is the machine as it is. A cap at or above what the CPU has is no preview: it is
this machine's own figure (said so). A cap needs the CPU to have the instruction set it names
(a preview of AMX needs an AMX machine): refused in one line otherwise. Torch-free.

A capped process's roofs are its own (``process_cap``): its peaks are measured under the cap
and its theoretical ones built on the instruction sets the cap leaves (``capped_flags``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

NATIVE = "native"
CAP_VARIABLE = "ONEDNN_MAX_CPU_ISA"


@dataclass(frozen=True)
class Profile:
    name: str
    cap: str | None           # ONEDNN_MAX_CPU_ISA's value (None: no cap)
    flags: tuple[str, ...]    # /proc/cpuinfo flags the CPU needs to run it (all of them)
    rank: int                 # wider instruction sets rank higher
    description: str
    # The /proc/cpuinfo flags of what it adds to the narrower profiles: a cap below it
    # withholds them.
    adds: tuple[str, ...] = ()


PROFILES = {p.name: p for p in (
    Profile(NATIVE, None, (), 100, "this machine as it is: no cap"),
    Profile("sse41", "SSE41", ("sse4_1",), 10, "SSE4.1: a CPU without AVX"),
    Profile("avx2", "AVX2", ("avx2",), 20, "AVX2 without VNNI (a Zen 3, a Haswell-Skylake "
                                           "client)", ("avx", "avx2", "fma", "f16c")),
    Profile("avx512", "AVX512_CORE", ("avx512f", "avx512bw"), 30, "AVX-512 without VNNI "
                                                                   "(a Skylake-SP Xeon)",
            ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
    Profile("avx512_vnni", "AVX512_CORE_VNNI", ("avx512_vnni",), 40,
            "AVX-512 with VNNI (Cascade Lake, a Zen 4 without bf16 use)",
            ("avx512_vnni", "avx_vnni")),
    Profile("avx512_bf16", "AVX512_CORE_BF16", ("avx512_bf16",), 50,
            "AVX-512 with VNNI and bf16 (Cooper Lake, Zen 4)", ("avx512_bf16",)),
    Profile("amx", "AVX512_CORE_AMX", ("amx_int8", "amx_bf16"), 60,
            "AMX (Sapphire Rapids and later Xeons)", ("amx_int8", "amx_bf16", "amx_tile")),
)}
PROFILE_NAMES = tuple(PROFILES)

# The runtimes whose kernels are read per cell, from oneDNN's verbose log in the profile's
# process: PyTorch's own.
READ_BY_KERNELS = ("eager", "compile", "compile-freeze")
# The runtimes PyTorch's oneDNN log cannot see into, as measured (docs/performance-notes.md):
# None where the kernels obey the cap, else why they do not. A runtime in neither is not
# known to obey it: no preview of it.
KNOWN = {
    # Its CPU plugin's own oneDNN reads ONEDNN_MAX_CPU_ISA: 46 ms, 120 under SSE41's cap.
    "openvino": None,
    # 40 ms, 42 under SSE41's cap.
    "ort": "ONNX Runtime's MLAS kernels dispatch on CPUID alone",
}
# oneDNN implementation names end in the instruction set their kernel was generated for
# (``brg_conv_fwd:avx512_core_vnni``, ``jit_uni_int8:avx2``), ranked as the profiles are;
# oneDNN never dispatches above its cap, so a tag above it would mean the cap was not read.
ONEDNN_ISA_RANK = {
    "sse41": 10, "avx": 15, "avx2": 20, "avx2_vnni": 25, "avx2_vnni_2": 26, "avx512_core": 30,
    "avx512_core_vnni": 40, "avx512_core_bf16": 50, "avx512_core_fp16": 55, "avx10_1_512": 55,
    "avx512_core_amx": 60, "avx10_1_512_amx": 60, "avx512_core_amx_fp16": 65,
    "avx10_1_512_amx_fp16": 65, "avx10_2_512": 70, "avx10_2_512_amx_2": 75,
}
# Implementation names inside oneDNN that carry no instruction set: its own gemm ("gemm:jit",
# whose kernels go through the same capped dispatch) and its reference code ("ref:any").
ONEDNN_GENERIC = ("jit", "any", "uni", "ref")


def cpu_flags() -> set[str]:
    """The CPU's flags from /proc/cpuinfo (empty where there is none to read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def machine_rank(flags: set[str]) -> int:
    """The widest profile this CPU can run (by rank); 0 where it has none of them."""
    return max((p.rank for p in PROFILES.values() if p.cap and set(p.flags) <= flags),
               default=0)


def process_cap(flags: set[str] | None = None) -> str | None:
    """The cap this process's oneDNN runs under (``ONEDNN_MAX_CPU_ISA``), where it withholds
    an instruction set this CPU (``flags``) has; None where there is none or it changes
    nothing, and this process's roofs are the machine's own."""
    cap = os.environ.get(CAP_VARIABLE) or None
    flags = cpu_flags() if flags is None else flags
    return cap if cap and capped_flags(flags, cap) != flags else None


def capped_flags(flags: set[str], cap: str | None) -> set[str]:
    """The CPU's flags less those a cap withholds: what every profile ranked above it adds.
    A cap no profile names (set by hand) withholds nothing: the theoretical roofs built on
    the flags stay an upper bound."""
    capping = next((p for p in PROFILES.values() if p.cap and p.cap == (cap or "").upper()),
                   None)
    if capping is None:
        return set(flags)
    withheld = {f for p in PROFILES.values() if p.cap and p.rank > capping.rank
                for f in p.adds}
    return set(flags) - withheld


def get(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(f"unknown instruction-set profile {name!r}; known: "
                         f"{', '.join(PROFILES)}")
    return PROFILES[name]


def check_profiles(names, flags: set[str] | None = None) -> None:
    """One line naming the first profile this CPU cannot run."""
    flags = cpu_flags() if flags is None else flags
    for name in names:
        profile = get(name)
        if profile.cap and not set(profile.flags) <= flags:
            raise ValueError(f"--isa {name} needs a CPU with {', '.join(profile.flags)}; this "
                             f"one has not ({profile.description}): a preview caps a wider "
                             f"CPU down, it cannot add instructions")


def label(name: str, flags: set[str] | None = None) -> dict:
    """What a cell of the profile says of itself: its name, its cap, and whether it is a
    preview (a cap below this CPU's widest) or this machine's own figure."""
    flags = cpu_flags() if flags is None else flags
    profile = get(name)
    preview = bool(profile.cap) and profile.rank < machine_rank(flags)
    if profile.cap is None:
        said = "native: this machine as it is"
    elif preview:
        said = f"preview: {name} on this machine (ONEDNN_MAX_CPU_ISA={profile.cap})"
    else:
        said = f"{name}: this machine's own instruction sets (the cap changes nothing)"
    return {"name": name, "cap": profile.cap, "preview": preview, "label": said}


def cap_rank(name: str) -> int:
    """The rank of a profile's cap (``native``: above every instruction set)."""
    profile = get(name)
    return profile.rank if profile.cap else max(ONEDNN_ISA_RANK.values()) + 1


def known_reason(runtime: str) -> str | None:
    """Why a runtime's cells are no preview, known before they run (``KNOWN``); None for
    one whose kernels are read (PyTorch's) or known to obey the cap (OpenVINO)."""
    if runtime in READ_BY_KERNELS:
        return None
    if runtime in KNOWN:
        return KNOWN[runtime]
    return f"{runtime}'s kernels are not known to obey ONEDNN_MAX_CPU_ISA"


def onednn_obeys(implementation: str, rank: int) -> bool:
    """Whether a oneDNN implementation (``jit:avx2``, ``x64:gemm:jit``, ``ref:any``) runs at
    or below a cap of ``rank``; a name this does not know is not assumed to."""
    tag = implementation.rsplit(":", 1)[-1]
    if tag in ONEDNN_GENERIC:
        return True
    return ONEDNN_ISA_RANK.get(tag, rank + 1) <= rank
