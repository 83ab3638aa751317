"""Issue 34.5: instruction-set profiles. A capped profile is timed in a process of its own
with oneDNN capped, each row labelled with its profile and whether it is a preview; a cell is
a preview where the kernels it ran (read from oneDNN's verbose log in that process) obey the
cap, and "n/a (why)" where they do not (ONNX Runtime's MLAS, FBGEMM's quantized linears, MKL's
float matmuls): never the native figure under another name, and never a failure; the verdict
is given per profile."""

from __future__ import annotations

import json

import pytest

from benchmarks.report.results import VariantResult
from benchmarks.spec import isa
from helpers import FAST_CLI, run_cli

# A oneDNN verbose log as PyTorch's x86 engine prints it for seed_cnn's static INT8 convs
# under an AVX2 cap (the quantized linear runs in FBGEMM: no line), with a reorder between.
AVX2_LOG = """onednn_verbose,v1,info,oneDNN v3.12.0 (commit 80afa71049cd69a3df32adcccb623b12cd7baa22)
onednn_verbose,v1,primitive,exec,cpu,convolution,jit_uni_int8:avx2,forward_inference,src:u8::blocked:acdb::f0 wei:s8:ap:blocked:ABcd2b8a4b::f8:zpm1 bia:f32:a:blocked:a::f0 dst:u8::blocked:acdb::f0,attr-scratchpad:user attr-scales:src0:0:f32+dst:0:f32,alg:convolution_direct,mb32_ic1oc64_ih8oh6kh3sh1dh0ph0_iw8ow6kw3sw1dw0pw0,0.02
onednn_verbose,v1,primitive,exec,cpu,reorder,jit:blk,undef,src:f32::blocked:aBcd8b::f0 dst:f32::blocked:abcd::f0,attr-scratchpad:user,,32x64x6x6,0.01
onednn_verbose,v1,primitive,exec,cpu,convolution,jit_uni_int8:avx2,forward_inference,src:u8::blocked:acdb::f0 wei:s8:a:blocked:ABcd2b8a4b::f0 bia:f32:a:blocked:a::f0 dst:u8::blocked:acdb::f0,attr-scratchpad:user attr-scales:src0:0:f32+dst:0:f32,alg:convolution_direct,mb32_ic64oc128_ih6oh4kh3sh1dh0ph0_iw6ow4kw3sw1dw0pw0,0.2
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_bf16,undef,src:bf16::blocked:ab::f0 wei:bf16::blocked:ba::f0 dst:bf16::blocked:ab::f0,attr-scratchpad:user,,32x2048:2048x10,0.03
"""

AVX2_ONLY = {"sse4_1", "avx2", "fma"}
AMX = AVX2_ONLY | {"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_int8", "amx_bf16"}
WIDER_THAN_SSE41 = pytest.mark.skipif(
    "sse4_1" not in isa.cpu_flags() or isa.machine_rank(isa.cpu_flags()) <= 10,
    reason="needs a CPU wider than SSE4.1 to cap it")


def test_a_cap_below_the_cpus_widest_is_a_preview_and_at_it_is_the_machines_own():
    assert isa.label("sse41", AVX2_ONLY)["preview"] is True
    assert isa.label("avx2", AVX2_ONLY)["preview"] is False
    assert "this machine's own" in isa.label("avx2", AVX2_ONLY)["label"]
    assert isa.label("avx2", AMX)["label"] == \
        "preview: avx2 on this machine (ONEDNN_MAX_CPU_ISA=AVX2)"
    assert isa.label("native", AMX) == {"name": "native", "cap": None, "preview": False,
                                       "label": "native: this machine as it is"}


def test_a_profile_the_cpu_cannot_run_is_refused_in_one_line():
    isa.check_profiles(("avx2", "native"), AVX2_ONLY)
    with pytest.raises(ValueError, match=r"--isa amx needs a CPU with amx_int8, amx_bf16"):
        isa.check_profiles(("amx",), AVX2_ONLY)
    with pytest.raises(ValueError, match="unknown instruction-set profile 'avx9'"):
        isa.check_profiles(("avx9",), AVX2_ONLY)


