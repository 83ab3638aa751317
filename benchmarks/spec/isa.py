"""Instruction-set profiles: another machine's verdict previewed on this one (issue 34.5).

A profile caps the instruction sets the kernels may use, through oneDNN's
``ONEDNN_MAX_CPU_ISA`` (read once, at oneDNN's first dispatch: a capped profile is timed in a
process of its own). Which runtimes obey the cap was measured, not assumed
(docs/performance-notes.md): PyTorch's oneDNN kernels (eager, compile) and OpenVINO (through
its oneDNN) do; ONNX Runtime's MLAS dispatches on CPUID alone, so an ORT cell under a cap
would be the native one mislabelled, and is refused with one line instead.

``native`` is the machine as it is. A cap at or above what the CPU has is no preview: it is
this machine's own figure (said so). A cap needs the CPU to have the instruction set it names
(a preview of AMX needs an AMX machine): refused in one line otherwise. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NATIVE = "native"


@dataclass(frozen=True)
class Profile:
    name: str
    cap: str | None           # ONEDNN_MAX_CPU_ISA's value (None: no cap)
    flags: tuple[str, ...]    # /proc/cpuinfo flags the CPU needs to run it (all of them)
    rank: int                 # wider instruction sets rank higher
    description: str


PROFILES = {p.name: p for p in (
    Profile(NATIVE, None, (), 100, "this machine as it is: no cap"),
    Profile("sse41", "SSE41", ("sse4_1",), 10, "SSE4.1: a CPU without AVX"),
    Profile("avx2", "AVX2", ("avx2",), 20, "AVX2 without VNNI (a Zen 3, a Haswell-Skylake "
                                           "client)"),
    Profile("avx512", "AVX512_CORE", ("avx512f", "avx512bw"), 30, "AVX-512 without VNNI "
                                                                   "(a Skylake-SP Xeon)"),
    Profile("avx512_vnni", "AVX512_CORE_VNNI", ("avx512_vnni",), 40,
            "AVX-512 with VNNI (Cascade Lake, a Zen 4 without bf16 use)"),
    Profile("avx512_bf16", "AVX512_CORE_BF16", ("avx512_bf16",), 50,
            "AVX-512 with VNNI and bf16 (Cooper Lake, Zen 4)"),
    Profile("amx", "AVX512_CORE_AMX", ("amx_int8", "amx_bf16"), 60,
            "AMX (Sapphire Rapids and later Xeons)"),
)}
PROFILE_NAMES = tuple(PROFILES)
# The runtimes whose kernels obey the cap (measured: docs/performance-notes.md).
HONOURED_BY = ("eager", "compile", "compile-freeze", "openvino")


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
