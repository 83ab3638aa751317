"""Per-layer diagnostics of any variant against the baseline: where its outputs drift.

For every layer the two models share by name and output shape (a channel-pruned layer's own
output has fewer channels and is skipped; the next layer's is compared), the signal-to-
quantization-noise ratio and the cosine similarity of its output on a fixed batch, and the
same for the model's output; and the test examples whose correctness flipped. A distilled
student has other layers: it gets the flips and the output's figures only.

``sqnr_db`` and ``cosine`` import torch when called; ``flips`` is torch-free (it reads the
stored correctness bits), so the dashboard may call it.
"""

from __future__ import annotations

import math

# At most this many bytes of a model's layer outputs are held at once (float32): a large
# model at full resolution compares its first layers, not every one.
HELD_BYTES = 128 * 2**20
DIAGNOSTIC_BATCH = 16          # examples of the fixed batch, fewer for large inputs
DIAGNOSTIC_ELEMENTS = 2**20    # ... so that the batch holds at most this many input values
LAYER_TYPES = ("Conv1d", "Conv2d", "Conv3d", "Linear", "ConvReLU1d", "ConvReLU2d",
               "ConvReLU3d", "LinearReLU", "ConvBn2d", "ConvBnReLU2d")


def sqnr_db(reference, output) -> float | None:
    """10 log10(|reference|^2 / |reference - output|^2) in dB: +inf for identical outputs,
    None when the shapes differ or the reference is all zeros."""
    import torch
    ref, out = _float(reference, torch.float64), _float(output, torch.float64)
    if ref.shape != out.shape:
        return None
    signal = float(torch.sum(ref * ref))
    noise = float(torch.sum((ref - out) ** 2))
    if signal == 0:
        return None
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise)


def cosine(reference, output) -> float | None:
    """Cosine similarity of the two outputs flattened (None when shapes differ or one is
    zero)."""
    import torch
    ref = _float(reference, torch.float64).flatten()
    out = _float(output, torch.float64).flatten()
    if ref.shape != out.shape:
        return None
    norm = float(torch.linalg.vector_norm(ref) * torch.linalg.vector_norm(out))
    return None if norm == 0 else float(torch.dot(ref, out)) / norm


def _float(t, dtype=None):
    import torch
    if isinstance(t, torch.Tensor) and t.is_quantized:
        t = t.dequantize()
    return t.detach().to("cpu", dtype or torch.float32)


FOLDED_TYPES = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "ReLU", "ReLU6")


class Capture:
    """One forward's outputs, module by module: each layer's (LAYER_TYPES, first call), the
    batch norms and ReLUs that ran right after it (what INT8's fused ops fold in), which
    modules ran, and the model's output. At most HELD_BYTES of outputs are kept."""

    def __init__(self, model, example, names=None):
        import torch
        self.outputs: dict = {}
        self.chains: dict = {}      # layer -> [(module right after it, its output), ...]
        self.called: set = set()
        held, current = [0], [None]
        wanted = set(names) if names is not None else None

        def keep(output) -> object | None:
            size = output.numel() * 4
            if held[0] + size > HELD_BYTES:
                return None
            held[0] += size
            return _float(output)

        def hook(name, kind):
            def seen(module, args, output):
                self.called.add(name)
                if not isinstance(output, torch.Tensor):
                    current[0] = None
                    return
                if kind in LAYER_TYPES and (wanted is None or name in wanted):
                    if name not in self.outputs:
                        kept = keep(output)
                        if kept is not None:
                            self.outputs[name], self.chains[name] = kept, []
                    current[0] = name if name in self.chains else None
                elif kind in FOLDED_TYPES and current[0] is not None:
                    kept = keep(output)
                    if kept is not None:
                        self.chains[current[0]].append((name, kept))
                else:
                    current[0] = None
            return seen

        handles = [m.register_forward_hook(hook(n, type(m).__name__))
                   for n, m in model.named_modules() if n and not list(m.children())
                   or type(m).__name__ in LAYER_TYPES]
        try:
            with torch.inference_mode():
                self.output = _float(model(example))
        finally:
            for h in handles:
                h.remove()

    @property
    def order(self) -> list[str]:
        return list(self.outputs)

    def reference(self, name: str, other: "Capture"):
        """This (the baseline's) output to compare with ``other``'s layer ``name``: the
        layer's own, or where ``other`` folded the batch norm and ReLU that followed it into
        one op (they did not run there), the last of those."""
        ref = self.outputs.get(name)
        for follower, output in self.chains.get(name, []):
            if follower in other.called:
                break
            ref = output
        return ref


