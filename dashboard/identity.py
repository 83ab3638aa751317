"""Who is asking: the browser's identity cookie, the session keys made from it, and owners.

Without sign-in a person is a browser, known by an identity cookie of the app's own
(``cb_identity``): ``ID.ISSUED.MAC``, a random id, when it was issued, and an HMAC of both with
the server's secret. The server sets it (``dashboard/asgi.py``: on the health check the page
makes before it opens its WebSocket) HttpOnly, ``SameSite=Strict``, on the app's path, for
``COOKIE_MAX_AGE_S`` (a closed browser keeps its runs), ``Secure`` and named ``__Host-`` (or
``__Secure-`` under a base path) under TLS; re-signs it when it is a day old; and believes a
value only while it verifies, is younger than its Max-Age and its id is not revoked (the
page's "Forget this browser"). Page scripts cannot read it, another app on the same host name
cannot forge one, and one it plants beside the browser's own makes neither believed.

A session key is ``KEY_ID`` + ``MAC``, an HMAC over the key's id and a binding: the identity's
id for a browser (``browser_key``: the same in every tab), a random value for a browser that
sent no identity (this tab only). It names the session in the URL (``?session=``), but grants
nothing there: the server derives the key from the cookie on every run, so a key copied into
another browser does not verify. What is shared between people is a read-only link to a run.

An owner is the signed-in user (``user:EMAIL``) when sign-in is configured, else the browser
as a digest of its key's id (``session:...``): the store never holds a key or an identity.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.spec.folders import revocations_path

SECRET_ENV = "COMPRESSION_BENCH_SECRET"
TRUSTED_PROXIES_ENV = "COMPRESSION_BENCH_TRUSTED_PROXIES"
LOOPBACK = "loopback"  # Streamlit reports no address for a loopback connection
ID_HEX, MAC_HEX = 16, 24

COOKIE = "cb_identity"  # the name over plain HTTP, and the one the page reads (see asgi.py)
COOKIE_MAC_HEX = 32
COOKIE_MAX_AGE_S = 30 * 24 * 3600  # a browser unused for a month starts afresh
ROTATE_S = 24 * 3600               # re-signed when older: a copy of an old value dies sooner
FUTURE_SKEW_S = 300                # a value issued "later" than now by more is not believed
# What the ASGI layer hands the page in place of the cookie when a request carried several
# identities that verify: one was planted beside the browser's own, and neither is believed.
CONFLICT = "conflict"


def server_secret(store_path: Path) -> bytes:
    """$COMPRESSION_BENCH_SECRET, else a random secret kept in the server's own folder beside
    the store (0600: the worker never reads it), made once: every server over the same store
    verifies the same keys, across restarts. The revocations file is made with it, before any
    worker starts (one could otherwise make it first, and own it)."""
    from benchmarks.spec.folders import (
        own_folder,
        private_folder,
        read_or_make_secret,
        secret_path,
        server_folder,
    )
    env = os.environ.get(SECRET_ENV)
    private_folder(Path(store_path).parent)
    own_folder(server_folder(store_path))  # the server's own: the worker cannot enter it
    os.close(_own_file(revocations_path(store_path)))
    if env:
        return env.encode()
    return read_or_make_secret(secret_path(store_path))


def _mac(secret: bytes, session_id: str, binding: str) -> str:
    return hmac.new(secret, f"{session_id}|{binding}".encode(), hashlib.sha256
                    ).hexdigest()[:MAC_HEX]


def mint(secret: bytes, binding: str) -> str:
    session_id = secrets.token_hex(ID_HEX // 2)
    return session_id + _mac(secret, session_id, binding)


def browser_key(secret: bytes, binding: str) -> str:
    """The key of the browser whose identity cookie's id is ``binding``: the same in every
    tab, so a new tab keeps its owner's runs, and nobody without the cookie can make it
    (``verify`` accepts it like a minted one)."""
    session_id = hmac.new(secret, f"browser|{binding}".encode(), hashlib.sha256
                          ).hexdigest()[:ID_HEX]
    return session_id + _mac(secret, session_id, binding)


def verify(key, secret: bytes, binding: str) -> bool:
    """Minted by this server, for this binding."""
    if not isinstance(key, str) or len(key) != ID_HEX + MAC_HEX:
        return False
    try:
        int(key, 16)
    except ValueError:
        return False
    return hmac.compare_digest(key[ID_HEX:], _mac(secret, key[:ID_HEX], binding))


def session_owner(key: str) -> str:
    """The session as an owner: a digest of its id, never the key itself."""
    return "session:" + hashlib.sha256(key[:ID_HEX].encode()).hexdigest()[:16]


def user_owner(email: str) -> str:
    return "user:" + email.strip().lower()


# -- the identity cookie -------------------------------------------------------------------------

@dataclass(frozen=True)
class Identity:
    """A verified identity cookie: its id, when it was issued, and the value itself."""
    id: str
    issued: int
    value: str


def _cookie_mac(secret: bytes, identity_id: str, issued: int) -> str:
    return hmac.new(secret, f"identity-cookie|{identity_id}|{issued}".encode(),
                    hashlib.sha256).hexdigest()[:COOKIE_MAC_HEX]


def issue(secret: bytes, identity_id: str | None = None, now: float | None = None) -> str:
    """An identity cookie's value: a new identity, or ``identity_id`` re-signed (rotation)."""
    identity_id = identity_id or secrets.token_hex(ID_HEX // 2)
    issued = int(time.time() if now is None else now)
    return f"{identity_id}.{issued}.{_cookie_mac(secret, identity_id, issued)}"


def read_cookie(value, secret: bytes, revoked: frozenset = frozenset(),
                now: float | None = None) -> Identity | None:
    """The identity ``value`` names where this server issued it, it has not expired and its
    id is not revoked; else None."""
    if not isinstance(value, str) or value.count(".") != 2:
        return None
    identity_id, issued_text, mac = value.split(".")
    if len(identity_id) != ID_HEX or len(mac) != COOKIE_MAC_HEX or not issued_text.isdigit():
        return None
    try:
        int(identity_id, 16)
    except ValueError:
        return None
    issued = int(issued_text)
    if not hmac.compare_digest(mac, _cookie_mac(secret, identity_id, issued)):
        return None
    age = (time.time() if now is None else now) - issued
    if not -FUTURE_SKEW_S <= age < COOKIE_MAX_AGE_S or revocation(identity_id) in revoked:
        return None
    return Identity(identity_id, issued, value)


def cookie_path(base_url_path: str | None) -> str:
    """The cookie's Path: the app's base path (``server.baseUrlPath``), so other apps under
    the same host name are not sent it."""
    base = (base_url_path or "").strip("/")
    return f"/{base}" if base else "/"


def cookie_name(secure: bool, path: str) -> str:
    """``cb_identity``; under TLS ``__Host-cb_identity``, which the browser accepts only
    Secure, from a secure page, with Path=/ and no Domain (so neither a plain-HTTP page nor a
    sibling sub-domain can set it), or under a base path ``__Secure-cb_identity`` (``__Host-``
    demands Path=/, which would send the identity to every path on the host name)."""
    if not secure:
        return COOKIE
    return ("__Host-" if path == "/" else "__Secure-") + COOKIE


NAMES = (COOKIE, "__Host-" + COOKIE, "__Secure-" + COOKIE)


def set_cookie(name: str, value: str, path: str, secure: bool,
               max_age: int = COOKIE_MAX_AGE_S) -> str:
    """The Set-Cookie header's value."""
    return "; ".join([f"{name}={value}", f"Path={path}", f"Max-Age={max_age}", "HttpOnly",
                      "SameSite=Strict", *(["Secure"] if secure else [])])


def cookie_pairs(headers: list[str]) -> list[tuple[str, str]]:
    """Every ``name=value`` of the Cookie headers, in order, repeated names kept (a planted
    cookie arrives beside the browser's own under the same name)."""
    pairs = []
    for text in headers:
        for chunk in text.split(";"):
            name, _, value = chunk.strip().partition("=")
            if name:
                pairs.append((name, value.strip().strip('"')))
    return pairs


def from_cookies(headers: list[str], secure: bool, path: str, secret: bytes,
                     revoked: frozenset = frozenset(), now: float | None = None
                     ) -> tuple[Identity | None, bool]:
    """(the identity a request's Cookie headers carry, whether several did). Only the name
    for this scheme counts (under TLS a plain ``cb_identity``, which any plain-HTTP page on
    the host name may set, is ignored). Where values of several identities verify, one was
    planted beside the browser's own and the order of cookies does not tell which: neither is
    believed (the browser is anonymous until it goes; planting spoils, it never takes)."""
    name = cookie_name(secure, path)
    found: dict[str, Identity] = {}
    for key, value in cookie_pairs(headers):
        known = read_cookie(value, secret, revoked, now) if key == name else None
        if known and (known.id not in found or known.issued > found[known.id].issued):
            found[known.id] = known
    if len(found) == 1:
        return next(iter(found.values())), False
    return None, len(found) > 1


# -- revocation ("Forget this browser") -------------------------------------------------------

def revocation(identity_id: str) -> str:
    """How the revocations file names an identity: a digest, never the id."""
    return hashlib.sha256(f"revoked|{identity_id}".encode()).hexdigest()[:32]


def _own_file(path: Path) -> int:
    """``path`` made empty and 0600 if absent; refused in one line where it is not this
    process's own and private (a worker running as another user could otherwise un-revoke)."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        os.close(fd)
        raise RuntimeError(f"{path} is not this server's own file (owned by uid "
                           f"{info.st_uid}, mode {info.st_mode & 0o777:o}; it must be uid "
                           f"{os.geteuid()}, mode 600)")
    return fd


def revoke(store_path, identity_id: str) -> None:
    """From now on no cookie naming ``identity_id`` verifies, on every server over the store."""
    fd = _own_file(revocations_path(store_path))
    try:
        os.write(fd, (revocation(identity_id) + "\n").encode())
    finally:
        os.close(fd)


_revoked_cache: dict[str, tuple[tuple[int, int], frozenset]] = {}
_revoked_lock = threading.Lock()


def revoked(store_path) -> frozenset:
    """The revoked identities (digests), read again only when the file changed: every page run
    and every WebSocket asks."""
    path = revocations_path(store_path)
    try:
        info = path.stat()
    except FileNotFoundError:
        return frozenset()
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise RuntimeError(f"{path} is not this server's own file (owned by uid "
                           f"{info.st_uid}, mode {info.st_mode & 0o777:o})")
    stamp = (info.st_mtime_ns, info.st_size)
    with _revoked_lock:
        cached = _revoked_cache.get(str(path))
        if cached and cached[0] == stamp:
            return cached[1]
        digests = frozenset(path.read_text().split())
        _revoked_cache[str(path)] = (stamp, digests)
        return digests


def request_is_secure(scheme: str, peer: str | None, forwarded_proto: list[str] | None,
                      trusted: tuple[str, ...]) -> bool:
    """Whether the browser reached the app over TLS: the connection's own scheme, or behind a
    proxy the operator trusts (COMPRESSION_BENCH_TRUSTED_PROXIES) its X-Forwarded-Proto."""
    if scheme in ("https", "wss"):
        return True
    if not trusted or not _is_trusted((peer or LOOPBACK).strip().lower(), trusted):
        return False
    said = [p.strip().lower() for value in forwarded_proto or [] for p in value.split(",")]
    return bool(said) and said[0] == "https"  # the first hop's: the browser's own scheme


# -- where a request comes from ----------------------------------------------------------------

def trusted_proxies(environ=None) -> tuple[str, ...]:
    """The proxies whose X-Forwarded-For the operator trusts: addresses or networks
    (``127.0.0.1``, ``10.0.0.0/8``; ``loopback`` for a proxy on this machine), comma-separated
    in COMPRESSION_BENCH_TRUSTED_PROXIES. None by default: the header is anyone's to write."""
    text = (os.environ if environ is None else environ).get(TRUSTED_PROXIES_ENV, "")
    return tuple(p.strip().lower() for p in text.split(",") if p.strip())


def _is_trusted(address: str, trusted: tuple[str, ...]) -> bool:
    import ipaddress
    if address == LOOPBACK:
        return any(t in (LOOPBACK, "127.0.0.1", "::1", "localhost") for t in trusted)
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for entry in trusted:
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            if entry == LOOPBACK and ip.is_loopback:
                return True
    return False


def client_address(peer: str | None, forwarded: list[str] | None,
                   trusted: tuple[str, ...]) -> str:
    """The client's address: the connection's peer (``loopback`` where Streamlit gives none),
    unless the peer is a trusted proxy: then the nearest address in X-Forwarded-For that is
    not one of the trusted proxies (the far end of the header is the client's to write)."""
    address = (peer or LOOPBACK).strip().lower()
    if not trusted or not _is_trusted(address, trusted):
        return address
    hops = [h.strip().lower() for value in forwarded or [] for h in value.split(",")
            if h.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop
    return address


def client_digest(address: str) -> str:
    """An address as the jobs table keeps it: a digest, compared, never shown."""
    return "addr:" + hashlib.sha256(address.encode()).hexdigest()[:16]
