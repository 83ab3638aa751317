"""Data-parallel training benchmark: DDP with gradient compression as a comm hook.

The article trains with Horovod; Horovod does not build against current PyTorch, so this is
its PyTorch-native equivalent (docs/distributed.md maps every Horovod call). For each worker
count and compression the launcher starts one process per rank (gloo on CPU, NCCL on GPU),
watches them, and turns a crash or a hang into a failed run with the worker's reason, leaving
no process behind. ``prepare_distributed`` refuses what cannot run before anything starts or
is recorded (the ``distributed`` command, ``benchmarks.cli.distributed``, records after it).
A cancel (``should_stop``) is checked every WAIT_S while the ranks run, and stops every rank
at once. Multi-node runs use the same worker under torchrun
(``python -m benchmarks.distributed.worker``).

On one machine everything listens on loopback only: the rendezvous store on a socket bound to
127.0.0.1 (torch's TCPStore would otherwise bind every interface, with no authentication),
gloo's connections on the ``lo`` interface. Ranks share the launcher's hard memory limit
between them.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import queue
import socket
import sys
import time
from dataclasses import dataclass

from benchmarks.distributed.worker import (
    PROGRESS_SLOTS,
    STARTUP_TIMEOUT_S,
    WorkerFailure,
    WorkerJob,
    run_worker,
)
from benchmarks.distributed.lifeline import die_with_launcher
from benchmarks.measure.environment import resolve_device
from benchmarks.measure.machine import apply_memory_limit, data_segment_bytes, memory_limit
from benchmarks.spec.cancel import Cancelled
from benchmarks.spec.distributed import DistributedConfig
from optimizers.errors import first_line

# Beyond one worker per core timings are oversubscribed (warned); beyond this many per core
# the run would measure the scheduler, not the training: refused.
MAX_WORKERS_PER_CORE = 4
# A terminated worker gets this long to exit before it is killed.
TERMINATE_GRACE_S = 3.0
HOST = "127.0.0.1"
LOOPBACK_IFNAME = "lo"  # gloo's interface for ranks on one machine (GLOO_SOCKET_IFNAME)
WAIT_S = 0.2            # how often the launcher looks at its ranks (and at a cancel)


# -- capacity --------------------------------------------------------------------------------

def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_capacity(workers: tuple[int, ...], device: str) -> list[str]:
    """Refuse (ValueError) what the machine cannot host; return warnings for what it hosts
    badly (more CPU workers than cores: the timings then share cores)."""
    import torch
    most = max(workers)
    if device == "cuda":
        gpus = torch.cuda.device_count()
        if most > gpus:
            raise ValueError(f"{most} workers need {most} GPUs; this machine has {gpus} "
                             f"(NCCL needs one GPU per worker)")
        return []
    cores = available_cores()
    if most > MAX_WORKERS_PER_CORE * cores:
        raise ValueError(f"{most} workers exceed {MAX_WORKERS_PER_CORE} per core on this "
                         f"machine's {cores} cores; use at most {MAX_WORKERS_PER_CORE * cores}")
    if most > cores:
        return [f"{most} workers on {cores} cores: timings will be oversubscribed "
                f"(workers share cores)"]
    return []


def _preflight(config: DistributedConfig, memory_share: float | None = None,
               should_stop=None) -> None:
    """Bad model or dataset names fail here, in one line, before any worker starts; so does a
    run whose ranks together would need more memory than it may use (every rank loads the
    data set), before anything is loaded."""
    from benchmarks.run.footprint import admit, describe_data, distributed_footprint
    from benchmarks.spec.limits import Limits
    from benchmarks.zoo.datasets import load_dataset, stored_size
    from benchmarks.zoo.models import build_model
    size = stored_size(config.dataset, config.data_root, config.input_shape)
    share = memory_share if memory_share is not None else Limits.from_env().memory_share
    footprint = distributed_footprint(config, size, lambda: build_model(
        config.model, size.classes, size.shape[0], size.shape[1:]))
    admit(f"{describe_data(config.dataset, size, config.batch_size)} on "
          f"{max(config.workers)} workers", footprint, share)
    bundle = load_dataset(config.dataset, data_root=config.data_root, download=False,
                          input_shape=config.input_shape, seed=config.seed,
                          should_stop=should_stop)
    build_model(config.model, bundle.num_classes, bundle.in_channels, bundle.input_size)
    shard = len(bundle.train) // max(config.workers)
    if config.batch_size > shard:
        raise ValueError(f"batch size {config.batch_size} is larger than a worker's shard: "
                         f"{len(bundle.train)} training samples over {max(config.workers)} "
                         f"workers leave {shard} each")


# -- the launcher ----------------------------------------------------------------------------

def _loopback_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _open_store(port: int | None, timeout_s: float):
    """The rendezvous store, hosted by the launcher on a socket it bound to loopback (port 0:
    the OS picks a free one, with no window in which another process could take it).
    Returns (store, warning); the store owns the socket from then on."""
    import torch.distributed as dist
    timeout = datetime.timedelta(seconds=timeout_s)
    warning, sock = None, None
    if port:
        try:
            sock = _loopback_socket(port)
        except OSError as exc:
            warning = f"port {port} is not usable ({first_line(exc)}); using a free port"
    if sock is None:
        sock = _loopback_socket(0)
    try:
        store = dist.TCPStore(HOST, sock.getsockname()[1], None, True, timeout,
                              wait_for_workers=False, master_listen_fd=sock.fileno())
    except BaseException:
        sock.close()
        raise
    sock.detach()  # the store closes the descriptor when it goes
    return store, warning


def _child(rank, world_size, port, backend, job, results, progress, timeout_s,
           memory_headroom=None, launcher=None):
    """Entry point of one launched rank: reports ("ok", rank, result) or ("error", rank, why)."""
    die_with_launcher(launcher)
    if memory_headroom is not None:  # this rank's share of what the launcher's limit leaves
        apply_memory_limit(data_segment_bytes() + memory_headroom)
    # gloo connects the ranks over loopback: nothing listens on the machine's other addresses.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", LOOPBACK_IFNAME)
    try:
        import torch.distributed as dist
        # Collectives time out well after the launcher's watchdog, which names the rank that
        # stalled; otherwise a waiting rank's gloo timeout would be reported as the cause.
        timeout = datetime.timedelta(seconds=2 * timeout_s + 10)
        store = dist.TCPStore(HOST, port, None, False, timeout)
        kwargs = {}
        if backend == "nccl":
            import torch
            # The rank's GPU first, then a group bound to it (NCCL's communicator is created
            # on that device, not guessed at the first collective).
            torch.cuda.set_device(rank)
            kwargs["device_id"] = torch.device("cuda", rank)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=timeout, **kwargs)
        try:
            result = run_worker(job, rank, world_size, rank, progress)
        finally:
            dist.destroy_process_group()
        results.put(("ok", rank, result))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the launcher
        results.put(("error", rank, f"{type(exc).__name__}: {first_line(exc)}"))
        results.close()
        results.join_thread()
        os._exit(1)


def _context():
    # forkserver: torch is imported once, in the server, and each worker forks from it in a
    # fraction of a second instead of importing torch again (seconds per worker).
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        # The built-in data sets' loaders too (scikit-learn alone takes over a second).
        ctx.set_forkserver_preload(["benchmarks.distributed.worker", "benchmarks.zoo.datasets",
                                    "benchmarks.zoo.models", "sklearn.datasets"])
        return ctx
    return mp.get_context("spawn")


def _rank_headroom(world_size: int) -> int | None:
    """Each rank's share of what the launcher's memory limit leaves, or None (no limit)."""
    limit = memory_limit()
    if limit is None:
        return None
    return max(0, limit - data_segment_bytes()) // world_size


def launch(job: WorkerJob, world_size: int, *, backend: str, timeout_s: float,
           port: int | None = None, warn=None, should_stop=None, on_step=None) -> dict:
    """Run one job on world_size local ranks; rank 0's figures, or WorkerFailure; Cancelled
    (every rank stopped) when ``should_stop()`` says so. ``on_step(steps)``: the slowest
    rank's steps so far, as they change."""
    store, warning = _open_store(port, STARTUP_TIMEOUT_S + timeout_s)
    if warning and warn:
        warn(warning)
    ctx = _context()
    results = ctx.Queue()
    progress = ctx.Array("q", world_size * PROGRESS_SLOTS, lock=False)
    headroom = _rank_headroom(world_size)
    procs = [ctx.Process(target=_child, name=f"bench-ddp-rank{r}", daemon=True,
                         args=(r, world_size, store.port, backend, job, results, progress,
                               timeout_s, headroom, os.getpid()))
             for r in range(world_size)]
    result, ok = None, set()
    steps_seen = 0
    try:
        for p in procs:
            p.start()
        started = time.monotonic()
        last_change, last_seen = started, list(progress)
        while len(ok) < world_size:
            if should_stop is not None and should_stop():
                raise Cancelled()
            try:
                kind, rank, payload = results.get(timeout=WAIT_S)
            except queue.Empty:
                kind = None
            if kind == "error":
                raise WorkerFailure(f"worker rank {rank} failed: {payload}")
            if kind == "ok":
                ok.add(rank)
                result = payload if rank == 0 else result
                continue
            for r, p in enumerate(procs):
                if p.exitcode not in (None, 0):
                    _drain_errors(results)
                    code = p.exitcode
                    how = f"signal {-code}" if code < 0 else f"exit status {code}"
                    raise WorkerFailure(f"worker rank {r} died ({how}) without a report")
            now, seen = time.monotonic(), list(progress)
            if seen != last_seen:
                last_change, last_seen = now, seen
            steps = min(seen[r * PROGRESS_SLOTS] for r in range(world_size))
            if on_step is not None and steps != steps_seen:
                steps_seen = steps
                on_step(steps)
            all_up = all(seen[r * PROGRESS_SLOTS] > 0 for r in range(world_size))
            if all_up and now - last_change > timeout_s:
                raise WorkerFailure(_hang_message(seen, world_size, timeout_s))
            if not all_up and now - started > STARTUP_TIMEOUT_S:
                late = [r for r in range(world_size) if seen[r * PROGRESS_SLOTS] == 0]
                raise WorkerFailure(f"worker rank(s) {late} did not get through start-up in "
                                    f"{STARTUP_TIMEOUT_S:.0f} s")
        return result
    finally:
        _stop(procs)
        results.close()
        results.cancel_join_thread()
        del store


