"""A target, what was measured and whether it was met: the rows of the generated performance
docs, shared by ``make perf`` (tools/perf.py, tools/perf_ui.py) and ``make perf-gpu``.

A target holds on any machine or says which it needs: it is a ratio of two things measured
side by side in one run (ours against a floor, a variant against its baseline), or it is keyed
to the instruction set it needs (``check_isa``) and skipped, with a line, on a CPU without it.
A threshold in seconds tests the machine, not the product: ``check`` refuses one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# "<= 3 s", "within 60 s", "< 1.5 seconds", "<= {limit} min": a time written as a threshold
# ({...}: the number an f-string fills in, as the target table's test reads the source).
ABSOLUTE_TIME = re.compile(r"(<=|>=|<|>|within|under|at most)\s*(\d[\d.,_]*|\{[^}]*\})\s*"
                           r"(s|ms|sec|secs|seconds?|min|mins|minutes?|h|hours?)\b")

# The instruction sets a target may need, by the name a skipped row gives, and the
# /proc/cpuinfo flags of which any one will do.
ISA = {"AVX2": ("avx2",),
       "AVX-512": ("avx512f",),
       "VNNI or AMX": ("avx512_vnni", "avx_vnni", "amx_int8"),
       "AMX": ("amx_int8", "amx_bf16")}
# The flags the generated doc lists (what INT8 and bf16 speed depend on).
SHOWN_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile",
               "amx_int8", "amx_bf16")


def instruction_sets() -> set[str]:
    """The CPU's flags from /proc/cpuinfo (empty where there is none to read): the product's
    own reading, which its instruction-set profiles use."""
    from benchmarks.spec.isa import cpu_flags
    return cpu_flags()


def isa_class(flags: set[str] | None = None) -> str:
    """The widest of the CPU's vector and matrix extensions: what INT8's speed depends on."""
    flags = instruction_sets() if flags is None else flags
    for flag, name in (("amx_int8", "AMX"), ("avx512_vnni", "AVX-512 VNNI"),
                       ("avx512f", "AVX-512"), ("avx2", "AVX2")):
        if flag in flags:
            return name
    return "no AVX2" if flags else "unknown"


def cpu_card() -> dict:
    """What the generated doc records of the machine: the CPU's model, its instruction sets
    (of SHOWN_FLAGS) and the load average now (1, 5, 15 minutes)."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = instruction_sets()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"model": model, "isa": [f for f in SHOWN_FLAGS if f in flags],
            "isa_class": isa_class(flags), "cores": os.cpu_count(), "load": load}


def check(name: str, measured, target: str, ok: bool, note: str = "") -> dict:
    if ABSOLUTE_TIME.search(str(target)):
        raise ValueError(f"{name}: the threshold {target!r} is a time; a target is a ratio "
                         f"against a floor measured in the same run, or keyed to an "
                         f"instruction set (check_isa)")
    return {"target": name, "measured": measured, "threshold": target, "ok": bool(ok),
            "note": note}


def check_ratio(name: str, ours: float, floor: float, at_most: float, floor_name: str,
                note: str = "") -> dict:
    """Ours over its floor, both in seconds measured side by side in the same run."""
    ratio = ours / floor if floor > 0 else float("inf")
    return check(f"{name} / {floor_name}", f"{ratio:.2f} ({ours:.2f} s / {floor:.2f} s)",
                 f"<= {at_most:g}", ratio <= at_most, note)


def check_isa(needs: str, name: str, measured, target: str, ok: bool, note: str = "",
              flags: set[str] | None = None, exact: bool = False) -> dict:
    """A target that holds only with the instruction set ``needs`` (a key of ISA): judged where
    the CPU has it, else the row says so and counts as skipped, not met or missed. ``exact``:
    only where it is the CPU's widest (isa_class), for figures measured on one kind of CPU."""
    row = check(name, measured, target, ok, note)
    flags = instruction_sets() if flags is None else flags
    has = isa_class(flags) == needs if exact else bool(flags & set(ISA[needs]))
    if not has:
        # An exact row's threshold was measured on one CPU kind: another kind is not lacking
        # anything (an AMX Xeon has AVX2), its threshold is just not known yet.
        why = (f"threshold measured on {needs} CPUs only (this CPU: {isa_class(flags)})" if exact
               else f"needs {needs} (this CPU: {isa_class(flags)})")
        row.update(ok=True, skipped=why)
    row["needs"] = needs
    return row


def check_rows(name: str, section: dict) -> list[str]:
    """A section's checks as rows of the | target | measured | threshold | met | table."""
    rows = [f"| {name} | failed: {section['error']} | | **no** |"] if "error" in section else []
    for c in section.get("checks", []):
        note = f" ({c['note']})" if c["note"] else ""
        met = (f"skipped: {c['skipped']}" if c.get("skipped")
               else "yes" if c["ok"] else "**no**")
        rows.append(f"| {c['target']}{note} | {c['measured']} | {c['threshold']} | {met} |")
    return rows


def unmet(results: dict) -> list[str]:
    """The checks that failed and the sections that broke, by name."""
    return ([c["target"] for s in results.values() for c in s.get("checks", []) if not c["ok"]]
            + [name for name, s in results.items() if "error" in s])


def cli(args: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, the finished process) of one ``python -m benchmarks`` command."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    return time.perf_counter() - t0, proc
