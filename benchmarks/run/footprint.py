"""A job's peak memory, estimated before it allocates anything, and the admission check.

The estimate adds what a sweep really holds at its peak, each part from what will be
allocated, not from a rule of thumb:

- the data set as stored (``datasets.stored_size``: uint8 pixels, float32 otherwise);
- the measured batch (float32) and the accuracy pass's batch;
- activations: the model's forward pass run on the meta device (shapes only, no memory) at a
  batch of 2 and scaled to the real batch: the peak of live tensors for inference, every
  output kept for the backward pass (and as much again for its gradients) for training;
- weights: the baseline, a variant and a teacher side by side, plus gradients and Adam's two
  moments while training;
- copies: the checkpoint read into memory, the test split renormalised when a checkpoint's
  normalisation is checked, the teacher's logits;
- a margin for the allocator and what no estimate sees.

``admit`` refuses, in one line and before anything is loaded, a job whose estimate exceeds
its share of the memory available now (and what the worker's hard limit leaves). On a GPU
the model's part (activations, weights) is held against the GPU's free memory and the rest
against the host's. The hard limit (``service/limits.py``) catches whatever the estimate
misses.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from pathlib import Path

from benchmarks.measure.machine import available_memory_bytes, data_segment_bytes, memory_limit
from benchmarks.spec.limits import gib
from benchmarks.zoo.datasets import DataSize

DRY_BATCH = 2              # the meta-device forward's batch (BatchNorm trains on 2 or more)
ACCURACY_BATCH = 256       # what the runner scores accuracy with
MARGIN_SHARE, MARGIN_BYTES = 0.10, 64 * 2**20
RESIDENT_MODELS = 3        # baseline, teacher (a copy) and the variant being built
TRAIN_STATE = 4            # weights, gradients, Adam's two moments


@dataclass(frozen=True)
class Footprint:
    data: int          # the data set as stored
    batches: int       # the measured batch and the accuracy pass's batch
    activations: int   # the larger of a training step's and an inference pass's
    weights: int       # models side by side, with gradients and optimizer state
    copies: int        # checkpoint, renormalised test split, teacher logits

    @property
    def total(self) -> int:
        return _with_margin(self.data + self.batches + self.activations + self.weights +
                            self.copies)

    @property
    def host(self) -> int:
        """What stays in host memory when the model runs on a GPU."""
        return _with_margin(self.data + self.batches + self.copies)

    @property
    def device(self) -> int:
        """What a GPU holds: the models and their activations."""
        return _with_margin(self.activations + self.weights)

    def describe(self) -> str:
        return (f"about {gib(self.total)} (data set {gib(self.data)}, batches "
                f"{gib(self.batches)}, activations {gib(self.activations)}, weights "
                f"{gib(self.weights)}, copies {gib(self.copies)}, plus a margin)")


def _key(t) -> int | None:
    import torch
    if not isinstance(t, torch.Tensor):
        return None
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


def _with_margin(n: int) -> int:
    return int(n * (1 + MARGIN_SHARE) + MARGIN_BYTES)


class _MetaBytes:
    """Bytes of every tensor an op outputs (``total``, what autograd may keep for backward)
    and the peak of those alive at once (``peak``), on any device, the meta one included."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                from torch.utils._pytree import tree_flatten
                out = func(*args, **(kwargs or {}))
                # A view or an in-place result shares an input's storage: nothing new.
                seen = {_key(t) for t in tree_flatten((args, kwargs))[0]}
                for t in tree_flatten(out)[0]:
                    if _key(t) not in seen:
                        tracker._track(t)
                return out

        self.mode = Mode()
        self.live: dict[int, int] = {}
        self.current = self.peak = self.total = 0

    def _track(self, t) -> None:
        import torch
        if not isinstance(t, torch.Tensor):
            return
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        key, size = storage._cdata, storage.nbytes()
        if size == 0 or key in self.live:
            return
        self.live[key] = size
        self.total += size
        self.current += size
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)


