"""Trustworthy comparisons: intervals and paired tests against hand-computed cases, bit arrays
through the store, seeds, results that do not depend on the cache's state or the order of
variants, interleaved timing, no ratio across devices, effective FLOPs, and a checkpoint
trained outside the product scored as its owner scores it."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from benchmarks.report import stats
from benchmarks.report.comparisons import comparison_rows
from benchmarks.report.results import VariantResult
from benchmarks.run.cache import WeightsCache
from benchmarks.run.runner import prepare_sweep, run_sweep
from benchmarks.spec.sweep import DEFAULT_TIMING_ROUNDS, SweepSpec

TINY = dict(epochs=1, min_time_s=0.02, min_runs=4, warmup=1, finetune_epochs=1,
            calibration_batches=2)


# -- statistics against hand-computed cases ------------------------------------------------

def test_wilson_interval_hand_computed():
    # p = 0.8, n = 10, z = 1.959964: centre 0.716741, half-width 0.226575.
    low, high = stats.wilson_interval(8, 10)
    assert low == pytest.approx(0.490166, abs=1e-5)
    assert high == pytest.approx(0.943315, abs=1e-5)
    assert stats.wilson_interval(0, 0) is None
    low, high = stats.wilson_interval(360, 360)
    assert high == 1.0 and low == pytest.approx(0.98944, abs=1e-4)  # never [1, 1]


@pytest.mark.parametrize("only_a, only_b, expected", [
    (1, 6, 2 * (1 + 7) / 2**7),       # 2 * P(X <= 1), X ~ Bin(7, 1/2) = 0.125
    (0, 5, 2 / 2**5),                 # 0.0625
    (3, 3, 1.0),
    (0, 0, 1.0),                      # nothing differs: no evidence of a difference
    (10, 0, 2 / 2**10),
])
def test_exact_mcnemar_hand_computed(only_a, only_b, expected):
    assert stats.mcnemar_exact(only_a, only_b) == pytest.approx(expected)


def test_paired_counts_and_bits_round_trip():
    a = [True, True, False, False, True, False, True, True, True]
    b = [True, False, True, False, False, False, True, True, False]
    assert stats.discordant(a, b) == (3, 1)
    assert stats.unpack_bits(stats.pack_bits(a), len(a)) == a
    assert stats.paired_p_value(stats.pack_bits(a), stats.pack_bits(b), len(a)) == \
        pytest.approx(stats.mcnemar_exact(3, 1))


def test_mean_interval_t_distribution():
    summary = stats.mean_interval([1.0, 2.0, 3.0])
    # mean 2, sd 1, t(0.975, 2) = 4.302653: half-width 4.302653 / sqrt(3) = 2.484138.
    assert summary["mean"] == 2.0 and summary["std"] == 1.0
    assert summary["ci"] == pytest.approx([2 - 2.484138, 2 + 2.484138], abs=1e-5)
    assert stats.mean_interval([0.5])["ci"] is None


def test_bits_round_trip_through_the_store(tmp_path):
    from benchmarks.store.database import ResultsStore
    right = [i % 3 != 0 for i in range(360)]
    result = VariantResult.of("baseline", accuracy=sum(right) / 360,
                              correct_bits=stats.pack_bits(right), n_test=360,
                              latency_samples_ms=[1.0, 2.0], batch_size=4)
    store = ResultsStore(tmp_path / "s.db")
    run = store.start_run(model="m", dataset="d", device="cpu", spec={}, environment={})
    store.add_variant(run, result)
    (back,) = store.variant_results(run)
    assert back == result
    assert stats.unpack_bits(back.scores.correct_bits, back.scores.n_test) == right
    d = back.to_dict()
    assert d["accuracy_ci"] == pytest.approx(list(stats.wilson_interval(240, 360)))


def test_comparison_rows_mark_a_one_image_difference_within_noise():
    n = 360
    base_right = [True] * 345 + [False] * 15
    one_more = list(base_right)
    one_more[350] = True                                    # one image: +0.28 points
    many_more = [True] * 359 + [False]                      # 14 images: +3.9 points
    rows = comparison_rows([
        VariantResult.of("baseline", accuracy=345 / n, correct_bits=stats.pack_bits(base_right),
                         n_test=n),
        VariantResult.of("a", ["amp"], accuracy=346 / n, correct_bits=stats.pack_bits(one_more),
                         n_test=n),
        VariantResult.of("b", ["prune"], accuracy=359 / n,
                         correct_bits=stats.pack_bits(many_more), n_test=n)])
    assert rows[1]["accuracy_vs_base"] == pytest.approx(100 / 360)
    assert rows[1]["within_noise"] is True and rows[1]["p_value_vs_base"] > 0.5
    assert rows[2]["within_noise"] is False and rows[2]["p_value_vs_base"] < 0.001


# -- no ratio across devices; the CPU baseline in the same rounds --------------------------

def test_int8_rows_of_a_cuda_sweep_use_the_cpu_baseline_or_no_ratio():
    base = VariantResult.of("baseline", device="cuda:0", latency_samples_ms=[1.0] * 10,
                            batch_size=8)
    int8 = VariantResult.of("int8-static", ["int8"], device="cpu", latency_samples_ms=[5.0] * 10,
                            batch_size=8)
    amp = VariantResult.of("amp", ["amp"], device="cuda:0", latency_samples_ms=[0.5] * 10,
                           batch_size=8)
    rows = comparison_rows([base, int8, amp])
    assert rows[1]["p50_ms_vs_base"] is None and rows[1]["throughput_vs_base"] is None
    assert rows[2]["p50_ms_vs_base"] == pytest.approx(0.5)
    base.timing.cpu_latency_samples_ms = [20.0] * 10
    rows = comparison_rows([base, int8, amp])
    assert rows[1]["p50_ms_vs_base"] == pytest.approx(0.25)
    assert rows[1]["baseline_ref"] == "baseline on cpu"
    assert rows[2]["baseline_ref"] == "baseline"


def test_a_cuda_sweep_times_a_cpu_baseline_in_the_same_rounds(tmp_path, monkeypatch):
    """With a fake CUDA device (no GPU here): the rounds visit a CPU copy of the baseline
    beside the CPU variants, and its samples become the baseline's CPU reference."""
    from benchmarks.run import rounds
    spec = SweepSpec.from_toggles(int8="static", **TINY)
    sweep = prepare_sweep(spec, cache=WeightsCache(tmp_path))
    results = list(sweep.run())
    visits = []

    def fake_visit(b, runs, seconds, warmup, nearest=False):
        visits.append((b.result.name, b.device.type))
        b.samples.extend([1.0 if b.device.type == "cuda" else 4.0] * runs)
        b.visits += 1

    monkeypatch.setattr(rounds, "visit", fake_visit)
    results[0].device = "cuda:0"  # where a CUDA sweep's baseline runs
    built = [rounds.Built(0, results[0], nn.Linear(1, 1), torch.device("cuda")),
             rounds.Built(1, results[1], nn.Linear(1, 1), torch.device("cpu"))]
    rounds.time_interleaved(built, spec, torch.device("cuda"), sweep.example,
                            lambda *event: None, lambda: False)
    rounds = spec.timing_rounds
    assert visits.count(("baseline", "cuda")) == visits.count(("baseline", "cpu")) == rounds
    assert visits.count(("int8-static", "cpu")) == rounds
    assert results[0].timing.cpu_latency_samples_ms and results[0].timing.how["cpu_baseline"]
    rows = comparison_rows(results)
    assert rows[1]["p50_ms_vs_base"] == pytest.approx(1.0)  # 4 ms against the CPU's 4 ms


