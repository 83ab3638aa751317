"""One data-parallel worker: DDP training with a timed, byte-counting gradient comm hook.

Runs inside a process whose process group is already initialised: a child started by the
launcher (``benchmarks.distributed.launcher``, i.e. ``compression-bench distributed``: one
machine), or a process started by torchrun (any number of machines,
``python -m benchmarks.distributed.worker``, which reads torchrun's environment).

How the figures are taken (docs/distributed.md says the same for the reader):
- bytes per step: inside the comm hook, ``bucket.buffer().numel()`` times the element size
  of the dtype that goes on the wire (fp32, or fp16/bf16 when compressed), summed over the
  buckets of one step.
- comm time per step: the hook notes when a bucket is handed over (compression included)
  and a callback on its future notes when the all-reduce and decompression are done; the
  union of these intervals over one step is its communication time. With gloo the callback
  runs when the reduction completes; on CUDA, events on the stream time it instead. It
  includes waiting for the slowest rank to hand over the same bucket.
- throughput: the timed steps (after warm-up) on every rank, the slowest rank's wall time
  taken, global batch x steps / that time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Subset

from benchmarks.measure import precisions
from benchmarks.report.records import kept_samples
from benchmarks.spec.distributed import FAULT_STEP
from benchmarks.spec.sweep import COMPRESSIONS

# Each compression is a registered precision (``measure.precisions``: its dtype goes on the
# wire) with DDP's hook of that name; "none" all-reduces fp32 gradients as they are.
WIRE_DTYPES = {c: getattr(torch, precisions.get(precisions.DEFAULT if c == "none" else c)
                          .dtypes[0]) for c in COMPRESSIONS}
HOOKS = {c: default_hooks.allreduce_hook if c == "none" else
         getattr(default_hooks, f"{c}_compress_hook") for c in COMPRESSIONS}
# The first steps pay for lazy initialisation (DDP rebuilds its buckets after step one,
# allocators warm up): they are run but not timed.
WARMUP_STEPS = 3
# Horovod's recipe scales the learning rate with the number of workers (the global batch
# grows with them); kept here so accuracy stays comparable between worker counts.
BASE_LR = 0.01
EVAL_BATCH = 512
# Slots per rank in the shared progress array the launcher watches for hangs.
# Start-up (data set, model, rendezvous, DDP's broadcast) can take long on a loaded machine;
# the launcher's no-progress watchdog starts once every worker is through it, and this bounds it.
STARTUP_TIMEOUT_S = 180.0


class WorkerFailure(RuntimeError):
    """A run's workers crashed, hung or disagreed; the message names the worker."""


PROGRESS_SLOTS = 2  # [0] steps completed, [1] all-reduces handed over


@dataclass(frozen=True)
class WorkerJob:
    """What every rank of one run does; built and validated by the launcher
    (``benchmarks.distributed.launcher``)."""
    model: str
    dataset: str
    compression: str = "none"
    amp: bool = False
    steps: int = 50
    batch_size: int = 32           # per worker: the global batch grows with the workers
    device: str = "cpu"            # "cpu" or "cuda" (each rank takes cuda:LOCAL_RANK)
    seed: int = 0
    data_root: str | None = None
    input_shape: tuple[int, int, int] | None = None
    threads: int = 1
    mode: str = "train"            # "train" or "grads" (first-step gradients only)
    crash_rank: int | None = None  # test hooks: this rank raises / hangs at FAULT_STEP
    hang_rank: int | None = None

    def __post_init__(self):
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {', '.join(COMPRESSIONS)}; "
                             f"got {self.compression!r}")
        if self.mode not in ("train", "grads"):
            raise ValueError(f"mode must be train or grads; got {self.mode!r}")


class CommMeter:
    """State of the comm hook: wraps the chosen hook, counts wire bytes and times buckets."""

    def __init__(self, compression: str, device: torch.device, progress=None, rank: int = 0):
        self.inner = HOOKS[compression]
        self.wire_size = torch.empty((), dtype=WIRE_DTYPES[compression]).element_size()
        self.cuda = device.type == "cuda"
        self.progress, self.rank = progress, rank
        self.reset()

    def reset(self):
        self.bytes = 0
        self.intervals: list[tuple[float, float]] = []
        self.events: list[tuple] = []
        if self.cuda:  # the step's time origin: every bucket's events are read against it
            self.origin = torch.cuda.Event(enable_timing=True)
            self.origin.record()

    def step_comm_ms(self) -> float:
        """Communication time of the step: the union of its buckets' intervals (buckets
        overlap: each is handed over while later ones are still being computed)."""
        if self.cuda:
            torch.cuda.synchronize()
            return union_ms([(self.origin.elapsed_time(a), self.origin.elapsed_time(b))
                             for a, b in self.events])
        return union_ms([(t0 * 1e3, t1 * 1e3) for t0, t1 in self.intervals])


