"""The data-parallel training benchmark: DDP with gradient compression as a comm hook.

``launcher`` (one process per rank on this machine, ``compression-bench distributed``),
``worker`` (one rank's body; under torchrun, ``python -m benchmarks.distributed.worker``) and
``ray_ranks`` (ranks as Ray actors). Its config is torch-free, in ``benchmarks.spec.distributed``.
"""

__all__ = ["launcher", "ray_ranks", "worker"]
