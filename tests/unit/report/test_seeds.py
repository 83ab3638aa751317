"""With seeds > 1 the table says what it shows: accuracy as the mean over seeds with its
t interval and the paired t-test of the per-seed differences, a note naming it; seed 0's
figures stay in the JSON. And the sustained rate beside the median call's, from an injected
clock with preemption spikes."""

from __future__ import annotations

import json
import statistics

import pytest

from benchmarks.measure.latency import Clock, LatencyTracker
from benchmarks.report import stats
from benchmarks.report.document import RunReport
from benchmarks.report.records import CONTENTION_FRACTION
from benchmarks.report.results import VariantResult
from helpers import FAST_CLI

N_TEST = 360


def bits(right: int) -> str:
    return stats.pack_bits([i < right for i in range(N_TEST)])


def seeded(name, accuracies, techniques=()):
    return VariantResult.of(name=name, techniques=list(techniques), accuracy=accuracies[0],
                            n_test=N_TEST, correct_bits=bits(round(accuracies[0] * N_TEST)),
                            seeds=[0, 1, 2], seed_accuracies=list(accuracies),
                            latency_samples_ms=[1.0] * 11, batch_size=32)


# The numbers: seed 0 at 96.94% while the mean over three seeds is 97.50%.
BASE = [0.9694, 0.9805, 0.9751]
PRUNED = [0.9722, 0.9833, 0.9806]


def report() -> RunReport:
    return RunReport(spec={"seeds": 3}, variants=[seeded("baseline", BASE),
                                                  seeded("prune", PRUNED, ["prune"])],
                     baseline="baseline")


def test_paired_t_is_scipys_one_sample_t_on_the_differences():
    from scipy.stats import ttest_1samp
    diffs = [0.5, -0.2, 0.9, 0.3]
    test = stats.paired_t(diffs)
    assert test["p_value"] == pytest.approx(ttest_1samp(diffs, 0).pvalue)
    assert test["mean"] == pytest.approx(statistics.fmean(diffs)) and test["n"] == 4
    assert stats.paired_t([0.0, 0.0])["p_value"] == 1.0
    assert stats.paired_t([1.0, 1.0])["p_value"] == 0.0 and stats.paired_t([1.0]) is None


def test_the_text_table_shows_the_mean_over_seeds_and_says_so():
    r = report()
    table = r.table()
    head, base_row, prune_row = table.splitlines()[:3]
    assert "acc % (mean of 3)" in head and "95% CI (t)" in head
    assert base_row.split()[2] == f"{100 * statistics.fmean(BASE):.2f}" == "97.50"
    assert "96.94" not in base_row  # seed 0 alone is not what the table shows
    diffs = [100 * (a - b) for a, b in zip(PRUNED, BASE)]
    assert f"+{statistics.fmean(diffs):.2f}" in prune_row
    assert "over 3 seeds: the mean, its Student-t 95% interval" in table
    assert "paired t-test" in table and "exact McNemar" not in table
    low, high = stats.mean_interval(BASE)["ci"]
    assert f"{100 * low:.1f}-{100 * high:.1f}" in base_row


def test_seed_0_stays_in_the_json_and_the_test_of_the_means_is_beside_it():
    doc = report().document()
    base, pruned = doc["variants"]
    assert base["accuracy"] == BASE[0] and base["seeds"]["mean"] == pytest.approx(97.5e-2)
    assert pruned["accuracy"] == PRUNED[0]
    assert pruned["p_value_vs_baseline"] == stats.paired_bits(
        bits(round(PRUNED[0] * N_TEST)), bits(round(BASE[0] * N_TEST)), N_TEST)["p_value"]
    over = pruned["seeds_vs_baseline"]
    diffs = [100 * (a - b) for a, b in zip(PRUNED, BASE)]
    assert over["test"] == "paired t-test over seeds" and over["n"] == 3
    assert over["mean_difference_pts"] == pytest.approx(statistics.fmean(diffs))
    assert over["p_value"] == pytest.approx(stats.paired_t(diffs)["p_value"])
    assert "accuracy_seed" not in pruned["vs_baseline"]
    rows = report().rows()  # the CSV's rows: seed 0, with the seeds' figures beside
    assert rows[0]["accuracy"] == BASE[0] and rows[0]["accuracy_seed_n"] == 3


