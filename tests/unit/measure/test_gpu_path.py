"""The GPU path, checked on the CPU with fakes where only a GPU would show it: per-variant
memory with a fake allocator, fp32 precision in the environment card, launch-bound flagged from
an injected clock, comm time as the union of bucket intervals, disjoint worker cores."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from benchmarks.measure.environment import apply_precision, precision_key, worker_cores
from benchmarks.measure.latency import HOST_PROBES, Clock, LatencyTracker
from benchmarks.measure.memory import peak_over_resident, state_bytes
from benchmarks.report.results import VariantResult


class FakeAllocator:
    """The CUDA allocator's counters: ``resident`` bytes are there before the forward pass,
    which allocates ``activations`` on top (each call), and a cuBLAS-like workspace on the
    first call only."""

    def __init__(self, resident: int, activations: int, workspace: int):
        self.current, self.activations, self.workspace = resident, activations, workspace
        self.high = resident
        self.calls = 0

    def hook(self, *_):
        self.calls += 1
        if self.calls == 1:
            self.current += self.workspace  # never freed, like cuBLAS's
        self.high = max(self.high, self.current + self.activations)

    def synchronize(self):
        pass

    def reset_peak(self):
        self.high = self.current

    def allocated(self):
        return self.current

    def peak(self):
        return self.high


@pytest.mark.parametrize("resident", [0, 33 * 2**20, 4 * 2**30])
def test_gpu_peak_memory_is_the_variants_whatever_else_is_resident(resident):
    model = nn.Linear(100, 10)
    x = torch.randn(8, 100)
    fake = FakeAllocator(resident, activations=12345, workspace=32 * 2**20)
    model.register_forward_hook(fake.hook)
    over = peak_over_resident(model, x, contextlib.nullcontext(), fake)
    assert over == 12345  # neither the resident bytes nor the one-off workspace
    expected = state_bytes(model) + x.numel() * 4 + over
    assert expected == (100 * 10 + 10) * 4 + 8 * 100 * 4 + 12345


def test_the_environment_card_carries_the_precision_settings(tmp_path):
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    sweep = prepare_sweep(SweepSpec(epochs=1, fp32="tf32"), cache=WeightsCache(tmp_path))
    assert sweep.environment["precision"]["fp32"] == "ieee"  # the CPU has no TF32
    assert precision_key(torch.device("cpu"), "tf32") == "cpu"
    assert precision_key(torch.device("cuda"), "tf32") == "cuda-tf32"


def test_apply_precision_fixes_both_matmuls_and_convolutions_on_cuda():
    """The backend flags are settings: they can be set and read without a GPU."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.fp32_precision, cudnn.conv.fp32_precision, cudnn.benchmark)
    try:
        card = apply_precision(torch.device("cuda"), "ieee")
        assert card == {"fp32": "ieee", "matmul_tf32": False, "conv_tf32": False,
                        "cudnn_benchmark": True}
        assert matmul.fp32_precision == "ieee" and cudnn.conv.fp32_precision == "ieee"
        apply_precision(torch.device("cuda"), "tf32")
        assert matmul.fp32_precision == "tf32" and cudnn.conv.fp32_precision == "tf32"
        with pytest.raises(ValueError, match="fp32 must be one of ieee, tf32"):
            apply_precision(torch.device("cuda"), "fp19")
    finally:
        matmul.fp32_precision, cudnn.conv.fp32_precision, cudnn.benchmark = saved


class FakeDeviceClock(Clock):
    """A device clock whose calls take ``device_ms`` on the device and ``host_ms`` to issue."""
    device_timed = True

    def __init__(self, host_ms: float, device_ms: float):
        self.host_per_call, self.device_per_call = host_ms, device_ms
        self.now = 0.0
        self.pending = 0

    def tick(self):
        self.now += self.host_per_call

    def start(self):
        return None

    def stop(self, token):
        self.pending += 1
        return float("nan")

    def finish(self):
        samples, self.pending = [max(self.device_per_call, self.host_per_call)] * self.pending, 0
        return samples

    def host_ms(self):
        return self.now


@pytest.mark.parametrize("host_ms, device_ms, expected", [
    (0.50, 0.05, True),    # the device finishes long before the host issues the next call
    (0.50, 0.55, True),    # about the host's time: still waiting on launches
    (0.05, 4.00, False),   # kernels dominate: the host runs ahead
])
def test_launch_bound_is_flagged_from_an_injected_clock(host_ms, device_ms, expected):
    clock = FakeDeviceClock(host_ms, device_ms)
    tracker = LatencyTracker(min_runs=10, min_time_s=0, warmup=1, clock=clock)
    tracker.run(clock.tick)
    assert len(tracker.host_samples_ms) == HOST_PROBES
    assert tracker.host_samples_ms == pytest.approx([host_ms] * HOST_PROBES)
    result = VariantResult.of("v", latency_samples_ms=tracker.samples_ms,
                              host_samples_ms=tracker.host_samples_ms)
    assert result.timing.launch_bound is expected
    assert VariantResult.of("cpu", latency_samples_ms=[1.0]).timing.launch_bound is None


def test_comm_time_is_the_union_of_overlapping_bucket_intervals():
    from benchmarks.distributed.worker import union_ms
    assert union_ms([(0, 2), (1, 3), (5, 6)]) == 4        # 0-3 and 5-6
    assert union_ms([(0, 10), (2, 3), (4, 5)]) == 10      # nested buckets count once
    assert union_ms([]) == 0


def test_cpu_and_cuda_workers_get_disjoint_cores():
    cores = list(range(16))
    cpu, gpu = worker_cores("cpu", cores, gpus=1), worker_cores("cuda:0", cores, gpus=1)
    assert set(cpu).isdisjoint(gpu) and set(cpu) | set(gpu) == set(cores)
    assert gpu == [0, 1, 2, 3]
    assert worker_cores("cpu", [0, 1], gpus=1) == [1] and worker_cores("cuda", [0, 1], gpus=1) == [0]
    assert worker_cores("cpu", cores, gpus=0) == cores  # no GPU: nothing to share
    assert worker_cores("cpu", [3], gpus=1) == [3]


def test_amp_on_cuda_is_prepared_as_deployed_where_a_gpu_is_present():
    """On the CPU, AMP keeps fp32 weights under autocast (what the CPU tests pin); the CUDA
    branch casts weights once and goes channels-last, checked by make perf-gpu."""
    from optim_support import make_context
    from optimizers import AmpSettings, amp
    ctx = make_context((torch.randn(64, 1, 8, 8), torch.randint(0, 10, (64,))))
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten(), nn.Linear(4 * 36, 10)).eval()
    out = amp.apply(model, AmpSettings(), ctx)
    assert out.config["amp"]["weights"] == "fp32" and out.memory_format is None
    if torch.cuda.is_available():
        ctx.device = torch.device("cuda")
        out = amp.apply(model, AmpSettings(), ctx)
        assert out.config["amp"]["weights"] == "fp16 (cast once)"
        assert out.memory_format == torch.channels_last
