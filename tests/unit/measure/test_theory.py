"""The theoretical peaks: every instruction-set branch of the CPU table from fake
/proc/cpuinfo text, the clock's sources, SMT siblings, and GPUs from the spec table by name."""

from __future__ import annotations

import pytest

from benchmarks.measure import theory


def cpuinfo(vendor: str, family: int, model: int, flags: str, mhz: float = 2445.406,
            cores: int = 2, siblings_per_core: int = 1, name: str = "a CPU") -> str:
    """/proc/cpuinfo text: one block per logical processor, SMT siblings sharing a core id."""
    blocks = []
    for cpu in range(cores * siblings_per_core):
        blocks.append("\n".join([
            f"processor\t: {cpu}", f"vendor_id\t: {vendor}", f"cpu family\t: {family}",
            f"model\t\t: {model}", f"model name\t: {name}", f"cpu MHz\t\t: {mhz}",
            "physical id\t: 0", f"core id\t\t: {cpu % cores}", f"flags\t\t: {flags}"]))
    return "\n\n".join(blocks) + "\n"


BASE = "fpu sse sse2 ssse3 sse4_1 sse4_2"
ZEN3 = cpuinfo("AuthenticAMD", 25, 1, f"{BASE} avx fma avx2", name="AMD EPYC")
ZEN4 = cpuinfo("AuthenticAMD", 25, 17, f"{BASE} avx fma avx2 avx512f avx512_vnni "
                                       f"avx512_bf16")
ZEN1 = cpuinfo("AuthenticAMD", 23, 1, f"{BASE} avx fma avx2")
SAPPHIRE = cpuinfo("GenuineIntel", 6, 143, f"{BASE} avx fma avx2 avx512f avx512_vnni "
                                           f"avx512_bf16 amx_bf16 amx_int8 amx_tile")
SKYLAKE_SP = cpuinfo("GenuineIntel", 6, 85, f"{BASE} avx fma avx2 avx512f")
ALDER_LAKE = cpuinfo("GenuineIntel", 6, 151, f"{BASE} avx fma avx2 avx_vnni")
SANDY = cpuinfo("GenuineIntel", 6, 42, f"{BASE} avx")
G = 1e9


def per_cycle(text: str) -> dict:
    return {p: v for p, (v, _, _) in theory.flop_per_cycle(theory.parse_cpuinfo(text)).items()}


def test_zen3_this_machine_avx2_fma_and_what_bf16_and_int8_get():
    """AVX2 + FMA on two 256-bit pipes: 32 fp32 FLOP/cycle/core. No bf16 instructions: bf16
    is bounded by fp32's rate and not native (no plausibility check on it); int8 through
    vpmaddubsw/vpmaddwd is twice fp32."""
    peaks = theory.cpu_theoretical(1, ZEN3)
    assert peaks["flop_per_cycle"] == {"fp32": 32, "bf16": 32, "int8": 64}
    assert peaks["native"] == {"fp32": True, "bf16": False, "int8": True}
    assert peaks["gemm_flops_per_s"]["fp32"] == pytest.approx(1 * 2.445406 * 32 * G)
    assert peaks["gemm_flops_per_s"]["int8"] == pytest.approx(2 * peaks["gemm_flops_per_s"]
                                                              ["fp32"])
    assert "widened to fp32" in peaks["derivation"]["bf16"]
    assert peaks["cores"] == 1 and "cpu MHz" in peaks["clock_source"]
    # Two threads on the two cores: twice.
    assert theory.cpu_theoretical(2, ZEN3)["gemm_flops_per_s"]["fp32"] == pytest.approx(
        2 * peaks["gemm_flops_per_s"]["fp32"])


