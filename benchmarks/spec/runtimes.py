"""Where a variant is deployed: the runtime registry and the deployment axes.

A runtime is registered like a technique (``optimizers.registry``) or a data set
(``benchmarks.spec.datasets``): its name, what it is, where its ``prepare`` lives (a module of
``benchmarks/runtimes``, imported only when a cell is built), the modules it needs installed,
the distribution whose version a cell records, and the devices it runs on. Torch-free and
import-free, so menus list it, the specs validate names against it, ``list`` describes it and
the CLI refuses a runtime that is not installed before torch loads.

``DeploymentConfig`` declares the deployment axes with ``setting(...)`` metadata (the
``run`` command's ``--runtime``, ``--eval-batch-size`` and ``--threads``, the Experiment
page's widgets): measurement axes, nothing is retrained for them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import util

from benchmarks.spec.isa import PROFILE_NAMES
from optimizers.settings import check_settings, setting, setting_fields

EAGER = "eager"


@dataclass(frozen=True)
class Runtime:
    name: str
    description: str
    module: str                        # where its prepare(...) lives (benchmarks/runtimes)
    imports: tuple[str, ...] = ()      # modules that must be importable for it to run
    distribution: str = "torch"        # the package whose version its cells record
    devices: tuple[str, ...] = ("cpu",)
    install: str = ""                  # what to install when it is absent

    def available(self) -> bool:
        """Whether every module it needs is installed (looked up, not imported)."""
        try:
            return all(util.find_spec(m) is not None for m in self.imports)
        except (ImportError, ValueError):
            return False

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version(self.distribution)
        except PackageNotFoundError:
            return "absent"

    def to_dict(self) -> dict:
        return {"description": self.description, "available": self.available(),
                "version": self.version(), "devices": list(self.devices)}


_REGISTRY: dict[str, Runtime] = {}


def register_runtime(runtime: Runtime) -> Runtime:
    _REGISTRY[runtime.name] = runtime
    return runtime


register_runtime(Runtime(
    EAGER, "eager PyTorch: the variant as built (the reference of every other runtime)",
    "benchmarks.runtimes.eager", devices=("cpu", "cuda")))
register_runtime(Runtime(
    "compile", "torch.compile, its default mode (Inductor); compile time recorded",
    "benchmarks.runtimes.compile", devices=("cpu", "cuda")))
register_runtime(Runtime(
    "compile-freeze", "torch.compile with Inductor's freezing (weights folded as constants)",
    "benchmarks.runtimes.compile", devices=("cpu", "cuda")))
register_runtime(Runtime(
    "ort", "ONNX Runtime, every graph optimisation; static INT8 by its quantize_static "
    "(QDQ, per-channel, U8S8)", "benchmarks.runtimes.ort", imports=("onnxruntime", "onnx"),
    distribution="onnxruntime", devices=("cpu", "cuda"), install="pip install onnxruntime"))
register_runtime(Runtime(
    "openvino", "OpenVINO's CPU plugin, fp32 asked for (INFERENCE_PRECISION_HINT); static "
    "INT8 by NNCF's quantize", "benchmarks.runtimes.openvino",
    imports=("openvino", "nncf", "onnx"), distribution="openvino",
    install="pip install openvino nncf"))

class _Registered(Sequence):
    """The registered runtimes' names, read when asked: a runtime registered after this
    module loaded (a test's, a plug-in's) is a choice of ``--runtime``, of the page's menu and
    of every check, as the built-in ones are."""

    def __getitem__(self, index):
        return tuple(_REGISTRY)[index]

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return repr(tuple(_REGISTRY))


RUNTIME_NAMES = _Registered()


def runtimes() -> list[Runtime]:
    return list(_REGISTRY.values())


def get(name: str) -> Runtime:
    if name not in _REGISTRY:
        raise ValueError(f"unknown runtime {name!r}; known: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def check_available(names) -> None:
    """ValueError, one line, naming the first runtime asked for that is not installed here."""
    for name in names:
        runtime = get(name)
        if not runtime.available():
            missing = [m for m in runtime.imports if util.find_spec(m) is None]
            raise ValueError(f"--runtime {name} needs {', '.join(missing)}, not installed "
                             f"here ({runtime.install}); installed runtimes: "
                             f"{', '.join(r.name for r in runtimes() if r.available())}")


def machine_cores() -> int:
    """The cores this process may run on (its affinity), what a thread count may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def check_threads(counts) -> None:
    cores = machine_cores()
    above = [t for t in counts if t is not None and t > cores]
    if above:
        raise ValueError(f"--threads {max(above)} is above this machine's {cores} core"
                         f"{'s' if cores > 1 else ''} (what this process may run on); give "
                         f"at most {cores}")


