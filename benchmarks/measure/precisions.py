"""The precision registry: the one home of the precisions' vocabulary. Torch-free.

A precision is one ``Precision`` entry, registered once: its name, its bytes per element, the
kernels its compute roof is the best of on each device that has it (names in
``benchmarks.measure.kernels.KERNELS``; the devices that have it are the ones listed), and
what counts as "running in it" in a census (``benchmarks.measure.macs``: the dtype a float
layer's output comes out in; ``benchmarks.runtimes.census``: integer kernels, ONNX op types,
OpenVINO runtime precisions). The peaks, the roofline, the theoretical peaks, the runtimes'
census and choices, the cells' deployed precision, the export and the report's colours read
it; nothing else spells a list of precision names (``tests/unit/measure/test_precisions.py``
walks the code to hold that).

Registering something inconsistent (a duplicate name, bytes that are not positive, a kernel
the kernel table does not have, a device without kernels) is a ValueError at registration,
not a precision that silently lands on the fp32 roof later; ``get`` of a name not registered
is a ValueError naming the registered ones.
"""

from __future__ import annotations

from dataclasses import dataclass

DEVICE_TYPES = ("cpu", "cuda")
MATMUL_MODES = ("ieee", "tf32")


@dataclass(frozen=True)
class Precision:
    name: str
    bytes: float                               # per element (a 4-bit one: 0.5)
    # Device type -> the kernels (``measure.kernels.KERNELS`` keys) its peak is the best of;
    # a device not listed does not have it (its peaks leave it out).
    kernels: tuple[tuple[str, tuple[str, ...]], ...]
    description: str
    # "Running in it": the torch dtypes (by name) a float layer's output comes out in under it
    # (``measure.macs``) ...
    dtypes: tuple[str, ...] = ()
    # ... or, for an integer precision, quantized modules, ONNX integer op types and OpenVINO
    # integer runtime precisions (``runtimes.census``); a float one's OpenVINO precisions.
    integer: bool = False
    torch_quantized: bool = False              # torch's quantized modules run in it
    onnx_ops: frozenset[str] = frozenset()
    openvino: tuple[str, ...] = ()
    # How fp32 matmuls are computed while its roof is measured (tf32 is fp32 data on TF32
    # tensor cores).
    matmul_mode: str = "ieee"
    # A runtime can be asked to deploy a variant in it
    # (``benchmarks.runtimes.base.RuntimeConfig.precision``).
    deployable: bool = False
    color: str = "#64748b"                     # its roofs and points on the charts

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(device for device, _ in self.kernels)

    def kernels_on(self, device_type: str) -> tuple[str, ...]:
        """Its candidate kernels on ``device_type``; () where the device does not have it."""
        return dict(self.kernels).get(device_type, ())


_REGISTRY: dict[str, Precision] = {}


def _kernel_names() -> frozenset[str]:
    from benchmarks.measure.kernels import KERNELS  # torch: only when something registers
    return frozenset(KERNELS)


def check(precision: Precision, kernel_names: frozenset[str] | None = None) -> None:
    """A ValueError in one line where ``precision`` is inconsistent with itself, the registry
    or (when given) the kernel table."""
    p = precision
    where = f"precision {p.name!r}"
    if not p.name or not isinstance(p.name, str) or "+" in p.name:
        raise ValueError(f"a precision's name must be a non-empty string without '+', "
                         f"got {p.name!r}")
    if p.name in _REGISTRY:
        raise ValueError(f"{where} is already registered")
    if not isinstance(p.bytes, (int, float)) or isinstance(p.bytes, bool) or not p.bytes > 0:
        raise ValueError(f"{where}: bytes per element must be a positive number, got "
                         f"{p.bytes!r}")
    if not p.kernels:
        raise ValueError(f"{where}: no device has a kernel for its roof")
    for device, names in p.kernels:
        if device not in DEVICE_TYPES:
            raise ValueError(f"{where}: unknown device {device!r} (known: "
                             f"{', '.join(DEVICE_TYPES)})")
        if not names:
            raise ValueError(f"{where}: no kernel for its roof on {device}")
        unknown = [n for n in names if kernel_names is not None and n not in kernel_names]
        if unknown:
            raise ValueError(f"{where}: unknown kernel {unknown[0]!r} (known: "
                             f"{', '.join(sorted(kernel_names))})")
    if p.matmul_mode not in MATMUL_MODES:
        raise ValueError(f"{where}: matmul_mode must be one of {', '.join(MATMUL_MODES)}, got "
                         f"{p.matmul_mode!r}")
    for other in _REGISTRY.values():
        shared = set(p.dtypes) & set(other.dtypes)
        if shared:
            raise ValueError(f"{where}: dtype {sorted(shared)[0]} already counts as "
                             f"{other.name!r}")


def register(precision: Precision) -> Precision:
    """Add ``precision``; a ValueError (one line) where it is inconsistent, its kernels
    checked against ``measure.kernels.KERNELS``."""
    check(precision, _kernel_names())
    _REGISTRY[precision.name] = precision
    return precision


