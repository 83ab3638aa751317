"""The operator's folders the dashboard may read (image folders, model files), and the
owner-only folders and files the project itself creates.

Jobs from the dashboard name server-side paths only inside the operator's folders. A path
outside gets one line that says only where paths must be: whether it exists, is a folder or is
readable is not revealed (the server runs with more rights than the person typing).

The results store, the worker's log, the weights cache and the jobs' folders hold every team
member's results and uploads: they are created readable by their owner only (0600, 0700).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "COMPRESSION_BENCH_DATA_DIR"
CACHE_ENV = "COMPRESSION_BENCH_CACHE"
# The checkout (or the installed packages' folder): where data/ and models/ are by default.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The operator's folder of data sets the dashboard may read (default: ``data/``)."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else PROJECT_ROOT / "data"


def default_cache_dir() -> Path:
    """The weights cache (and the image folders' statistics): $COMPRESSION_BENCH_CACHE, else
    under $XDG_CACHE_HOME (~/.cache)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "compression-bench"


def exports_root(store_path: str | os.PathLike) -> Path:
    """Where the dashboard's exports live: ``exports/`` beside the results store, one folder
    per run (removed with the run), one per job inside."""
    return Path(store_path).with_name("exports")


def inside(folder: Path, typed: str, what: str = "the image folder", *,
           kind: str = "a folder", where: str = f"the server's data folder ({DATA_ENV})"
           ) -> Path:
    """``typed`` (relative to ``folder``, or absolute) as a resolved path inside ``folder``;
    a ValueError naming only the rule otherwise (``what`` must be ``kind`` inside
    ``where``). Symbolic links are followed first, so a link inside that points outside is
    refused too."""
    text = (typed or "").strip()
    root = Path(folder).expanduser().resolve()
    refusal = ValueError(f"{what} must be {kind} inside {where}; give its path relative to "
                         f"that folder")
    if not text or "\x00" in text:
        raise refusal
    path = Path(text).expanduser()
    resolved = (path if path.is_absolute() else root / path).resolve()
    if resolved != root and root not in resolved.parents:
        raise refusal
    return resolved


# What Linux takes: a name (one path component) of at most NAME_MAX bytes, a whole path of
# fewer than PATH_MAX; past either, open() raises ENAMETOOLONG from deep inside a writer.
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4095


def _shown(text: str, keep: int = 40) -> str:
    return text if len(text) <= keep else text[:keep] + "…"


def check_user_path(path: str | os.PathLike, flag: str, *, parent_must_exist: bool = True,
                    writable: bool = True) -> Path:
    """The one check every path from the user (``--json``, ``--csv``, ``--html``, ``--out``,
    ``--store``) goes through before anything runs: each name at most 255 bytes, the whole
    path under 4096, no control character (a newline in a file name breaks every listing
    that shows it), and the folder it goes in existing and writable (``parent_must_exist``
    False: a store's folder is created, so only the nearest existing one is checked;
    ``writable`` False: a store that exists is read where it is). A ValueError of one line naming the flag, the problem and what is accepted otherwise."""
    text = os.fspath(path)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError(f"{flag} {_shown(repr(text))}: a path may not hold control "
                         f"characters (newline, tab, NUL); give a plain file name")
    target = Path(text).expanduser()
    for part in target.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX_BYTES:
            raise ValueError(f"{flag}: the name {_shown(part)!r} is {size} bytes; a file or "
                             f"folder name may be at most {NAME_MAX_BYTES} bytes")
    size = len(os.fsencode(str(target)))
    if size > PATH_MAX_BYTES:
        raise ValueError(f"{flag}: the path is {size} bytes; it may be at most "
                         f"{PATH_MAX_BYTES} bytes")
    parent = target.absolute().parent
    if not parent_must_exist:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.is_dir():
        raise ValueError(f"{flag} {_shown(text, 200)}: folder {_shown(str(parent), 200)} "
                         f"does not exist")
    if writable and not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {_shown(text, 200)}: folder {_shown(str(parent), 200)} is "
                         f"not writable by this user; give a folder you may write to")
    return target


def subfolders(folder: Path, limit: int = 50) -> list[str]:
    """The operator's data sets: the data folder's sub-folders, by name (the page's hint)."""
    try:
        return sorted(p.name for p in Path(folder).iterdir()
                      if p.is_dir() and not p.name.startswith("."))[:limit]
    except OSError:
        return []


