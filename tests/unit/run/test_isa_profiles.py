"""Issue 34.5: instruction-set profiles. A capped profile is timed in a process of its own
with oneDNN capped, each row labelled with its profile and whether it is a preview; what does
not obey the cap (ONNX Runtime's MLAS, PyTorch's quantized FBGEMM kernels) is one failed row
saying so, never the native figure under another name; the verdict is given per profile."""

from __future__ import annotations

import json

import pytest

from benchmarks.report.results import VariantResult
from benchmarks.spec import isa
from helpers import FAST_CLI, run_cli

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
    assert proc.returncode in (0, 1), proc.stderr  # 1: the refused cells are failed rows
    listed = [v["name"] for v in json.loads(out.read_text())["variants"]]
    assert len(listed) == len(set(listed)), listed  # one row per cell and profile
    rows = {v["name"]: v for v in json.loads(out.read_text())["variants"]}
    for name, row in rows.items():
        profile = row["runtime"]["profile"]
        assert profile["name"] == ("sse41" if name.endswith(" [sse41]") else "native"), name
        assert profile["preview"] is name.endswith(" [sse41]")
    assert rows["baseline [sse41]"]["runtime"]["profile"]["cap"] == "SSE41"
    assert rows["baseline [sse41]"]["error"] is None and \
        rows["int8-static@openvino [sse41]"]["error"] is None
    assert "does not obey an instruction-set cap" in rows["int8-static@ort [sse41]"]["error"]
    assert "FBGEMM" in rows["int8-static [sse41]"]["error"]
    # A profile's rows are against its own baseline, timed in its own process ...
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


def test_only_the_runtimes_that_ignore_the_cap_get_a_refused_row():
    """Where every runtime of the sweep obeys the cap, no row is refused (an empty list of
    runtimes that ignore it is not "eager"); a failed profile refuses every variant once."""
    from benchmarks.run.profiles import _refused
    from benchmarks.spec.sweep import SweepSpec
    spec = SweepSpec.from_toggles(int8="static")
    assert _refused(spec, "sse41", "why", []) == []
    names = [r.name for r in _refused(spec, "sse41", "why", ["ort"])]
    assert names == ["baseline@ort [sse41]", "int8-static@ort [sse41]"]
    assert [r.name for r in _refused(spec, "sse41", "why")] == \
        ["baseline [sse41]", "int8-static [sse41]"]


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
