"""Context is made of parts; flat names still build one, and a chain moves it on."""
import dataclasses

import pytest
import torch

from optimizers.base import Budget, Context, Data, Hooks, Lineage, Step, Teaching, TrainData


def _data() -> dict:
    x = torch.randn(4, 1, 8, 8)
    return dict(train=TrainData(x, torch.zeros(4, dtype=torch.long)), example_input=x,
                num_classes=3, in_channels=1)


def test_flat_names_land_in_their_parts():
    teacher = torch.nn.Linear(2, 2)
    ctx = Context.of(**_data(), device=torch.device("cpu"), epochs=3, lr=0.5, seed=7,
                     train_amp="fp16", teacher=teacher, default_student="s",
                     base_key=("m",), shared={})
    assert ctx.data.num_classes == 3 and ctx.data.in_channels == 1
    assert ctx.budget == Budget(epochs=3, lr=0.5, seed=7, amp="fp16")
    assert ctx.teaching.teacher is teacher and ctx.teaching.default_student == "s"
    assert ctx.lineage == Lineage(base_key=("m",))
    assert ctx.hooks.shared == {} and ctx.hooks.cached is None


def test_every_part_field_has_a_flat_name():
    # A field added to a part is reachable from Context.of without another list to keep.
    for part in (Data, Budget, Teaching, Lineage, Hooks):
        for f in dataclasses.fields(part):
            flat = "train_amp" if (part, f.name) == (Budget, "amp") else f.name
            value = _data()[flat] if part is Data else f.default
            assert Context.of(**{**_data(), flat: value}) is not None


def test_an_unknown_name_is_refused_with_the_accepted_ones():
    with pytest.raises(TypeError, match=r"no field 'epoch'.*epochs.*example_input"):
        Context.of(**_data(), epoch=2)


def test_a_chain_step_extends_the_key_and_the_prior_steps_only_of_the_new_context():
    ctx = Context.of(**_data(), base_key=("m",))
    step = Step("prune", None, {"prune": {}})
    nxt = ctx.then(step, torch.device("cpu"), ("prune", "{}"))
    assert nxt.lineage.base_key == ("m", "prune", "{}") and nxt.after("prune") is step
    assert nxt.lineage.model_device == torch.device("cpu")
    assert ctx.lineage == Lineage(base_key=("m",)) and ctx.after("prune") is None
    taught = ctx.taught_by(torch.nn.Identity())
    assert isinstance(taught.teaching.teacher, torch.nn.Identity) and ctx.teaching.teacher is None


def test_budget_amp_is_part_of_the_cache_key():
    keys = []
    for amp in (None, "fp16"):
        ctx = Context.of(**_data(), base_key=("m",), train_amp=amp,
                         cached=lambda key, build, train: keys.append(key) or build())
        ctx.train_cached(("step",), lambda: torch.nn.Identity(), lambda m, e: None)
    assert keys == [("m", "step"), ("m", "step", "train_amp", "fp16")]
