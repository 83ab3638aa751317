"""Energy per inference on the CPU with fakes: an NVML module whose counter a fake clock
drives (idle power subtracted, windows of a second after a warm-up, the device's state before
and after, the spread gate), RAPL's files with their wrap-around, and no figure at all where
no counter is readable."""

from __future__ import annotations

import pytest

from benchmarks.measure import energy


class Clock:
    """A clock that advances only when the loop calls the model or sleeps."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class FakeNvml:
    """pynvml's three calls; the counter (mJ) grows at idle watts plus the model's when busy."""

    def __init__(self, clock, idle_w=50.0):
        self.clock, self.idle_w, self.busy_j = clock, idle_w, 0.0
        self.inited = False

    def nvmlInit(self):
        self.inited = True

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("gpu", index)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return 1000.0 * (self.idle_w * self.clock() + self.busy_j)

    # The state readings: a GPU that warms by a degree per second of work, at a fixed clock.
    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM = 0, 1

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 40 + int(self.clock())

    def nvmlDeviceGetClockInfo(self, handle, which):
        assert which == self.NVML_CLOCK_SM
        return 1980

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000  # mW


def test_nvml_energy_per_inference_with_idle_subtracted():
    clock = Clock()
    nvml = FakeNvml(clock)
    meter = energy.NvmlMeter(0, nvml=nvml)
    assert nvml.inited

    def call():  # each call of a batch of 8: 10 ms and 2 J above idle
        clock.now += 0.01
        nvml.busy_j += 2.0

    def sleep(seconds):
        clock.now += seconds
    out = energy.energy_per_inference(call, 8, meter, clock=clock, sleep=sleep,
                                      tokens_per_sample=4)
    # Five windows of at least a second each (float steps may need one more call each),
    # the half-second warm-up not among them.
    assert out["windows"] == 5 and 500 <= out["calls"] <= 505
    assert out["seconds"] == pytest.approx(5.0, abs=0.051)
    assert out["idle_w"] == pytest.approx(50.0)
    assert out["joules_per_inference"] == pytest.approx(2.0 / 8)
    assert out["joules_per_token"] == pytest.approx(2.0 / 8 / 4)
    assert out["watts_above_idle"] == pytest.approx(200.0, rel=1e-6)
    assert out["window_joules_per_inference"] == pytest.approx([0.25] * 5)
    assert out["spread"] == pytest.approx(0.0, abs=1e-9) and out["steady"] and "flag" not in out
    assert out["measured"] is True and "idle subtracted" in out["method"]
    # The device's state before (at rest) and after (1.5 s of idle and warm-up, 5 of work).
    assert out["before"] == {"temperature_c": 40.0, "clock_mhz": 1980.0, "power_limit_w": 700.0}
    assert out["after"]["temperature_c"] >= 46.0


def test_windows_that_disagree_flag_the_figure():
    """A clock that drops halfway (each call then costs twice the joules): the figure is
    kept, its windows say why it is not to be trusted."""
    clock = Clock()
    nvml = FakeNvml(clock)
    meter = energy.NvmlMeter(0, nvml=nvml)

    def call():
        clock.now += 0.01
        nvml.busy_j += 2.0 if clock.now < 3.0 else 4.0

    out = energy.energy_per_inference(call, 1, meter, clock=clock,
                                      sleep=lambda s: setattr(clock, "now", clock.now + s))
    assert out["spread"] > energy.SPREAD_GATE and not out["steady"]
    assert out["flag"].startswith("the windows disagree by")
    assert min(out["window_joules_per_inference"]) == pytest.approx(2.0)
    assert max(out["window_joules_per_inference"]) == pytest.approx(4.0)


def test_a_meter_without_state_readings_gives_none_not_an_error():
    """A driver without the temperature call (or a RAPL machine without a thermal zone):
    the readings are None, the figure stands."""
    clock = Clock()
    nvml = FakeNvml(clock)
    nvml.nvmlDeviceGetTemperature = None  # calling it raises TypeError
    meter = energy.NvmlMeter(0, nvml=nvml)

    def call():
        clock.now += 0.01
        nvml.busy_j += 1.0
    out = energy.energy_per_inference(call, 1, meter, clock=clock, min_seconds=1.0,
                                      min_windows=1, sleep=lambda s: setattr(
                                          clock, "now", clock.now + s))
    assert out["before"]["temperature_c"] is None and out["before"]["clock_mhz"] == 1980.0
    assert out["joules_per_inference"] == pytest.approx(1.0)


def test_rapl_counter_wraps_around(tmp_path):
    path = tmp_path / "energy_uj"
    (tmp_path / "max_energy_range_uj").write_text("1000000")
    path.write_text("900000")
    meter = energy.RaplMeter(path)
    path.write_text("950000")
    assert meter.joules() == pytest.approx(0.05)
    path.write_text("100000")  # wrapped past 1 J
    assert meter.joules() == pytest.approx(0.05 + 0.15)
    # Its power limit from RAPL's constraint where the file is there.
    (tmp_path / "constraint_0_power_limit_uw").write_text("225000000")
    assert meter.state()["power_limit_w"] == 225.0


def test_no_counter_no_figure(monkeypatch, tmp_path):
    import sys
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    assert energy.meter_for("cuda") is None
    monkeypatch.setattr(energy, "RAPL", tmp_path / "absent")
    assert energy.meter_for("cpu") is None