@WIDER_THAN_SSE41
def test_run_isa_times_each_profile_and_labels_every_cell(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    proc = run_cli("run", *FAST_CLI, "--int8", "static", "--runtime", "eager,ort,openvino",
                   "--isa", "sse41,native", "--store", str(tmp_path / "s.db"), "--json",
                   str(out))
    assert proc.returncode == 0, proc.stderr  # an n/a cell is no failure
    listed = [v["name"] for v in json.loads(out.read_text())["variants"]]
    assert len(listed) == len(set(listed)), listed  # one row per cell and profile
    rows = {v["name"]: v for v in json.loads(out.read_text())["variants"]}
    for name, row in rows.items():
        profile = row["runtime"]["profile"]
        assert profile["name"] == ("sse41" if name.endswith(" [sse41]") else "native"), name
        assert profile["preview"] is (name.endswith(" [sse41]") and not
                                      row.get("not_applicable")), name
        assert row["error"] is None, (name, row["error"])
    assert rows["baseline [sse41]"]["runtime"]["profile"]["cap"] == "SSE41"
    assert rows["int8-static@openvino [sse41]"]["latency_ms"] is not None
    assert "MLAS" in rows["int8-static@ort [sse41]"]["not_applicable"]
    # The eager INT8 cell by the kernels it ran: a preview where they obeyed the cap.
    int8 = rows["int8-static [sse41]"]
    kernels = int8["runtime"]["profile"]["kernels"]
    assert (int8.get("not_applicable") is None) is (kernels["obey"] >= 0.9), kernels
    assert (int8["latency_ms"] is None) is (kernels["obey"] < 0.9)
    # A profile's rows are against its own baseline, timed in its own process.
    ov = rows["int8-static@openvino [sse41]"]["vs_baseline"]
    assert ov["reference"] == "baseline [sse41]"
    # ... and held to the roofs measured there, under its cap (MKL's torch.mm left out).
    capped = rows["baseline [sse41]"]
    roofs = capped["runtime"]["profile"]["peaks"]["cpu"]
    assert roofs["isa_cap"] == "SSE41" and "isa_cap" not in rows["baseline"]["runtime"]["profile"]
    assert capped["percent_of_peak"] == pytest.approx(
        100 * capped["achieved_flops_per_s"] / roofs["gemm_flops_per_s"]["fp32"])
    assert "preview: sse41 on this machine (ONEDNN_MAX_CPU_ISA=SSE41):" in proc.stdout
    assert "the verdict per instruction-set profile" in proc.stdout
    assert "preview: sse41 on this machine (ONEDNN_MAX_CPU_ISA=SSE41): int8-static:" in \
        proc.stdout

    # The Results page draws a grid per profile and the best runtime per profile.
    from streamlit.testing.v1 import AppTest

    from benchmarks.store.database import ResultsStore
    from helpers import ROOT
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(tmp_path / "s.db"))
    run_id = ResultsStore(tmp_path / "s.db").runs(with_variants=False)[0]["run_id"]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["run"], at.query_params["tab"] = run_id, "Runtimes"
    at.switch_page("pages/results.py")
    try:
        at.run()
    finally:  # the app starts a worker for its store
        from benchmarks.service.queue import JobQueue
        JobQueue(tmp_path / "s.db").stop_worker("cpu")
    assert not at.exception, [e.value for e in at.exception]
    best = next(t.value for t in at.dataframe if "best runtime" in t.value.columns
                and "profile" in t.value.columns)
    assert {"native: this machine as it is",
            "preview: sse41 on this machine (ONEDNN_MAX_CPU_ISA=SSE41)"} == set(best["profile"])
    # The answer's variant carries its verdict on each profile beside the cards.
    from benchmarks.report import runtimes
    from benchmarks.report.document import RunReport
    shown = RunReport.from_stored(ResultsStore(tmp_path / "s.db").run(run_id)).shown_rows()
    on_each = runtimes.verdict_on_each_profile(shown, "int8-static@openvino")
    assert len(on_each) == 2 and "under native: this machine" in on_each[0], on_each
    assert "under preview: sse41" in on_each[1]
    assert runtimes.verdict_on_each_profile(shown, "no-such-variant") == []
    answer = at.metric[0].value.replace("\u200b", "")  # md() breaks a long name after @
    captions = [c.value for c in at.caption if "on each instruction set" in c.value]
    if any(answer == r["variant"] and runtimes.verdict_on_each_profile(shown, answer)
           for r in shown):
        assert captions and captions[0].replace("\u200b", "").startswith(answer), captions
    else:
        assert not captions, captions