@pytest.mark.parametrize("text, expected", [
    (ZEN4, {"fp32": 32, "bf16": 64, "int8": 128}),       # AVX-512 double-pumped on 256 bits
    (ZEN1, {"fp32": 16, "bf16": 16, "int8": 32}),        # 128-bit FMA pipes
    (SAPPHIRE, {"fp32": 64, "bf16": 1024, "int8": 2048}),  # AMX tiles
    (SKYLAKE_SP, {"fp32": 64, "bf16": 64, "int8": 128}),   # AVX-512, no VNNI: AVX2's 2x
    (ALDER_LAKE, {"fp32": 32, "bf16": 32, "int8": 128}),   # AVX-VNNI at 256 bits
    (SANDY, {"fp32": 16, "bf16": 16}),                    # AVX without FMA, no int8 rule
])
def test_each_instruction_set_branch(text, expected):
    assert per_cycle(text) == expected


def test_native_flags_follow_the_instructions():
    native = theory.cpu_theoretical(1, ZEN4)["native"]
    assert native == {"fp32": True, "bf16": True, "int8": True}
    assert theory.cpu_theoretical(1, SAPPHIRE)["isa"].startswith("amx_int8 amx_bf16")


def test_the_clock_prefers_cpufreq_and_smt_siblings_add_nothing():
    smt = cpuinfo("AuthenticAMD", 25, 1, f"{BASE} avx fma avx2", cores=2, siblings_per_core=2)
    peaks = theory.cpu_theoretical(4, smt, max_freq_khz=3_500_000)
    assert peaks["cores"] == 2  # 4 threads on 2 physical cores
    assert peaks["clock_ghz"] == pytest.approx(3.5) and "cpufreq" in peaks["clock_source"]
    assert peaks["gemm_flops_per_s"]["fp32"] == pytest.approx(2 * 3.5 * 32 * G)


def test_the_measured_sustained_clock_is_used_above_the_stated_one_and_both_recorded():
    """Under a hypervisor cpuinfo states the base clock (2.6 GHz on the Sapphire Rapids this
    was found on) while the core runs a boost: the roof is built on the measured clock, the
    stated one beside it; a chain read below the stated clock (preempted) lowers nothing."""
    stated = cpuinfo("GenuineIntel", 6, 143, f"{BASE} avx fma avx2 avx512f", mhz=2600.0)
    boosted = theory.cpu_theoretical(1, stated, sustained_ghz=3.59)
    assert boosted["clock_ghz"] == pytest.approx(3.59)
    assert boosted["nominal_clock_ghz"] == pytest.approx(2.6)
    assert boosted["sustained_clock_ghz"] == pytest.approx(3.59)
    assert boosted["clock_source"].startswith("measured") and "cpu MHz" in boosted[
        "clock_source"]
    assert boosted["gemm_flops_per_s"]["fp32"] == pytest.approx(3.59 * 64 * G)
    assert "3.590 GHz" in boosted["derivation"]["fp32"]
    preempted = theory.cpu_theoretical(1, stated, sustained_ghz=1.2)
    assert preempted["clock_ghz"] == pytest.approx(2.6)
    assert theory.cpu_theoretical(1, stated)["sustained_clock_ghz"] is None


def test_the_add_chain_reads_a_plausible_clock_here():
    """The dependent add chain on this machine: a clock every core runs within, at least
    near the stated one (a boost reads above it; a loaded machine's best of 30 calls may read
    somewhat below)."""
    from benchmarks.measure import clock
    ghz, how = clock.sustained_clock_ghz()
    if not clock.supported():
        assert ghz is None and how.startswith("not measured")
        return
    assert ghz is not None, how
    assert 0.1 < ghz < 10.0 and "dependent" in how
    stated = theory.cpu_theoretical(1)
    if stated is not None:
        assert ghz > 0.5 * stated["nominal_clock_ghz"]


def test_unknown_clock_or_instruction_set_gives_no_theoretical_peak():
    assert theory.cpu_theoretical(1, ZEN3.replace("cpu MHz", "cpu speed")) is None
    assert theory.cpu_theoretical(1, cpuinfo("Other", 1, 1, "fpu")) is None
    arm = "processor\t: 0\nFeatures\t: fp asimd\ncpu MHz\t\t: 3000\n"
    assert theory.cpu_theoretical(1, arm)["flop_per_cycle"] == {"fp32": 16, "bf16": 16}


