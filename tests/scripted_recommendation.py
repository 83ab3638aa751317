"""A recommendation made from hand-made bits and timing rounds, certified and stored by the
product's own code (``sequence.pick``, ``certificate.certify``, the store), as a run of the
embedded digits: what the pages' tests open without a search of minutes. ``certifies``
chooses whether its candidates pass."""

from __future__ import annotations

from dataclasses import asdict

N = 360  # digits' test examples


def _variant(name, bits, rounds, techniques=("int8",)):
    from benchmarks.report.results import VariantResult
    from benchmarks.report.stats import pack_bits, pack_labels
    return VariantResult.of(
        name=name, techniques=list(techniques), correct_bits=pack_bits(bits), n_test=N,
        accuracy=sum(bits) / N, latency_samples_ms=[x + 0.001 * k for x in rounds
                                                    for k in range(8)],
        round_p50_ms=list(rounds), batch_size=32, size_bytes=400_000 // (2 if techniques
                                                                            else 1),
        predictions=pack_labels([i % 10 for i in range(N)]),
        timing={"method": "interleaved", "rounds": len(rounds)})


def store_recommendation(store_path, owner: str, certifies: bool) -> str:
    """A stored, complete recommendation run owned by ``owner`` (signed as the server
    would): a baseline and two candidates faster than it beyond noise, lossless on the
    certify split where ``certifies``, else losing nine certify images each (beyond a 2-point
    margin on 180). Returns its run id."""
    from benchmarks.recommend.certificate import SEARCH_ORDER, certify, order_by_search
    from benchmarks.recommend.procedures import SHIPPED
    from benchmarks.recommend.request import RecommendRequest
    from benchmarks.recommend.search import TrialRecord
    from benchmarks.recommend.sequence import pick
    from benchmarks.recommend.space import search_space
    from benchmarks.recommend.split import accuracy_at, make_split
    from benchmarks.report.answer import PAIRED, objective_ratio
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.spec.variant import VariantSpec
    from benchmarks.store.database import ResultsStore
    from helpers import signed
    split = make_split(N, 0, 0.5)
    base_bits = [True] * 340 + [False] * 20
    lossy = list(base_bits)
    for i in list(split.certify)[:9]:
        lossy[i] = False
    bits = base_bits if certifies else lossy
    base = _variant("baseline", base_bits, [4.0, 4.1, 3.9, 4.0, 4.05, 3.95], ())
    specs = {"int8-static-cal8": VariantSpec.from_dict(
                 {"name": "int8-static-cal8", "techniques": ["int8"],
                  "settings": {"int8": {"mode": "static", "calibration_batches": 8}}}),
             "distill-T4-a0.7": VariantSpec.from_dict(
                 {"name": "distill-T4-a0.7", "techniques": ["distill"],
                  "settings": {"distill": {"temperature": 4.0, "alpha": 0.7}}})}
    results = {"int8-static-cal8": _variant("int8-static-cal8", bits,
                                            [1.6, 1.62, 1.58, 1.6, 1.61, 1.59]),
               "distill-T4-a0.7": _variant("distill-T4-a0.7", bits,
                                           [0.4, 0.41, 0.39, 0.4, 0.405, 0.395],
                                           ("distill",))}
    request = RecommendRequest(within="2pt", trials=2)
    base_acc = accuracy_at(base.scores.correct_bits, N, split.search)
    trials = []
    for i, (name, r) in enumerate(results.items()):
        ratio, ci = objective_ratio(r, base, "p50")
        acc = accuracy_at(r.scores.correct_bits, N, split.search)
        trials.append(TrialRecord(i, name, specs[name].stable_hash(), specs[name].to_dict(),
                                  {}, state="complete", search_accuracy=acc,
                                  search_change_pts=100 * (acc - base_acc), ratio=ratio,
                                  ratio_ci=ci, feasible=True, front=True, improved=True,
                                  seconds=3.0))
    chosen, not_faster = pick(trials, results, base, split, 2.0, request)
    cert = certify(order_by_search(chosen), results, base, split, margin_pts=2.0,
                   margin="2pt", confidence=0.95, objective="p50", procedure=SHIPPED,
                   order_basis=SEARCH_ORDER, not_faster=not_faster, min_speedup=1.1,
                   statistic=PAIRED, smallest_margin_pts=1.67)
    spec = SweepSpec(model="seed_cnn", dataset="digits", epochs=1)
    space = search_space({}, ("int8", "distill"))
    won = next((t for t in trials if t.name == cert.winner), None)
    block = {"schema": 1, "request": request.to_dict(), "margin_pts": 2.0,
             "space": space.to_dict(), "split": split.to_dict(), "context": "scripted",
             "search": {"trials": [asdict(t) for t in trials], "waves": [],
                        "ended": "2 trials, as asked", "sampler": {}, "seconds": 6.0},
             "certificate": cert.to_dict(), "references": {}, "final_timing": True,
             "timing_from": None, "stopped": None, "seconds": 9.0, "setup_s": 2.0,
             "budget_s": None,
             "recipe": None if won is None else {
                 "command": f"compression-bench run --epochs 1 --{won.name.split('-')[0]}",
                 "runtime": "eager", "spec": {**spec.to_dict(), "variants": [
                     {"name": "baseline", "techniques": []}, won.variant]}}}
    store = ResultsStore(store_path)
    run_spec = {**spec.to_dict(), "recommend": request.to_dict()}
    run_id = store.start_run(model="seed_cnn", dataset="digits", device="cpu", spec=run_spec,
                             environment={"threads": 1, "split": split.card()},
                             **signed(store_path, owner))
    store.add_variant(run_id, base.to_dict())
    for r in results.values():
        store.add_variant(run_id, r.to_dict())
    store.set_recommendation(run_id, block)
    store.finish_run(run_id, "complete")
    return run_id
