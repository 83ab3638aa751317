"""The data-parallel training benchmark: DDP with gradient compression as a comm hook.

``config`` (torch-free: the dashboard validates its form with it), ``launcher`` (one process
per rank on this machine, the CLI ``python -m benchmarks distributed``) and ``worker`` (one
rank's body; under torchrun, ``python -m benchmarks.distributed.worker``).
"""

from .config import DistributedConfig  # noqa: F401