def test_this_machine_is_read_without_text():
    peaks = theory.cpu_theoretical(1)
    if peaks is None:
        pytest.skip("this machine's /proc/cpuinfo names no clock or known instruction set")
    assert peaks["gemm_flops_per_s"]["fp32"] > 1e9


@pytest.mark.parametrize("name, matched, fp32_tflops", [
    ("NVIDIA H200", "h200", 67), ("NVIDIA H200 NVL", "h200 nvl", 60),
    ("NVIDIA H100 80GB HBM3", "h100", 67), ("NVIDIA H100 PCIe", "h100 pcie", 51.2),
    ("NVIDIA H100 NVL", "h100 nvl", 60), ("NVIDIA A100-SXM4-80GB", "a100", 19.5),
    ("NVIDIA A100-PCIE-40GB", "a100", 19.5), ("NVIDIA L4", "l4", 30.3),
    ("NVIDIA L40S", "l40s", 91.6), ("NVIDIA A10", "a10", 31.2), ("Tesla T4", "t4", 8.1),
])
def test_gpus_by_name(name, matched, fp32_tflops):
    spec = theory.gpu_theoretical(name)
    assert spec["matched"] == matched
    assert spec["gemm_flops_per_s"]["fp32"] == pytest.approx(fp32_tflops * 1e12)
    assert theory.theoretical("cuda", name, 1) == spec


def test_dense_tensor_core_peaks_and_what_a_gpu_lacks():
    h200 = theory.gpu_theoretical("NVIDIA H200")["gemm_flops_per_s"]
    assert h200["bf16"] == pytest.approx(989.5e12) and h200["int8"] == pytest.approx(1979e12)
    assert h200["tf32"] < h200["bf16"] < h200["int8"]
    assert "bf16" not in theory.gpu_theoretical("Tesla T4")["gemm_flops_per_s"]
    for unknown in ("NVIDIA GeForce RTX 4090", "NVIDIA GH200 480GB", "", "AMD Instinct MI300X"):
        assert theory.gpu_theoretical(unknown) is None


def test_the_clock_a_card_states():
    stated = cpuinfo("GenuineIntel", 6, 143, f"{BASE} avx fma avx2 avx512f", mhz=2600.0)
    assert theory.clock_text(theory.cpu_theoretical(1, stated, sustained_ghz=4.04)) == \
        "at 4.04 GHz (measured; stated 2.60)"
    assert theory.clock_text(theory.cpu_theoretical(1, stated)) == "at 2.60 GHz (stated)"
    assert theory.clock_text(theory.gpu_theoretical("NVIDIA H200")) == ""


def test_a_capped_process_is_held_to_the_instruction_sets_its_cap_leaves():
    """A profile's preview (ONEDNN_MAX_CPU_ISA, ``spec.isa``) on an AMX Xeon: the roofs of
    what the cap leaves, not of the CPU's widest."""
    def rates(cap):
        return theory.cpu_theoretical(1, SAPPHIRE, cap=cap)["flop_per_cycle"]
    assert rates(None) == {"fp32": 64, "bf16": 1024, "int8": 2048}
    assert rates("AVX512_CORE_VNNI") == {"fp32": 64, "bf16": 64, "int8": 256}
    assert rates("AVX2") == {"fp32": 32, "bf16": 32, "int8": 64}
    assert rates("SSE41") == {"fp32": 8, "bf16": 8}
    capped = theory.cpu_theoretical(1, SAPPHIRE, cap="AVX2")
    assert capped["native"]["bf16"] is False and capped["cap"] == "AVX2"
    assert capped["source"].endswith("(capped: ONEDNN_MAX_CPU_ISA=AVX2)")
