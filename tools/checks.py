"""A target, what was measured and whether it was met: the rows of the generated performance
docs, shared by ``make perf`` (tools/perf.py, tools/perf_ui.py) and ``make perf-gpu``."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def check(name: str, measured, target: str, ok: bool, note: str = "") -> dict:
    return {"target": name, "measured": measured, "threshold": target, "ok": bool(ok),
            "note": note}


def check_rows(name: str, section: dict) -> list[str]:
    """A section's checks as rows of the | target | measured | threshold | met | table."""
    rows = [f"| {name} | failed: {section['error']} | | **no** |"] if "error" in section else []
    for c in section.get("checks", []):
        note = f" ({c['note']})" if c["note"] else ""
        rows.append(f"| {c['target']}{note} | {c['measured']} | {c['threshold']} | "
                    f"{'yes' if c['ok'] else '**no**'} |")
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
