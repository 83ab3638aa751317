"""Per-user state: named session keys, the browser's identity and the session key made from
it, who owns what, the shared queue (and its supervisor), uploads handed to jobs, the
operator's folders."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path

import streamlit as st

from dashboard import identity
from dashboard.markup import md
from optimizers.errors import first_line as one_line  # torch-free; pages use it too

ROOT = Path(__file__).resolve().parent.parent

# Session-state keys, named once so pages never disagree on a spelling.
SESSION_KEY = "cb_session"        # this session's key (also in the URL as ?session=)
NEW_SESSION = "cb_new_session"    # set when the URL's key was another's
TAB_KEY = "cb_tab_session"        # the key of a tab whose browser sent no identity cookie
JOB_ID = "cb_job_id"              # the sweep job this session submitted last
DIST_JOB_ID = "cb_dist_job_id"    # the distributed job this session submitted last
EXPORT_JOB_ID = "cb_export_job_id"  # the model export this session asked for last
UPLOAD_DIR = "cb_upload_dir"      # private temporary folder for this session's checkpoints
WORKER_STARTED = "cb_worker_started"
SEEN_VARIANTS = "cb_seen_variants"
QUERY_PARAM = "session"
RUN_PARAM = "run"                 # a read-only link to one run: results?run=RUN_ID
POLL_S = 1.0                      # how often a running job is polled


@st.cache_resource(show_spinner=False)
def _secret(path: str) -> bytes:
    return identity.server_secret(Path(path))


NO_BROWSER = "no browser"  # a session with no HTTP request behind it (AppTest)


def browser_identity():
    """This browser's identity, as the server's ASGI layer handed it on from the WebSocket's
    handshake (``dashboard/asgi.py``) and verified again here (its MAC, age, revocation): an
    ``identity.Identity``; None where the browser sent none that verifies (cookies blocked, or
    forgotten in another tab); ``identity.CONFLICT`` where it sent two; ``NO_BROWSER`` where
    no request is behind the session at all (a real WebSocket always has headers)."""
    try:
        if not len(st.context.headers):
            return NO_BROWSER
        value = st.context.cookies.get(identity.COOKIE)
    except Exception:  # unreadable: a browser without an identity, never the harness's way
        return None
    if value == identity.CONFLICT:
        return identity.CONFLICT
    return identity.read_cookie(value, _secret(str(store_path())),
                                identity.revoked(store_path()))


def session_key() -> str:
    """This session's key, made again on every run from what the browser is now.

    - A browser with an identity cookie: its own key (``identity.browser_key``), the same in
      every tab and after a restart; a forgotten identity stops verifying at once.
    - A browser without one: a key of this tab alone, kept in the session.
    - No browser behind the session (AppTest, which has no HTTP layer): the session's key,
      else the URL's where this server minted it for such a session (a "refresh"), else a new
      one. Only such sessions mint keys bound to nothing, so a URL never stands for a
      browser's identity on a real server.

    The key is written to the URL (``?session=``), where a link from another browser or
    identity is told apart (a warning, unless the link names the run it shows)."""
    secret = _secret(str(store_path()))
    found = browser_identity()
    first = SESSION_KEY not in st.session_state
    key = st.session_state.get(SESSION_KEY)
    from_url = st.query_params.get(QUERY_PARAM)
    if found is NO_BROWSER:
        if not key:
            key = from_url if identity.verify(from_url, secret, "") else identity.mint(secret, "")
    elif isinstance(found, identity.Identity):
        key = identity.browser_key(secret, found.id)
    else:
        key = st.session_state.get(TAB_KEY) or identity.mint(secret, secrets.token_hex(16))
        st.session_state[TAB_KEY] = key
    if first:
        # A colleague's copied link: no news where it names the run it shows.
        st.session_state[NEW_SESSION] = (bool(from_url) and from_url != key
                                         and not st.query_params.get(RUN_PARAM))
    st.session_state[SESSION_KEY] = key
    if from_url != key:
        st.query_params[QUERY_PARAM] = key
    return key


def forget_browser() -> None:
    """The sidebar's Forget this browser: its identity is revoked on the server (the runs it
    made stay its old identity's, which nobody can act as any more), and the browser loads the
    app again, whose health check then gives it a new identity cookie in place of the old."""
    found = browser_identity()
    if isinstance(found, identity.Identity):
        identity.revoke(store_path(), found.id)
    for name in (SESSION_KEY, TAB_KEY, JOB_ID, DIST_JOB_ID, EXPORT_JOB_ID):
        st.session_state.pop(name, None)
    _load_again()


def _load_again() -> None:
    """Send this browser to the app's front page: Streamlit's own way of sending a browser
    elsewhere (what ``st.login`` and ``st.logout`` enqueue); a page cannot set a cookie."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx()
    if ctx is None:
        return
    message = ForwardMsg()
    path = identity.cookie_path(st.get_option("server.baseUrlPath"))
    message.auth_redirect.url = path if path.endswith("/") else path + "/"
    ctx.enqueue(message)


