"""What the menus offer, read from the engine's registries (never a hand-kept list)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from benchmarks.specs import COMPRESSIONS  # noqa: F401  (torch-free)


@st.cache_data(show_spinner=False)
def models() -> dict[str, dict]:
    """Zoo models: name -> {"description", "student", "family"}."""
    from benchmarks.models import list_models, model_entry
    out = {}
    for name in list_models():
        entry = model_entry(name)
        out[name] = {"description": entry.description, "student": entry.student,
                     "family": entry.family}
    return out


def datasets() -> list[str]:
    from benchmarks.specs import DATASETS  # not benchmarks.datasets: that one imports numpy
    return list(DATASETS)


def sweep_choices() -> dict:
    """The sweep-level menus (the techniques' come from the registry: technique_form)."""
    from benchmarks.specs import DEVICES, MAX_SEEDS, NORMALIZE_MODES
    return {"devices": DEVICES, "normalize": NORMALIZE_MODES,
            "max_repeats": min(5, MAX_SEEDS)}


def model_files(folder: Path) -> list[str]:
    """The ``*.py`` files of the server's allowed models folder, by name."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.glob("*.py") if p.is_file() and not p.name.startswith("_"))
