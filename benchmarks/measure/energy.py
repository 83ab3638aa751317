"""Energy per inference, where the machine has a counter to read: NVML's total-energy
counter on an NVIDIA GPU (``nvidia-ml-py``'s ``pynvml``), RAPL's package counter on a CPU
where ``/sys/class/powercap`` is readable. Elsewhere there is no figure (never a guess).

Measured as the field measures it (the ML.ENERGY benchmark, Zeus): the device first idles for
``IDLE_SECONDS`` (a cooldown after the timing rounds, and the idle power it draws), then a
warm-up of ``WARMUP_SECONDS`` that is not counted, then windows of at least
``WINDOW_SECONDS`` each (NVML's counter moves in steps of tens of milliseconds: a window much
shorter is mostly its step) until ``MIN_WINDOWS`` and ``MIN_SECONDS`` are reached. The figure
is the counter's increase over all windows, less the idle power, over the samples inferred,
marked ``measured``. Each window's own figure is kept: their spread (max - min over the
median) beyond ``SPREAD_GATE`` flags the figure as unsteady (a clock that moved, a
neighbour's load). The device's temperature, clock and power limit are read before and after
(NVML's; on a CPU what sysfs offers, else None), since a figure means little without them.
Meters and clocks are passed in, so tests run it on the CPU with fakes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

MIN_SECONDS = 5.0
IDLE_SECONDS = 1.0
WARMUP_SECONDS = 0.5
WINDOW_SECONDS = 1.0
MIN_WINDOWS = 5
# Windows' figures further apart than this share of their median flag the figure: on a quiet
# GPU they agree within a few percent; a throttling clock or another job moves them by more.
SPREAD_GATE = 0.10
RAPL = Path("/sys/class/powercap/intel-rapl:0/energy_uj")
CPU_MHZ = Path("/proc/cpuinfo")
THERMAL_ZONE = Path("/sys/class/thermal/thermal_zone0/temp")


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

    def state(self) -> dict:
        """Temperature (C), SM clock (MHz) and enforced power limit (W), each None where the
        driver does not say."""
        nvml, h = self.nvml, self.handle
        return {"temperature_c": _read(lambda: nvml.nvmlDeviceGetTemperature(
                    h, nvml.NVML_TEMPERATURE_GPU)),
                "clock_mhz": _read(lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
                "power_limit_w": _read(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000)}


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

    def state(self) -> dict:
        """The package's power limit (RAPL's long-term constraint), the mean core clock and a
        thermal zone's temperature, each None where this machine does not expose it."""
        limit = self.path.with_name("constraint_0_power_limit_uw")
        return {"temperature_c": _read(lambda: int(THERMAL_ZONE.read_text()) / 1000),
                "clock_mhz": _read(_mean_cpu_mhz),
                "power_limit_w": _read(lambda: int(limit.read_text()) / 1e6)}


def _read(get):
    """A state reading, or None where it fails (the figure never depends on one)."""
    try:
        value = get()
    except Exception:
        return None
    return None if value is None else round(float(value), 1)


def _mean_cpu_mhz() -> float | None:
    mhz = [float(line.split(":")[1]) for line in CPU_MHZ.read_text().splitlines()
           if line.startswith("cpu MHz")]
    return sum(mhz) / len(mhz) if mhz else None


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
                         warmup_seconds: float = WARMUP_SECONDS,
                         window_seconds: float = WINDOW_SECONDS, min_windows: int = MIN_WINDOWS,
                         tokens_per_sample: int | None = None,
                         clock: Callable[[], float] = time.perf_counter,
                         sleep: Callable[[float], None] = time.sleep,
                         synchronize: Callable[[], None] = lambda: None) -> dict:
    """Joules per inferred sample (and per token, given ``tokens_per_sample``), as the
    module's docstring says: idle, warm-up, then windows; with each window's figure, their
    spread and the device's state before and after."""
    before = meter.state()
    synchronize()
    e0, t0 = meter.joules(), clock()
    sleep(idle_seconds)
    e1, t1 = meter.joules(), clock()
    idle_w = max(0.0, (e1 - e0) / max(t1 - t0, 1e-9))
    start = clock()
    while clock() - start < warmup_seconds:  # not counted: caches, clocks ramping up
        call()
    synchronize()
    windows: list[tuple[float, float, int]] = []  # (joules, seconds, calls) of each
    first_e, first_t = meter.joules(), clock()
    last_e, last_t = first_e, first_t
    while len(windows) < min_windows or last_t - first_t < min_seconds:
        calls = 0
        while clock() - last_t < window_seconds or calls == 0:
            call()
            calls += 1
        synchronize()
        e, t = meter.joules(), clock()
        windows.append((e - last_e, t - last_t, calls))
        last_e, last_t = e, t
    seconds = last_t - first_t
    calls = sum(c for _, _, c in windows)
    net = max(0.0, (last_e - first_e) - idle_w * seconds)
    per_window = [max(0.0, j - idle_w * dt) / (c * samples_per_call) for j, dt, c in windows]
    middle = sorted(per_window)[len(per_window) // 2]
    spread = (max(per_window) - min(per_window)) / middle if middle > 0 else None
    per_sample = net / (calls * samples_per_call)
    out = {"joules_per_inference": per_sample,
           "joules_per_token": per_sample / tokens_per_sample if tokens_per_sample else None,
           "watts_above_idle": net / seconds if seconds > 0 else None, "idle_w": idle_w,
           "seconds": seconds, "calls": calls, "windows": len(windows),
           "window_joules_per_inference": per_window, "spread": spread,
           "steady": spread is not None and spread <= SPREAD_GATE,
           "before": before, "after": meter.state(),
           "method": f"{meter.method}, idle subtracted, {len(windows)} windows of "
                     f">= {window_seconds:g} s after {warmup_seconds:g} s of warm-up",
           "measured": True}
    if not out["steady"]:
        out["flag"] = (f"the windows disagree by {spread:.0%} of their median (more than "
                       f"{SPREAD_GATE:.0%}): a clock or a neighbour moved during the "
                       f"measurement" if spread is not None else "no energy above idle")
    return out
