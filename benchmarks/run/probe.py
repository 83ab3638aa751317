"""The worker's refusals that need torch but no data, asked before a job is queued.

A sweep's job is checked again by the worker when it starts (``PreparedSweep``), which behind
a queue can be long after the click. Of those checks, the ones that need no data set loaded
(a model file that imports and whose factory builds, the sweep's estimated peak memory
against what a job may use, a batch of the data's shape through the model, a checkpoint's
keys and shapes against it) run here with the same functions, in a process of their own
(``python -m benchmarks.run.probe``): the dashboard's server never imports torch nor runs a
model file's code itself. ``check_in_subprocess`` is the torch-free way to ask.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A model file's import and one build at the data's size; a probe past this is refused, as
# a file that takes minutes to build would take them in every variant.
PROBE_TIMEOUT_S = 120


def probe(spec, *, allowed_models_dir=None, allowed_data_dir=None,
          memory_share: float | None = None) -> None:
    """ValueError, one line, where the worker would refuse ``spec`` (a ``SweepSpec``) before
    loading its data: the checks of ``PreparedSweep`` in its order, on a batch of zeros of the
    data's stored shape instead of the data."""
    import torch

    from benchmarks.run.checks import check_data_paths, preflight
    from benchmarks.run.footprint import admit_sweep
    from benchmarks.spec import runtimes
    from benchmarks.spec.limits import Limits
    from benchmarks.zoo.checkpoints import load_into, read_state_dict
    from benchmarks.zoo.datasets import stored_size
    from benchmarks.zoo.models import build_model, check_input_fits, model_source
    source = model_source(spec.model)
    source.check(spec.model)
    runtimes.check_available(spec.runtimes)
    preflight(spec)
    pipeline = None
    if spec.weights is not None:
        source.weights_file(spec.model, spec.weights, spec.download)
        pipeline = source.pipeline(spec.model, spec.weights)
    keep_head = spec.labels == "imagenet"
    input_shape = spec.input_shape
    if input_shape is None and pipeline is not None and spec.dataset == "synthetic":
        input_shape = pipeline.shape
    if allowed_data_dir is not None:
        check_data_paths(spec, Path(allowed_data_dir))
    size = stored_size(spec.dataset, spec.data_root, input_shape, spec.labels, pipeline)

    def build():
        return build_model(spec.model, size.classes, size.shape[0], size.shape[1:],
                           allowed_models_dir, keep_head=keep_head)
    # A job for a GPU is held against that GPU's free memory, which only its worker knows.
    if spec.device == "cpu" or not torch.cuda.is_available():
        share = memory_share if memory_share is not None else Limits.from_env().memory_share
        admit_sweep(spec, size, build, share)
    model = build()
    check_input_fits(model, torch.zeros(2, *size.shape), size.classes, spec.model)
    if spec.checkpoint:
        load_into(model, read_state_dict(spec.checkpoint), Path(spec.checkpoint).name)


def probe_file(model: str, allowed_models_dir) -> None:
    """The worker's load of a model file (``FILE.py:factory``): inside the allowed folder, it
    imports, the factory is there (ValueError, one line)."""
    from benchmarks.zoo.models import load_user_factory
    load_user_factory(model, allowed_models_dir)


def check_in_subprocess(spec: dict | None = None, *, env: dict, model: str | None = None,
                        models_dir=None, data_dir=None,
                        timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """``probe`` of a spec's dict (or, given ``model`` instead, ``probe_file``) in a fresh
    interpreter with environment ``env`` (torch-free here): None where the worker would take
    it, else the one line saying why not."""
    request = json.dumps({"spec": spec, "model": model,
                          "models_dir": None if models_dir is None else str(models_dir),
                          "data_dir": None if data_dir is None else str(data_dir)},
                         default=str)
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks.run.probe"], input=request,
                              capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=ROOT)
    except subprocess.TimeoutExpired:
        return (f"the model took more than {timeout:.0f} s to import and build once; a "
                f"sweep builds it for every variant")
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])["error"]
    except (IndexError, ValueError, KeyError, TypeError):
        return (f"the model could not be checked: its check ended with exit status "
                f"{done.returncode} before answering (the model file may end the process)")


def main() -> int:
    """Reads ``{"spec" or "model", "models_dir", "data_dir"}`` as JSON on stdin and prints
    ``{"error": null or one line}`` as the last line of stdout, under the worker's memory
    limit."""
    from benchmarks.measure.machine import apply_memory_limit, is_out_of_memory
    from benchmarks.spec.limits import Limits
    from benchmarks.spec.sweep import SweepSpec
    from optimizers.errors import first_line
    request = json.loads(sys.stdin.read())
    limits = Limits.from_env()
    if limits.worker_memory is not None:
        apply_memory_limit(limits.worker_memory)
    answer = sys.stdout
    sys.stdout = sys.stderr  # what a model file prints is not the answer
    try:
        if request.get("model"):
            probe_file(request["model"], request["models_dir"])
        else:
            probe(SweepSpec.from_dict(request["spec"]), allowed_models_dir=request["models_dir"],
                  allowed_data_dir=request["data_dir"], memory_share=limits.memory_share)
        error = None
    except ValueError as exc:
        error = first_line(exc)
    except Exception as exc:  # a model file's own failure: one line, never a traceback
        error = ("the model needs more memory than a job may use here (building it once "
                 "failed to allocate)" if is_out_of_memory(exc) else
                 f"{type(exc).__name__}: {first_line(exc)}")
    answer.write(json.dumps({"error": error}) + "\n")
    answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
