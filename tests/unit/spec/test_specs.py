import pytest

from benchmarks.spec.sweep import SweepSpec
from benchmarks.spec.variant import BASELINE, VariantSpec
from optimizers.settings import AmpSettings, DistillSettings, Int8Settings, PruneSettings


@pytest.mark.parametrize("make, field", [
    (lambda: PruneSettings(ratio=0.96), "prune.ratio"),
    (lambda: PruneSettings(ratio=-0.1), "prune.ratio"),
    (lambda: PruneSettings(ratio=float("nan")), "prune.ratio"),
    (lambda: PruneSettings(method="random"), "prune.method"),
    (lambda: DistillSettings(temperature=0), "distill.temperature"),
    (lambda: DistillSettings(temperature=-1), "distill.temperature"),
    (lambda: DistillSettings(alpha=1.5), "distill.alpha"),
    (lambda: AmpSettings(dtype="fp8"), "amp.dtype"),
    (lambda: Int8Settings(mode="int4"), "int8.mode"),
    (lambda: SweepSpec(batch_size=0), "sweep.batch_size"),
    (lambda: SweepSpec(epochs=-1), "sweep.epochs"),
    (lambda: SweepSpec(dataset="imagefolder:x", labels="coco"), "sweep.labels"),
    (lambda: SweepSpec(device="tpu"), "sweep.device"),
    (lambda: SweepSpec(input_shape=(3, 0, 8)), "sweep.input_shape"),
])
def test_bad_settings_name_the_field(make, field):
    with pytest.raises(ValueError) as err:
        make()
    message = str(err.value)
    assert message.startswith(field)
    assert "\n" not in message


def test_messages_list_accepted_values():
    with pytest.raises(ValueError, match=r"l1, global, channel \(a language model: magnitude, "
                                         r"wanda, magnitude-2:4, wanda-2:4\); got 'random'"):
        PruneSettings(method="random")


def test_from_toggles_builds_one_variant_per_technique_plus_control_and_combination():
    spec = SweepSpec.from_toggles(prune=0.5, distill=True, temperature=4, amp=True,
                                  int8="static", combine=True)
    names = [v.name for v in spec.variants]
    assert names[0] == "baseline" and spec.variants[0].techniques == ()
    assert "student-scratch" in names
    combined = spec.variants[-1]
    assert combined.techniques == ("prune", "distill", "int8", "amp")
    assert len(spec.variants) == 7


def test_combine_needs_two_techniques():
    with pytest.raises(ValueError, match="combine needs at least two"):
        SweepSpec.from_toggles(prune=0.5, combine=True)


def test_variant_order_and_settings_are_checked():
    with pytest.raises(ValueError, match="no prune settings"):
        VariantSpec("p", ("prune",))
    with pytest.raises(ValueError, match="order"):
        VariantSpec("x", ("int8", "prune"), prune=PruneSettings(), int8=Int8Settings())


def test_stable_hash_depends_on_settings_only():
    a = VariantSpec("a", ("prune",), prune=PruneSettings(0.5))
    b = VariantSpec("b", ("prune",), prune=PruneSettings(0.5))
    c = VariantSpec("c", ("prune",), prune=PruneSettings(0.6))
    assert a.stable_hash() == b.stable_hash() != c.stable_hash()
    assert BASELINE.stable_hash() == VariantSpec("baseline").stable_hash()


def test_sweep_round_trips_through_dict():
    spec = SweepSpec.from_toggles(prune=0.3, prune_method="channel", distill=True, amp="bf16",
                                  int8="dynamic", combine=True, input_shape=(1, 8, 8))
    assert SweepSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize("fields, message", [
    ({"model": "seed_cnn", "weights": "DEFAULT"},
     "--weights applies to torchvision:NAME and timm:NAME models; seed_cnn takes its weights "
     "from --checkpoint"),
    ({"model": "timm:resnet18", "weights": "pretrained", "checkpoint": "w.pt"},
     "give --weights or --checkpoint, not both"),
    ({"model": "torchvision:resnet18", "labels": "imagenet"},
     "--labels imagenet reads an image folder's class folders; the dataset is digits"),
])
def test_weights_and_labels_are_checked_with_the_model_and_data(fields, message):
    with pytest.raises(ValueError, match=message):
        SweepSpec(**fields)


def test_epochs_zero_and_pretrained_fields_round_trip():
    spec = SweepSpec(model="torchvision:resnet50", weights="DEFAULT", labels="imagenet",
                     dataset="imagefolder:/data", epochs=0)
    assert SweepSpec.from_dict(spec.to_dict()) == spec
    # A document written before these fields existed still reads.
    old = {k: v for k, v in SweepSpec().to_dict().items() if k not in ("weights", "labels")}
    assert SweepSpec.from_dict(old) == SweepSpec()
