"""An export folder's files: their names, where the dashboard's exports land, the zip.

Torch-free: the dashboard names and offers these files without importing the engine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
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


EXPORT_NAMES = (CARD_NAME, WEIGHTS_NAME, PT2_NAME, ONNX_NAME, SOURCE_NAME)
# Every exported file, the zip too, is owner-only: it holds the run's trained weights, as
# private as the weights cache and the store they came from (the server's exports hold a
# team member's); ``chmod`` them to share.
FILE_MODE = 0o600


def check_folder(out_dir: str | Path) -> Path:
    """The export folder as a path, refused in one line where it cannot be one."""
    folder = Path(out_dir).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; give a folder")
    if not folder.parent.is_dir():
        raise ValueError(f"--out {folder}: folder {folder.parent} does not exist")
    return folder


def staging_folder(folder: Path) -> Path:
    """A fresh folder beside ``folder`` (the same file system) that the export is written
    into; ``publish`` moves it into place, and it is removed whatever happens."""
    return Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.partial-"))


def publish(staging: Path, folder: Path) -> None:
    """The staged export's files renamed into ``folder`` (made owner-only where new), each
    ``FILE_MODE``, after the earlier export's files there are removed."""
    if not folder.exists():
        folder.mkdir(mode=0o700)
    for name in EXPORT_NAMES:
        (folder / name).unlink(missing_ok=True)  # nothing stale from an earlier export
    for path in sorted(staging.iterdir()):
        os.chmod(path, FILE_MODE)
        os.replace(path, folder / path.name)


def archive_path(folder: str | Path) -> Path:
    """Where ``archive`` puts the zip of an export folder: beside it, named after it."""
    folder = Path(folder)
    return folder.with_name(folder.name + ".zip")


def archive(folder: str | Path) -> Path:
    """The export folder zipped beside it (the dashboard's download): written to a
    temporary name and renamed, ``FILE_MODE``; a full disk leaves no partial zip."""
    from benchmarks.spec.atomic import disk_full_as_one_line
    target = archive_path(folder)
    with disk_full_as_one_line(target.parent, target.name):
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.stem}.partial-"))
        try:
            made = shutil.make_archive(str(staging / target.stem), "zip", root_dir=folder)
            os.chmod(made, FILE_MODE)
            os.replace(made, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def export_folder(store_path: str | Path, run_id: str, variant: str) -> Path:
    """Where the dashboard's export of ``variant`` lands: beside the store, per run."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in variant)
    return Path(store_path).with_name("exports") / run_id / safe
