"""``make perf``'s language-model section: issue 35's command on the real model.

``run --model smollm2-135m --dataset text --int8 weight-only,dynamic --int4 128 --prune 0.5
--prune-method wanda --runtime eager,compile`` (five timing rounds: the compiled cells' warm-up
is most of the time), read back from its JSON: every cell built and timed; INT8 weight-only's
NLL change within noise; the INT4 cell timed eager and compiled; whether a quantized cell
decodes faster than fp32, judged only where the CPU has the int8 matmuls that could make it
(VNNI or AMX), and the answer line either way. The cells' table goes into the document.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from tools.checks import ROOT, check, check_isa

COMMAND = ["run", "--model", "smollm2-135m", "--dataset", "text", "--int8",
           "weight-only,dynamic", "--int4", "128", "--prune", "0.5", "--prune-method", "wanda",
           "--runtime", "eager,compile", "--timing-rounds", "5", "--quiet"]
TIMEOUT_S = 3600


def measure_lm() -> dict:
    from benchmarks.views.lm import lm_table
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "lm.json")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "benchmarks", *COMMAND, "--json", out,
                               "--store", os.path.join(tmp, "r.db")], cwd=ROOT,
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        took = time.perf_counter() - start
        if done.returncode not in (0, 1) or not os.path.exists(out):
            lines = (done.stderr.strip().splitlines() or ["no output"])
            raise RuntimeError(f"exit {done.returncode}: {lines[-1][:300]}")
        document = json.loads(open(out).read())
    variants = document["variants"]
    by = {v["name"]: v for v in variants}
    cells = {(v["name"], c["mode"]): c for v in variants for c in v.get("cells", [])}
    built = [v["name"] for v in variants if v["ok"]]
    timed = [k for k, c in cells.items() if c.get("ok")]
    checks = [check("every variant built and scored", f"{len(built)} of {len(variants)}",
                    "all", len(built) == len(variants)),
                  check("every cell (variant x mode) timed", f"{len(timed)} of "
                        f"{len(variants) * 2}", "all", len(timed) == len(variants) * 2)]
    w8 = by.get("int8-weight-only", {}).get("quality") or {}
    if w8:
        lo, hi = w8["delta_nll_interval"]
        checks.append(check("INT8 weight-only: NLL change per token (95%, bootstrap over "
                            "windows)", f"{w8['delta_nll']:+.4f} [{lo:+.4f}, {hi:+.4f}]",
                            "the interval holds 0", lo <= 0 <= hi))
    int4 = [mode for (name, mode), c in cells.items() if name == "int4-g128" and c.get("ok")]
    checks.append(check("INT4 g128 timed eager and compiled", ", ".join(sorted(int4)) or "none",
                        "eager, compile", sorted(int4) == ["compile", "eager"]))
    best = max(((c["decode_speedup"]["ci"][0], name, mode) for (name, mode), c in cells.items()
                if c.get("ok") and name.startswith(("int8", "int4"))
                and (c.get("decode_speedup") or {}).get("ci")), default=None)
    if best is not None:
        low, name, mode = best
        checks.append(check_isa(
            "VNNI or AMX", "a quantized cell decodes faster than fp32 in its mode",
            f"{name} ({mode}): lower bound {low:.2f}x", "> 1x", low > 1,
            note="int8 matmuls need VNNI or AMX to beat fp32"))
    return {"checks": checks, "took_s": round(took, 1), "answer": document["answer"],
            "markdown": "\n".join(["The cells (`" + " ".join(COMMAND) + "`):", "", "```",
                                   lm_table(variants), "", "answer: " +
                                   document["answer"]["line"], "```"])}
