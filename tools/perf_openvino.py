"""``make perf``'s OpenVINO INT8 check (issue 34.4): the product's OpenVINO INT8 cell against
NNCF's default flow by hand, on the same model, shape, calibration batches and thread, timed
in the same process in alternated rounds.

By hand is what NNCF's documentation shows: ``ov.convert_model`` of the PyTorch model,
``nncf.quantize`` with its defaults (preset, model type, subset), ``compile_model`` with the
plugin's default configuration but the thread count. The product goes through ONNX (the file
ONNX Runtime deploys too) and compiles with the latency hint and one stream. The target: the
product's cell at least ``SHARE`` of the hand flow's speed (the median of per-round ratios).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from tools.checks import check

SHARE = 0.95
ROUNDS = 10
CALLS = 20          # calls per round per side


def _per_call_ms(fn, x, calls: int = CALLS) -> float:
    fn(x)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - t0) / calls * 1000


def against_nncf(shape=(32, 3, 64, 64), calibration_batches: int = 8) -> tuple[dict, str]:
    """(the check row, a markdown line of the figures) on a random-init ResNet-18."""
    import nncf
    import openvino as ov
    import torch
    import torchvision

    from benchmarks.measure.latency import pinned_threads
    from benchmarks.runtimes.base import Calibration, RuntimeConfig, prepare
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    x = torch.randn(*shape)
    calibration = [torch.randn(*shape) for _ in range(calibration_batches)]
    with tempfile.TemporaryDirectory() as tmp, pinned_threads(1):
        ours = prepare(RuntimeConfig("openvino", precision="int8", threads=1), model, x,
                       calibration=Calibration(calibration), workdir=Path(tmp))
        quantized = nncf.quantize(ov.convert_model(model, example_input=x),
                                  nncf.Dataset(calibration, lambda b: b.numpy()))
        compiled = ov.Core().compile_model(quantized, "CPU", {"INFERENCE_NUM_THREADS": 1})
        request, output = compiled.create_infer_request(), compiled.output(0)

        def by_hand(t):
            return torch.from_numpy(request.infer({0: t.numpy()})[output].copy())
        rounds = []
        for i in range(ROUNDS):  # alternated, the side that goes first swapped each round
            if i % 2:
                hand, mine = _per_call_ms(by_hand, x), _per_call_ms(ours.fn, x)
            else:
                mine, hand = _per_call_ms(ours.fn, x), _per_call_ms(by_hand, x)
            rounds.append((mine, hand))
    share = statistics.median(hand / mine for mine, hand in rounds)
    mine_ms = statistics.median(m for m, _ in rounds)
    hand_ms = statistics.median(h for _, h in rounds)
    label = f"b{shape[0]} {'x'.join(map(str, shape[1:]))}"
    row = check(f"ResNet-18 {label}, 1 thread: the product's OpenVINO INT8 cell against NNCF's "
                f"default flow by hand (speed, median of {ROUNDS} alternated rounds)",
                f"{share:.3f}x ({mine_ms:.2f} ms against {hand_ms:.2f} ms)", f">= {SHARE}",
                share >= SHARE, f"the product's graph: {ours.ops.get('verdict')}")
    line = (f"OpenVINO INT8, ResNet-18 {label}, 1 thread: the product's cell {mine_ms:.2f} ms, "
            f"NNCF's default flow by hand {hand_ms:.2f} ms per call (medians of {ROUNDS} "
            f"alternated rounds); the product at {share:.3f}x the hand flow's speed.")
    return row, line
