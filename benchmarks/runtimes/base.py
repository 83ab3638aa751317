"""What every runtime shares: its small config, what ``prepare`` hands back, the calibration
reader, the ONNX file the graph runtimes start from, and the dispatch through the registry.

A runtime is one call (STYLE 18: a config, a ``prepare(model, example) -> callable``, its
census)::

    prepared = prepare(RuntimeConfig("ort", precision="int8", threads=1), model, example,
                       calibration=Calibration(batches), workdir=folder)
    logits = prepared.fn(example)   # a torch tensor in, logits (a torch tensor) out
    prepared.ops                    # the op census of the runtime's own optimized graph
    prepared.precision              # what it truly ran in ("fp32", "int8", "bf16", ...)

``model`` is what the runtime deploys: for eager and compile the variant as built (its FX
INT8 modules, its autocast), for the graph runtimes (ORT, OpenVINO) the variant's float
model, which they quantize themselves for an INT8 variant, calibrated on the engine's own
calibration batches (``Calibration``: the runtime's quantizer pulls them, STYLE 20).
"""

from __future__ import annotations

import contextlib
import io
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

from benchmarks.measure import precisions
from benchmarks.spec import runtimes as registry
from optimizers.settings import check_choice, check_number

DEVICES = ("cpu", "cuda")
# ONNX Runtime's INT8 activations: unsigned (U8S8, what its x86 kernels fuse into QLinearConv)
# or signed (quantize_static's default S8S8, which left 11 of ResNet-18's convs in float).
ORT_ACTIVATIONS = ("uint8", "int8")
ONNX_INPUT, ONNX_OUTPUT = "input", "logits"


@dataclass(frozen=True)
class RuntimeConfig:
    """One runtime cell's config: which runtime, the precision the variant asks of it, the
    intra-op threads and the device it runs on."""

    name: str
    precision: str = "fp32"
    threads: int = 1
    device: str = "cpu"
    activations: str = "uint8"   # ORT INT8 only

    def __post_init__(self):
        registry.get(self.name)
        # What a variant can ask of a runtime (its float graph, static INT8, autocast's
        # dtype): the deployable precisions of the registry.
        check_choice("runtime", "precision", self.precision, precisions.deployable())
        check_number("runtime", "threads", self.threads, 1, 1024, integer=True)
        check_choice("runtime", "device", self.device, DEVICES)
        check_choice("runtime", "activations", self.activations, ORT_ACTIVATIONS)
        if self.device not in registry.get(self.name).devices:
            raise RuntimeError(f"{self.name} runs on {', '.join(registry.get(self.name).devices)}"
                               f"; this variant runs on {self.device}")


@dataclass
class Prepared:
    """A runtime ready to time: its callable and what it truly is."""

    fn: Callable                  # torch tensor -> logits (torch tensor, on the CPU or device)
    precision: str                # what its kernels run in, from its census
    version: str
    prepare_s: float              # export, convert, quantize, compile (a first call included)
    ops: dict                     # census.Ops as a dict
    artefacts: list[Path] = field(default_factory=list)  # the runtime's own files
    notes: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)          # provider, precision hint, ...

    def __call__(self, x):
        return self.fn(x)


class Calibration:
    """The engine's calibration batches (``Context.calibration``), handed to a runtime's
    quantizer as it pulls them: never a second copy of the data."""

    def __init__(self, batches: list):
        if not batches:
            raise RuntimeError("static INT8 needs calibration batches and there are none")
        self.batches = list(batches)

    @property
    def samples(self) -> int:
        return sum(int(b.shape[0]) for b in self.batches)

    def arrays(self) -> Iterator:
        """Each batch as a numpy view (no copy), in order."""
        for batch in self.batches:
            yield batch.detach().cpu().numpy()


def export_onnx(model, example, path: Path) -> Path:
    """``model``'s fp32 graph as ONNX at ``path``, its batch dimension dynamic (the export
    command's exporter, torch.onnx with dynamo=True). Its reason, in one line, when it fails."""
    import torch

    from optimizers.errors import described
    if path.exists():
        return path
    weight = next(iter(model.parameters()), None)
    example = example.to(weight.device) if weight is not None else example.cpu()
    try:
        # The exporter reports its steps on stdout; the CLI keeps stdout for its table.
        with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
            torch.onnx.export(model, (example,), str(path), dynamo=True,
                              dynamic_shapes=({0: torch.export.Dim("batch", min=1,
                                                                   max=65536)},),
                              input_names=[ONNX_INPUT], output_names=[ONNX_OUTPUT],
                              external_data=False, verbose=False)
    except Exception as exc:
        path.unlink(missing_ok=True)
        # torch.onnx wraps the exporter's reason in advice, coloured for a terminal: the
        # innermost cause, one plain line.
        root = exc
        while root.__cause__ is not None and root.__cause__ is not root:
            root = root.__cause__
        reason = re.sub(r"\x1b\[[0-9;]*m", "", described(root))
        raise RuntimeError(f"ONNX export failed: {reason}") from None
    return path


def timed_first_call(fn: Callable, example) -> float:
    """The first call's milliseconds (what a cold service's first request pays)."""
    import torch
    t0 = time.perf_counter()
    with torch.inference_mode():
        fn(example)
    if example.device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1000.0


def prepare(config: RuntimeConfig, model, example, *, calibration: Calibration | None = None,
            workdir: Path | None = None, onnx_path: Path | None = None,
            autocast_dtype=None) -> Prepared:
    """``config``'s runtime prepared for ``model`` (see the module's docstring); its module is
    imported now. ``onnx_path``: the variant's ONNX file, shared by the graph runtimes (made
    here in ``workdir`` when not given). ``autocast_dtype``: the variant's autocast (eager and
    compile run under it; the graph runtimes ask for their own reduced precision)."""
    if precisions.get(config.precision).integer and calibration is None and config.name in ("ort",
                                                                              "openvino"):
        raise RuntimeError(f"{config.name} quantizes INT8 itself and needs the calibration "
                           f"batches")
    module = import_module(registry.get(config.name).module)
    return module.prepare(config, model, example, calibration=calibration, workdir=workdir,
                          onnx_path=onnx_path, autocast_dtype=autocast_dtype)