def test_run_refuses_a_profile_this_cpu_cannot_run(tmp_path):
    flags = isa.cpu_flags()
    missing = next((p.name for p in isa.PROFILES.values()
                    if p.cap and not set(p.flags) <= flags), None)
    if missing is None:
        pytest.skip("this CPU runs every profile")
    proc = run_cli("run", *FAST_CLI, "--isa", f"{missing},native", "--store",
                   str(tmp_path / "s.db"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: --isa {missing} needs")
    assert not (tmp_path / "s.db").exists()


def test_only_the_runtimes_that_ignore_the_cap_get_an_na_row():
    """Where every runtime of the sweep may obey the cap, no row is n/a (an empty list of
    runtimes that ignore it is not "eager"); a failed profile fails every variant once."""
    from benchmarks.run.profiles import _rows
    from benchmarks.spec.sweep import SweepSpec
    spec = SweepSpec.from_toggles(int8="static")
    assert _rows(spec, "sse41", [], reasons={}) == []
    na = _rows(spec, "sse41", ["ort"], reasons={"ort": isa.known_reason("ort")})
    assert [r.name for r in na] == ["baseline@ort [sse41]", "int8-static@ort [sse41]"]
    assert all(r.error is None and not r.ok and not r.failed for r in na)
    assert na[1].not_applicable == ("no sse41 preview of int8-static under ort: ONNX "
                                    "Runtime's MLAS kernels dispatch on CPUID alone")
    assert na[1].runtime["profile"]["preview"] is False
    failed = _rows(spec, "sse41", like=None, error="the sse41 profile's process failed: x")
    assert [r.name for r in failed] == ["baseline [sse41]", "int8-static [sse41]"]
    assert all(r.failed and r.not_applicable is None for r in failed)


def test_a_verbose_log_gives_each_kernel_its_implementation_type_and_multiply_adds():
    from benchmarks.measure.onednn import primitive_macs, primitives
    found = primitives(AVX2_LOG)
    assert [p["implementation"] for p in found] == ["jit_uni_int8:avx2"] * 2 + \
        ["brg_matmul:avx512_core_bf16"]
    assert [p["dtype"] for p in found] == ["int8", "int8", "bf16"]
    assert [p["macs"] for p in found] == [32 * 64 * 36 * 9, 32 * 128 * 16 * 64 * 9,
                                          32 * 2048 * 10]
    # Groups divide the input channels; an inner product's spatial input multiplies them.
    assert primitive_macs("convolution", "g2mb4_ic4oc8_ih5oh3kh3sh1dh0ph0_iw5ow3kw3sw1dw0pw0") \
        == 4 * 8 * 2 * 9 * 9
    assert primitive_macs("inner_product", "mb4ic8ih2iw2oc10") == 4 * 8 * 4 * 10
    assert primitive_macs("matmul", "2x3x4:2x4x5") == 2 * 3 * 4 * 5
    assert primitive_macs("convolution", "unreadable") == 0


def test_a_kernel_obeys_a_cap_at_or_above_its_instruction_set_and_onednns_own_gemm_always():
    avx2 = isa.cap_rank("avx2")
    assert isa.onednn_obeys("jit_uni_int8:avx2", avx2)
    assert isa.onednn_obeys("x64:gemm:jit", avx2) and isa.onednn_obeys("ref:any", avx2)
    assert not isa.onednn_obeys("brg_conv_fwd:avx512_core_vnni", avx2)
    assert not isa.onednn_obeys("gemm:mkl", avx2)  # a name it does not know is not trusted
    assert isa.onednn_obeys("brg:avx512_core_amx", isa.cap_rank("native"))
    assert isa.known_reason("eager") is None and isa.known_reason("openvino") is None
    assert "MLAS" in isa.known_reason("ort")
    assert isa.known_reason("tvm") == "tvm's kernels are not known to obey ONEDNN_MAX_CPU_ISA"


def test_a_cell_is_a_preview_where_most_of_its_multiply_adds_obeyed_the_cap():
    from benchmarks.run.profiles import PREVIEW_SHARE, not_previewed
    assert not_previewed("eager", {"obey": 0.9832, "outside": ["5 (Linear, int8)"]}) is None
    assert not_previewed("compile", {"obey": PREVIEW_SHARE, "outside": []}) is None
    why = not_previewed("eager", {"obey": 0.0, "outside": [f"{i} (Linear, int8)"
                                                          for i in range(6)]})
    assert why.startswith("0% of its multiply-adds ran in oneDNN kernels under the cap; "
                          "outside oneDNN (FBGEMM, MKL")
    assert why.endswith("0 (Linear, int8), 1 (Linear, int8), 2 (Linear, int8), "
                        "3 (Linear, int8) and 2 more")
    assert not_previewed("eager", {"obey": None, "why": "no convolution or linear layer"}) \
        == "its kernels could not be read (no convolution or linear layer)"
    assert not_previewed("eager", None) == "its kernels could not be read (not read)"
    assert not_previewed("openvino", None) is None  # known to obey, not read
    assert "MLAS" in not_previewed("ort", None)


def test_the_census_reads_the_kernels_that_ran_fbgemm_and_mkl_outside_onednn():
    """Real kernels, no cap (every oneDNN kernel is at or below native): a dynamic INT8
    perceptron's linears run in FBGEMM and a float one's in MKL, which print nothing in
    oneDNN's log, so neither obeys a cap; seed_cnn's float convolutions are oneDNN's."""
    import torch

    from benchmarks.measure.onednn import census
    from benchmarks.run.profiles import not_previewed
    from benchmarks.zoo.models import create_model
    torch.manual_seed(0)
    x = torch.randn(4, 1, 8, 8)
    mlp = create_model("mlp", 10, 1, (8, 8)).eval()
    dynamic = torch.ao.quantization.quantize_dynamic(mlp, {torch.nn.Linear}, torch.qint8)
    native = isa.cap_rank("native")
    for model, precision in ((mlp, "fp32"), (dynamic, "int8")):
        found = census(model, model, x, native)
        assert found["obey"] == 0.0 and found["primitives"] == {}, found
        assert found["outside"][0] == f"1 (Linear, {precision})" and \
            len(found["outside"]) == 3
        assert "outside oneDNN" in not_previewed("eager", found)
    cnn = create_model("seed_cnn", 10, 1, (8, 8)).eval()
    found = census(cnn, cnn, x, native)
    assert found["outside"] == ["5 (Linear, fp32)"] and found["primitives"] == {"f32": 2}
    assert found["obey"] == pytest.approx(1 - 128 * 16 * 10 / (36 * 64 * 9 + 16 * 128 * 64 * 9
                                                               + 128 * 16 * 10), abs=1e-4)
    assert all(isa.onednn_obeys(i, native) for i in found["isa"]) and found["above_cap"] == []
    assert census(torch.nn.ReLU(), torch.nn.ReLU(), x, native)["obey"] is None


@pytest.mark.slow
@pytest.mark.skipif(isa.machine_rank(isa.cpu_flags()) < 20, reason="needs an AVX2 CPU")
def test_run_isa_previews_an_int8_cell_whose_kernels_obey_and_exits_0(tmp_path, capsys):
    """The issue's command: the eager INT8 cell under avx2 is a preview where the kernels
    read from its run obeyed the cap (on a VNNI CPU PyTorch's x86 engine gives its convs to
    oneDNN: ``jit_uni_int8:avx2``), n/a with the reason where they did not (FBGEMM's convs on
    an AVX2 CPU); ONNX Runtime's cells are n/a; nothing failed, so `run` exits 0."""
    from benchmarks.cli.main import main
    out = tmp_path / "r.json"
    assert main(["run", *FAST_CLI, "--model", "seed_cnn", "--dataset", "digits", "--int8",
                 "static", "--runtime", "eager,ort", "--isa", "avx2,native", "--store",
                 str(tmp_path / "s.db"), "--json", str(out)]) == 0
    from benchmarks.run.profiles import PREVIEW_SHARE
    shown = capsys.readouterr().out
    rows = {v["name"]: v for v in json.loads(out.read_text())["variants"]}
    assert all(r["error"] is None for r in rows.values())
    int8 = rows["int8-static [avx2]"]
    kernels = int8["runtime"]["profile"]["kernels"]
    # What ran was read: oneDNN's kernels all at or below AVX2, each layer ran or named.
    assert kernels["isa"] and kernels["above_cap"] == [], kernels
    assert all(isa.onednn_obeys(i, isa.cap_rank("avx2")) for i in kernels["isa"])
    assert kernels["macs"] > 0 and 0.0 <= kernels["obey"] <= 1.0
    if kernels["obey"] >= PREVIEW_SHARE:
        assert kernels["primitives"].get("int8"), kernels  # its int8 convs were oneDNN's
        assert int8.get("not_applicable") is None and int8["latency_ms"] is not None
        assert int8["runtime"]["profile"]["preview"] is \
            (isa.machine_rank(isa.cpu_flags()) > 20)
        assert int8["vs_baseline"]["reference"] == "baseline [avx2]"
    else:
        assert "outside oneDNN" in int8["not_applicable"] and int8["latency_ms"] is None
        assert f"int8-static [avx2]: n/a ({int8['not_applicable']})" in shown
    ort = rows["int8-static@ort [avx2]"]
    assert "MLAS" in ort["not_applicable"] and ort["latency_ms"] is None
    assert ort["runtime"]["profile"]["preview"] is False
    assert f"int8-static@ort [avx2]: n/a ({ort['not_applicable']})" in shown
    # The profile's rows share its grid (the threads they ran on), n/a cells marked so.
    assert shown.count("preview: avx2 on this machine") + \
        shown.count("avx2: this machine's own") >= 1
    assert len({r["runtime"].get("threads") for n, r in rows.items() if "[avx2]" in n}) == 1


def test_an_na_row_is_no_failure_keeps_the_json_and_reads_n_a_with_its_reason():
    """Rows stored before read as they were (an old refusal stays a failure, a row without
    the field writes none); an n/a row is neither measured nor failed, the table and the
    grid say "n/a (why)", and a profile whose baseline is n/a has no ratio against another
    profile's baseline."""
    from benchmarks.report import runtimes
    from benchmarks.report.document import RunReport
    from benchmarks.report.formats import display_rows
    from benchmarks.report.results import VariantResult

    def row(name, variant, profile, **figures):
        runtime = {"name": "eager", "variant": variant, "threads": 1,
                   "profile": {**isa.label(profile), "kernels": {"obey": 0.0}}}
        return VariantResult.of(name, [] if variant == "baseline" else ["int8"],
                                runtime=runtime, **figures)

    why = "no avx2 preview of baseline under eager: 0% of its multiply-adds ran in oneDNN"
    rows = [row("baseline", "baseline", "native", latency_samples_ms=[2.0], batch_size=4),
            row("baseline [avx2]", "baseline", "avx2", batch_size=4, not_applicable=why),
            row("int8 [avx2]", "int8", "avx2", latency_samples_ms=[1.0], batch_size=4)]
    assert [(r.ok, r.failed) for r in rows] == [(True, False), (False, False), (True, False)]
    stored = json.loads(json.dumps(rows[1].to_dict()))
    assert stored["not_applicable"] == why and stored["error"] is None
    assert VariantResult.from_dict(stored) == rows[1]
    assert "not_applicable" not in rows[0].to_dict()
    old = {**rows[0].to_dict(), "name": "int8 [sse41]", "error": "PyTorch's quantized kernels "
           "(FBGEMM) dispatch on the CPU's own flags and do not obey the cap"}
    assert VariantResult.from_dict(old).failed and "not_applicable" not in \
        VariantResult.from_dict(old).to_dict()

    report = RunReport(environment={}, spec={}, variants=rows, baseline="baseline",
                       model="seed_cnn", dataset="digits")
    shown = {r["variant"]: r for r in report.rows()}
    assert shown["int8 [avx2]"]["p50_ms_vs_base"] is None  # never against native's baseline
    assert f"baseline [avx2]: n/a ({why})" in report.table()
    from benchmarks.views.html import render
    assert f"baseline [avx2]: n/a ({why})" in render(report)
    cell = runtimes.cell(shown["baseline [avx2]"], None)
    assert runtimes.cell_text(cell) == "n/a" and runtimes.cell_text(cell, why=True) == \
        f"n/a ({why})"
    assert display_rows([shown["baseline [avx2]"]], ["p50_ms"])[0] == \
        {"Latency p50 (ms)": f"— (n/a: {why})"}


# -- a preview's roofs: its cap's, never the native ones --------------------------------------

def profile_row(name: str, profile: str, runtime: str = "eager", precision: str | None = None,
                **carried) -> VariantResult:
    """A row timed at 10 GFLOP/s (1e6 FLOPs x 10 per batch in 1 ms) under ``profile``."""
    entry = {"name": runtime, "variant": name.split(" [")[0], "precision": precision,
             "profile": {**isa.label(profile, AMX), **carried}}
    return VariantResult.of(name=name, latency_samples_ms=[1.0] * 11, batch_size=10,
                            flops=1_000_000, flops_effective=1_000_000, traffic_bytes=100_000,
                            runtime=entry)


def test_a_capped_profiles_row_is_held_to_the_roof_measured_under_its_cap():
    from benchmarks.report.document import RunReport
    from benchmarks.run.profiles import capped_roofs
    env = {"peaks": {"cpu": {"gemm_flops_per_s": {"fp32": 100e9, "int8": 400e9},
                             "memory_bytes_per_s": 10e9,
                             "theoretical": {"gemm_flops_per_s": {"fp32": 200e9}}}}}
    # The capped process's environment card, as it measured it (its kernels that obey SSE41).
    under_cap = {"cpu": {"isa_cap": "SSE41", "gemm_flops_per_s": {"fp32": 20e9},
                         "memory_bytes_per_s": 8e9, "measured_at": "now",
                         "unsupported": {"int8": "no kernel obeys the cap"},
                         "theoretical": {"gemm_flops_per_s": {"fp32": 40e9}, "cores": 1},
                         "method": {"candidates": {}}}}
    roofs = capped_roofs(under_cap)
    assert "method" not in roofs["cpu"] and roofs["cpu"]["theoretical"] == {
        "gemm_flops_per_s": {"fp32": 40e9}}
    native = profile_row("baseline", "native")
    capped = profile_row("baseline [sse41]", "sse41", peaks=roofs)
    assert native.roofline(env)["percent_of_peak"] == pytest.approx(10.0)
    point = capped.roofline(env)
    assert point["percent_of_peak"] == pytest.approx(50.0)  # 10 of the capped 20, not of 100
    assert point["peak_flops_per_s"] == 20e9 and point["theoretical_peak_flops_per_s"] == 40e9
    assert point["peak_note"] is None
    # A precision with no roof under the cap, and a capped row that carries none (a store's
    # row from before they were measured): no % peak, and why, never the native roof.
    int8 = profile_row("int8@openvino [sse41]", "sse41", "openvino", "int8", peaks=roofs)
    assert int8.roofline(env)["percent_of_peak"] is None
    assert int8.roofline(env)["peak_note"] == "no int8 roof: no kernel obeys the cap"
    bare = profile_row("old [sse41]", "sse41")
    point = bare.roofline(env)
    assert point["percent_of_peak"] is None and point["peak_flops_per_s"] is None
    assert point["peak_note"].startswith("no roof was measured under the sse41 profile's cap")
    table = RunReport(environment=env, variants=[native, capped, int8, bare],
                      baseline="baseline").table()
    assert "over the peak measured under its cap" in table
    assert "- on % peak (old [sse41]): no roof was measured under the sse41" in table


@WIDER_THAN_SSE41
def test_a_capped_process_keeps_roofs_of_its_own_from_the_kernels_that_obey_the_cap(
        monkeypatch):
    import torch

    from benchmarks.measure import peaks
    cpu = torch.device("cpu")
    native = peaks.peaks_key(cpu, 1)
    assert "isa_cap" not in native
    monkeypatch.setenv(isa.CAP_VARIABLE, "SSE41")
    assert peaks.peaks_key(cpu, 1) == {**native, "isa_cap": "SSE41"}
    # MKL's sgemm behind torch.mm dispatches on the CPU's flags: no capped roof is its.
    kernel, rate, tried = peaks.precision_peak(cpu, "fp32", windows=1)
    assert kernel == "conv2d 3x3" and rate == tried["conv2d 3x3"] > 0
    assert tried["torch.mm"].startswith("dispatches on the CPU's own flags, not under "
                                        "ONEDNN_MAX_CPU_ISA=SSE41")


def test_a_cap_withholds_the_instruction_sets_of_every_wider_profile(monkeypatch):
    assert isa.capped_flags(AMX, "AVX2") == AVX2_ONLY
    assert isa.capped_flags(AMX, "AVX512_CORE_VNNI") == AMX - {"avx512_bf16", "amx_int8",
                                                                "amx_bf16"}
    assert isa.capped_flags(AMX, None) == isa.capped_flags(AMX, "AVX2_VNNI_2") == AMX
    # A cap that withholds nothing this CPU has leaves its roofs the machine's own.
    monkeypatch.setenv(isa.CAP_VARIABLE, "AVX2")
    assert isa.process_cap(AMX) == "AVX2" and isa.process_cap(AVX2_ONLY) is None