def signed_in_email() -> str | None:
    """The signed-in user's email (or subject), where sign-in is configured and done."""
    try:
        if st.user.get("is_logged_in", False):
            return st.user.get("email") or st.user.get("sub")
    except Exception:  # no sign-in configured
        pass
    return None


def owner() -> str:
    """Who this session acts as: the signed-in user, else this browser session."""
    email = signed_in_email()
    return identity.user_owner(email) if email else identity.session_owner(session_key())


def is_admin() -> bool:
    """A signed-in user the operator named in COMPRESSION_BENCH_ADMINS."""
    return limits().is_admin(signed_in_email())


def limits():
    return queue().limits


def store_path() -> Path:
    from benchmarks.store.database import default_store_path
    return default_store_path()


@st.cache_resource(show_spinner=False)
def _queue(path: str):
    from benchmarks.service.queue import JobQueue
    # This server's one queue, with its supervisor thread: it starts (and so reaps) the
    # workers and notices a dead one within a second, without waiting for a page load.
    # With the server's secret: it signs every job's owner and run, and believes only an
    # owner whose signature verifies (job code in the worker may rewrite the store).
    return JobQueue.shared(path, secret=_secret(path))


def queue():
    """The job queue over the results store: shared by every session, with its supervisor
    thread; never mutated here."""
    return _queue(str(store_path()))


def store():
    """The results store of the shared queue. One handle for every session: opening a
    ResultsStore runs its schema and the dead-run check, which a page polled every second
    should not repeat (the worker and the CLI do that when they start)."""
    return queue().store


def queue_device(requested: str) -> str:
    """Which device's queue a job goes to: the GPU's when the user asked for cuda, or asked
    for auto and the worker sees a GPU; the CPU's otherwise (the one rule every page uses)."""
    if requested == "cuda":
        return "cuda"
    if requested == "auto":
        card = worker_card("cpu") or {}
        if any(str(d).startswith("cuda") for d in card.get("devices") or []):
            return "cuda"
    return "cpu"


def worker_card(device: str = "cpu") -> dict | None:
    try:
        return queue().worker_card(device)
    except Exception:
        return None


def current_peaks(peaks: dict) -> dict:
    """``peaks`` as the store holds them now under their own key (host, device, torch,
    threads): a run that re-measured them since has changed them there."""
    from benchmarks.store.database import PEAKS_KEY
    try:
        stored = store().device_peaks({k: peaks[k] for k in PEAKS_KEY})
    except Exception:  # an older card without its key, an unreadable store: as given
        return peaks
    if not stored or not stored.get("gemm_flops_per_s"):
        return peaks
    return {**peaks, **stored}


def submit(kind: str, payload: dict, device: str, attachments: dict | None = None) -> str:
    """Queue a job for this session on the device's worker (started if need be). Files in
    ``attachments`` (payload field -> path) move into the job's own folder."""
    q = queue()
    target = queue_device(device)
    q.ensure_worker(target)
    return q.submit(kind, payload, session=identity.session_owner(session_key()),
                    device=target, owner=owner(), attachments=attachments,
                    client=client_id(), admin=is_admin())