# -- reproducible by construction ----------------------------------------------------------

def _accuracies(results) -> dict:
    return {r.name: (r.scores.accuracy, r.scores.correct_bits) for r in results}


@pytest.mark.slow
def test_results_do_not_depend_on_the_cache_state_or_variant_order(tmp_path):
    """The default combined sweep on a tiny budget: cold, warm, with --no-cache, with one
    cache entry lost, and in another variant order: the same weights, so the same
    per-example correctness for every variant."""
    spec = SweepSpec.from_toggles(prune=0.5, distill=True, temperature=4, amp=True,
                                  int8="static", combine=True, **TINY)
    cache_dir = tmp_path / "cache"
    cold = _accuracies(run_sweep(spec, cache=WeightsCache(cache_dir)))
    warm_cache = WeightsCache(cache_dir)
    warm = _accuracies(run_sweep(spec, cache=warm_cache))
    assert warm_cache.misses == 0 and warm_cache.hits > 0
    uncached = _accuracies(run_sweep(spec, cache=WeightsCache(enabled=False)))
    assert cold == warm == uncached
    # Lose some entries (the prune step's among them): the rest are hits, the same results.
    entries = sorted(cache_dir.glob("*.safetensors"), key=lambda p: p.stat().st_mtime)
    for entry in entries[1:3]:
        entry.unlink()
    assert _accuracies(run_sweep(spec, cache=WeightsCache(cache_dir))) == cold
    reordered = SweepSpec(**{**spec.__dict__,
                             "variants": (spec.variants[0], *reversed(spec.variants[1:]))})
    assert _accuracies(run_sweep(reordered, cache=WeightsCache(enabled=False))) == cold


