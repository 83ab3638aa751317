"""The torchvision and timm catalogues as the menus see them: names, families, weights.

``catalogue.json`` beside this module is generated once from the installed libraries
(``make catalogue``, i.e. ``python -m tools.catalogue``) and read here without importing
torch, torchvision or timm, so the dashboard's model picker lists 1,400 models in
milliseconds. ``tests/unit/zoo/test_catalogue.py`` regenerates it and finds it equal to the
committed file for the pinned versions.

The default students live here too, as rules over those names (torch-free): a model's student
is its obvious smaller sibling in the same family, or None, and the run then asks for
``--student``.
"""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from pathlib import Path

CATALOGUE_FILE = Path(__file__).with_name("catalogue.json")
SOURCES = ("torchvision", "timm")
# timm's weights are one pretrained tag per name: ``--weights pretrained`` loads the default
# tag (``timm:resnet18.a1_in1k`` picks another).
TIMM_WEIGHTS = "pretrained"


@lru_cache(maxsize=1)
def catalogue() -> dict:
    """{"versions": {...}, "torchvision": {name: entry}, "timm": {name: entry}}. An entry is
    {"family", "weights": [names]}; torchvision's add "default" (what DEFAULT means) and
    "urls" (weights name -> its file's URL); timm's with weights add "hf_hub_id" (the default
    tag's repository) and "hf_hub_filename" (None: timm's usual file names)."""
    return json.loads(CATALOGUE_FILE.read_text())


def names(source: str) -> list[str]:
    return sorted(catalogue()[source])


def entry(source: str, name: str) -> dict | None:
    """The catalogue's entry for ``name``; a timm name with a pretrained tag
    (``resnet18.a1_in1k``) is looked up by its architecture."""
    table = catalogue()[source]
    if name in table:
        return table[name]
    if source == "timm" and "." in name:
        return table.get(name.split(".", 1)[0])
    return None


def check_name(source: str, name: str) -> None:
    """ValueError naming the closest catalogue names when ``name`` is not one of them."""
    if entry(source, name) is not None:
        return
    close = difflib.get_close_matches(name, names(source), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(f'{source}:{c}' for c in close)}?" if close else \
        f"; see `python -m benchmarks list` ({len(catalogue()[source])} {source} models)"
    raise ValueError(f"{source} has no classification model {name!r}{hint}")


def weight_names(source: str, name: str) -> list[str]:
    found = entry(source, name)
    if found is None:
        return []
    if source == "torchvision" and found["weights"]:
        return ["DEFAULT", *found["weights"]]
    return list(found["weights"])


def check_weights(source: str, name: str, weights: str) -> None:
    accepted = weight_names(source, name)
    if weights not in accepted:
        raise ValueError(f"--weights {weights!r} is not offered for {source}:{name}; "
                         f"accepted: {', '.join(accepted) or 'none (it has no pretrained weights)'}")


# -- default students ------------------------------------------------------------------------
# torchvision: the obvious smaller sibling of each family, by hand (80 names).
TORCHVISION_STUDENTS = (
    (r"resnet(34|50|101|152)", "resnet18"),
    (r"resnext101_.*", "resnext50_32x4d"),
    (r"resnext50_32x4d", "resnet18"),
    (r"wide_resnet(50|101)_2", "resnet18"),
    (r"efficientnet_b[1-7]", "efficientnet_b0"),
    (r"efficientnet_v2_[ml]", "efficientnet_v2_s"),
    (r"efficientnet_v2_s", "efficientnet_b0"),
    (r"mobilenet_v3_large|mobilenet_v2", "mobilenet_v3_small"),
    (r"convnext_(small|base|large)", "convnext_tiny"),
    (r"densenet(161|169|201)", "densenet121"),
    (r"regnet_x_(?!400mf).*", "regnet_x_400mf"),
    (r"regnet_y_(?!400mf).*", "regnet_y_400mf"),
    (r"shufflenet_v2_x(1_0|1_5|2_0)", "shufflenet_v2_x0_5"),
    (r"squeezenet1_0", "squeezenet1_1"),
    (r"mnasnet(0_75|1_0|1_3)", "mnasnet0_5"),
    (r"vgg(13|16|19)", "vgg11"),
    (r"vgg(13|16|19)_bn", "vgg11_bn"),
    (r"swin_[sb]", "swin_t"),
    (r"swin_v2_[sb]", "swin_v2_t"),
    (r"vit_[lh]_\d+", "vit_b_32"),
    # torchvision has no ViT below ViT-B: timm's ViT-S is the usual smaller sibling.
    (r"vit_b_(16|32)", "timm:vit_small_patch16_224"),
)
# timm: a size word or letter one step down, else the smallest depth or scale number.
SIZE_WORDS = ("giant", "huge", "xxlarge", "xlarge", "large", "big", "base", "medium", "small",
              "tiny", "mini", "nano", "pico", "femto", "atto")
