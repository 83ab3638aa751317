"""A sweep's trainable builds spread over this machine's idle GPUs (no Ray needed).

The sweep's own job holds its GPU; before building, it borrows every other GPU that is idle
now (their busy locks, ``devices.py``), starts one process per borrowed GPU (each sees only
that GPU), and hands them the builds that train. Each process returns the weights it trained,
by cache key; the sweep then builds and times every variant on its own GPU from those weights.
What cannot be borrowed (every other GPU busy with other sessions' jobs) is trained by the
sweep itself, as a local run would.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_module
from pathlib import Path

from benchmarks.executors.devices import compute_device, try_busy
from benchmarks.executors.tasks import Trained, TrainTask, plan, ship, train
from benchmarks.run.weights import state_of


def _borrowed_device_main(device: str, visible: str | None, jobs, results) -> None:
    """One borrowed GPU's process: it sees only that GPU, and trains what it is given."""
    if visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
    while True:
        item = jobs.get()
        if item is None:
            return
        spec_dict, files, task, given = item
        results.put(train(spec_dict, task, given, files, device=compute_device(device)
                          if visible is None else "cuda"))


class DevicePool:
    """The executor for a machine with several GPUs: ``prefetch`` trains a sweep's variants
    on the idle ones, in parallel."""

    def __init__(self, store_path: str | Path, devices: list[str], own: str):
        self.store_path = Path(store_path)
        self.devices = [d for d in devices if d != own]
        self.own = own

    def prefetch(self, sweep, on_progress=None, should_stop=None) -> None:
        from benchmarks.run.phases import ProgressEvent
        stop = should_stop or (lambda: False)
        spec = sweep.spec
        tasks = plan(spec, sweep.data.labelled)
        if not tasks:
            return
        locks = {}
        for device in self.devices:
            fd = try_busy(self.store_path, device)
            if fd is not None:
                locks[device] = fd
        if not locks:
            return  # every other GPU is busy: the sweep trains its own variants
        spec_dict, files = ship(spec)
        base_key = sweep.cache.key(sweep.base_key(spec.seed))
        given = {} if spec.checkpoint else {base_key: state_of(sweep.baseline)}
        ctx = mp.get_context("spawn")
        jobs, results = ctx.Queue(), ctx.Queue()
        procs = [ctx.Process(target=_borrowed_device_main, daemon=True,
                             args=(device, None if compute_device(device) == "cpu"
                                   else device.split(":")[1], jobs, results))
                 for device in locks]
        try:
            for p in procs:
                p.start()
            waves = [[t for t in tasks if t.index == 0], [t for t in tasks if t.index > 0]]
            trained: dict[TrainTask, Trained] = {}
            for wave in waves:
                for task in wave:
                    extra = trained.get(TrainTask(0, task.seed))
                    jobs.put((spec_dict, files, task, {**given, **(extra.weights if extra
                                                                      else {})}))
                for _ in wave:
                    while True:
                        if stop():
                            return
                        try:
                            done = results.get(timeout=0.5)
                            break
                        except queue_module.Empty:
                            if not any(p.is_alive() for p in procs):
                                raise RuntimeError("every borrowed GPU's process died")
                    trained[done.task] = done
                    if done.error is None:
                        sweep.cache.add(done.weights)
                        sweep.built_on.setdefault(done.task.index, []).append(done.where)
                    if on_progress:
                        name = spec.variants[done.task.index].name
                        on_progress(ProgressEvent(name, done.task.index, len(spec.variants),
                                                  f"trained on {done.where}"
                                                  if done.error is None
                                                  else f"build failed: {done.error}"))
            # A build that failed elsewhere is tried again here, in the sweep's own process:
            # its error, if it recurs, is then the variant's.
        finally:
            for _ in procs:
                jobs.put(None)
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
            for fd in locks.values():
                os.close(fd)
