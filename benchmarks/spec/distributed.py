"""What a data-parallel benchmark is asked to run: a self-validating, torch-free config, so the
dashboard's Distributed page checks its form the way the Experiment page does, before it
submits anything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from benchmarks.spec.sweep import COMPRESSIONS, DEVICES

# Where the test hooks strike: after step 1, whose forward holds DDP's bucket-rebuild
# collective, so the healthy ranks get as far as the gradient all-reduce and the launcher
# can tell the stalled rank from the ones waiting for it.
FAULT_STEP = 2


@dataclass(frozen=True)
class DistributedConfig:
    model: str = "seed_cnn"
    dataset: str = "digits"
    workers: tuple[int, ...] = (1, 2)
    compressions: tuple[str, ...] = ("none", "fp16")
    amp: bool = False
    steps: int = 50
    batch_size: int = 32            # per worker (weak scaling, as Horovod's examples do)
    device: str = "auto"
    seed: int = 0
    timeout_s: float = 120.0        # seconds without progress before a run counts as hung
    port: int | None = None         # rendezvous port; None (or a busy one): a free one
    data_root: str | None = None
    input_shape: tuple[int, int, int] | None = None
    crash_rank: int | None = None   # test hooks: make one rank raise / hang (at step 2)
    hang_rank: int | None = None
    executor: str = "local"         # local: ranks on this machine; ray: across a cluster
    ray_address: str | None = None  # the cluster's head (default: $RAY_ADDRESS)

    def __post_init__(self):
        from benchmarks.spec.sweep import EXECUTORS

        def bad(name, accepted, got):
            raise ValueError(f"{name} must be {accepted}; got {got!r}")

        for name in ("model", "dataset"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                bad(name, "a non-empty name", getattr(self, name))
        workers = tuple(self.workers) if isinstance(self.workers, (list, tuple)) else ()
        if (not workers or any(not isinstance(w, int) or isinstance(w, bool) or w < 1
                               for w in workers) or len(set(workers)) != len(workers)):
            bad("workers", "distinct integers >= 1", self.workers)
        object.__setattr__(self, "workers", tuple(sorted(workers)))
        comps = tuple(self.compressions) if isinstance(self.compressions, (list, tuple)) else ()
        if not comps or any(c not in COMPRESSIONS for c in comps) or len(set(comps)) != len(comps):
            bad("compressions", f"distinct values among {', '.join(COMPRESSIONS)}",
                self.compressions)
        object.__setattr__(self, "compressions", comps)
        if not isinstance(self.amp, bool):
            bad("amp", "true or false", self.amp)
        for name in ("steps", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                bad(name, "an integer >= 1", value)
        if self.device not in DEVICES:
            bad("device", f"one of {', '.join(DEVICES)}", self.device)
        if not isinstance(self.seed, int) or self.seed < 0:
            bad("seed", "an integer >= 0", self.seed)
        if not isinstance(self.timeout_s, (int, float)) or not self.timeout_s > 0:
            bad("timeout_s", "a number of seconds > 0", self.timeout_s)
        if self.port is not None and (not isinstance(self.port, int) or not 0 < self.port < 65536):
            bad("port", "an integer in 1..65535 or None", self.port)
        if self.executor not in EXECUTORS:
            bad("executor", f"one of {', '.join(EXECUTORS)}", self.executor)
        if self.ray_address is not None and (not isinstance(self.ray_address, str)
                                             or not self.ray_address.strip()):
            bad("ray_address", "HOST:PORT", self.ray_address)
        for name in ("crash_rank", "hang_rank"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                bad(name, "None or a rank >= 0", value)
            if value is not None and self.steps <= FAULT_STEP:
                bad("steps", f"> {FAULT_STEP} when {name} is set (the fault strikes at step "
                    f"{FAULT_STEP})", self.steps)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "DistributedConfig":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: tuple(v) if isinstance(v, list) else v
                      for k, v in data.items() if k in known})