SIZE_LETTERS = ("h", "xl", "l", "b", "m", "s", "t", "xs", "xxs")


def default_student(source: str, name: str) -> str | None:
    """The student spec (``source:name``) for a catalogue model, or None when no obvious
    smaller sibling exists."""
    if source == "torchvision":
        for pattern, student in TORCHVISION_STUDENTS:
            if re.fullmatch(pattern, name):
                return student if ":" in student else f"torchvision:{student}"
        return None
    found = entry(source, name)
    if found is None:
        return None
    arch = name.split(".", 1)[0]
    family = {n for n, e in catalogue()["timm"].items() if e["family"] == found["family"]}
    student = _timm_sibling(arch, family)
    return f"timm:{student}" if student else None


def _timm_sibling(name: str, family: set[str]) -> str | None:
    tokens = name.split("_")
    for ladder in (SIZE_WORDS, SIZE_LETTERS):
        for i, token in enumerate(tokens):
            if token in ladder:
                for smaller in ladder[ladder.index(token) + 1:]:
                    candidate = "_".join(tokens[:i] + [smaller] + tokens[i + 1:])
                    if candidate in family:
                        return candidate
    # resnet50 -> resnet18, efficientnet_b3 -> efficientnet_b0, regnetx_032 -> regnetx_002:
    # the smallest number in the same pattern, when it is smaller.
    match = re.fullmatch(r"(.*?)(\d+)([a-z]*)", name)
    if match is None:
        match = re.fullmatch(r"(.*?_[a-z]?)(\d+)(_.*)?", name)
    if match is None:
        return None
    head, number, tail = match.group(1), match.group(2), match.group(3) or ""
    pattern = re.compile(re.escape(head) + r"(\d+)" + re.escape(tail))
    smaller = [(int(m.group(1)), n) for n in family
               if (m := pattern.fullmatch(n)) and int(m.group(1)) < int(number)]
    return min(smaller)[1] if smaller else None


# -- generating the file ---------------------------------------------------------------------

def generate() -> dict:
    """The catalogue from the installed libraries (imports torchvision and timm)."""
    from importlib.metadata import version

    import timm
    import torchvision
    from torchvision.models import get_model_builder, get_model_weights

    tv = {}
    for name in torchvision.models.list_models(module=torchvision.models):
        module = get_model_builder(name).__module__.rsplit(".", 1)[-1]
        enum = get_model_weights(name)
        tv[name] = {"family": module, "weights": [w.name for w in enum],
                    "default": enum.DEFAULT.name, "urls": {w.name: w.url for w in enum}}
    pretrained = {n.split(".", 1)[0] for n in timm.list_models(pretrained=True)}
    tm = {}
    for module in timm.list_modules():
        for name in timm.list_models(module=module):
            tm[name] = {"family": module, "weights": []}
            cfg = timm.models.get_pretrained_cfg(name) if name in pretrained else None
            if cfg is not None and cfg.hf_hub_id:
                tm[name].update(weights=[TIMM_WEIGHTS], hf_hub_id=cfg.hf_hub_id,
                                hf_hub_filename=cfg.hf_hub_filename)
    return {"versions": {"torchvision": version("torchvision"), "timm": version("timm")},
            "torchvision": dict(sorted(tv.items())), "timm": dict(sorted(tm.items()))}


def write(path: Path = CATALOGUE_FILE) -> dict:
    data = generate()
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    catalogue.cache_clear()
    return data