def client_id() -> str:
    """Where this session's requests come from, as a digest (counted against the per-address
    cap without sign-in): the connection's address, or behind a proxy the operator trusts
    (COMPRESSION_BENCH_TRUSTED_PROXIES) the client it forwarded for (X-Forwarded-For)."""
    try:
        peer = st.context.ip_address  # None for a loopback connection
        forwarded = list(st.context.headers.get_all("X-Forwarded-For") or [])
    except Exception:  # no browser behind this session (a test harness)
        peer, forwarded = None, []
    if not isinstance(peer, str):  # AppTest's stand-in connection has no address
        peer = None
    return identity.client_digest(identity.client_address(
        peer, forwarded, identity.trusted_proxies()))


def owns(run: dict) -> bool:
    """Whether this viewer owns a stored run (or is an admin): who sees its errors whole,
    with the server's paths in them."""
    return run.get("owner") == owner() or is_admin()


def may_run_on(run: dict, kind: str) -> bool:
    """Whether this viewer may queue a ``kind`` job on a stored run (export its models, draw
    its map, apply its schedule, run its recipe): its owner or an admin, and for an export
    anyone where the operator shares exports (a kind ``shared_with_link``). The queue enforces
    the same rule (``JobQueue.submit``); a read-only view shows no button that it would
    refuse."""
    from benchmarks.service import kinds
    return owns(run) or (kinds.get(kind).shared_with_link and limits().shared_exports)


def cancel(job_id: str) -> bool:
    """Cancel a job of this session's owner (an admin may cancel any)."""
    return queue().cancel(job_id, by=owner(), admin=is_admin())


def my_jobs(limit: int = 20) -> list:
    return queue().jobs(owner=owner(), limit=limit)


def current_job_id(state_key: str, kind: str) -> str | None:
    """This session's latest job of ``kind``: the one it submitted, or after a refresh the
    newest found through the session key in the URL."""
    job_id = st.session_state.get(state_key)
    if job_id:
        return job_id
    try:
        jobs = my_jobs()
    except Exception:
        return None
    job = next((j for j in jobs if j.kind == kind), None)
    if job is not None:
        st.session_state[state_key] = job.job_id
        return job.job_id
    return None


def current_run_id(state_key: str, kind: str) -> str | None:
    """The stored run of this session's latest job of ``kind``, if it has one."""
    try:
        job_id = current_job_id(state_key, kind)
        job = queue().get(job_id) if job_id else None
        return job.run_id if job else None
    except Exception:
        return None


def run_link(run_id: str, **view: str) -> str:
    """A read-only link to one run on the Results page (no session in it); ``view``: what it
    opens on (``tab``, ``variant``, ``margin``)."""
    from urllib.parse import urlencode, urlsplit, urlunsplit
    query = urlencode({RUN_PARAM: run_id, **view})
    try:
        url = st.context.url
    except Exception:  # no browser behind this session
        url = None
    if not url:
        return f"results?{query}"
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rsplit("/", 1)[0] + "/results",
                       query, ""))


def view_params(url) -> dict:
    """What a page's ``links.UrlForm`` wrote into the URL: the view a link reopens."""
    return dict(st.session_state.get(url.memory) or {})


# The worker's start-up (importing torch) takes a core for seconds; started at once it made
# the first page draw 2 s later on two cores. Started after this delay, it is ready long before
# a user has set the toggles, and a click on Run benchmark starts it at once anyway.
WORKER_START_DELAY_S = 3.0


