"""Energy per inference, where the machine has a counter to read: NVML's total-energy
counter on an NVIDIA GPU (``nvidia-ml-py``'s ``pynvml``), RAPL's package counter on a CPU
where ``/sys/class/powercap`` is readable. Elsewhere there is no figure (never a guess).

A time-boxed loop of at least ``MIN_SECONDS`` calls the model; the counter's increase over it,
less the idle power measured just before over ``IDLE_SECONDS``, over the samples inferred is
the figure, marked ``measured``. Meters and clocks are passed in, so tests run it on the CPU
with fakes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

MIN_SECONDS = 5.0
IDLE_SECONDS = 1.0
RAPL = Path("/sys/class/powercap/intel-rapl:0/energy_uj")


class NvmlMeter:
    """A GPU's energy counter (millijoules since the driver loaded), through NVML."""

    method = "NVML total energy counter"

    def __init__(self, index: int = 0, nvml=None):
        if nvml is None:
            import pynvml as nvml
        self.nvml = nvml
        nvml.nvmlInit()
        self.handle = nvml.nvmlDeviceGetHandleByIndex(index)

    def joules(self) -> float:
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0


class RaplMeter:
    """A CPU package's energy counter (microjoules, wrapping at its range), through RAPL."""

    method = "RAPL package energy counter"

    def __init__(self, path: Path = RAPL):
        self.path = Path(path)
        wrap = self.path.with_name("max_energy_range_uj")
        self.wrap = int(wrap.read_text()) if wrap.exists() else None
        self.last = None
        self.total = 0.0
        self.joules()  # unreadable: raises here, so meter_for sees it

    def joules(self) -> float:
        now = int(self.path.read_text())
        if self.last is not None:
            step = now - self.last
            if step < 0 and self.wrap:
                step += self.wrap
            self.total += step / 1e6
        self.last = now
        return self.total


def meter_for(device_type: str, index: int = 0):
    """The energy meter of a device, or None where none is readable (no NVML, no RAPL)."""
    try:
        if device_type == "cuda":
            return NvmlMeter(index)
        if RAPL.exists():
            return RaplMeter()
    except Exception:  # no pynvml, no driver support, a counter only root may read
        return None
    return None


def energy_per_inference(call: Callable[[], object], samples_per_call: int, meter, *,
                         min_seconds: float = MIN_SECONDS, idle_seconds: float = IDLE_SECONDS,
                         clock: Callable[[], float] = time.perf_counter,
                         sleep: Callable[[float], None] = time.sleep,
                         synchronize: Callable[[], None] = lambda: None) -> dict:
    """Joules per inferred sample: the counter over a loop of at least ``min_seconds``, less
    the idle power measured over ``idle_seconds`` before it."""
    synchronize()
    e0, t0 = meter.joules(), clock()
    sleep(idle_seconds)
    e1, t1 = meter.joules(), clock()
    idle_w = max(0.0, (e1 - e0) / max(t1 - t0, 1e-9))
    calls = 0
    start = clock()
    while clock() - start < min_seconds or calls == 0:
        call()
        calls += 1
    synchronize()
    e2, t2 = meter.joules(), clock()
    seconds = t2 - start
    net = max(0.0, (e2 - e1) - idle_w * seconds)
    return {"joules_per_inference": net / (calls * samples_per_call),
            "watts_above_idle": net / seconds if seconds > 0 else None, "idle_w": idle_w,
            "seconds": seconds, "calls": calls, "method": f"{meter.method}, idle subtracted",
            "measured": True}