def test_the_accuracy_chart_and_the_page_table_show_the_mean():
    from benchmarks.report.figures import accuracy_chart
    rows = report().shown_rows()
    fig = accuracy_chart(rows)
    # A dot per variant (one trace per marker kind: the baseline, a finding, within noise).
    points = [(c[0], x, c[3]) for trace in fig.data if trace.customdata is not None
              for c, x in zip(trace.customdata, trace.x)]
    by_name = {name: x for name, x, _ in points}
    assert [by_name[r["variant"]] for r in rows] == pytest.approx(
        [100 * statistics.fmean(BASE), 100 * statistics.fmean(PRUNED)])
    assert "mean of 3 seeds" in fig.layout.title.text
    assert any("paired t over seeds" in note for _, _, note in points)
    assert rows[0]["accuracy_shows"] == "mean of 3 seeds" and rows[0]["accuracy_seed0"] == BASE[0]
    # One seed: the rows are as they were.
    single = RunReport(variants=[VariantResult.of("baseline", accuracy=0.9)], baseline="baseline")
    assert single.shown_rows() == single.rows() and "mean" not in single.table()


def test_cli_seeds_3_table_is_the_mean_over_seeds(tmp_path, cli):
    out = tmp_path / "r.json"
    p = cli("run", "--seeds", "3", *FAST_CLI, "--min-time", "0.02", "--store",
            str(tmp_path / "s.db"), "--json", str(out))
    assert p.returncode == 0, p.stderr
    base = json.loads(out.read_text())["variants"][0]
    row = next(line for line in p.stdout.splitlines() if line.startswith("baseline"))
    assert row.split()[2] == f"{100 * base['seeds']['mean']:.2f}"
    assert "acc % (mean of 3)" in p.stdout and "over 3 seeds" in p.stdout
    assert base["accuracy"] == base["seeds"]["accuracies"][0]  # seed 0 in the JSON


class SpikyClock(Clock):
    """A fake CPU clock: every call takes 1 ms but one in ten is preempted for 30 ms, and
    the scheduler takes the core for 5 ms between some calls (outside any sample)."""

    def __init__(self, spike_every=10, gap_every=7):
        self.now, self.calls = 0.0, 0
        self.spike_every, self.gap_every = spike_every, gap_every

    def start(self):
        if self.gap_every and self.calls % self.gap_every == self.gap_every - 1:
            self.now += 5.0
        return self.now

    def stop(self, token):
        self.calls += 1
        spike = self.spike_every and self.calls % self.spike_every == 0
        self.now += 30.0 if spike else 1.0
        return self.now - token

    def host_ms(self):
        return self.now


def timed(clock) -> VariantResult:
    tracker = LatencyTracker(min_runs=200, min_time_s=0.0, warmup=0, clock=clock)
    samples = tracker.run(lambda: None)
    return VariantResult.of("baseline", latency_samples_ms=samples, batch_size=32,
                            timed_calls=len(samples), timed_window_s=tracker.window_ms / 1e3)


def test_the_sustained_rate_sees_the_preemptions_the_median_dodges():
    spiky = timed(SpikyClock())
    assert spiky.timing.latency.p50 == pytest.approx(1.0)
    assert spiky.timing.throughput == pytest.approx(32_000)
    # 200 calls: 20 spikes of 30 ms, 180 of 1 ms, 28 gaps of 5 ms = 920 ms of window.
    assert spiky.timing.timed_window_s == pytest.approx(0.920)
    assert spiky.timing.throughput_sustained == pytest.approx(200 * 32 / 0.920)
    assert spiky.timing.contention is True
    quiet = timed(SpikyClock(spike_every=0, gap_every=0))
    assert quiet.timing.throughput_sustained == pytest.approx(quiet.timing.throughput)
    assert quiet.timing.contention is False and CONTENTION_FRACTION == 0.2
    doc = RunReport(variants=[spiky], baseline="baseline").document()["variants"][0]
    assert doc["throughput_sustained"] == pytest.approx(6956.5, rel=1e-3)
    assert doc["contention"] is True and doc["raw"]["timed_calls"] == 200
    assert VariantResult.from_dict(doc).timing.throughput_sustained == \
        spiky.timing.throughput_sustained
    table = RunReport(variants=[spiky], baseline="baseline").table()
    assert "6,957!" in table and "! on sust/s, contention" in table


def test_the_charts_hover_carries_both_rates():
    from benchmarks.report.figures import latency_chart
    rows = RunReport(variants=[timed(SpikyClock())], baseline="baseline").rows()
    hover = latency_chart(rows).data[0].customdata[0][6]
    assert hover == "32,000 samples/s at the median call, 6,957 sustained (contention!)"