def ensure_worker_once() -> None:
    """Start the CPU worker soon after a session first opens the app, once the page has drawn;
    a submit checks again and starts it at once if needed."""
    if st.session_state.get(WORKER_STARTED):
        return
    UploadFolder.sweep_stale()
    try:
        q = queue()
        if not q.worker_alive("cpu"):
            timer = threading.Timer(WORKER_START_DELAY_S, _start_quietly, args=(q, "cpu"))
            timer.daemon = True
            timer.start()
        st.session_state[WORKER_STARTED] = True
    except Exception as exc:  # the page still draws; submitting retries and reports
        st.session_state[WORKER_STARTED] = False
        st.sidebar.warning(f"The benchmark worker could not start: {md(one_line(exc))}")


def _start_quietly(q, device: str) -> None:
    try:
        q.ensure_worker(device)
    except Exception:  # a submit retries and shows the reason
        pass


UPLOAD_PREFIX = "cb-upload-"
STALE_UPLOAD_S = 24 * 3600  # folders older than this belong to sessions long gone


class UploadFolder:
    """Owns one session's private folder for uploaded checkpoints (mode 0700). The folder is
    deleted with the session: Streamlit drops a session's state some time after its browser
    disconnects, this object goes with it, and the finalizer removes the folder (also at
    server exit). ``sweep_stale`` catches anything a crash left behind."""

    def __init__(self):
        self.path = Path(tempfile.mkdtemp(prefix=UPLOAD_PREFIX))
        os.chmod(self.path, 0o700)
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)

    def clear(self) -> None:
        self._finalizer()

    @staticmethod
    def sweep_stale(max_age_s: float = STALE_UPLOAD_S) -> int:
        now, removed = time.time(), 0
        for folder in Path(tempfile.gettempdir()).glob(UPLOAD_PREFIX + "*"):
            try:
                if folder.is_dir() and now - folder.stat().st_mtime > max_age_s:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed += 1
            except OSError:
                continue
        return removed


def upload_bytes() -> int:
    """What uploads hold now: sessions' folders and the queued jobs' own folders."""
    total = 0
    for folder in Path(tempfile.gettempdir()).glob(UPLOAD_PREFIX + "*"):
        for path in folder.glob("*"):
            try:
                total += path.stat().st_size
            except OSError:
                continue
    return total + queue().attachment_bytes()


def upload_dir() -> Path:
    """This session's private folder for uploaded checkpoints."""
    folder = st.session_state.get(UPLOAD_DIR)
    if not isinstance(folder, UploadFolder) or not folder.path.is_dir():
        folder = UploadFolder()
        st.session_state[UPLOAD_DIR] = folder
    return folder.path


def save_upload(file, accepted: list[str]) -> str:
    """Write an uploaded checkpoint into this session's private folder, for ``submit`` to
    move into the job's own folder. The uploads held on the server are capped in total."""
    import re

    from benchmarks.spec.limits import MIB
    suffix = Path(file.name).suffix.lower()
    if suffix.lstrip(".") not in accepted:
        raise ValueError(f"checkpoint {file.name}: accepted formats are "
                         f"{', '.join('.' + a for a in accepted)}")
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(file.name).stem)[:64] or "checkpoint"
    path = upload_dir() / f"{stem}-{file.file_id[:8]}{suffix}"
    if path.exists():  # saved already (the form checks it before the click): counted once
        return str(path)
    data = file.getvalue()
    if not data:
        raise ValueError(f"checkpoint {file.name} is empty")
    cap, held = limits().upload_mb, upload_bytes()
    if held + len(data) > cap * MIB:
        raise ValueError(f"checkpoint {file.name} ({len(data) / MIB:.0f} MB) would take the "
                         f"uploads held on this server past {cap} MB (COMPRESSION_BENCH_"
                         f"UPLOAD_MB; {held / MIB:.0f} MB are held by queued jobs): try again "
                         f"when they have run")
    # Owner-only from the start (a member's upload is theirs alone).
    with os.fdopen(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "wb") as f:
        f.write(data)
    return str(path)


def models_dir() -> Path:
    """The server's folder of allowed model files (users cannot point anywhere else); the
    worker checks the same folder (benchmarks.zoo.models.models_dir)."""
    from benchmarks.zoo.models import models_dir as engine_models_dir
    return Path(engine_models_dir()).resolve()


