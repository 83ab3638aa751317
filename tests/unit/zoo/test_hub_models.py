"""torchvision and timm models: built for the data set from scratch, or from pretrained files
the tests fabricate in temporary caches (no network): loaded as data, the head kept or
replaced, grey images adapted, an absent file refused in one line naming it and its folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from benchmarks.zoo.hub import torch_hub_dir
from benchmarks.zoo.models import build_model, check_input_fits, model_source
from helpers import torchvision_weights_file

TV = "torchvision:mobilenet_v3_small"


@pytest.fixture
def torch_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    return tmp_path / "torch"


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Path:
    from huggingface_hub import constants
    cache = tmp_path / "hf" / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def fabricate_torchvision(spec: str, weights: str = "DEFAULT") -> tuple[Path, dict]:
    """A state dict of the right shapes where torch hub keeps the weights' file."""
    target, state = torchvision_weights_file(torch_hub_dir().parent, spec.split(":", 1)[1],
                                             weights)
    assert model_source(spec).weights_file(spec, weights) == target  # the engine finds it
    return target, state


def fabricate_timm(cache: Path, name: str = "resnet18") -> dict:
    """A safetensors file where the Hugging Face cache keeps the default tag's weights."""
    import timm
    from safetensors.torch import save_file
    torch.manual_seed(2)
    state = {k: v.contiguous() for k, v in timm.create_model(name).state_dict().items()}
    repo = timm.models.get_pretrained_cfg(name).hf_hub_id
    folder = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / "main"
    folder.mkdir(parents=True)
    save_file(state, str(folder / "model.safetensors"))
    return state


def test_torch_hub_dir_is_torchs_own(torch_home):
    assert torch_hub_dir() == Path(torch.hub.get_dir())


@pytest.mark.parametrize("spec, shape", [
    ("torchvision:mobilenet_v3_small", (1, 8, 8)),
    ("torchvision:squeezenet1_1", (3, 32, 32)),
    ("torchvision:vit_b_32", (3, 32, 32)),
    ("torchvision:googlenet", (3, 32, 32)),
    ("timm:resnet18", (1, 32, 32)),
    ("timm:deit_tiny_patch16_224", (3, 32, 32)),
])
def test_built_from_scratch_for_the_data_set(spec, shape):
    c, h, w = shape
    model = build_model(spec, 7, c, (h, w))
    check_input_fits(model, torch.randn(2, c, h, w), 7, spec)
    model.train()
    out = model(torch.randn(2, c, h, w))  # training returns plain logits (no aux heads)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 7)


def test_torchvision_weights_kept_head(torch_home):
    _, state = fabricate_torchvision(TV)
    model = build_model(TV, 1000, 3, (224, 224), weights="DEFAULT", keep_head=True)
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_torchvision_weights_new_head_and_grey_images(torch_home):
    _, state = fabricate_torchvision(TV, "IMAGENET1K_V1")
    model = build_model(TV, 5, 1, (64, 64), weights="IMAGENET1K_V1")
    assert model.classifier[-1].out_features == 5
    # The stem sums its colour filters for one channel, as timm's adapt_input_conv does.
    assert torch.allclose(model.features[0][0].weight,
                          state["features.0.0.weight"].sum(dim=1, keepdim=True))
    assert torch.equal(model.features[1].block[0][0].weight,
                       state["features.1.block.0.0.weight"])
    check_input_fits(model, torch.randn(2, 1, 64, 64), 5, TV)


def test_vit_weights_at_another_resolution_interpolate_positions(torch_home):
    spec = "torchvision:vit_b_32"
    fabricate_torchvision(spec)
    model = build_model(spec, 1000, 3, (64, 64), weights="DEFAULT", keep_head=True)
    assert model.encoder.pos_embedding.shape == (1, 1 + (64 // 32) ** 2, 768)
    check_input_fits(model, torch.randn(2, 3, 64, 64), 1000, spec)


def test_kept_head_needs_the_weights_classes(torch_home):
    fabricate_torchvision(TV)
    with pytest.raises(ValueError, match="emit 1000 classes but the data set has 10"):
        build_model(TV, 10, 3, (32, 32), weights="DEFAULT", keep_head=True)


def test_absent_weights_name_the_file_and_folder(torch_home, hf_cache):
    with pytest.raises(ValueError) as err:
        build_model(TV, 10, 3, (32, 32), weights="DEFAULT")
    message = str(err.value)
    assert "\n" not in message
    assert "mobilenet_v3_small-047dcff4.pth" in message
    assert str(torch_home / "hub" / "checkpoints") in message
    with pytest.raises(ValueError) as err:
        build_model("timm:resnet18", 10, 3, (32, 32), weights="pretrained")
    assert "model.safetensors" in str(err.value)
    assert str(hf_cache / "models--timm--resnet18.a1_in1k" / "snapshots" / "main") in \
        str(err.value)


def test_weights_that_carry_code_are_refused(torch_home):
    target, _ = fabricate_torchvision(TV)

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    torch.save({"features.0.0.weight": Boom()}, target)
    with pytest.raises(ValueError, match="carries pickled code, which is refused"):
        build_model(TV, 1000, 3, (32, 32), weights="DEFAULT", keep_head=True)


def test_timm_weights_from_the_hugging_face_cache(hf_cache):
    state = fabricate_timm(hf_cache)
    kept = build_model("timm:resnet18", 1000, 3, (224, 224), weights="pretrained",
                       keep_head=True)
    assert torch.equal(kept.fc.weight, state["fc.weight"])
    replaced = build_model("timm:resnet18", 3, 1, (32, 32), weights="pretrained")
    assert replaced.fc.out_features == 3
    assert torch.equal(replaced.layer1[0].conv1.weight, state["layer1.0.conv1.weight"])
    assert replaced.conv1.weight.shape[1] == 1


def test_the_weights_pipeline_is_their_transforms():
    tv = model_source("torchvision:resnet50").pipeline("torchvision:resnet50", "DEFAULT")
    assert (tv.size, tv.resize, tv.interpolation) == ((224, 224), 232, "bilinear")
    assert tv.origin == "torchvision IMAGENET1K_V2 transforms"
    assert tv.normalize() == "0.485:0.456:0.406,0.229:0.224:0.225"
    tm = model_source("timm:resnet18").pipeline("timm:resnet18", "pretrained")
    assert (tm.size, tm.resize, tm.interpolation) == ((224, 224), 235, "bicubic")  # crop 0.95
    smaller = tv.at((112, 112))
    assert smaller.size == (112, 112) and smaller.resize == 116  # the same crop fraction