def test_seeds_rebuild_every_trained_variant_and_pair_distillation_with_its_twin(tmp_path):
    from benchmarks.report.document import RunReport
    spec = SweepSpec.from_toggles(distill=True, int8="dynamic", model="mlp", seeds=3,
                                  **{k: v for k, v in TINY.items() if k != "finetune_epochs"})
    results = list(run_sweep(spec, cache=WeightsCache(tmp_path)))
    for r in results:
        assert r.ok, r.error
        assert r.scores.seeds == [0, 1, 2] and len(r.scores.seed_accuracies) == 3
        assert r.scores.seed_accuracies[0] == r.scores.accuracy  # seed 0 is the timed model
        summary = r.to_dict()["seeds"]
        assert summary["mean"] == pytest.approx(sum(r.scores.seed_accuracies) / 3)
        assert summary["std"] is not None and len(summary["ci"]) == 2
    base = results[0]
    assert len(set(base.scores.seed_accuracies)) > 1 or \
        len({r.scores.correct_bits for r in results}) > 1
    doc = RunReport(variants=results, baseline="baseline").document()
    distilled = next(v for v in doc["variants"] if v["techniques"] == ["distill"])
    gain = distilled["vs_control"]
    assert gain["control"] == "student-scratch"
    assert len(gain["gain_ci_pts"]) == 2 and gain["gain_ci_pts"][0] <= gain["gain_pts"] \
        <= gain["gain_ci_pts"][1]
    # Timings are not repeated per seed: one set of samples per variant.
    assert all(r.timing.how["method"] == "interleaved" for r in results)


def test_every_variant_is_timed_in_interleaved_rounds(tmp_path):
    spec = SweepSpec.from_toggles(amp=True, prune=0.5, **TINY)
    results = list(run_sweep(spec, cache=WeightsCache(tmp_path)))
    for r in results:
        assert r.timing.how["method"] == "interleaved" and r.timing.how["rounds"] == \
            spec.timing_rounds == DEFAULT_TIMING_ROUNDS
        assert r.timing.how["variants_together"] == 3 and r.timing.latency.n >= spec.min_runs
    sequential = list(run_sweep(SweepSpec(**{**spec.__dict__, "timing": "sequential"}),
                                cache=WeightsCache(tmp_path)))
    assert {r.timing.how["method"] for r in sequential} == {"sequential"}


def test_json_carries_intervals_p_values_and_axes(tmp_path, cli):
    out = tmp_path / "r.json"
    p = cli("run", "--prune", "0.3,0.6", "--epochs", "1", "--finetune-epochs", "1",
            "--min-time", "0.02", "--store", str(tmp_path / "s.db"), "--json", str(out),
            "--quiet")
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["baseline"] == "baseline"
    for v in doc["variants"]:
        low, high = v["accuracy_ci"]
        assert low <= v["accuracy"] <= high
        assert v["timing"]["method"] == "interleaved"
    base, a, b = doc["variants"]
    assert "p_value_vs_baseline" not in base
    assert 0 <= a["p_value_vs_baseline"] <= 1 and isinstance(a["within_noise"], bool)
    assert a["axes"] == {"prune.ratio": 0.3} and b["axes"] == {"prune.ratio": 0.6}
    assert "=" in p.stdout or "within noise" not in p.stdout  # the mark goes with its note


# -- FLOPs that mean something ---------------------------------------------------------------

def test_effective_flops_count_only_non_zero_weights():
    from optimizers.counting import count_flops
    linear = nn.Linear(10, 5, bias=False)
    with torch.no_grad():
        linear.weight[:, :5] = 0  # half the weights
    flops = count_flops(linear, torch.randn(4, 10))
    assert flops.dense == 2 * 10 * 5 and flops.effective == 2 * 5 * 5
    conv = nn.Conv2d(2, 4, 3, bias=False)
    with torch.no_grad():
        conv.weight[0] = 0  # one output channel of 4
    flops = count_flops(conv, torch.randn(1, 2, 6, 6))
    positions = 4 * 4
    assert flops.dense == 2 * 4 * 2 * 9 * positions
    assert flops.effective == 2 * 3 * 2 * 9 * positions


