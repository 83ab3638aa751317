"""Whom the worker runs as: never root.

A model file in the operator's models folder is code, and the worker runs it. Started by a
server running as root, the worker would run it as root, with the session-signing secret,
every member's files and the whole machine in reach. So when the server runs as root, the
worker runs as an unprivileged user: ``COMPRESSION_BENCH_WORKER_USER`` (default
``compression-bench``), created with ``useradd --system`` if absent (unless
``COMPRESSION_BENCH_CREATE_WORKER_USER=off``). Naming ``root`` there is the one way to keep
the old behaviour (a throwaway container where the server's rights protect nothing; the test
suite does it), and the worker's card then says so.

What the worker may touch, set up by the server (root) before each start (``prepare``):

- the store's folder becomes ``root:GROUP``, mode 1770 (the worker's group may create files
  there, the sticky bit keeps it from removing or renaming the server's): the store and its
  WAL, the jobs' folders, the exports, are the worker's. The server's own folder there
  (``STORE.server/``, root's, 0700: the secret, the revoked browser identities, each
  worker's log and lock, uploads waiting for their job) is closed to it. A folder holding
  anything but the store's own files is not changed: it must already let the worker in, or
  the start is refused in one line.
- the weights cache and a home of its own (``results.db.worker-home``) are the worker's.
- nothing else: the models and data folders stay the operator's (a models folder the worker
  could write to is refused: it would let a job rewrite the code later jobs run).

Its environment loses the session secret and anything named like a credential.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.spec.folders import (
    exports_root,
    own_folder,
    private_file,
    private_folder,
    read_or_make_secret,
    revocations_path,
    secret_path,
    server_folder,
)

USER_ENV = "COMPRESSION_BENCH_WORKER_USER"
CREATE_ENV = "COMPRESSION_BENCH_CREATE_WORKER_USER"
DEFAULT_USER = "compression-bench"
SECRET_ENV = "COMPRESSION_BENCH_SECRET"
# Environment variables the worker never sees (a credential has no business in a job).
CREDENTIALS = re.compile(r"SECRET|TOKEN|PASSW|CREDENTIAL|API_?KEY|PRIVATE|AUTH", re.I)
STORE_FOLDER_MODE = 0o1770


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


def worker_account(environ=None, create: bool = True) -> Account | None:
    """The account the worker must run as, or None: as this process's own user (the server
    is not root, or the operator named root). Created if absent and allowed (``create``;
    else None while it does not exist); ValueError with one line otherwise."""
    env = os.environ if environ is None else environ
    if os.geteuid() != 0:
        return None
    name = (env.get(USER_ENV) or "").strip() or DEFAULT_USER
    if name == "root":
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        if not create:
            return None
        entry = _create(name, env)
    if entry.pw_uid == 0:
        raise ValueError(f"{USER_ENV}={name} has uid 0: the worker must run as an "
                         f"unprivileged user")
    return Account(name, entry.pw_uid, entry.pw_gid)


def _create(name: str, env) -> pwd.struct_passwd:
    allowed = (env.get(CREATE_ENV) or "on").strip().lower() not in ("0", "off", "no", "false")
    how = f"useradd --system --user-group --no-create-home --shell /usr/sbin/nologin {name}"
    if not allowed:
        raise ValueError(f"the worker user {name!r} does not exist and {CREATE_ENV} is off: "
                         f"create it ({how}) or name another in {USER_ENV}")
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", name):
        raise ValueError(f"{USER_ENV} must be a user name (lower-case letters, digits, _ and "
                         f"-); got {name!r}")
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    done = subprocess.run([useradd, *how.split()[1:]], capture_output=True, text=True)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["failed"]
        raise ValueError(f"cannot create the worker user {name!r} ({why[0]}): create it "
                         f"({how}) or name another in {USER_ENV}")
    return pwd.getpwnam(name)


def worker_environment(account: Account | None, base=None, **extra) -> dict:
    """What the worker's process sees: never the session secret; run as another user, no
    variable named like a credential either, and its own HOME and USER."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k != SECRET_ENV}
    if account is not None:
        env = {k: v for k, v in env.items()
               if not CREDENTIALS.search(k) or k.startswith("COMPRESSION_BENCH_")}
        env.update(USER=account.name, LOGNAME=account.name)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def home_of(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".worker-home")


