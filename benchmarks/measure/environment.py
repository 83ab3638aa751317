"""The environment card: what a figure was measured on, stored with every run.

Torch loads on first use, not on import: the CLI imports this module for
``quiet_library_noise`` and must still refuse bad input before torch's seconds of start-up.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.spec.cpu_env import card_variables
from benchmarks.spec.folders import PROJECT_ROOT
from benchmarks.spec.sweep import FP32_MODES

if TYPE_CHECKING:
    import torch


def library_version(name: str) -> str:
    """A package's version from its metadata, without importing it (importing torchvision
    costs 1.6 s of start-up); "absent" when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def device_label(card: dict) -> str | None:
    """The device an environment card (``environment_card``) was measured on, in words:
    "cpu (AMD EPYC 9R14 ...)", "cuda:0 (NVIDIA H100 80GB HBM3)"; None without one."""
    device = card.get("device")
    if not device:
        return None
    return f"{device} ({card['device_name']})" if card.get("device_name") else str(device)


@lru_cache(maxsize=1)
def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def quiet_library_noise() -> None:
    """Keep stderr for progress and one-line errors: silence the libraries' chatter that says
    nothing about the user's run (deprecation notes of the quantization APIs, the CUDA_HOME
    probe on machines without a GPU)."""
    import logging
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.ao\..*")
    warnings.filterwarnings("ignore", category=UserWarning, message=r".*quantize_per_tensor.*")
    warnings.filterwarnings("ignore", category=UserWarning, message=r".*TypedStorage.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning,
                            message=r".*_stable_hash_for_caching.*")  # torchao's INT4 compiled
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    # torchao registers its enums with torch.compile the deprecated way, on import.
    logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)


def resolve_device(requested: str) -> torch.device:
    """auto -> cuda when there is one; asking for cuda without one is the environment's fault."""
    import torch
    if requested == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if requested == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device cuda requested but no CUDA GPU is visible; use auto or cpu")
        return torch.device("cuda:0")
    if requested == "cpu":
        return torch.device("cpu")
    raise ValueError(f"device must be one of auto, cpu, cuda; got {requested!r}")


# What "fp32" means on a GPU: PyTorch's defaults use TF32 for convolutions (cuDNN) and IEEE
# for matmuls, so a CNN's fp32 baseline and a ViT's would be different precisions. A sweep
# fixes both: IEEE by default (true fp32), or TF32 for both when asked (--fp32 tf32).
def apply_precision(device: torch.device, fp32: str = "ieee") -> dict:
    """Set the fp32 precision of matmuls and convolutions, and cuDNN autotuning, for a sweep
    on ``device``; return what was set, for the environment card. cuDNN's benchmark mode is
    on: the engine's warm-up calls absorb its one-off autotuning for each shape."""
    import torch
    if fp32 not in FP32_MODES:
        raise ValueError(f"fp32 must be one of {', '.join(FP32_MODES)}; got {fp32!r}")
    if device.type != "cuda":
        return {"fp32": "ieee", "note": "TF32 is a GPU mode; the CPU computes fp32 in IEEE"}
    tf32 = fp32 == "tf32"
    matmul, conv = torch.backends.cuda.matmul, torch.backends.cudnn
    if hasattr(matmul, "fp32_precision") and hasattr(conv, "conv"):  # torch >= 2.9
        matmul.fp32_precision = fp32
        conv.conv.fp32_precision = fp32
    else:
        matmul.allow_tf32 = tf32
        conv.allow_tf32 = tf32
    conv.benchmark = True
    return {"fp32": fp32, "matmul_tf32": tf32, "conv_tf32": tf32, "cudnn_benchmark": True}


def precision_key(device: torch.device, fp32: str = "ieee") -> str:
    """What the weights cache keys on: weights trained on another device or precision are
    other weights."""
    return device.type if device.type == "cpu" else f"{device.type}-{fp32}"


def worker_cores(device: str, cores: list[int] | None = None,
                 gpus: int | None = None) -> list[int]:
    """The cores a queue worker for ``device`` may use, disjoint from the other kind's: the
    CPU worker's timed threads and a CUDA worker's kernel launches (and its INT8 variants'
    CPU timings) must not disturb each other. A CUDA worker mostly waits on the GPU: it gets
    the first quarter of the cores (at least one); the CPU worker the rest. On a machine with
    no GPU the CPU worker keeps every core; with one core there is nothing to split."""
    cores = sorted(cores if cores is not None else (os.sched_getaffinity(0)
                                                    if hasattr(os, "sched_getaffinity")
                                                    else range(os.cpu_count() or 1)))
    if gpus is None:
        gpus = torch.cuda.device_count()
    if len(cores) < 2 or (gpus == 0 and not device.startswith("cuda")):
        return list(cores)
    split = max(1, len(cores) // 4)
    return cores[:split] if device.startswith("cuda") else cores[split:]


def default_threads() -> int:
    """All the process's cores but one: the OS, the server and the progress bar get the spare
    core, which keeps CPU timings steady (spreads of 20-70% were seen using every core of
    two). A queue worker's cores are its share (``worker_cores``)."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        available = os.cpu_count() or 1
    return max(1, available - 1)


def environment_card(device: torch.device | None = None, threads: int | None = None) -> dict:
    import torch

    device = device or torch.device("cpu")
    card = {
        "torch": torch.__version__,
        "torchvision": library_version("torchvision"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "threads": threads if threads is not None else torch.get_num_threads(),
        "device": str(device),
        "device_name": cpu_name(),
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "quantized_engine": torch.backends.quantized.engine,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        # Which machine timed the run: History compares latencies only within one.
        "host": socket.gethostname(),
        # The instruction-set variables cleared before native work, any in force (a
        # profile's own process), the thread variables (benchmarks.spec.cpu_env).
        "variables": card_variables(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        card["device_name"] = props.name
        card["gpu_memory_gb"] = round(props.total_memory / 2**30, 1)
        card["cudnn"] = torch.backends.cudnn.version()
        card["gpu_uuid"] = str(getattr(props, "uuid", "") or "") or None
        card["driver"] = _driver_version()
        card["compute_capability"] = f"{props.major}.{props.minor}"
    return card


@lru_cache(maxsize=1)
def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() \
        else None