# -- the inputs a checkpoint expects ---------------------------------------------------------

# A depthwise/SE network, as a user would write it in their own file, outside the product.
NET_SOURCE = """
from torch import nn


class SmallNet(nn.Module):
    def __init__(self, num_classes=10, in_channels=1):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 16, 3, padding=1), nn.SiLU())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.SiLU(),
                                nn.Conv2d(16, 32, 1), nn.SiLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(32, 8, 1), nn.SiLU(),
                                nn.Conv2d(8, 32, 1), nn.Sigmoid())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                                  nn.Linear(128, num_classes))

    def forward(self, x):
        x = self.dw(self.stem(x))
        return self.head(x * self.se(x))


def build(num_classes, in_channels):
    return SmallNet(num_classes, in_channels)
"""


@pytest.fixture(scope="module")
def outside_model(tmp_path_factory):
    """16x16 grey digits written as PNGs, a network trained on them outside the product on
    [0, 1] pixels, its weights as safetensors, and its owner's own accuracy on every image."""
    import numpy as np
    from PIL import Image
    from safetensors.torch import save_file
    from sklearn.datasets import load_digits
    root = tmp_path_factory.mktemp("outside")
    folder = root / "digits16"
    digits = load_digits()
    files = []
    for i in range(250):
        label = int(digits.target[i])
        image = Image.fromarray((digits.images[i] * 255 / 16).astype(np.uint8)).resize(
            (16, 16), Image.BILINEAR)
        path = folder / f"class_{label}" / f"{i:04d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(path)
        files.append((path, label))
    x = torch.stack([torch.from_numpy(np.asarray(Image.open(p).convert("L"), dtype=np.float32)
                                      / 255.0)[None] for p, _ in files])
    y = torch.tensor([label for _, label in files])
    (root / "net.py").write_text(NET_SOURCE)
    namespace: dict = {}
    exec(compile(NET_SOURCE, str(root / "net.py"), "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["build"](10, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(150):  # until it gets every image right (checked every tenth epoch)
        model.train()
        for i in range(0, len(y), 50):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x[i:i + 50]), y[i:i + 50]).backward()
            optimizer.step()
        if epoch % 10 == 9:
            model.eval()
            with torch.no_grad():
                own = (model(x).argmax(1) == y).float().mean().item()
            if own == 1.0:
                break
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              str(root / "w.safetensors"))
    return root, folder, own


@pytest.mark.slow
def test_an_outside_checkpoint_scores_as_its_owner_scores_it(outside_model, tmp_path, cli):
    root, folder, own = outside_model
    assert own == 1.0  # the owner's evaluation of these images
    base = ["run", "--model", f"{root}/net.py:build", "--checkpoint", f"{root}/w.safetensors",
            "--dataset", f"imagefolder:{folder}", "--input-shape", "1,16,16", "--min-time",
            "0.02", "--store", str(tmp_path / "s.db"), "--quiet"]
    right = cli(*base, "--normalize", "none", "--json", str(tmp_path / "right.json"))
    assert right.returncode == 0, right.stderr
    doc = json.loads((tmp_path / "right.json").read_text())
    assert doc["variants"][0]["accuracy"] == own
    assert doc["warnings"] == [] and doc["environment"]["data"]["normalization"]["mode"] == "none"

    # The data set's own statistics: far below, and the run names the normalisation that
    # scores as the owner does, measured on the same test images.
    wrong = cli(*base, "--normalize", "dataset", "--json", str(tmp_path / "wrong.json"))
    assert wrong.returncode == 0, wrong.stderr
    doc = json.loads((tmp_path / "wrong.json").read_text())
    assert doc["variants"][0]["accuracy"] < 0.8
    (warning,) = doc["warnings"]
    assert "but 100.0% with none" in warning and "--normalize none" in warning
    assert "--normalize none" in wrong.stdout  # the CLI prints it under the table

    # A scaling nothing rescues reads near chance, and says so.
    hopeless = cli(*base, "--normalize", "5,0.01", "--json", str(tmp_path / "far.json"))
    assert hopeless.returncode == 0, hopeless.stderr
    doc = json.loads((tmp_path / "far.json").read_text())
    assert doc["variants"][0]["accuracy"] <= 0.15, doc["variants"][0]["accuracy"]
    assert any("near chance" in w or "with none" in w for w in doc["warnings"])

    guessed = cli(*base[:-1], "--json", str(tmp_path / "guess.json"))  # no --normalize
    assert "no --normalize given with --checkpoint" in guessed.stderr