def unregister(name: str) -> None:
    """Remove ``name`` (a test's own precision); the built-in ones stay."""
    if name in BUILT_IN:
        raise ValueError(f"precision {name!r} is built in")
    _REGISTRY.pop(name, None)


def get(name: str) -> Precision:
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown precision {name!r} (registered: {', '.join(names())})") \
            from None


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def precisions() -> tuple[Precision, ...]:
    return tuple(_REGISTRY.values())


def known(name: object) -> bool:
    return isinstance(name, str) and name in _REGISTRY


def on_device(device_type: str) -> tuple[str, ...]:
    """The precisions ``device_type`` has (a roof each), in registration order."""
    return tuple(p.name for p in _REGISTRY.values() if p.kernels_on(device_type))


def deployable() -> tuple[str, ...]:
    """The precisions a runtime can be asked to deploy a variant in."""
    return tuple(p.name for p in _REGISTRY.values() if p.deployable)


def by_dtype(dtype_name: str) -> str | None:
    """The precision a float layer whose output is ``dtype_name`` ("bfloat16") runs in."""
    return next((p.name for p in _REGISTRY.values() if dtype_name in p.dtypes), None)


def by_matmul_mode(mode: str) -> str | None:
    """The precision fp32 matmuls computed in ``mode`` run in ("tf32"); None for IEEE's."""
    return next((p.name for p in _REGISTRY.values()
                 if p.matmul_mode == mode and mode != "ieee"), None)


def by_openvino(code: str) -> str | None:
    """The precision an OpenVINO runtime precision ("f32", "bf16", "u8") means."""
    code = code.lower()
    return next((p.name for p in _REGISTRY.values() if code in p.openvino), None)


def quantized() -> str:
    """The precision quantized kernels run in: torch's quantized modules (FX's, dynamic
    ones), a runtime's integer kernels (``runtimes.census``)."""
    return next(p.name for p in _REGISTRY.values() if p.torch_quantized)


def integer_onnx_ops() -> frozenset[str]:
    return frozenset().union(*(p.onnx_ops for p in _REGISTRY.values() if p.integer))


def integer_openvino() -> frozenset[str]:
    return frozenset(c for p in _REGISTRY.values() if p.integer for c in p.openvino)


DEFAULT = "fp32"  # what a variant runs in when nothing says otherwise

# The built-in precisions. Kernels: on a CPU every kernel family the variants run in (oneDNN's
# fp32 convolutions can outrun its matmul; autocast's bf16 linear runs several times faster
# than a bf16 torch.mm; on a Zen 3 torch._int_mm runs int8 at ~2 GFLOP/s while fbgemm's
# quantized linear and convolution run near 150), on a GPU its torch.mm.
_BUILT_IN = (
    Precision("fp32", 4, (("cpu", ("mm_fp32", "conv_fp32")), ("cuda", ("mm_fp32",))),
              "IEEE single precision: the baseline's and every float variant's default",
              dtypes=("float32",), openvino=("f32",), deployable=True, color="#2563eb"),
    Precision("tf32", 4, (("cuda", ("mm_fp32",)),),
              "fp32 data on TF32 tensor cores (a CUDA sweep with --fp32 tf32)",
              matmul_mode="tf32", color="#0891b2"),
    Precision("bf16", 2, (("cpu", ("mm_bf16", "autocast_linear_bf16", "autocast_conv_bf16")),
                          ("cuda", ("mm_bf16",))),
              "bfloat16: AMP's autocast dtype on a CPU, a cast model",
              dtypes=("bfloat16",), openvino=("bf16",), deployable=True, color="#9333ea"),
    Precision("fp16", 2, (("cuda", ("mm_fp16",)),),
              "IEEE half precision: AMP's autocast dtype on a GPU, a cast model",
              dtypes=("float16",), openvino=("f16",), deployable=True, color="#db2777"),
    Precision("int8", 1, (("cpu", ("int_mm", "quantized_linear", "quantized_conv")),
                          ("cuda", ("int_mm",))),
              "8-bit integers: the INT8 technique's quantized kernels, a runtime's integer ops",
              integer=True, torch_quantized=True, deployable=True, color="#ea580c",
              onnx_ops=frozenset({"QLinearConv", "ConvInteger", "QLinearMatMul",
                                  "MatMulInteger", "QGemm", "MatMulIntegerToFloat",
                                  "DynamicQuantizeMatMul", "QAttention", "DynamicQuantizeLSTM",
                                  "QLinearConvTranspose", "MatMulNBits"}),
              # (i32 is their accumulators; u4/i4 are weight-compressed integer kernels)
              openvino=("u8", "i8", "u4", "i4", "i32")),
)
for _p in _BUILT_IN:
    check(_p)  # their kernels are held to the kernel table by the registry's test (torch)
    _REGISTRY[_p.name] = _p
BUILT_IN = names()
