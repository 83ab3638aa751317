"""An export folder's files: their names, where the dashboard's exports land, the zip.

Torch-free: the dashboard names and offers these files without importing the engine.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

CARD_NAME = "model_card.json"
WEIGHTS_NAME = "model.safetensors"
PT2_NAME = "model.pt2"
ONNX_NAME = "model.onnx"
SOURCE_NAME = "model_source.py"
FORMATS = ("safetensors", "pt2", "onnx")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def prepare_folder(out_dir: str | Path) -> Path:
    folder = Path(out_dir).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; give a folder")
    if not folder.parent.is_dir():
        raise ValueError(f"--out {folder}: folder {folder.parent} does not exist")
    folder.mkdir(exist_ok=True)
    for name in (CARD_NAME, WEIGHTS_NAME, PT2_NAME, ONNX_NAME, SOURCE_NAME):
        (folder / name).unlink(missing_ok=True)  # nothing stale from an earlier export
    return folder


def archive_path(folder: str | Path) -> Path:
    """Where ``archive`` puts the zip of an export folder: beside it, named after it."""
    folder = Path(folder)
    return folder.with_name(folder.name + ".zip")


def archive(folder: str | Path) -> Path:
    """The export folder zipped beside it (the dashboard's download)."""
    return Path(shutil.make_archive(str(archive_path(folder))[:-len(".zip")], "zip",
                                    root_dir=folder))


def export_folder(store_path: str | Path, run_id: str, variant: str) -> Path:
    """Where the dashboard's export of ``variant`` lands: beside the store, per run."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in variant)
    return Path(store_path).with_name("exports") / run_id / safe
