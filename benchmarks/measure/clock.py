"""The clock a CPU core sustains, measured: a dependent chain of integer adds. Torch-free.

The theoretical peaks (``benchmarks.measure.theory``) are cores x clock x FLOP/cycle, and the
clock the kernel states is often not the one the core runs: under a hypervisor ``cpu MHz`` is
the base clock (2.6 GHz on the Sapphire Rapids this was written on) while the core boosts to
3.59, so a 1024^3 fp32 matmul reached 104% of the "theoretical" roof. A register add whose
input is the previous add's output takes exactly one cycle on every x86-64 core (a
register-register add: no renamer folds it, as Golden Cove folds small immediates), so
``ADDS`` of them per loop trip, timed, count cycles per second.

The chain is 300 bytes of x86-64 machine code called through ctypes from an executable
mapping. It runs in a child interpreter (``python -I``): a mapping the system refuses, or
any fault, costs the child, never the caller, and the clock is then unknown (None) and the
nominal one stands. Elsewhere than x86-64 nothing is measured. The figure is the fastest of
``REPEATS`` timed calls (a preempted call only reads slower) after ``WARM`` untimed ones (the
core ramps its clock up under load), on one core: with every core busy the clock can only be
lower, so a roof built on it stays an upper bound.
"""

from __future__ import annotations

import platform
import subprocess
import sys

ADDS = 100              # dependent adds per loop trip: the loop's own dec/jnz hide under them
# 2e6 cycles a call, ~0.5 ms at 4 GHz: short enough that some calls run between two
# preemptions on a loaded machine. Calls of 6 ms (2e7 cycles) were all preempted on a Zen 4
# whose two cores ran five other processes: they read 1.6-2.0 GHz where 0.5 ms calls read 4.3.
TRIPS = 20_000
REPEATS = 300
WARM = 20
TIMEOUT_S = 20.0
METHOD = (f"a chain of dependent 64-bit register adds (one cycle each), {ADDS} per loop trip, "
          f"{TRIPS:,} trips a call; the fastest of {REPEATS} calls after {WARM} untimed, "
          f"on one core, in a child process")

# The child: map the chain executable, call it, print the fastest call's GHz.
#   xor eax,eax; mov ecx,1; L: add rax,rcx (x ADDS); dec rdi; jnz L; ret
_CHILD = r"""
import ctypes, mmap, time
adds, trips, repeats, warm = {adds}, {trips}, {repeats}, {warm}
body = b"\x48\x01\xc8" * adds + b"\x48\xff\xcf"
head = b"\x31\xc0\xb9\x01\x00\x00\x00"
jump = -(len(body) + 6)
code = head + body + b"\x0f\x85" + jump.to_bytes(4, "little", signed=True) + b"\xc3"
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
chain = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(address)
assert chain(3) == 3 * adds, "the chain did not add up"
best = float("inf")
for i in range(warm + repeats):
    t0 = time.perf_counter()
    chain(trips)
    dt = time.perf_counter() - t0
    if i >= warm:
        best = min(best, dt)
print(adds * trips / best / 1e9)
"""


def supported() -> bool:
    # The chain takes its trip count in rdi: the System V calling convention (Windows passes
    # it in rcx, which the chain uses).
    return platform.machine().lower() in ("x86_64", "amd64") and sys.platform != "win32"


def sustained_clock_ghz() -> tuple[float | None, str]:
    """(GHz, how): the clock one core sustains under a dependent add chain; (None, why not)
    where it could not be measured."""
    if not supported():
        return None, (f"not measured: the add chain is x86-64 System V code, this is "
                      f"{platform.machine()} on {sys.platform}")
    code = _CHILD.format(adds=ADDS, trips=TRIPS, repeats=REPEATS, warm=WARM)
    try:
        done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True,
                              text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"not measured: {type(exc).__name__}: {exc}"[:200]
    try:
        ghz = float(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return None, f"not measured: {why}"[:200]
    if not 0.1 < ghz < 10.0:  # no core runs outside this: the timer or the chain misread
        return None, f"not measured: the chain read {ghz:.3g} GHz"
    return ghz, METHOD
