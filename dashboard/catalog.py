"""What the menus offer, read from the engine's registries and catalogues (never a hand-kept
list), without importing torch."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from benchmarks.spec.sweep import COMPRESSIONS  # noqa: F401  (torch-free)


@st.cache_data(show_spinner=False)
def models() -> dict[str, dict]:
    """Zoo models: name -> {"description", "student", "family"}."""
    from benchmarks.zoo.models import list_models, model_entry
    out = {}
    for name in list_models():
        entry = model_entry(name)
        out[name] = {"description": entry.description, "student": entry.student,
                     "family": entry.family}
    return out


@st.cache_data(show_spinner=False)
def hub_models(source: str) -> dict[str, dict]:
    """torchvision's or timm's classification models: name -> {"family", "weights"}, read
    from the catalogue file the engine ships (no torch, no timm: milliseconds)."""
    from benchmarks.zoo.catalogue import catalogue, weight_names
    return {name: {"family": entry["family"], "weights": weight_names(source, name)}
            for name, entry in sorted(catalogue()[source].items())}


@st.cache_data(show_spinner=False)
def language_models() -> dict[str, str]:
    """The registered causal language models: name -> description (torch-free)."""
    from benchmarks.zoo.lm import lm_entry, lm_names
    return {name: lm_entry(name).description for name in lm_names()}


def hub_sources() -> tuple[str, ...]:
    from benchmarks.zoo.catalogue import SOURCES
    return SOURCES


@st.cache_data(show_spinner=False)
def student_choices() -> list[str]:
    """Every model a student may be: the zoo's names, then ``torchvision:`` and ``timm:``."""
    return list(models()) + [f"{source}:{name}" for source in hub_sources()
                             for name in hub_models(source)]


def default_student(model: str | None) -> str | None:
    """The student distillation takes for ``model`` when none is picked (the zoo's narrow
    twin, the catalogue's smaller sibling), or None: it has none (a model file, resnet18...).
    Torch-free: the registry's and the catalogue's rules."""
    if not model:
        return None
    from benchmarks.zoo.models import default_student as engine_default
    try:
        return engine_default(model)
    except ValueError:  # a name no source has: the form refuses it elsewhere
        return None


def datasets(*, folders: bool = True) -> list[str]:
    """The data sets' menu forms (``imagefolder:DIR`` ...), from the registry (torch- and
    numpy-free, unlike the loaders). ``folders=False``: without those that take a folder."""
    from benchmarks.spec.datasets import dataset_entries
    return [entry.menu for entry in dataset_entries() if folders or entry.argument is None]


def sweep_choices() -> dict:
    """The sweep-level menus (the techniques' come from the registry: technique_form)."""
    from benchmarks.spec.sweep import DEVICES, MAX_SEEDS, NORMALIZE_MODES
    return {"devices": DEVICES, "normalize": NORMALIZE_MODES,
            "max_repeats": min(5, MAX_SEEDS)}


def model_files(folder: Path) -> list[str]:
    """The ``*.py`` files of the server's allowed models folder, by name."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.glob("*.py") if p.is_file() and not p.name.startswith("_"))