def capture(model, example, names=None) -> Capture:
    """The outputs of ``model`` on ``example``, for ``names`` or every layer."""
    return Capture(model, example, names)


def diagnostic_batch(example) -> int:
    """How many examples of ``example`` the diagnostics compare on."""
    per_example = max(int(example[0].numel()), 1)
    return max(1, min(DIAGNOSTIC_BATCH, len(example), DIAGNOSTIC_ELEMENTS // per_example))


def layer_diagnostics(baseline, variant, example, *, variant_device=None,
                      autocast=None, corresponds: bool = True) -> dict:
    """{"batch", "output": {"sqnr_db", "cosine"}, "layers": [{"layer", "sqnr_db", "cosine"}],
    "skipped"} of ``variant`` against ``baseline`` on ``example`` (at most DIAGNOSTIC_BATCH
    examples). ``corresponds=False`` (a distilled student) compares the output only."""
    from contextlib import nullcontext
    x = example[:diagnostic_batch(example)]
    base_device = next((p.device for p in baseline.parameters()), None)
    base = capture(baseline, x.to(base_device) if base_device else x)
    with autocast or nullcontext():
        mine = capture(variant, x.to(variant_device) if variant_device else x,
                       base.order if corresponds else [])
    rows, skipped = [], 0
    for name in base.order if corresponds else []:
        ref, got = base.reference(name, mine), mine.outputs.get(name)
        if ref is None or got is None or got.shape != ref.shape:
            skipped += 1
            continue
        rows.append({"layer": name, "sqnr_db": _finite(sqnr_db(ref, got)),
                     "cosine": cosine(ref, got)})
    result = {"batch": int(x.shape[0]),
              "output": {"sqnr_db": _finite(sqnr_db(base.output, mine.output)),
                         "cosine": cosine(base.output, mine.output)},
              "layers": rows, "skipped": skipped}
    if not corresponds:
        result["note"] = "a distilled student: its layers do not correspond to the baseline's"
    return result


# JSON has no infinity: identical outputs are written as this many dB.
SQNR_CAP_DB = 200.0


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    return min(value, SQNR_CAP_DB)


def flips(baseline_bits: str, variant_bits: str, n: int, limit: int | None = None) -> dict:
    """The test examples the variant gets wrong where the baseline got them right, and the
    reverse (``benchmarks.report.stats.flipped``: torch-free, from stored bits)."""
    from benchmarks.report.stats import flipped
    return flipped(baseline_bits, variant_bits, n, limit)


def variant_diagnostics(baseline, model, device, example, config: dict, techniques,
                        autocast=None) -> dict:
    """A built variant's diagnostics for its result: its layers against the baseline's, or
    only its output where it is another architecture (a distilled student); a failure is
    recorded, never raised (a diagnostic must not sink the variant it explains)."""
    from optimizers.errors import described
    student = any(_architecture(name, config) for name in techniques)
    try:
        return layer_diagnostics(baseline, model, example, variant_device=device,
                                 autocast=autocast, corresponds=not student)
    except Exception as exc:  # models fail on a hook in many ways: said, not raised
        return {"error": described(exc)}


def _architecture(name: str, config: dict):
    from optimizers import registry
    control = registry.control(name)
    if control is not None:
        return control.architecture(config.get(name) or {})
    if name in registry.names():
        return registry.get(name).architecture(config.get(name) or {})
    return None
