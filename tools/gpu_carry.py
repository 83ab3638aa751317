"""What ``make perf-gpu`` carries to a lent GPU machine: the packages its cells need that the
machine's own Python lacks, as wheels repacked from this environment's installed files.

A lent machine reaches no package registry, and a call carries at most 64 MiB with the working
tree (the device's README). Its image holds torch, torchvision, timm, transformers and
nvidia-ml-py, not torchao (FP8 and INT4 cells) or Torch-Pruning (channel pruning), so those two
travel. They are repacked from what is installed here (``importlib.metadata``'s file list,
compiled caches left out) rather than downloaded: nothing here reaches a registry either, and
the wheel is the version the tests ran. torchao's compiled kernels are built for this
environment's torch; where the lent machine's torch differs, torchao skips them with a warning
and its FP8 path (``torch._scaled_mm``) does not need them.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from importlib import metadata
from pathlib import Path

# (distribution, why the GPU check needs it)
CARRIED = (("torchao", "FP8 rowwise and INT4 weight-only cells"),
           ("torch-pruning", "channel pruning in the sweep section"))
LIMIT_BYTES = 64 * 2**20  # what one lent call carries, working tree included


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def repack(name: str, folder: Path) -> Path:
    """A wheel of the installed distribution ``name`` in ``folder``: its files as installed
    (no ``__pycache__``), its metadata, and a RECORD of their hashes. Raises
    ``metadata.PackageNotFoundError`` where it is not installed."""
    dist = metadata.distribution(name)
    tag = "py3-none-any"
    wheel_meta = dist.read_text("WHEEL") or ""
    for line in wheel_meta.splitlines():
        if line.startswith("Tag:"):
            tag = line.split(":", 1)[1].strip()
            break
    project = dist.metadata["Name"].replace("-", "_")
    path = Path(folder) / f"{project}-{dist.version}-{tag}.whl"
    record_name = None
    rows = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        for file in dist.files or []:
            text = str(file)
            if "__pycache__" in file.parts or text.endswith(".pyc") or text.startswith(".."):
                continue  # compiled caches; console scripts installed outside site-packages
            if file.name == "RECORD" and file.parent.name.endswith(".dist-info"):
                record_name = text
                continue
            data = Path(dist.locate_file(file)).read_bytes()
            whl.writestr(text, data)
            rows.append(f"{text},{_hash(data)},{len(data)}")
        record_name = record_name or f"{project}-{dist.version}.dist-info/RECORD"
        whl.writestr(record_name, "\n".join([*rows, f"{record_name},,"]) + "\n")
    return path


def carry(folder: Path) -> dict:
    """Every carried wheel built in ``folder``: {"wheels": [{name, version, file, bytes,
    why}], "total_bytes", "limit_bytes", "fits"}; a distribution not installed here is listed
    with its error and counted as not carried."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    for name, why in CARRIED:
        try:
            path = repack(name, folder)
        except metadata.PackageNotFoundError:
            wheels.append({"name": name, "why": why, "error": "not installed here"})
            continue
        wheels.append({"name": name, "version": metadata.version(name), "file": path.name,
                       "bytes": path.stat().st_size, "why": why})
    total = sum(w.get("bytes", 0) for w in wheels)
    return {"wheels": wheels, "total_bytes": total, "limit_bytes": LIMIT_BYTES,
            "fits": total < LIMIT_BYTES and all("error" not in w for w in wheels)}
