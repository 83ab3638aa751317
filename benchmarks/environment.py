"""The environment card: what a figure was measured on, stored with every run."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import torch

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


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
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)


def resolve_device(requested: str) -> torch.device:
    """auto -> cuda when there is one; asking for cuda without one is the environment's fault."""
    if requested == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if requested == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device cuda requested but no CUDA GPU is visible; use auto or cpu")
        return torch.device("cuda:0")
    if requested == "cpu":
        return torch.device("cpu")
    raise ValueError(f"device must be one of auto, cpu, cuda; got {requested!r}")


def default_threads() -> int:
    """All cores but one: the OS, the server and the progress bar get the spare core, which
    keeps CPU timings steady (spreads of 20-70% were seen using every core of two)."""
    return max(1, (os.cpu_count() or 1) - 1)


def environment_card(device: torch.device | None = None, threads: int | None = None) -> dict:
    from .cache import _torchvision_version
    device = device or torch.device("cpu")
    card = {
        "torch": torch.__version__,
        "torchvision": _torchvision_version(),
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
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        card["device_name"] = props.name
        card["gpu_memory_gb"] = round(props.total_memory / 2**30, 1)
        card["cudnn"] = torch.backends.cudnn.version()
    return card
