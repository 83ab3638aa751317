"""The job-kind registry (issue 33.1): the product's five kinds each registered once, a name
taken twice refused, an unknown kind and an unimportable kinds module each said in one line,
and the queue refusing a kind nobody registered before anything is stored."""

from __future__ import annotations

import pytest

from benchmarks.service import kinds
from benchmarks.service.kinds import JobKind


def test_the_products_kinds_are_registered_each_from_its_own_module():
    assert {"sweep", "distributed", "export", "recommend", "sensitivity"} <= set(kinds.names())
    for name in kinds.BUILTIN:
        kind = kinds.get(name)
        assert kind.run.__module__ == f"benchmarks.service.kinds.{name}"
        assert kind.description
    assert [k.name for k in kinds.kinds() if k.shared_with_link] == ["export"]
    from benchmarks.spec.sweep import SweepSpec
    spec = kinds.get("sweep").parse(SweepSpec(model="seed_cnn").to_dict())  # its own config
    assert spec.model == "seed_cnn" and kinds.get("export").parse({"a": 1}) == {"a": 1}


def test_a_name_is_taken_once_and_an_unknown_one_is_named_with_the_registered_ones():
    with pytest.raises(ValueError, match="'sweep' is registered already"):
        kinds.register(JobKind(name="sweep", description="another", run=lambda w, j: None))
    with pytest.raises(ValueError, match="letters, digits"):
        kinds.register(JobKind(name="two words", description="", run=lambda w, j: None))
    with pytest.raises(kinds.UnknownKind) as unknown:
        kinds.get("lm-finetune")
    line = str(unknown.value)
    assert "\n" not in line and "'lm-finetune'" in line and "export, lm, recommend" in line


def test_a_kinds_module_that_cannot_be_imported_is_said_in_one_line(monkeypatch):
    monkeypatch.setenv(kinds.EXTRA_KINDS_ENV, "no_such_kinds_module")
    with pytest.raises(ValueError, match="COMPRESSION_BENCH_KIND_MODULES names "
                                         "'no_such_kinds_module', which cannot be imported"):
        kinds.names()


def test_the_queue_takes_only_registered_kinds(tmp_path):
    from benchmarks.service.queue import JobQueue
    queue = JobQueue(tmp_path / "s.db")
    with pytest.raises(ValueError, match="'lm-finetune' is not registered"):
        queue.submit("lm-finetune", {}, session="a")
    assert queue.jobs() == []
