"""Deployment runtimes: eager PyTorch, torch.compile, ONNX Runtime, OpenVINO (one module
each, imported only when a cell is built), the op census of each one's optimized graph and
the output parity against eager. The registry (names, availability, versions) is
``benchmarks.spec.runtimes``, torch-free."""

__all__ = ["Calibration", "Prepared", "RuntimeConfig", "prepare"]

from benchmarks.runtimes.base import Calibration, Prepared, RuntimeConfig, prepare
