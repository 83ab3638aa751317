"""The precision registry is the one home of the precisions' vocabulary: bytes and lookup,
registration errors, an unknown precision that is never drawn at fp32 on the roofline, and a
walk over the product's code that finds no list of precision names outside the registry."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from benchmarks.measure import kernels, precisions, roofline
from benchmarks.measure.precisions import Precision

ROOT = Path(__file__).resolve().parents[3]
# The two left, with why: the distributed benchmark's gradient compressions are DDP's
# communication hooks by name, declared in the spec layer, which sits below the registry's
# (``test_gradient_compressions_are_registered_precisions`` holds them to the registry); a
# GPU's data sheet is figures per precision, data rather than vocabulary
# (``test_the_gpu_data_sheets_name_registered_precisions``).
ALLOWED = {("benchmarks/spec/sweep.py", "COMPRESSIONS"),
           ("benchmarks/measure/theory.py", "GPU_SPECS")}


def test_bytes_and_lookup():
    assert [precisions.get(n).bytes for n in ("fp32", "bf16", "fp16", "int8")] == [4, 2, 2, 1]
    assert precisions.names()[:5] == ("fp32", "tf32", "bf16", "fp16", "int8")
    assert precisions.on_device("cpu") == ("fp32", "bf16", "int8")
    assert precisions.on_device("cuda") == ("fp32", "tf32", "bf16", "fp16", "int8")
    assert precisions.by_dtype("bfloat16") == "bf16" and precisions.by_dtype("float64") is None
    assert precisions.by_openvino("F16") == "fp16" and precisions.quantized() == "int8"
    assert set(precisions.deployable()) == {"fp32", "bf16", "fp16", "int8"}
    with pytest.raises(ValueError) as err:
        precisions.get("fp8")
    assert str(err.value) == ("unknown precision 'fp8' (registered: fp32, tf32, bf16, fp16, "
                              "int8)")


def test_every_built_in_kernel_is_in_the_kernel_table():
    for p in precisions.precisions():
        precisions_kernels = [n for _, names in p.kernels for n in names]
        assert set(precisions_kernels) <= set(kernels.KERNELS), p.name
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert [k.name for k in kernels.candidates(cpu, "fp32")] == ["torch.mm", "conv2d 3x3"]
    assert kernels.candidates(cpu, "fp16") == ()  # the CPU has no fp16 roof
    assert [k.name for k in kernels.candidates(cuda, "int8")] == ["torch._int_mm"]


TOY = Precision("toy4", 0.5, (("cpu", ("mm_fp32",)),), "a toy", dtypes=("float64",))


@pytest.mark.parametrize("bad, message", [
    (replace(TOY, name="fp32"), "precision 'fp32' is already registered"),
    (replace(TOY, bytes=0), "bytes per element must be a positive number, got 0"),
    (replace(TOY, bytes=-1.0), "bytes per element must be a positive number"),
    (replace(TOY, kernels=(("cpu", ("mm_fp128",)),)), "unknown kernel 'mm_fp128'"),
    (replace(TOY, kernels=()), "no device has a kernel for its roof"),
    (replace(TOY, kernels=(("tpu", ("mm_fp32",)),)), "unknown device 'tpu'"),
    (replace(TOY, dtypes=("bfloat16",)), "dtype bfloat16 already counts as 'bf16'"),
    (replace(TOY, name="int8+fp32"), "without '+'"),
])
def test_an_inconsistent_precision_is_an_error_at_registration(bad, message):
    with pytest.raises(ValueError, match=message.replace("+", r"\+").replace("(", r"\(")):
        precisions.register(bad)
    assert "toy4" not in precisions.names() or bad.name != "toy4"
    assert precisions.names()[:5] == ("fp32", "tf32", "bf16", "fp16", "int8")


def test_a_registered_precision_is_found_and_a_built_in_cannot_go():
    precisions.register(TOY)
    try:
        assert precisions.get("toy4").bytes == 0.5 and "toy4" in precisions.names()
        assert precisions.on_device("cpu")[-1] == "toy4"
        assert precisions.by_dtype("float64") == "toy4"
    finally:
        precisions.unregister("toy4")
    assert "toy4" not in precisions.names()
    with pytest.raises(ValueError, match="built in"):
        precisions.unregister("fp32")


PEAKS = {"gemm_flops_per_s": {"fp32": 1e11, "int8": 4e11}, "memory_bytes_per_s": 1e10}


def test_an_unknown_precision_is_not_held_to_the_fp32_roof():
    point = roofline.point(flops=10**6, batch_size=8, p50_ms=1.0, traffic_bytes=10**5,
                           precision="fp8", peaks=PEAKS)
    assert point["precision"] == "fp8"
    assert point["peak_flops_per_s"] is None and point["percent_of_peak"] is None
    assert point["roofline_warning"].startswith("precision 'fp8' is not registered")
    assert "\n" not in point["roofline_warning"]
    fp32 = roofline.point(flops=10**6, batch_size=8, p50_ms=1.0, traffic_bytes=10**5,
                          precision="fp32", peaks=PEAKS)
    assert fp32["peak_flops_per_s"] == 1e11 and "roofline_warning" not in fp32
    # A technique declaring a precision no one registered keeps its name, not fp32's.
    from optimizers import registry
    technique = registry.get("amp")
    assert technique.precision({"dtype": "fp8"}) == "fp8"
    assert roofline.variant_precision({"amp": {"dtype": "fp8"}}, {}, "cpu") == "fp8"


def test_the_chart_leaves_an_unknown_precision_out_and_says_so():
    from benchmarks.report.roofline_chart import roofline_chart, roofline_points
    base = {"variant": "baseline", "ok": True, "device": "cpu", "achieved_flops_per_s": 1e9,
            "arithmetic_intensity": 2.0, "precision": "fp32", "is_baseline": True}
    odd = {**base, "variant": "odd", "precision": "fp8", "is_baseline": False,
           "roofline_warning": roofline.unknown_precision("fp8")}
    assert [r["variant"] for r in roofline_points([base, odd])] == ["baseline"]
    fig = roofline_chart([base, odd], {"cpu": PEAKS})
    texts = [a.text for a in fig.layout.annotations]
    assert any(t.startswith("odd: precision 'fp8' is not registered") for t in texts), texts
    assert not any("odd" in str(t.customdata) for t in fig.data if t.customdata is not None)


def test_gradient_compressions_are_registered_precisions():
    from benchmarks.spec.sweep import COMPRESSIONS
    assert all(precisions.known(c) for c in COMPRESSIONS if c != "none")
    from benchmarks.distributed.worker import HOOKS, WIRE_DTYPES
    assert set(HOOKS) == set(WIRE_DTYPES) == set(COMPRESSIONS)
    for c in COMPRESSIONS:
        wire = torch.empty((), dtype=WIRE_DTYPES[c]).element_size()
        assert wire == precisions.get("fp32" if c == "none" else c).bytes, c


def test_the_gpu_data_sheets_name_registered_precisions():
    from benchmarks.measure.theory import GPU_SPECS
    for _, sheet in GPU_SPECS:
        assert set(sheet) <= set(precisions.names()), sheet


def _precision_lists(path: Path, rel: str | None = None) -> list[str]:
    """``file:line: names`` of every tuple, list or set literal, and every dict literal's keys,
    in ``path`` holding two or more registered precision names (``ALLOWED`` aside)."""
    names = set(precisions.names())
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = rel or path.relative_to(ROOT).as_posix()
    allowed = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and (rel, t.id) in ALLOWED for t in node.targets):
            allowed.update(id(n) for n in ast.walk(node.value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elements = node.elts
        elif isinstance(node, ast.Dict):
            elements = [k for k in node.keys if k is not None]
        else:
            continue
        hits = [e.value for e in elements if isinstance(e, ast.Constant) and e.value in names]
        if len(hits) >= 2 and id(node) not in allowed:
            found.append(f"{rel}:{node.lineno}: {', '.join(hits)}")
    return found


def test_no_list_of_precision_names_outside_the_registry():
    """The issue's must-show: grep finds no list (or map) of precision names outside the
    registry."""
    registry_file = ROOT / "benchmarks" / "measure" / "precisions.py"
    files = [p for d in ("benchmarks", "dashboard", "pages")
             for p in sorted((ROOT / d).rglob("*.py")) if p != registry_file]
    assert len(files) > 100
    found = [hit for path in files for hit in _precision_lists(path)]
    assert not found, "\n".join(found)


def test_the_walk_finds_a_list_where_one_is_spelled(tmp_path):
    """Not vacuous: a module that spells a list of precision names is found."""
    sample = tmp_path / "sample.py"
    sample.write_text('CHOICES = ("fp32", "bf16")\nONE = ("fp32", "other")\n'
                      'COMPRESSIONS = ["fp16", "bf16"]\nCOLORS = {"int8": 1, "fp16": 2}\n')
    assert sorted(_precision_lists(sample, "x/sample.py")) == [
        "x/sample.py:1: fp32, bf16", "x/sample.py:3: fp16, bf16", "x/sample.py:4: int8, fp16"]
    assert sorted(_precision_lists(sample, "benchmarks/spec/sweep.py")) == [
        "benchmarks/spec/sweep.py:1: fp32, bf16", "benchmarks/spec/sweep.py:4: int8, fp16"]


def test_stored_peaks_without_a_registered_precision_are_measured_again():
    from datetime import datetime, timezone

    from benchmarks.measure import peaks
    stored = {"device": "cpu", "method": {"version": peaks.METHOD_VERSION},
              "measured_at": datetime.now(timezone.utc).isoformat(),
              "gemm_flops_per_s": {"fp32": 1e11, "int8": 4e11},
              "unsupported": {"bf16": "no bf16 kernel"}}
    assert peaks.stale_reason(stored, None) is None
    precisions.register(TOY)
    try:
        assert peaks.stale_reason(stored, None) == "no roof stored for toy4"
        assert peaks.device_precisions(torch.device("cpu"))[-1] == "toy4"
    finally:
        precisions.unregister("toy4")


def test_a_runtimes_precision_choices_and_a_variants_deployed_precision_read_the_registry():
    from benchmarks.run.cells import deployed_precision
    from benchmarks.runtimes.base import RuntimeConfig
    from benchmarks.spec.variant import VariantSpec
    from optimizers import AmpSettings, Int8Settings
    with pytest.raises(ValueError, match="fp32, bf16, fp16, int8"):
        RuntimeConfig("eager", precision="tf32")  # a roof, not something a runtime deploys
    precisions.register(replace(TOY, deployable=True))
    try:
        assert RuntimeConfig("eager", precision="toy4").precision == "toy4"
    finally:
        precisions.unregister("toy4")
    both = VariantSpec("int8+amp", ("int8", "amp"),
                       {"int8": Int8Settings(), "amp": AmpSettings("bf16")})
    # The quantized step wins whichever path it took (pt2e's declares no precision).
    assert deployed_precision(both, {"int8": {"path": "pt2e"}, "amp": {"dtype": "bf16"}}) \
        == "int8"
    amp = VariantSpec("amp", ("amp",), {"amp": AmpSettings("bf16")})
    assert deployed_precision(amp, {"amp": {"dtype": "bf16"}}) == "bf16"
    assert deployed_precision(amp, {"amp": {"dtype": "fp8"}}) == "fp32"  # not deployable
    assert deployed_precision(VariantSpec("baseline"), {}) == "fp32"


def test_the_runtimes_read_their_precision_codes_from_the_registry():
    from benchmarks.runtimes import census
    from benchmarks.runtimes.eager import torch_precision
    from benchmarks.runtimes.openvino import _hint_name, hint
    assert [hint(p) for p in ("fp32", "bf16", "fp16", "int8")] == ["f32", "bf16", "f16", "f32"]
    assert [_hint_name(v) for v in ("<Type: 'bfloat16'>", "float16", "f32")] == \
        ["bf16", "f16", "f32"]
    assert "QLinearConv" in census.ONNX_INT and {"u8", "i8"} <= census.OV_INT
    real = census.count_onnx(["QLinearConv", "QLinearConv", "Conv"], "g").to_dict()
    some = census.count_onnx(["QLinearConv", "Conv", "Conv"], "g").to_dict()
    assert census.ran_in(real, "fp32") == "int8" and census.ran_in(some, "bf16") == "int8+bf16"
    floats = census.count_onnx(["Conv"], "g").to_dict()
    assert torch_precision(floats, "fp32", torch.float16) == "fp16"
    assert torch_precision(floats, "fp32", None) == "fp32"


def test_a_cuda_sweeps_fp32_mode_picks_the_precision_of_that_matmul_mode():
    env = {"precision": {"fp32": "tf32"}}
    fp32 = {"precision": "fp32", "macs": {"fp32": 10}}
    assert precisions.by_matmul_mode("tf32") == "tf32" and precisions.by_matmul_mode("ieee") \
        is None
    assert roofline.variant_precision({}, env, "cuda:0", census=fp32) == "tf32"
    assert roofline.variant_precision({}, env, "cpu", census=fp32) == "fp32"
    assert roofline.variant_precision({}, {"precision": {"fp32": "ieee"}}, "cuda:0") == "fp32"
