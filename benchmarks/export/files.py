"""An export folder's files: their names, where the dashboard's exports land, the zip.

Torch-free: the dashboard names and offers these files without importing the engine.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from benchmarks.spec.cancel import check_stop
from benchmarks.spec.folders import exports_root

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
    from benchmarks.spec.folders import check_user_path
    folder = check_user_path(out_dir, "--out")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file; give a folder")
    return folder


def staging_folder(folder: Path) -> Path:
    """A fresh folder beside ``folder`` (the same file system) that the export is written
    into; ``publish`` moves it into place, and it is removed whatever happens. Its name
    carries this process's pid, so a later export of the same target removes one whose
    process was killed mid-export (``remove_stale_staging``)."""
    remove_stale_staging(folder)
    return Path(tempfile.mkdtemp(dir=folder.parent,
                                 prefix=f".{folder.name}.partial-{os.getpid()}-"))


def remove_stale_staging(folder: Path) -> list[Path]:
    """The staging folders of ``folder`` whose export's process is gone: removed."""
    from benchmarks.store.processes import process_alive
    prefix = f".{folder.name}.partial-"
    removed = []
    for path in folder.parent.glob(glob.escape(prefix) + "*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid), None):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def remove_dead_exports(store_path: str | Path, live_jobs: set[str]) -> list[Path]:
    """What export jobs no worker runs any longer left under the dashboard's exports (a
    worker killed mid-export never reached its own clean-up): their partial files, and the
    whole job folder where no zip was finished. ``live_jobs``: the queued and running jobs'
    ids, whose folders are left alone. Called when a worker starts."""
    removed = []
    for job in exports_root(store_path).glob("*/*"):
        try:
            if not job.is_dir() or job.name in live_jobs:
                continue
            entries = list(job.iterdir())
        except OSError:
            continue  # removed by another process meanwhile
        partial = [p for p in entries if p.name.startswith(".") and ".partial" in p.name]
        if not any(p.suffix == ".zip" and not p.name.startswith(".") for p in entries):
            partial = [job]  # nothing finished in it: the job folder goes whole
        for path in partial:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
        try:
            job.parent.rmdir()  # the run's exports folder, if that was its only one
        except OSError:
            pass
    return removed


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


ZIP_CHUNK = 1 << 20  # the zip is written a MiB at a time, checking for a cancel between


def archive(folder: str | Path, should_stop=None) -> Path:
    """The export folder zipped beside it (the dashboard's download): written to a temporary
    name a chunk at a time, ``should_stop`` asked between chunks (Cancelled then, and nothing
    left behind), renamed into place when whole, ``FILE_MODE``; a full disk leaves no partial
    zip and reads as one line."""
    from benchmarks.spec.atomic import disk_full_as_one_line
    folder = Path(folder)
    target = archive_path(folder)
    partial = target.with_name(f".{target.name}.partial")
    with disk_full_as_one_line(target.parent, target.name):
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
                for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                    with path.open("rb") as source, \
                            z.open(str(path.relative_to(folder)), "w", force_zip64=True) as out:
                        for block in iter(lambda: source.read(ZIP_CHUNK), b""):
                            check_stop(should_stop)
                            out.write(block)
            os.chmod(partial, FILE_MODE)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    return target


def export_folder(store_path: str | Path, run_id: str, variant: str,
                  job_id: str | None = None) -> Path:
    """Where the dashboard's export of ``variant`` lands: beside the store, under its run
    (removed with the run) and its job (two people exporting one variant write two
    folders): ``exports/RUN_ID/JOB_ID/VARIANT`` and its zip beside it."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in variant)
    run = exports_root(store_path) / run_id
    return (run / job_id / safe) if job_id else (run / safe)


def _tree_bytes(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            total += path.stat().st_size if path.is_file() else 0
        except OSError:
            continue
    return total


def exports(store_path: str | Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, folder) of every job's export, least recently used first."""
    found = []
    for job in exports_root(store_path).glob("*/*"):
        try:
            if job.is_dir():
                found.append((job.stat().st_mtime, _tree_bytes(job), job))
        except OSError:
            continue  # removed by another process meanwhile
    return sorted(found)


def evict_exports(store_path: str | Path, max_bytes: int, keep: Path | None = None) -> int:
    """Remove least recently used exports until the rest fit in ``max_bytes`` (``keep``, the
    one just written, stays), as the weights cache does; returns how many went."""
    from benchmarks.spec.lru import least_recently_used
    going = least_recently_used(exports(store_path), max_bytes, keep)
    for folder in going:
        shutil.rmtree(folder, ignore_errors=True)
    for run in exports_root(store_path).glob("*"):
        try:
            run.rmdir()  # a run whose exports all went
        except OSError:
            pass
    return len(going)
