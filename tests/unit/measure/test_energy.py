"""Energy per inference on the CPU with fakes: an NVML module whose counter a fake clock
drives (idle power subtracted), RAPL's files with their wrap-around, and no figure at all
where no counter is readable."""

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
    out = energy.energy_per_inference(call, 8, meter, clock=clock, sleep=sleep)
    # At least five seconds of calls (float steps may need one more).
    assert out["calls"] in (500, 501) and out["seconds"] == pytest.approx(5.0, abs=0.011)
    assert out["idle_w"] == pytest.approx(50.0)
    assert out["joules_per_inference"] == pytest.approx(2.0 / 8)
    assert out["watts_above_idle"] == pytest.approx(200.0, rel=1e-6)
    assert out["measured"] is True and "idle subtracted" in out["method"]


def test_rapl_counter_wraps_around(tmp_path):
    path = tmp_path / "energy_uj"
    (tmp_path / "max_energy_range_uj").write_text("1000000")
    path.write_text("900000")
    meter = energy.RaplMeter(path)
    path.write_text("950000")
    assert meter.joules() == pytest.approx(0.05)
    path.write_text("100000")  # wrapped past 1 J
    assert meter.joules() == pytest.approx(0.05 + 0.15)


def test_no_counter_no_figure(monkeypatch, tmp_path):
    import sys
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    assert energy.meter_for("cuda") is None
    monkeypatch.setattr(energy, "RAPL", tmp_path / "absent")
    assert energy.meter_for("cpu") is None