def activation_bytes(build, shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """(inference peak per sample, training activations per sample, parameter bytes) of the
    model ``build()`` makes, from forward passes on the meta device: nothing is allocated."""
    import torch
    with torch.device("meta"):
        model = build()  # a bad model name or file fails here, as it would for real
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    x = torch.empty(DRY_BATCH, *shape, device="meta")
    infer, train = _MetaBytes(), _MetaBytes()
    try:
        with torch.no_grad(), infer.mode:
            model.eval()(x)
        with train.mode:
            model.train()(x)
    except Exception:  # an input that does not fit, or an op without a meta kernel: the
        pass           # real forward pass says why (check_input_fits); count what was seen
    return infer.peak // DRY_BATCH, train.total // DRY_BATCH, params


def sweep_footprint(spec, size: DataSize, build) -> Footprint:
    """The peak of a sweep over data of ``size``; ``build()`` makes the baseline's model."""
    sample = 4 * size.shape[0] * size.shape[1] * size.shape[2]  # one float32 input
    infer, train, params = activation_bytes(build, size.shape)
    batch = spec.batch_size
    timed = max((batch, *spec.eval_batch_sizes))  # the largest batch any row is timed at
    accuracy = min(ACCURACY_BATCH, size.samples)
    # A training batch holds at most the whole data set (ten images train ten at a time).
    step = min(batch, size.samples)
    activations = max(2 * train * step,                     # a training step, with gradients
                      infer * max(timed, accuracy))         # measuring, or scoring accuracy
    copies = 0
    if spec.checkpoint:
        try:
            copies += Path(spec.checkpoint).stat().st_size
        except OSError:
            pass
        copies += sample * size.samples // 5   # the test split, renormalised
    # Each runtime other than eager holds its own copy of a variant's weights.
    copies += params * len(spec.variants) * (len(spec.runtimes) - 1) * \
        max(1, len(spec.thread_counts))
    return Footprint(data=size.nbytes, batches=sample * (timed + accuracy),
                     activations=activations, weights=params * (RESIDENT_MODELS + TRAIN_STATE),
                     copies=copies)


def distributed_footprint(config, size: DataSize, build) -> Footprint:
    """Every rank holds the data set, its batch, one model in training and its activations."""
    sample = 4 * size.shape[0] * size.shape[1] * size.shape[2]
    _, train, params = activation_bytes(build, size.shape)
    ranks = max(config.workers)
    return Footprint(data=size.nbytes * ranks, batches=sample * config.batch_size * ranks,
                     activations=2 * train * config.batch_size * ranks,
                     weights=params * TRAIN_STATE * ranks, copies=0)


# A language model's run holds the baseline and the variant being built from a copy of it,
# and while it loads, what the loader read (a state dict beside the built module); its logits
# are scored a batch at a time (benchmarks.measure.lm_quality.BATCH_LOGIT_BYTES), two models'.
LM_RESIDENT_MODELS = 2
LM_LOGIT_BYTES = 2 * 256 * 2**20


def lm_footprint(parameters: int, bytes_per_parameter: int = 4) -> Footprint:
    """A language model's run from its parameter count (fp32, as loaded), before torch
    builds anything: its text and windows are capped on their own (``zoo.text``)."""
    weights = parameters * bytes_per_parameter
    return Footprint(data=0, batches=0, activations=LM_LOGIT_BYTES,
                     weights=LM_RESIDENT_MODELS * weights, copies=weights)


def budget(share: float) -> tuple[int, str]:
    """The most a job may use now, and how that was reached (for the refusal's line)."""
    available = available_memory_bytes()
    allowed = int(share * available)
    how = f"{share:.0%} of the {gib(available)} available (COMPRESSION_BENCH_MEMORY_SHARE)"
    limit = memory_limit()
    if limit is not None:
        left = limit - data_segment_bytes()
        if left < allowed:
            allowed = max(0, left)
            how = (f"what the worker's hard limit of {gib(limit)} leaves "
                   f"(COMPRESSION_BENCH_WORKER_MEMORY)")
    return allowed, how


SMALLER = "give a smaller --input-shape, --batch-size or --eval-batch-size"


def admit(what: str, footprint: Footprint, share: float,
          device_free: int | None = None, smaller: str = SMALLER) -> None:
    """ValueError, one line, when ``footprint`` exceeds what this job may use now: all of it
    in host memory, or with ``device_free`` (a GPU's free bytes) its model part on the GPU.
    ``smaller``: what the line asks for instead."""
    allowed, how = budget(share)
    host = footprint.total if device_free is None else footprint.host
    if host > allowed:
        raise ValueError(f"{what} needs {footprint.describe()} in memory; a job may use at "
                         f"most {gib(allowed)} here, {how}; {smaller}")
    if device_free is not None and footprint.device > share * device_free:
        raise ValueError(f"{what} needs about {gib(footprint.device)} of GPU memory "
                         f"(activations {gib(footprint.activations)}, weights "
                         f"{gib(footprint.weights)}); a job may use at most "
                         f"{gib(share * device_free)}, {share:.0%} of the GPU's "
                         f"{gib(device_free)} free (COMPRESSION_BENCH_MEMORY_SHARE); give a "
                         f"smaller --input-shape, --batch-size or --eval-batch-size")


def admit_sweep(spec, size: DataSize, build, share: float,
                device_free: int | None = None) -> Footprint:
    """The sweep's estimate (``sweep_footprint``) held against what it may use (``admit``):
    what the worker does before it loads the data, and what the page's check asks
    (``benchmarks.run.probe``) before anything is queued."""
    footprint = sweep_footprint(spec, size, build)
    batch = max((spec.batch_size, *spec.eval_batch_sizes))  # the largest one timed
    admit(describe_data(spec.dataset, size, batch), footprint, share, device_free)
    return footprint


def describe_data(name: str, size: DataSize, batch: int) -> str:
    dims = ",".join(map(str, size.shape))
    return f"{name} ({size.samples} samples of {dims}) at batch size {batch}"

