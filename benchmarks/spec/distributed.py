"""What a data-parallel benchmark is asked to run: a self-validating, torch-free config, so the
dashboard's Distributed page checks its form the way the Experiment page does, before it
submits anything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from benchmarks.spec.datasets import check_dataset
from benchmarks.spec.sweep import COMPRESSIONS, DEVICES, EXECUTORS
from optimizers.settings import check_settings, setting, setting_fields

# Where the test hooks strike: after step 1, whose forward holds DDP's bucket-rebuild
# collective, so the healthy ranks get as far as the gradient all-reduce and the launcher
# can tell the stalled rank from the ones waiting for it.
FAULT_STEP = 2
WORKER_MENU = (1, 2, 3, 4, 6, 8)  # what the page offers; any count the machine hosts is taken


@dataclass(frozen=True)
class DistributedConfig:
    """Every field's ``setting(...)`` is its one declaration: the default, the check below,
    the ``distributed`` command's flag and help, and the Distributed page's widget."""

    model: str = setting(
        "seed_cnn", "the model trained: a zoo name (see `list`), torchvision:NAME, timm:NAME "
        "or FILE.py:FACTORY", text=True)
    dataset: str = setting("digits", "the data set (see `list`)", text=True)
    workers: tuple[int, ...] = setting(
        (1, 2), "worker counts, one run each", integer=True, low=1, many=True,
        suggested=WORKER_MENU)
    compressions: tuple[str, ...] = setting(
        ("none", "fp16"), "gradient compressions (DDP communication hooks), one run each",
        choices=COMPRESSIONS, many=True, flag="--compression")
    amp: bool = setting(False, "autocast: fp16 and a GradScaler on CUDA, bf16 on the CPU",
                        boolean=True)
    steps: int = setting(50, "training steps of each run", integer=True, low=1, high=100_000,
                         step=1)
    # Per worker: weak scaling, as Horovod's examples do.
    batch_size: int = setting(32, "batch size per worker", integer=True, low=1, high=65536,
                              step=1)
    device: str = setting("auto", "where the ranks train: gloo on the CPU, NCCL on GPUs",
                          choices=DEVICES)
    seed: int = setting(0, "the seed of the model's weights and the shards' order",
                        integer=True, low=0, high=2**32 - 1, step=1, advanced=True)
    timeout_s: float = setting(
        120.0, "seconds without progress before a run counts as hung", low=0.0, high=86_400.0,
        low_open=True, step=10.0, flag="--timeout", advanced=True)
    port: int | None = setting(
        None, "the rendezvous port (a busy one is replaced)", integer=True, low=1,
        high=65535, nullable=True, none_means="a free one", form=False)
    data_root: str | None = setting(None, "where cifar10 lives", text=True, nullable=True,
                                    metavar="DIR", form=False)
    input_shape: tuple[int, int, int] | None = setting(
        None, "the inputs' C,H,W (synthetic needs it)", integer=True, low=1, high=4096,
        length=3, nullable=True, none_means="the data set's own", metavar="C,H,W",
        advanced=True)
    # Test hooks: make one rank raise / hang (at FAULT_STEP).
    crash_rank: int | None = setting(None, "the rank that raises", integer=True, low=0,
                                     nullable=True, hidden=True)
    hang_rank: int | None = setting(None, "the rank that hangs", integer=True, low=0,
                                    nullable=True, hidden=True)
    # The operator's cluster, not a page's choice: the dashboard's worker decides.
    executor: str = setting("local", "local: ranks on this machine; ray: ranks spread over a "
                            "Ray cluster", choices=EXECUTORS, form=False)
    ray_address: str | None = setting(
        None, "the Ray cluster's head", text=True, nullable=True, none_means="$RAY_ADDRESS",
        metavar="HOST:PORT", form=False)

    def __post_init__(self):
        check_settings(self, "distributed")
        for name, meta, _ in setting_fields(type(self)):
            if meta.several and getattr(self, name) is not None:  # a list from JSON or a form
                object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "workers", tuple(sorted(self.workers)))
        check_dataset(self.dataset, self.input_shape)
        for name in ("crash_rank", "hang_rank"):
            if getattr(self, name) is not None and self.steps <= FAULT_STEP:
                raise ValueError(f"distributed.steps must be > {FAULT_STEP} when {name} is set "
                                 f"(the fault strikes at step {FAULT_STEP}); got {self.steps}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> DistributedConfig:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