def _chown_tree(path: Path, account: Account) -> None:
    """``path`` and all below it made ``account``'s, following no link (job code may swap a
    folder in there for a link to one of root's while this runs): ``os.fwalk`` walks by
    descriptors and checks each folder it enters is the one it listed."""
    try:
        os.chown(path, account.uid, account.gid, follow_symlinks=False)
    except FileNotFoundError:
        return
    for _, dirs, files, fd in os.fwalk(path):
        for name in dirs + files:
            try:
                os.chown(name, account.uid, account.gid, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue


def _lets_in(path: Path, account: Account, write: bool = False) -> bool:
    """Whether ``account`` may enter (and with ``write`` create files in) folder ``path``."""
    info = path.stat()
    want = 0o3 if write else 0o1  # w+x, or x
    if info.st_uid == account.uid:
        return (info.st_mode >> 6) & want == want
    if info.st_gid == account.gid:
        return (info.st_mode >> 3) & want == want
    return info.st_mode & want == want


def blocked_at(path: Path, account: Account) -> Path | None:
    """The first folder on the way to ``path`` that ``account`` cannot enter, or None."""
    path = Path(path).resolve()
    for folder in [*reversed(path.parents), *([path] if path.is_dir() else [])]:
        if not _lets_in(folder, account):
            return folder
    return None


def _writable_by(path: Path, account: Account) -> bool:
    info = path.stat()
    if info.st_uid == account.uid:
        return bool(info.st_mode & stat.S_IWUSR)
    if info.st_gid == account.gid:
        return bool(info.st_mode & stat.S_IWGRP)
    return bool(info.st_mode & stat.S_IWOTH)


def _store_folder(store_path: Path, account: Account) -> None:
    folder = store_path.parent
    own = all(p.name.startswith(store_path.name) or p == exports_root(store_path)
              for p in folder.iterdir())
    if own and folder.stat().st_uid == 0:
        os.chown(folder, 0, account.gid)
        os.chmod(folder, STORE_FOLDER_MODE)
    elif not (_lets_in(folder, account, write=True) and folder.stat().st_mode & stat.S_ISVTX):
        raise ValueError(f"the worker runs as {account.name}, and the store's folder {folder} "
                         f"holds other files: give the store a folder of its own "
                         f"(COMPRESSION_BENCH_STORE), or chgrp {account.name} {folder} && "
                         f"chmod 1770 {folder}")


def prepare(account: Account, store_path: Path, cache_dir: Path, models_dir: Path,
            root: Path) -> None:
    """Set up what the worker of ``account`` may use (see the module's docstring); a
    ValueError with one line where it cannot run as that user."""
    store_path = Path(store_path).resolve()

    def reach(what: str, path: Path) -> None:
        blocked = blocked_at(path, account)
        if blocked is not None:
            raise ValueError(f"the worker runs as {account.name}, who cannot reach {what} "
                             f"({path}): {blocked} is closed to it; let it in (chmod o+x "
                             f"{blocked}), move it (COMPRESSION_BENCH_STORE, "
                             f"COMPRESSION_BENCH_CACHE) or name another user in {USER_ENV}")
    reach("the Python interpreter", Path(sys.executable).resolve())
    reach("the project", Path(root))
    reach("the store", store_path.parent.parent)
    if models_dir.is_dir() and any(_writable_by(p, account)
                                   for p in [models_dir, *models_dir.rglob("*")]):
        raise ValueError(f"the models folder {models_dir} is writable by the worker user "
                         f"{account.name}: model files are code the worker runs, so only the "
                         f"operator may write there (chown root and chmod go-w)")
    secret, revoked = secret_path(store_path), revocations_path(store_path)
    if not os.environ.get(SECRET_ENV):
        # Made now, by the server, before the worker could plant one it knows.
        read_or_make_secret(secret)
    private_folder(store_path.parent)
    own = own_folder(server_folder(store_path))
    private_file(revoked)  # likewise: a worker's own would let it un-revoke
    # The store first, while its folder is still the server's alone: a -wal or -shm file a
    # connection of the server's creates from now on takes its owner (SQLite, as root, gives
    # them the database's), and one made before is listed below. Handed over the other way
    # round, a connection opened in between (the folder the worker's, the store still root's:
    # opened as root, ``ResultsStore._opener``) left a root-owned -shm the starting worker
    # could not open: its first job failed "unable to open database file" or "attempt to
    # write a readonly database", one start in two here.
    _chown_tree(store_path, account)
    _store_folder(store_path, account)
    for path in store_path.parent.iterdir():
        # The server's own folder (its secret, logs, locks, held uploads) stays its own, and
        # so does a secret an older version kept beside the store.
        if path.name.startswith(store_path.name) and path not in (own, secret) and \
                path.name != store_path.name + ".secret":
            _chown_tree(path, account)
    # Once more for SQLite's own files: a connection that read the store's owner before it
    # changed may have created one since the listing above (the worker could not open it).
    for suffix in ("-wal", "-shm"):
        _chown_tree(Path(f"{store_path}{suffix}"), account)
    for folder in (exports_root(store_path), cache_dir, home_of(store_path)):
        private_folder(Path(folder))
        _chown_tree(Path(folder), account)
    reach("the weights cache", Path(cache_dir))