def private_folder(path: Path) -> None:
    """Create ``path`` (and its missing parents) owner-only; an existing folder is left as
    the operator made it."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)  # mkdir's mode is filtered by the umask


def private_file(path: Path) -> None:
    """Create ``path`` empty and owner-only unless it exists."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass


def server_folder(store_path: str | os.PathLike) -> Path:
    """The server's own folder beside the store (``STORE.server/``, 0700): what the server
    itself opens by name (the session secret, each worker's log and lock, uploads waiting for
    their job). The store's folder is writable by the worker's user, which may swap any file
    of its own there for a link; in here it can create nothing and open nothing."""
    store_path = Path(store_path)
    return store_path.with_name(store_path.name + ".server")


def own_folder(path: Path) -> Path:
    """``path`` as this user's private folder: created 0700 (its missing parents too), or an
    existing one checked without following a link: a folder this user owns (then made 0700).
    A RuntimeError of one line otherwise: another user made it, and could read or replace
    what goes in."""
    private_folder(path.parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError:  # ELOOP (a link) or ENOTDIR (a file)
        raise RuntimeError(f"{path} is not this server's own folder (a link or a file): "
                           f"remove it and start again") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise RuntimeError(f"{path} is not this server's own folder (owned by uid "
                               f"{info.st_uid}; it must be uid {os.geteuid()}): remove it "
                               f"and start again")
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    except OSError as exc:
        raise RuntimeError(f"{path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return path


def secret_path(store_path: str | os.PathLike) -> Path:
    """The session-signing secret's file, in the server's own folder (dashboard.identity)."""
    return server_folder(store_path) / "secret"


def _legacy_secret(path: Path) -> Path | None:
    """Where a version that kept the secret beside the store had ``path``'s (``STORE.secret``
    for ``STORE.server/secret``), if ``path`` is a store's secret."""
    folder = path.parent
    if path.name != "secret" or not folder.name.endswith(".server"):
        return None
    return folder.with_name(folder.name[:-len(".server")] + ".secret")


def _adopt_legacy_secret(path: Path) -> None:
    """Move the secret an older version kept beside the store into the server's folder (the
    runs and jobs it signed keep their owners), if it is this user's own private file."""
    import stat
    legacy = _legacy_secret(path)
    if legacy is None:
        return
    try:
        info = os.lstat(legacy)
    except OSError:
        return
    if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and \
            not info.st_mode & 0o077 and info.st_nlink == 1:
        try:
            os.link(legacy, path, follow_symlinks=False)
        except FileExistsError:
            return
        os.unlink(legacy)


def revocations_path(store_path: str | os.PathLike) -> Path:
    """The revoked browser identities' file (dashboard.identity), in the server's own folder
    beside the secret: the server opens it by name, so the worker must not reach it."""
    return server_folder(store_path) / "revoked"


def read_or_make_secret(path: Path, size: int = 32) -> bytes:
    """The secret in ``path``, made once (random, 0600) if absent. A file this process's user
    does not own, or that others may read, is refused: where the worker runs as another user
    (``benchmarks.service.account``) it could otherwise plant a secret it knows."""
    import secrets
    import tempfile
    own_folder(path.parent)
    if not path.exists():
        _adopt_legacy_secret(path)
    if path.exists():  # read as it is: a full disk leaves room for no draft (below)
        return _existing_secret(path, size)
    # Written whole to a private temporary file, then linked into place: link() fails when the
    # name exists, so of several processes starting at once exactly one makes the secret, and
    # none reads it half-written (created empty and then filled, a reader could see 0 bytes).
    fd, draft = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(size))
        os.link(draft, path)
    except FileExistsError:
        return _existing_secret(path, size)
    finally:
        os.unlink(draft)
    return path.read_bytes()


def _existing_secret(path: Path, size: int) -> bytes:
    info = path.stat()
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise RuntimeError(f"{path} is not this server's own secret (owned by uid "
                           f"{info.st_uid}, mode {info.st_mode & 0o777:o}; it must be "
                           f"uid {os.geteuid()}, mode 600): delete it to make a new one "
                           f"(sessions then start afresh)") from None
    secret = path.read_bytes()
    if len(secret) >= size:
        return secret
    raise RuntimeError(f"{path} is not a usable secret (too short); delete it to make a "
                       f"new one (sessions then start afresh)") from None
