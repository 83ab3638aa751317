"""A model file and a checkpoint, checked before anything is queued, and a model file brought
from the page on a local run.

The worker refuses a model file that does not import, a factory that is missing or does not
build, a batch the model cannot take, a checkpoint whose keys or shapes do not fit and a sweep
above its memory share, but only when the job starts. The page asks the same checks first
(``benchmarks.run.probe``, in a process of its own: the server never imports torch nor runs
a model file's code), where that process runs as the worker would: as the server's own user.
Where the worker runs as a user of its own (a team server started as root), the worker's own
checks stand.

On a local run (the server bound to the loopback, no sign-in, the worker as the server's user:
`make run`) a model file may come from the page: checked as the worker loads it, then written
into the models folder under a safe name. A team server's models folder is its operator's.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import streamlit as st

from dashboard import state

MAX_MODEL_FILE_MB = 1
ADDED = "cb_model_file_added"     # session state: {upload's file_id: (file name, error)}
PICK = "cb_model_file_pick"       # session state: the file to select on the next draw
HOW_IT_GETS_THERE = ("A model file reaches this server through its operator, who copies the "
                     ".py file into the server's models folder (COMPRESSION_BENCH_MODELS_DIR; "
                     "docs/models-and-data.md, Your own model); it is then listed here.")


def worker_is_server_user() -> bool:
    """Whether the worker runs as this server's own user (``benchmarks.service.account``):
    a check run here then has the rights the worker's would."""
    try:
        return state.queue().worker_account() is None
    except Exception:  # no worker can start: nothing to check as it
        return False


def _sign_in_configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file
        return False


def local_run() -> bool:
    """One person's own server: bound to the loopback, no sign-in, its worker as the server's
    user (`make run`, docs/team-server.md)."""
    return (not state.serves_others() and not _sign_in_configured()
            and worker_is_server_user())


def said(text) -> str:
    """A line the Experiment page shows (a refusal, a job's error), as plain text: the
    operator's folders' files by their names there; any other server path hidden, except on
    a local run, where the machine is the person's own and a path says where to put a file
    (the weights cache's folder)."""
    from dashboard.markup import no_paths, relative_names
    return relative_names(text) if local_run() else no_paths(text)


def _environment() -> dict:
    """The check's process sees what the worker's would (no session secret)."""
    from benchmarks.service.account import worker_environment
    return worker_environment(None, PYTHONPATH=state.ROOT)


def _digest(path: str | None) -> str | None:
    if not path:
        return None
    try:
        data = Path(path).read_bytes() if Path(path).stat().st_size < 2**20 else None
        info = Path(path).stat()
    except OSError:
        return None
    # A model file by its content; a checkpoint (up to 200 MB) by its size and time.
    return hashlib.sha256(data).hexdigest() if data is not None else \
        f"{info.st_size}:{info.st_mtime_ns}"


@st.cache_data(show_spinner="Checking the model as the worker will…", max_entries=64,
               ttl=600)
def _probe(_spec_json: str, key: str) -> str | None:
    """The check's answer, cached by ``key`` alone (the spec's text is not hashed: settings
    that do not change the answer reuse it)."""
    import json

    from benchmarks.run.probe import check_in_subprocess
    from benchmarks.spec.folders import data_dir
    return check_in_subprocess(json.loads(_spec_json), env=_environment(),
                               models_dir=state.models_dir(), data_dir=data_dir())


def needs_check(spec) -> bool:
    """A model file or a checkpoint: what only building the model tells."""
    from benchmarks.zoo.models import is_user_model
    return bool(spec.checkpoint) or is_user_model(spec.model)


def check(spec) -> str | None:
    """The worker's refusal of ``spec`` before its data loads, or None: asked once per model
    file, checkpoint and the settings the answer depends on (the technique values do not
    change it, only their variants' count)."""
    import json
    if not needs_check(spec) or not worker_is_server_user():
        return None
    asked = spec.to_dict()
    spec_json = json.dumps(asked, default=str, sort_keys=True)
    shape = dict(asked, variants=len(asked["variants"]))
    key = json.dumps([shape, _digest(spec.model.rsplit(":", 1)[0]),
                      _digest(spec.checkpoint)], default=str, sort_keys=True)
    return _probe(spec_json, key)


def safe_name(file_name: str) -> str:
    """A model file's name in the models folder: letters, digits and _ only, starting with a
    letter (the menu hides names starting with _), at most 64 characters, ending .py."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(file_name).stem)[:64].strip("_") or "model"
    if not stem[0].isalpha():
        stem = f"model_{stem}"
    return f"{stem}.py"


def add(upload, factory: str) -> tuple[str | None, str | None]:
    """A model file uploaded on a local run: (its name in the models folder, None), or (None,
    the one line saying why not). Checked as the worker loads it (imported, the factory
    found) from this session's private folder first; then written into the models folder
    under ``safe_name`` (another file of that name is never replaced: name_2.py ...)."""
    from benchmarks.run.probe import check_in_subprocess
    if not local_run():
        return None, HOW_IT_GETS_THERE
    data = upload.getvalue()
    if not data:
        return None, f"{upload.name} is empty"
    if len(data) > MAX_MODEL_FILE_MB * 2**20:
        return None, f"{upload.name} is larger than {MAX_MODEL_FILE_MB} MB: not a model file"
    name = safe_name(upload.name)
    draft = state.upload_dir() / name
    draft.write_bytes(data)
    error = check_in_subprocess(model=f"{draft}:{factory}", env=_environment(),
                                models_dir=draft.parent)
    draft.unlink(missing_ok=True)
    if error:  # said of the file the person chose, not of the draft's place
        return None, error.replace(str(draft), upload.name)
    folder = state.models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stem, n = name[:-3], 1
    while True:
        target = folder / name
        if target.is_file() and target.read_bytes() == data:
            return name, None  # the same file again
        try:
            with os.fdopen(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644),
                           "wb") as f:
                f.write(data)
            return name, None
        except FileExistsError:
            n += 1
            name = f"{stem}_{n}.py"