def union_ms(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of [start, end] intervals (milliseconds in, out)."""
    total, end = 0.0, -math.inf
    for t0, t1 in sorted(intervals):
        if t1 > end:
            total += t1 - max(t0, end)
            end = t1
    return total


def timed_hook(meter: CommMeter, bucket):
    meter.bytes += bucket.buffer().numel() * meter.wire_size
    if meter.progress is not None:
        meter.progress[meter.rank * PROGRESS_SLOTS + 1] += 1
    if meter.cuda:
        start = torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.perf_counter()
    fut = meter.inner(None, bucket)  # None: the default (world) process group

    def done(f):
        if meter.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            meter.events.append((start, end))
        else:
            meter.intervals.append((t0, time.perf_counter()))
        return f.value()

    return fut.then(done)


def make_sampler(dataset, world_size: int, rank: int, seed: int, shuffle: bool = True):
    # drop_last: without it the sampler pads the last shard with repeated samples, and the
    # shards would overlap.
    return DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=shuffle,
                              seed=seed, drop_last=True)


def _max_param_diff(params: torch.Tensor, world_size: int) -> float:
    """Largest difference between any rank's parameters and rank 0's (0.0 when in sync)."""
    gathered = [torch.empty_like(params) for _ in range(world_size)]
    dist.all_gather(gathered, params)
    return max(float((g - gathered[0]).abs().max()) for g in gathered)


def _shards_check(sampler, n: int, world_size: int, device) -> tuple[bool, float]:
    """Epoch 0's indices of every rank: disjoint, and what fraction of the split they cover."""
    mine = torch.tensor(list(iter(sampler)), dtype=torch.int64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(gathered, mine)
    every = torch.cat(gathered)
    unique = int(torch.unique(every).numel())
    return unique == every.numel(), unique / n


def _tick(progress, rank: int, slot: int = 0):
    if progress is not None:
        progress[rank * PROGRESS_SLOTS + slot] += 1


def _build(job: WorkerJob, rank: int, device: torch.device):
    from benchmarks.zoo.datasets import load_dataset
    from benchmarks.zoo.models import build_model

    bundle = load_dataset(job.dataset, data_root=job.data_root, download=False,
                          input_shape=job.input_shape, seed=job.seed)
    # Each rank starts from different weights on purpose: DDP's constructor must broadcast
    # rank 0's (Horovod's broadcast_parameters), and the check after it proves it did.
    torch.manual_seed(job.seed + rank)
    model = build_model(job.model, bundle.num_classes, bundle.in_channels,
                        bundle.input_size).to(device)
    return bundle, model


class _Pairs(Dataset):
    """A split as (input, label) pairs: inputs are made float32 per sample from what is
    stored (uint8 pixels), so a rank never holds a float copy of its data set."""

    def __init__(self, split):
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i):
        return self.split.x[i], self.split.y[i]


def run_worker(job: WorkerJob, rank: int, world_size: int, local_rank: int,
               progress=None) -> dict | None:
    """The body of one rank; rank 0 returns the run's figures, the others None."""
    torch.set_num_threads(job.threads)
    if job.device == "cuda":
        torch.cuda.set_device(local_rank)  # before any CUDA work (init_process_group did it too)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    bundle, model = _build(job, rank, device)
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    meter = CommMeter(job.compression, device, progress, rank)
    ddp.register_comm_hook(meter, timed_hook)
    flat = lambda: torch.nn.utils.parameters_to_vector(model.parameters()).detach()
    diff_after_broadcast = _max_param_diff(flat(), world_size)
    _tick(progress, rank)
    if job.mode == "grads":
        return _first_step_grads(job, ddp, model, bundle, rank, world_size, device)

    train = _Pairs(bundle.train)
    sampler = make_sampler(train, world_size, rank, job.seed)
    loader = DataLoader(train, batch_size=job.batch_size, sampler=sampler, drop_last=True)
    if len(loader) == 0:
        raise ValueError(f"batch size {job.batch_size} is larger than a worker's shard "
                         f"({len(sampler)} samples of {len(train)} over {world_size} workers)")
    disjoint, coverage = _shards_check(sampler, len(train), world_size, device)

    step_ms, comm_ms, loss = _train(job, ddp, model, loader, sampler, meter, rank, device,
                                    world_size, progress)
    bytes_per_step = meter.bytes
    diff_after_training = _max_param_diff(flat(), world_size)
    # The slowest rank sets the pace of synchronous data parallelism.
    timed = torch.tensor([sum(step_ms)], dtype=torch.float64, device=device)
    dist.all_reduce(timed, op=dist.ReduceOp.MAX)
    train_loss = loss.detach().float().reshape(1)
    dist.all_reduce(train_loss)
    if rank != 0:
        return None
    test_loss, accuracy = _evaluate(model, bundle, device)
    _tick(progress, rank)
    global_batch = job.batch_size * world_size
    wall_ms = float(timed.item())
    return {
        "throughput": global_batch * len(step_ms) / (wall_ms / 1e3) if wall_ms > 0 else None,
        "bytes_per_step": bytes_per_step,
        "comm_ms_per_step": sum(comm_ms) / len(comm_ms),
        "step_ms": wall_ms / len(step_ms),
        "step_ms_samples": kept_samples(step_ms),  # rank 0's, raw (at most KEPT_SAMPLES)
        "loss": test_loss,
        "train_loss": float(train_loss.item()) / world_size,
        "accuracy": accuracy,
        "steps": job.steps,
        "timed_steps": len(step_ms),
        "global_batch_size": global_batch,
        "threads_per_worker": job.threads,
        "shards_disjoint": disjoint,
        "shard_coverage": coverage,
        "param_max_diff_after_broadcast": diff_after_broadcast,
        "param_max_diff_after_training": diff_after_training,
    }


def _train(job: WorkerJob, ddp, model, loader, sampler, meter, rank: int, device,
           world_size: int, progress) -> tuple[list[float], list[float], torch.Tensor]:
    """``job.steps`` DDP steps (the injected faults at FAULT_STEP): each timed step's wall
    and comm-hook milliseconds after the warm-up, and the last loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=BASE_LR * world_size, momentum=0.9)
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    # GradScaler only for fp16: bf16 keeps fp32's exponent range, nothing underflows.
    scaler = torch.amp.GradScaler(device.type, enabled=job.amp and amp_dtype == torch.float16)
    warmup = min(WARMUP_STEPS, job.steps - 1)
    step, epoch, step_ms, comm_ms, loss = 0, 0, [], [], torch.zeros((), device=device)
    ddp.train()
    while step < job.steps:
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        for x, y in loader:
            if step >= job.steps:
                break
            if step == FAULT_STEP and rank == job.crash_rank:
                raise RuntimeError(f"injected crash on rank {rank} (crash_rank)")
            if step == FAULT_STEP and rank == job.hang_rank:
                while True:  # injected hang: the launcher's watchdog must end it
                    time.sleep(1)
            t0 = time.perf_counter()
            meter.reset()
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=job.amp):
                loss = F.cross_entropy(ddp(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if step >= warmup:
                step_ms.append((time.perf_counter() - t0) * 1e3)
                comm_ms.append(meter.step_comm_ms())
            step += 1
            _tick(progress, rank)
        epoch += 1

    return step_ms, comm_ms, loss


def _first_step_grads(job, ddp, model, bundle, rank, world_size, device) -> dict | None:
    """One step on a fixed global batch, split evenly over the ranks; rank 0 returns the
    all-reduced (averaged) gradients."""
    global_batch = job.batch_size * world_size
    order = torch.randperm(len(bundle.train), generator=torch.Generator().manual_seed(job.seed))
    batch = Subset(_Pairs(bundle.train), order[:global_batch].tolist())
    sampler = make_sampler(batch, world_size, rank, job.seed, shuffle=False)
    x, y = next(iter(DataLoader(batch, batch_size=job.batch_size, sampler=sampler)))
    # eval(): dropout masks and BatchNorm batch statistics depend on how the batch is split;
    # what is checked here is the sharding and the all-reduce, not those.
    ddp.eval()
    F.cross_entropy(ddp(x.to(device)), y.to(device)).backward()
    if rank != 0:
        return None
    return {name: p.grad.detach().cpu().numpy() for name, p in model.named_parameters()}


def _evaluate(model, bundle, device) -> tuple[float | None, float | None]:
    """Test loss and accuracy, by rank 0 on the whole test split (null without labels)."""
    if len(bundle.test) == 0 or not getattr(bundle, "labelled", True):
        return None, None
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.inference_mode():
        for i in range(0, len(bundle.test), EVAL_BATCH):
            x = bundle.test.x[i:i + EVAL_BATCH].to(device)
            y = bundle.test.y[i:i + EVAL_BATCH].to(device)
            logits = model(x).float()
            total_loss += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())
    return total_loss / len(bundle.test), correct / len(bundle.test)


# -- torchrun entry: python -m benchmarks.distributed.worker ---------------------------------

def torchrun_main(argv: list[str]) -> int:
    """One rank under torchrun (any number of nodes); rank 0 prints the run as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.distributed.worker")
    parser.add_argument("--model", default="seed_cnn")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--compression", choices=COMPRESSIONS, default="none")
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-root")
    parser.add_argument("--json", help="rank 0 writes the run here as well")
    args = parser.parse_args(argv)
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            print(f"error: {var} is not set; start this module with torchrun", file=sys.stderr)
            return 2
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        # The rank's GPU first, then a group bound to it (device_id): NCCL then creates its
        # communicator eagerly on the right device instead of guessing at the first call.
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    else:
        dist.init_process_group("gloo")  # env:// from torchrun
    try:
        job = WorkerJob(model=args.model, dataset=args.dataset, compression=args.compression,
                        amp=args.amp, steps=args.steps, batch_size=args.batch_size,
                        device=device, seed=args.seed, data_root=args.data_root,
                        threads=max(1, (os.cpu_count() or 1) // local_world))
        result = run_worker(job, rank, world_size, local_rank)
    finally:
        dist.destroy_process_group()
    if result is not None:
        run = {"workers": world_size, "compression": job.compression, "amp": job.amp,
               "backend": "nccl" if device == "cuda" else "gloo", "device": device,
               "scaling_efficiency": None, "error": None, **result}
        text = json.dumps(run, indent=2)
        print(text)
        if args.json:
            with open(args.json, "w") as fh:
                fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(torchrun_main(sys.argv[1:]))
