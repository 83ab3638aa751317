import gzip
import io

import pytest
import torch
from torch import nn

from benchmarks.measure.latency import measure_latency, pinned_threads
from benchmarks.measure.memory import (
    CPU_MEMORY_METHOD,
    CUDA_MEMORY_METHOD,
    LiveTensorBytes,
    measure_peak_memory,
    state_bytes,
)
from benchmarks.measure.size import serialized_size
from optimizers.counting import count_flops, count_params


def tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))


def test_latency_on_cpu_keeps_at_least_min_runs():
    tracker = measure_latency(tiny(), torch.randn(2, 1, 8, 8), torch.device("cpu"),
                                      min_runs=12, min_time_s=0.0, warmup=2)
    assert len(tracker.samples_ms) == 12
    assert all(s > 0 for s in tracker.samples_ms)
    # The loop's own overhead is small against the timed calls.
    assert tracker.wall_s * 1000 >= sum(tracker.samples_ms)


def test_peak_memory_grows_with_batch_and_counts_weights():
    model = tiny()
    small, method = measure_peak_memory(model, torch.randn(1, 1, 8, 8),
                                                torch.device("cpu"))
    big, _ = measure_peak_memory(model, torch.randn(64, 1, 8, 8), torch.device("cpu"))
    assert method == CPU_MEMORY_METHOD
    assert small > state_bytes(model)
    # 63 more samples: at least their input and the first activation (4x6x6 floats each).
    assert big - small >= 63 * (64 + 144) * 4


def test_live_tensor_bytes_sees_allocations_and_frees():
    tracker = LiveTensorBytes()
    with tracker:
        a = torch.ones(1000)  # 4000 bytes
        b = a * 2             # another 4000
        del a, b
    assert tracker.peak >= 8000
    assert tracker.current == 0


def test_size_is_what_torch_save_writes():
    model = tiny()
    raw, zipped = serialized_size(model)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    assert raw == len(buf.getvalue())
    assert zipped == len(gzip.compress(buf.getvalue(), compresslevel=6, mtime=0))


def test_sparsity_pays_off_only_gzipped():
    model = tiny()
    raw0, zip0 = serialized_size(model)
    with torch.no_grad():
        for p in model.parameters():
            p[torch.rand_like(p) < 0.8] = 0.0
    raw1, zip1 = serialized_size(model)
    assert raw1 == raw0
    assert zip1 < 0.6 * zip0


def test_params_and_nonzero_params():
    model = nn.Linear(10, 5)
    with torch.no_grad():
        model.weight[:2] = 0
    total, nonzero = count_params(model)
    assert total == 55
    assert nonzero == 55 - 20 - int((model.bias == 0).sum())


def test_flops_per_sample():
    model = nn.Linear(10, 5, bias=False)
    assert count_flops(model, torch.randn(4, 10), torch.device("cpu")).dense == 2 * 10 * 5


def test_pinned_threads_restores():
    before = torch.get_num_threads()
    with pinned_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA events need a GPU")
def test_cuda_latency_and_memory():
    model = tiny().cuda()
    x = torch.randn(8, 1, 8, 8)
    tracker = measure_latency(model, x, torch.device("cuda"), min_runs=10, min_time_s=0)
    assert len(tracker.samples_ms) == 10 and all(s > 0 for s in tracker.samples_ms)
    peak, method = measure_peak_memory(model, x, torch.device("cuda"))
    assert method == CUDA_MEMORY_METHOD and peak > 0


def test_peak_memory_under_cpu_autocast_with_einsum():
    """MaxViT's attention mixes a bf16 matmul's output with fp32 in an einsum: autocast
    handles that, and the memory tracker must too."""
    from optimizers.precision import autocast

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.v = torch.nn.Linear(8, 8)

        def forward(self, x):
            weights = torch.softmax(x @ x.transpose(1, 2), dim=-1).float()
            return torch.einsum("bij,bjd->bid", weights, self.v(x)).mean(dim=1)

    peak, method = measure_peak_memory(
        Attention().eval(), torch.randn(2, 5, 8), torch.device("cpu"),
        autocast=autocast("cpu", torch.bfloat16))
    assert peak > 0 and method == "live_tensor_bytes"
