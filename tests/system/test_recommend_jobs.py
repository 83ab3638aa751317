"""A recommendation as a queue job, in the real worker process: it runs to a stored,
certified run; cancelled mid-search (the same stop check as every job kind), it certifies
what it found and says so."""

from __future__ import annotations

from benchmarks.recommend.job import from_payload, payload
from benchmarks.recommend.request import RecommendRequest
from benchmarks.spec.sweep import SweepSpec
from helpers import FAST, finished_job, wait_until

SPEC = SweepSpec(**{**FAST, "epochs": 2})


def test_a_recommend_job_completes_and_a_cancelled_one_certifies_what_it_found(queue):
    done = payload(SPEC, RecommendRequest(within="3pt", trials=2),
                   {("int8", "mode"): ("dynamic", "static"),
                    ("int8", "calibration_batches"): 8}, {"int8"})
    request, spec, space = from_payload(done)  # the payload reads back as it was made
    assert request.within == "3pt" and spec.epochs == 2 and space.chains == ("int8",)
    long = payload(SPEC, RecommendRequest(within="3pt", trials=60),
                   {("prune", "ratio"): tuple(i / 20 for i in range(2, 19)),
                    ("prune", "finetune_epochs"): 0}, {"prune"})
    first = queue.submit("recommend", done, session="a")
    second = queue.submit("recommend", long, session="a")
    queue.ensure_worker("cpu")
    job = finished_job(queue, first, timeout=300)
    assert job.status == "complete", job.error
    run = queue.store.run(job.run_id)
    rec = run["recommendation"]
    assert run["status"] == "complete" and rec["certificate"]["winner"] == "int8-static"
    assert run["environment"]["split"]["certify_size"] == 180
    assert rec["recipe"]["spec"]["variants"][1]["name"] == "int8-static"

    # The second: cancelled once two trials are in, it stops and certifies those.
    wait_until(lambda: (j := queue.get(second)).run_id and queue.store.variant_count(
        j.run_id) >= 3, 300, "the second job's first two trials", every=0.2)
    assert queue.cancel(second)
    job = finished_job(queue, second, timeout=120)
    run = queue.store.run(job.run_id)
    rec = run["recommendation"]
    assert job.status == "cancelled" and run["status"] == "interrupted"
    assert rec["stopped"] == "cancelled" and not rec["final_timing"]
    assert 2 <= sum(t["state"] == "complete" for t in rec["search"]["trials"]) < 60
