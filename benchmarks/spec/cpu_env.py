"""The environment variables that decide which kernels a CPU timing runs, recorded on every
environment card (``benchmarks.measure.environment``) and said in words where the card is
shown; the instruction-set ones cleared before native work starts.

Each library reads its variable once, at its first dispatch: oneDNN's cap
(``ONEDNN_MAX_CPU_ISA``, ``DNNL_MAX_CPU_ISA`` its older name), PyTorch's own vectorised
kernels (``ATEN_CPU_CAPABILITY``), MKL's (``MKL_ENABLE_INSTRUCTIONS``, ``MKL_CBWR``,
``MKL_DEBUG_CPU_TYPE``), and oneDNN's implicit down-conversion of fp32 arithmetic
(``ONEDNN_DEFAULT_FPMATH_MODE``). One of them inherited from whoever started the server capped
every "native" cell (6x slower where it was found), unlabelled and unrecorded.

Cleared, not labelled: ``native`` means this machine as it is, and its figures feed what
outlives a run (the trend History flags across runs, the measured peaks cached per machine and
thread count, the first estimates of later sweeps); a label on each row would leave all of
those a capped machine's. So the CLI and the queue's worker remove these variables from their
own environment before torch is imported (``clear_inherited``), and the card records what was
removed and its value. A deliberate cap is an instruction-set profile (``--isa``,
``benchmarks.run.profiles``), set in a process of its own, whose rows say so.

The thread variables (``OMP_NUM_THREADS``...) are recorded, not cleared: the sweep sets its
threads itself and says how many; these say what the libraries' other pools were given.
Torch-free.
"""

from __future__ import annotations

import os

INSTRUCTION_SET_VARIABLES = (
    "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR", "MKL_DEBUG_CPU_TYPE", "ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE")
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "OMP_DYNAMIC", "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY", "KMP_BLOCKTIME",
    "GOMP_CPU_AFFINITY")

# What this process removed, with the values it inherited (the card's "cleared").
_CLEARED: dict[str, str] = {}


def clear_inherited(environ=None) -> dict[str, str]:
    """Remove the instruction-set variables from this process's environment (and so from its
    children's); returns every one removed so far, with its value."""
    environ = os.environ if environ is None else environ
    for name in INSTRUCTION_SET_VARIABLES:
        value = environ.pop(name, None)
        if value is not None:
            _CLEARED[name] = value
    return dict(_CLEARED)


def card_variables(environ=None) -> dict:
    """The card's ``variables``: the instruction-set variables cleared (their inherited
    values), those in force (an instruction-set profile's own process sets its cap), and the
    thread variables as set."""
    environ = os.environ if environ is None else environ
    return {"cleared": dict(_CLEARED),
            "in_force": {n: environ[n] for n in INSTRUCTION_SET_VARIABLES if environ.get(n)},
            "threads": {n: environ[n] for n in THREAD_VARIABLES if environ.get(n)}}


def _pairs(values: dict) -> str:
    return ", ".join(f"{name}={value}" for name, value in values.items())


def variables_text(variables: dict | None) -> str | None:
    """A card's ``variables`` in words; None where nothing was set."""
    if not isinstance(variables, dict):
        return None
    parts = []
    if variables.get("cleared"):
        parts.append(f"inherited {_pairs(variables['cleared'])} cleared: native cells ran "
                     f"on this machine's own instruction sets")
    if variables.get("in_force"):
        parts.append(f"kernels capped by {_pairs(variables['in_force'])}")
    if variables.get("threads"):
        parts.append(f"thread variables {_pairs(variables['threads'])}")
    return "; ".join(parts) or None