def _drain_errors(results):
    """A worker that reported an error just before exiting: surface its message."""
    try:
        while True:
            kind, rank, payload = results.get(timeout=0.5)
            if kind == "error":
                raise WorkerFailure(f"worker rank {rank} failed: {payload}")
    except queue.Empty:
        return


def _hang_message(seen: list[int], world_size: int, timeout_s: float) -> str:
    """Name the rank that stopped: the one that handed the fewest buckets to the all-reduce
    (the others wait for it inside the collective)."""
    steps = [seen[r * PROGRESS_SLOTS] for r in range(world_size)]
    reduces = [seen[r * PROGRESS_SLOTS + 1] for r in range(world_size)]
    behind = [r for r in range(world_size)
              if (reduces[r], steps[r]) < (max(reduces), max(steps))]
    who = (f"worker rank {behind[0]}" if len(behind) == 1
           else f"worker ranks {behind}" if behind else f"all {world_size} workers")
    return (f"{who} made no progress for {timeout_s:g} s (hung); all workers stopped. "
            f"Progress per rank: {list(zip(steps, reduces))} (checkpoints, all-reduces)")


def _stop(procs) -> None:
    """Terminate, then kill, then reap every worker: none outlives its run."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE_S
    for p in procs:
        if p.pid is not None:
            p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()


# -- the benchmark ---------------------------------------------------------------------------

def _threads_per_worker(world_size: int, device: str) -> int:
    """Every worker gets the same share of the cores but one (the launcher and the OS keep the
    spare one, as the sweep's timings do). An equal share matters more than a large one: the
    1-worker run must not get threads the 2-worker runs lack, or efficiency reads above 1 (on
    2 cores, 1 worker on 2 threads ran 5x slower than on 1 while anything else ran)."""
    if device == "cuda":
        return 1
    return max(1, (available_cores() - 1) // world_size)


@dataclass(frozen=True)
class PreparedDistributed:
    """A benchmark that passed every check (capacity, model, data, memory): nothing is
    recorded or started yet, so a refusal before this writes nothing."""

    config: DistributedConfig
    device: str  # the ranks' device type: cpu or cuda
    warnings: tuple[str, ...] = ()  # what the machine hosts badly (oversubscribed cores)

    @property
    def backend(self) -> str:
        return "nccl" if self.device == "cuda" else "gloo"

    def run(self, on_progress=None, warn=None, *, should_stop=None, on_step=None
            ) -> list[dict]:
        """Every (compression, workers) pair, fewest workers first so the one-worker run is
        there to compute scaling efficiency from (see ``run_distributed``)."""
        config = self.config
        warn = warn or _warn
        pairs = [(c, w) for c in config.compressions for w in config.workers]
        runs: list[dict] = []
        for done, (compression, workers) in enumerate(pairs, 1):
            if should_stop is not None and should_stop():
                raise Cancelled()
            run = self._empty_run(workers, compression)
            stepped = None if on_step is None else (
                lambda steps, i=done - 1, name=run["name"]: on_step(i, len(pairs), name, steps,
                                                                    config.steps))
            t0 = time.monotonic()
            try:
                run.update(self._launch(self._job(workers, compression), workers, warn,
                                        should_stop, stepped))
                run["error"] = _sync_error(run)
            except WorkerFailure as exc:
                run["error"] = str(exc)
            run["wall_s"] = round(time.monotonic() - t0, 3)
            run["oversubscribed"] = (config.executor != "ray" and self.device == "cpu"
                                     and workers > available_cores())
            run["scaling_efficiency"] = scaling_efficiency(run, runs)
            runs.append(run)
            if on_progress:
                on_progress(done, len(pairs), run)
        return runs

    def _job(self, workers: int, compression: str) -> WorkerJob:
        c = self.config
        return WorkerJob(model=c.model, dataset=c.dataset, compression=compression, amp=c.amp,
                         steps=c.steps, batch_size=c.batch_size, device=self.device,
                         seed=c.seed, data_root=c.data_root, input_shape=c.input_shape,
                         threads=_threads_per_worker(workers, self.device),
                         crash_rank=c.crash_rank, hang_rank=c.hang_rank)

    def _empty_run(self, workers: int, compression: str) -> dict:
        c = self.config
        return {"name": run_name(workers, compression, c.amp), "workers": workers,
                "compression": compression, "amp": c.amp, "backend": self.backend,
                "device": self.device, "throughput": None, "scaling_efficiency": None,
                "bytes_per_step": None, "comm_ms_per_step": None, "step_ms": None,
                "loss": None, "accuracy": None, "steps": c.steps,
                "global_batch_size": c.batch_size * workers, "error": None}

    def _launch(self, job, workers, warn, should_stop, on_step) -> dict:
        c = self.config
        if c.executor == "ray":
            from benchmarks.distributed.ray_ranks import launch_on_ray
            return launch_on_ray(job, workers, backend=self.backend, timeout_s=c.timeout_s,
                                 should_stop=should_stop)
        return launch(job, workers, backend=self.backend, timeout_s=c.timeout_s, port=c.port,
                      warn=warn, should_stop=should_stop, on_step=on_step)


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)


def prepare_distributed(config: DistributedConfig, *, should_stop=None,
                        memory_share: float | None = None) -> PreparedDistributed:
    """Refuse (ValueError, one line) what this machine or the cluster cannot host, a model or
    data set that does not load, and ranks that together would need more memory than the run
    may use. What it hosts badly (more CPU workers than cores) is in ``warnings``, for the
    caller to show once everything passed (a refusal stays one line)."""
    warnings: list[str] = []
    if config.executor == "ray":
        from benchmarks.executors.ray_executor import check_cluster_capacity, connect
        connect(config.ray_address)
        device = config.device if config.device != "auto" else "cpu"
        check_cluster_capacity(max(config.workers), device)
    else:
        device = resolve_device(config.device).type
        warnings += check_capacity(config.workers, device)
    _preflight(config, memory_share, should_stop)
    return PreparedDistributed(config, device, tuple(warnings))


def run_distributed(config: DistributedConfig, on_progress=None, warn=None, *,
                    should_stop=None, on_step=None, memory_share: float | None = None
                    ) -> list[dict]:
    """Every (compression, workers) pair, fewest workers first so the one-worker run is there
    to compute scaling efficiency from. on_progress(done, total, run) after each run;
    on_step(index, total, name, steps, of) while one trains; warn(text) for what the caller
    should show (default: stderr). ``should_stop()`` true: Cancelled, every rank stopped."""
    prepared = prepare_distributed(config, should_stop=should_stop, memory_share=memory_share)
    for text in prepared.warnings:
        (warn or _warn)(text)
    return prepared.run(on_progress, warn, should_stop=should_stop, on_step=on_step)


def _sync_error(run: dict) -> str | None:
    """The checks the run proves about itself: disjoint shards, parameters in step."""
    if not run.get("shards_disjoint", True):
        return "the workers' data shards overlap"
    for when in ("after_broadcast", "after_training"):
        diff = run.get(f"param_max_diff_{when}")
        if diff:
            return f"parameters differ between ranks {when.replace('_', ' ')} (max {diff:g})"
    return None


def run_name(workers: int, compression: str, amp: bool) -> str:
    return f"w{workers}-{compression}" + ("-amp" if amp else "")


def scaling_efficiency(run: dict, previous: list[dict]) -> float | None:
    """throughput(N) / (N x throughput(1)), against the one-worker run of the same
    compression and AMP setting; None when that run is absent or failed."""
    if run.get("throughput") is None:
        return None
    for base in previous:
        if (base["workers"] == 1 and base["compression"] == run["compression"]
                and base["amp"] == run["amp"] and base.get("throughput")):
            return run["throughput"] / (run["workers"] * base["throughput"])
    return None


def first_step_gradients(model_name: str, dataset: str, workers: int, global_batch: int,
                         seed: int = 0, compression: str = "none",
                         timeout_s: float = 60.0) -> dict:
    """The gradients after one DDP step on a fixed global batch split evenly over `workers`
    CPU ranks: with the same batch and seed they must not depend on `workers` (DDP averages
    the shards' mean-loss gradients, which is the full batch's mean-loss gradient)."""
    import torch
    if global_batch % workers:
        raise ValueError(f"global_batch {global_batch} must split evenly over {workers} workers")
    job = WorkerJob(model=model_name, dataset=dataset, compression=compression,
                    batch_size=global_batch // workers, seed=seed, mode="grads",
                    threads=_threads_per_worker(workers, "cpu"))
    grads = launch(job, workers, backend="gloo", timeout_s=timeout_s)
    return {name: torch.from_numpy(g) for name, g in grads.items()}


# -- the record ------------------------------------------------------------------------------

def distributed_environment(config: DistributedConfig) -> dict:
    """The environment card of a distributed run: the device its ranks train on (a GPU's
    card on CUDA), the cores and the start method."""
    import torch

    from benchmarks.measure.environment import environment_card
    device = resolve_device(config.device)
    environment = environment_card(torch.device("cuda:0") if device.type == "cuda" else device)
    environment.update(device=device.type, cores=available_cores(),
                       start_method=_context().get_start_method())
    if config.executor == "ray":
        from benchmarks.executors.ray_executor import cluster_card
        environment["cluster"] = cluster_card()
    return environment
