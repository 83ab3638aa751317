"""The torchvision and timm catalogues: the committed name list matches the installed
libraries, default students are smaller siblings, and ImageNet ids map to class indices."""

from __future__ import annotations

import json

import pytest

from benchmarks.zoo import catalogue
from benchmarks.zoo.models import build_model, check_model, default_student, model_source


def test_the_committed_catalogue_is_the_installed_libraries():
    assert json.loads(catalogue.CATALOGUE_FILE.read_text()) == \
        json.loads(json.dumps(catalogue.generate()))


def test_torchvision_classification_models_are_all_listed():
    import torchvision
    assert catalogue.names("torchvision") == sorted(
        torchvision.models.list_models(module=torchvision.models))
    assert "resnet50" in catalogue.names("torchvision")
    assert "fasterrcnn_resnet50_fpn" not in catalogue.names("torchvision")  # detection
    assert catalogue.weight_names("torchvision", "resnet50") == [
        "DEFAULT", "IMAGENET1K_V1", "IMAGENET1K_V2"]
    assert catalogue.weight_names("timm", "resnet18") == ["pretrained"]


@pytest.mark.parametrize("teacher, student", [
    ("torchvision:resnet50", "torchvision:resnet18"),
    ("torchvision:efficientnet_b2", "torchvision:efficientnet_b0"),
    ("torchvision:mobilenet_v3_large", "torchvision:mobilenet_v3_small"),
    ("torchvision:convnext_small", "torchvision:convnext_tiny"),
    ("torchvision:vit_b_16", "timm:vit_small_patch16_224"),
    ("torchvision:swin_b", "torchvision:swin_t"),
    ("timm:resnet50", "timm:resnet18"),
    ("timm:vit_base_patch16_224", "timm:vit_small_patch16_224"),
    ("timm:efficientnet_b3", "timm:efficientnet_b0"),
    ("timm:convnext_small", "timm:convnext_tiny"),
    ("timm:mobilenetv3_large_100", "timm:mobilenetv3_small_100"),
    ("resnet18", "resnet10"),
])
def test_default_students_are_smaller_siblings(teacher, student):
    assert default_student(teacher) == student
    check_model(student)
    size = (224, 224) if "vit" in teacher else (32, 32)
    params = [sum(p.numel() for p in build_model(m, 10, 3, size).parameters())
              for m in (teacher, student)]
    assert params[1] < params[0]


@pytest.mark.parametrize("model", ["torchvision:maxvit_t", "torchvision:resnet18",
                                   "timm:resnet18", "mlp_small"])
def test_no_obvious_sibling_means_no_default(model):
    assert default_student(model) is None


def test_every_default_student_is_a_model():
    for source in catalogue.SOURCES:
        for name in catalogue.names(source):
            student = default_student(f"{source}:{name}")
            if student is not None:
                check_model(student)
                assert student != f"{source}:{name}"


def test_unknown_names_suggest_the_closest():
    with pytest.raises(ValueError, match=r"torchvision has no classification model 'resnt50'; "
                                         r"did you mean torchvision:resnet50"):
        check_model("torchvision:resnt50")
    with pytest.raises(ValueError, match=r"--weights 'DEFAULT' is not offered for timm:resnet18; "
                                         r"accepted: pretrained"):
        model_source("timm:resnet18").check_weights("timm:resnet18", "DEFAULT")


def test_imagenet_ids_are_the_1000_class_indices():
    from benchmarks.zoo.inputs import imagenet_class_index
    index = imagenet_class_index()
    assert len(index) == 1000
    assert index["n01440764"] == 0 and index["n01443537"] == 1  # tench, goldfish
    assert sorted(index.values()) == list(range(1000))
