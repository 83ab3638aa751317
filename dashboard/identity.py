"""Who is asking: server-minted session keys, bound to the browser, and owners.

A session key is ``ID`` + ``MAC``: a random id and an HMAC of it, made with the server's
secret, over the id and the browser's XSRF cookie token (Streamlit sets that cookie on the
first page load; it stays with the browser). The key travels in the URL so a refresh finds
the session's jobs again, yet a key the server did not mint, or one copied into another
browser (a shared link, a proxy log), does not verify there: that browser gets a session of
its own. What is shared between people is a read-only link to a run, never a session.

An owner is the signed-in user (``user:EMAIL``) when sign-in is configured, else the session
as a digest of its id (``session:...``): the store never holds a key that would verify.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import os
import secrets
from pathlib import Path

SECRET_ENV = "COMPRESSION_BENCH_SECRET"
TRUSTED_PROXIES_ENV = "COMPRESSION_BENCH_TRUSTED_PROXIES"
LOOPBACK = "loopback"  # Streamlit reports no address for a loopback connection
XSRF_COOKIE = "_streamlit_xsrf"  # Streamlit's double-submit cookie, one token per browser
ID_HEX, MAC_HEX = 16, 24


def server_secret(store_path: Path) -> bytes:
    """$COMPRESSION_BENCH_SECRET, else a random secret kept beside the store (0600, the
    server's own: the worker never reads it), made once: every server over the same store
    verifies the same keys, across restarts."""
    env = os.environ.get(SECRET_ENV)
    if env:
        return env.encode()
    from benchmarks.spec.folders import read_or_make_secret, secret_path
    return read_or_make_secret(secret_path(store_path))


def browser_binding(xsrf_cookie: str | None) -> str:
    """The browser's XSRF token (stable across page loads; the cookie's mask is not), as hex;
    "" where there is none (no XSRF protection, a test harness)."""
    if not isinstance(xsrf_cookie, str) or not xsrf_cookie:
        return ""
    value = xsrf_cookie.strip("\"'")
    try:
        version, mask_hex, masked_hex, _ = value.split("|")
        if version != "2":
            raise ValueError
        mask, masked = binascii.a2b_hex(mask_hex), binascii.a2b_hex(masked_hex)
    except ValueError:
        return hashlib.sha256(value.encode()).hexdigest()[:32]  # an unmasked token
    token = bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked))
    return token.hex()


def _mac(secret: bytes, session_id: str, binding: str) -> str:
    return hmac.new(secret, f"{session_id}|{binding}".encode(), hashlib.sha256
                    ).hexdigest()[:MAC_HEX]


def mint(secret: bytes, binding: str) -> str:
    session_id = secrets.token_hex(ID_HEX // 2)
    return session_id + _mac(secret, session_id, binding)


def browser_key(secret: bytes, binding: str) -> str:
    """The key of this browser (``binding``: its XSRF cookie's token, which Streamlit keeps
    for the browser's life): the same in every tab, so a new tab keeps its owner's runs, and
    nobody without the cookie can make it (``verify`` accepts it like a minted one)."""
    session_id = hmac.new(secret, f"browser|{binding}".encode(), hashlib.sha256
                          ).hexdigest()[:ID_HEX]
    return session_id + _mac(secret, session_id, binding)


def verify(key, secret: bytes, binding: str) -> bool:
    """Minted by this server, for this browser."""
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