def image_folder(typed: str) -> str:
    """The dataset name for an image folder typed on a page: inside the operator's data
    folder (COMPRESSION_BENCH_DATA_DIR) or refused with one line that reveals nothing else."""
    from benchmarks.spec.folders import data_dir, inside
    path = inside(data_dir(), typed)
    if not path.is_dir():
        raise ValueError(f"the data folder has no folder {typed.strip()!r}")
    return f"imagefolder:{path}"


def data_folders() -> list[str]:
    from benchmarks.spec.folders import data_dir, subfolders
    return subfolders(data_dir())


def _private_host(host: str) -> bool | None:
    """True for a loopback or private address, False for a public one, None for a name (no
    lookup: the server reaches for no network, and a name can point anywhere)."""
    import ipaddress
    host = host.strip().strip("[]")
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    return ip.is_private or ip.is_loopback


LOCAL_ADDRESSES = ("localhost", "127.0.0.1", "::1", "[::1]")


def serves_others() -> bool:
    """Whether this server can be reached from other machines: bound to anything but the
    loopback (``server.address``; unset binds every interface). A local `make run` is
    localhost only, and there a root worker is the person's own choice, not a risk to others."""
    address = st.get_option("server.address")
    return not address or str(address).strip() not in LOCAL_ADDRESSES


def cluster_exposure(cluster: dict | None) -> tuple[str | None, str | None]:
    """(the cluster's address as the operator gave it, a warning or None). Ray binds every
    interface whatever ``--node-ip-address`` says, with no authentication: the warning names
    the head or nodes whose address is not a private one (docs/ray.md)."""
    from benchmarks.service.queue import ray_address
    address = ray_address()
    if not address:
        return None, None
    head = address.split("://", 1)[-1].rsplit(":", 1)[0] if ":" in address else address
    hosts = [head] + [str(n.get("address") or "") for n in (cluster or {}).get("nodes") or []]
    public = [h for h in dict.fromkeys(hosts) if h and h != "auto" and _private_host(h) is False]
    named = [h for h in dict.fromkeys(hosts) if h and h != "auto" and _private_host(h) is None]
    if public:
        return address, (f"The Ray cluster is reachable at a public address ({', '.join(public)})"
                         f": Ray has no authentication and binds every interface, so anyone "
                         f"who reaches it can run code on it. Firewall its ports (docs/ray.md).")
    if named:
        return address, (f"The Ray cluster is named {', '.join(named)}: make sure it resolves "
                         f"to a private address and that its ports are firewalled (Ray has no "
                         f"authentication and binds every interface).")
    return address, None


def cache_line() -> str:
    """The weights cache's use against its cap, for the sidebar."""
    from benchmarks.run.cache import usage_bytes
    from benchmarks.spec.folders import default_cache_dir
    from benchmarks.spec.limits import MIB, Limits
    used = usage_bytes(default_cache_dir())
    try:
        cap = limits().cache_mb
    except Exception:  # the store cannot be opened (a full disk): the page says so, once
        cap = Limits.from_env().cache_mb
    return (f"Weights cache: {used / MIB:,.0f} MB of {cap:,} MB (least recently used "
            f"entries are evicted beyond)")



def require_login() -> None:
    """Sign-in, where the operator configured an identity provider for Streamlit's ``st.login``
    (an ``[auth]`` section in ``.streamlit/secrets.toml``); without one the app is open to
    whoever can reach it, which by default is only this machine (the server binds localhost)."""
    try:
        configured = "auth" in st.secrets
    except Exception:  # no secrets file at all
        configured = False
    if not configured or st.user.get("is_logged_in", False):
        return
    st.title("Compression benchmark")
    st.write("Sign in to run and compare experiments.")
    st.button("Log in", on_click=st.login, type="primary")
    st.stop()


def export_allowed(run: dict) -> bool:
    """Whether this session may export the models of ``run``: the one rule the Results page
    asks (who may take a model away lives here, not in the page)."""
    return run.get("kind", "sweep") == "sweep"
