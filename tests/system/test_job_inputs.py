"""Every job kind applies the operator's folders in the worker (issue "a server that trusts
nothing the worker writes", item 6), through the real queue and its worker: ``lm`` and
``distributed`` payloads naming files outside the folders (an ``hf:`` folder outside the
models folder, ``text:/etc/shadow``, a model file elsewhere, a data root elsewhere), and an
export of a run whose data lies elsewhere, end failed in one line naming the rule, and
nothing outside was read or run; a payload that is not a JSON object fails its job in one
line, and the worker goes on to the next job."""

from __future__ import annotations

import json
import sqlite3

import pytest

from benchmarks.service.queue import decoded_payload
from helpers import finished_jobs

pytestmark = pytest.mark.slow


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """The operator's models and data folders (empty), and a place outside both."""
    models, data, outside = tmp_path / "models", tmp_path / "data", tmp_path / "outside"
    for folder in (models, data, outside):
        folder.mkdir()
    monkeypatch.setenv("COMPRESSION_BENCH_MODELS_DIR", str(models))
    monkeypatch.setenv("COMPRESSION_BENCH_DATA_DIR", str(data))
    return models, data, outside


def lm_payload(model: str, dataset: str) -> dict:
    return {"sweep": {"model": model, "dataset": dataset, "device": "cpu",
                      "variants": [{"name": "baseline", "techniques": [], "settings": {}}]},
            "lm": {"window": 32, "prompt_tokens": 8, "new_tokens": 4, "max_windows": 6}}


def test_lm_and_distributed_jobs_read_only_inside_the_operators_folders(queue, folders):
    models, data, outside = folders
    # A Hugging Face folder outside the models folder, whole enough to load, and a model
    # file outside it that would leave a mark if it ran.
    hf = outside / "tiny"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "llama",
                                                "max_position_embeddings": 64}))
    (hf / "model.safetensors").write_bytes(b"\0" * 16)
    mark = outside / "ran"
    (outside / "net.py").write_text(f"open({str(mark)!r}, 'w').write('ran')\n"
                                    "def build(classes, channels):\n    raise SystemExit\n")
    (outside / "words.txt").write_text("the text outside the data folder " * 500)
    jobs = {
        "hf outside": ("lm", lm_payload(f"hf:{hf}", "text"), "models folder"),
        "hf climbing out": ("lm", lm_payload(f"hf:{models}/../outside/tiny", "text"),
                            "models folder"),
        "shadow": ("lm", lm_payload("tiny-lm", "text:/etc/shadow"), "data folder"),
        "text outside": ("lm", lm_payload("tiny-lm", f"text:{outside / 'words.txt'}"),
                         "data folder"),
        "model file": ("distributed", {"model": f"{outside / 'net.py'}:build",
                                       "dataset": "digits", "workers": [1], "steps": 4,
                                       "device": "cpu"}, "models folder"),
        "data root": ("distributed", {"model": "seed_cnn", "dataset": "cifar10",
                                      "data_root": "/etc", "workers": [1], "steps": 4,
                                      "device": "cpu"}, "data folder"),
        "image folder": ("distributed", {"model": "seed_cnn", "dataset": f"imagefolder:"
                                         f"{outside}", "workers": [1], "steps": 4,
                                         "device": "cpu"}, "data folder"),
    }
    ids = {name: queue.submit(kind, payload, session=name)  # a session each: under the cap
           for name, (kind, payload, _) in jobs.items()}
    # An export of a stored run (a CLI run's: its spec is whatever its maker typed) whose
    # data lies outside the data folder: rebuilding it would read that data.
    from benchmarks.report.results import VariantResult
    run_id = queue.store.start_run(
        model="mlp", dataset=f"imagefolder:{outside}", device="cpu", environment={},
        spec={"model": "mlp", "dataset": f"imagefolder:{outside}", "device": "cpu",
              "variants": [{"name": "baseline", "techniques": [], "settings": {}}]})
    queue.store.add_variant(run_id, VariantResult.of(name="baseline", accuracy=0.5).to_dict())
    queue.store.finish_run(run_id, "complete")
    jobs["export"] = ("export", {}, "data folder")
    ids["export"] = queue.submit("export", {"run_id": run_id, "variant": "baseline"},
                                 session="export", admin=True)
    queue.ensure_worker("cpu")
    done = dict(zip(ids, finished_jobs(queue, list(ids.values()), timeout=240)))
    for name, (_, _, where) in jobs.items():
        job = done[name]
        assert job.status == "failed", (name, job.status, job.error)
        assert "\n" not in job.error and f"inside the server's {where}" in job.error, \
            (name, job.error)
        assert job.run_id is None, name  # refused before a run was stored
    assert not mark.exists()  # the model file outside was never imported


def test_a_payload_that_is_not_a_json_object_fails_its_job_in_one_line(queue, store_path):
    ids = [queue.submit("distributed", {"model": "seed_cnn"}, session="a") for _ in range(2)]
    follow = queue.submit("distributed", {"model": "no_such_model", "workers": [1]},
                          session="a")
    # Written around the server, as job code or a hand in the store would.
    with sqlite3.connect(store_path) as db:
        db.execute("UPDATE jobs SET payload=? WHERE job_id=?", ("{not json", ids[0]))
        db.execute("UPDATE jobs SET payload=? WHERE job_id=?", ("[1, 2]", ids[1]))
    assert [j.job_id for j in queue.jobs(session="a")] == [follow, *ids[::-1]]  # still listed
    queue.ensure_worker("cpu")
    broken, listed, after = finished_jobs(queue, [*ids, follow], timeout=180)
    assert broken.status == listed.status == "failed"
    assert broken.error.startswith("invalid input: the job's payload is not JSON")
    assert listed.error.startswith("invalid input: the job's payload is a JSON list, not an "
                                   "object")
    assert all("\n" not in j.error for j in (broken, listed))
    # The worker went on: the next job ran (and failed on its own input).
    assert after.status == "failed" and "no_such_model" in after.error
    assert queue.worker_alive("cpu")


def test_decoding_a_stored_payload():
    assert decoded_payload('{"a": 1}') == ({"a": 1}, None)
    assert decoded_payload("") [1].startswith("the job's payload is not JSON")
    assert decoded_payload(None)[1].startswith("the job's payload is not JSON")
    assert decoded_payload('"x"')[1] == ("the job's payload is a JSON str, not an object; "
                                         "queue the job again")