@dataclass(frozen=True)
class DeploymentConfig:
    """The deployment axes: every variant is timed under each runtime, at each batch size, on
    each thread count (one row each); accuracy is scored once per variant per runtime."""

    runtimes: tuple[str, ...] = setting(
        (EAGER,), "runtimes every variant runs under (eager is always timed: the other "
        "runtimes' ratios are taken against its fp32 baseline)", choices=RUNTIME_NAMES,
        many=True, flag="--runtime")
    eval_batch_sizes: tuple[int, ...] | None = setting(
        None, "batch sizes every variant is timed at (nothing is retrained)", integer=True,
        low=1, high=65536, many=True, nullable=True, none_means="the training batch size",
        suggested=(1, 8, 32, 128), flag="--eval-batch-size")
    threads: tuple[int, ...] | None = setting(
        None, "intra-op thread counts every variant is timed on", integer=True, low=1,
        high=1024, many=True, nullable=True, none_means="all cores but one",
        suggested=(1, 2, 4, 8))
    isa: tuple[str, ...] | None = setting(
        None, "instruction-set profiles every cell is also timed under, each in a process of "
        "its own with oneDNN capped (ONEDNN_MAX_CPU_ISA): another CPU's verdict previewed "
        "here; native is the machine as it is", choices=PROFILE_NAMES, many=True,
        nullable=True, none_means="native alone", flag="--isa", form=False)

    def __post_init__(self):
        for name, meta, _ in setting_fields(type(self)):
            value = getattr(self, name)
            if isinstance(value, (list, tuple)):
                # A form's "(default)" entry, or an empty pick, means unset.
                value = tuple(v for v in value if v is not None)
                if not value and meta.nullable:
                    value = None
                object.__setattr__(self, name, value)
        check_settings(self, "deployment")

    def sweep_fields(self) -> dict:
        """The SweepSpec fields these axes set: one thread count is the sweep's ``threads``,
        several are its ``thread_counts`` (the sweep pins as many cores as the largest)."""
        threads = self.threads or ()
        return {"runtimes": self.runtimes, "eval_batch_sizes": self.eval_batch_sizes or (),
                "threads": max(threads) if threads else None,
                "thread_counts": threads if len(threads) > 1 else (),
                "isa": self.isa or ()}


def check_axes(runtimes, eval_batch_sizes, thread_counts) -> tuple:
    """(runtimes with eager first, batch sizes, thread counts) as tuples, or a one-line
    ValueError: what SweepSpec checks of its deployment fields."""
    runtimes = tuple(runtimes)
    for name in runtimes:
        get(name)
    DeploymentConfig(runtimes=runtimes or (EAGER,), eval_batch_sizes=tuple(eval_batch_sizes),
                     threads=tuple(thread_counts))
    if len(set(runtimes)) != len(runtimes):
        raise ValueError(f"--runtime lists a runtime twice: {', '.join(runtimes)}")
    ordered = (EAGER, *(r for r in runtimes if r != EAGER))
    return ordered, tuple(eval_batch_sizes), tuple(thread_counts)
