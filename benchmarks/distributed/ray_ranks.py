"""The data-parallel benchmark's ranks on a Ray cluster: one actor per rank in a placement
group spread over the nodes (one GPU per rank on a GPU cluster, one bench slot per rank on
CPU nodes), rendezvous at rank 0's node, then the same worker body and comm hooks as on one
machine (``worker.run_worker``), so bytes per step and the hooks are those of a local run.

The rendezvous listens on rank 0's node address as Ray knows it: the cluster must sit on a
private network (docs/ray.md). Ray is imported only here.
"""

from __future__ import annotations

import datetime
import socket
import time

from benchmarks.distributed.worker import WorkerJob, run_worker
from optimizers.errors import described

POLL_S = 0.5


class Rank:
    """One rank: reports where it can be reached, then trains."""

    def address(self) -> tuple[str, int]:
        import ray
        host = ray.util.get_node_ip_address()
        with socket.socket() as s:  # a free port on this node for rank 0's store
            s.bind((host, 0))
            port = s.getsockname()[1]
        return host, port

    def where(self) -> str:
        import ray
        return f"ray node {ray.get_runtime_context().get_node_id()[:12]}"

    def run(self, job: WorkerJob, rank: int, world_size: int, host: str, port: int,
            backend: str, timeout_s: float):
        import torch
        import torch.distributed as dist
        timeout = datetime.timedelta(seconds=2 * timeout_s + 10)
        kwargs = {}
        if backend == "nccl":  # Ray shows each rank its own GPU as device 0
            torch.cuda.set_device(0)
            kwargs["device_id"] = torch.device("cuda", 0)
        dist.init_process_group(backend, init_method=f"tcp://{host}:{port}", rank=rank,
                                world_size=world_size, timeout=timeout, **kwargs)
        try:
            return run_worker(job, rank, world_size, 0)
        finally:
            dist.destroy_process_group()


def launch_on_ray(job: WorkerJob, world_size: int, *, backend: str, timeout_s: float,
                  should_stop=None) -> dict:
    """Run one job on ``world_size`` ranks spread over the cluster; rank 0's figures plus
    where each rank ran. A rank that fails or stalls ends the run with one line naming it."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from benchmarks.distributed.worker import STARTUP_TIMEOUT_S, WorkerFailure
    from benchmarks.executors.ray_executor import SLOT
    bundle = {"GPU": 1, "CPU": 1} if job.device == "cuda" else {"CPU": 1, SLOT: 1}
    group = placement_group([bundle] * world_size, strategy="SPREAD")
    actors = []
    try:
        ready, _ = ray.wait([group.ready()], timeout=STARTUP_TIMEOUT_S)
        if not ready:
            raise WorkerFailure(f"the cluster has no room for {world_size} ranks of "
                                f"{bundle} within {STARTUP_TIMEOUT_S:.0f} s")
        remote = ray.remote(Rank)
        for rank in range(world_size):
            actors.append(remote.options(
                num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0),
                resources={SLOT: 1} if SLOT in bundle else None,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group, placement_group_bundle_index=rank)).remote())
        host, port = ray.get(actors[0].address.remote(), timeout=STARTUP_TIMEOUT_S)
        places = ray.get([a.where.remote() for a in actors], timeout=STARTUP_TIMEOUT_S)
        refs = [a.run.remote(job, rank, world_size, host, port, backend, timeout_s)
                for rank, a in enumerate(actors)]
        deadline = time.monotonic() + STARTUP_TIMEOUT_S + timeout_s * max(1, job.steps)
        pending = list(refs)
        while pending:
            if should_stop is not None and should_stop():
                raise WorkerFailure("cancelled")
            if time.monotonic() > deadline:
                raise WorkerFailure(f"the ranks did not finish in {deadline:.0f} s")
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
            for rank, ref in enumerate(refs):
                if ref not in pending:
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        raise WorkerFailure(f"worker rank {rank} on {places[rank]} failed: "
                                            f"{described(exc)}") from None
        result = ray.get(refs[0])
        result["ranks_on"] = places
        return result
    finally:
        for a in actors:
            ray.kill(a)
        remove_placement_group(group)
