"""The ASGI layer serve.py puts in front of Streamlit: the Host check, the identity cookie and
the upload caps.

All are plain ASGI middleware (no Starlette request objects: the upload body is counted as it
streams, never buffered here). ``HostCheck`` answers a request or WebSocket whose Host is not
in ``server.allowedHosts`` with 400; ``IdentityCookie`` issues, re-signs and verifies the
browser's identity cookie (``dashboard/identity.py``) and refuses a WebSocket opened by a page
of another origin; ``UploadLimits`` (``dashboard/upload_limits.py``) caps what uploads may hold
in the server's memory.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

from dashboard import identity


def host_name(header: str) -> str:
    """The name in a Host header, without its port: ``[::1]:8501`` -> ``::1``,
    ``localhost:8501`` -> ``localhost``, ``::1`` (bare, as some clients send) -> ``::1``."""
    text = (header or "").strip().lower()
    if text.startswith("["):  # an IPv6 literal: [ADDR] or [ADDR]:PORT
        end = text.find("]")
        return text[1:end] if end > 0 else ""
    if text.count(":") == 1:
        return text.split(":", 1)[0]
    return text  # a name without a port, or a bare IPv6 address


def host_allowed(name: str, allowed: list[str]) -> bool:
    """Exact names, ``*.example.com`` for any sub-domain, ``*`` for any host."""
    for pattern in allowed:
        pattern = pattern.strip().lower().strip("[]")
        if pattern == "*" or name == pattern:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


async def _refuse(scope, receive, send, status: int, text: str, close: bool = True) -> None:
    """A plain-text HTTP answer, or a WebSocket closed before it was accepted. With
    ``close=False`` the connection stays open: the server reads and drops what is left of
    the request's body, so a client that sends its whole body before reading still gets the
    answer rather than a reset."""
    if scope["type"] == "websocket":
        # Refusing the handshake: the client sees the HTTP status (Starlette's own way).
        await send({"type": "websocket.http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
        await send({"type": "websocket.http.response.body", "body": text.encode()})
        return
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status,
                "headers": headers + ([(b"connection", b"close")] if close else [])})
    await send({"type": "http.response.body", "body": body})


def header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class HostCheck:
    """400 for any HTTP request or WebSocket whose Host is not allowed (DNS rebinding)."""

    def __init__(self, app, allowed_hosts: list[str]):
        self.app, self.allowed = app, list(allowed_hosts)

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and \
                not host_allowed(host_name(header(scope, b"host") or ""), self.allowed):
            await _refuse(scope, receive, send, 400, "Invalid host header")
            return
        await self.app(scope, receive, send)


def host_port(header: str) -> int | None:
    """The port in a Host header, None where it names none."""
    text = (header or "").strip()
    tail = text[text.find("]") + 1:] if text.startswith("[") else (
        text if text.count(":") == 1 else "")
    _, colon, port = tail.rpartition(":")
    return int(port) if colon and port.isdigit() else None


def same_origin(origin: str, host: str) -> bool:
    """Whether a page at ``origin`` (the Origin header) is the app itself, reached as ``host``
    (the Host header): the same name and port. Cookies are not separated by port, but origins
    are: a page on another port of the same host is another origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False  # "null": a sandboxed frame, a file
    default = 443 if parts.scheme == "https" else 80
    return (parts.hostname.lower() == host_name(host)
            and (port or default) == (host_port(host) or default))


def cookie_headers(scope) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers") or () if k.lower() == b"cookie"]


class IdentityCookie:
    """The browser's identity cookie (``dashboard/identity.py``), set by the server alone.

    - On the health check every page makes before it opens its WebSocket (a same-origin
      request, so a ``SameSite=Strict`` cookie is always sent with it, even when the page was
      reached from another site's link and the page's own request went without), the
      response issues a new identity to a browser that sent none that verifies, and re-signs
      one older than ``identity.ROTATE_S``. Nothing is set where several identities arrived
      (one may be the browser's own).
    - On the WebSocket's handshake, a page of another origin is refused (Streamlit alone
      accepts any port of localhost, and the browser would send it this browser's cookie),
      and the Cookie header Streamlit sees carries, under ``identity.COOKIE``, only the
      identity that verified for this scheme (or ``identity.CONFLICT``): the page reads it
      there (``st.context.cookies``) and verifies it again.
    """

    def __init__(self, app, base_url_path: str = "", store_path=None):
        self.app = app
        self.path = identity.cookie_path(base_url_path)
        self.trusted = identity.trusted_proxies()
        self.store_path = store_path
        self._secret: bytes | None = None

    def _store(self) -> Path:
        if self.store_path is None:
            from benchmarks.store.database import default_store_path
            self.store_path = default_store_path()
        return Path(self.store_path)

    def _found(self, scope) -> tuple[bool, identity.Identity | None, bool]:
        """(over TLS, the identity the request carries, whether several did)."""
        if self._secret is None:
            self._secret = identity.server_secret(self._store())
        client = scope.get("client")
        secure = identity.request_is_secure(
            scope.get("scheme", "http"), client[0] if client else None,
            [v.decode("latin-1") for k, v in scope.get("headers") or ()
             if k.lower() == b"x-forwarded-proto"], self.trusted)
        found, conflict = identity.from_cookies(
            cookie_headers(scope), secure, self.path, self._secret,
            identity.revoked(self._store()))
        return secure, found, conflict

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            origin = header(scope, b"origin")
            if origin is not None and not same_origin(origin, header(scope, b"host") or ""):
                await _refuse(scope, receive, send, 403,
                              "A page of another origin may not open this app's WebSocket")
                return
            scope = self._handed_on(scope)
        elif (scope["type"] == "http" and scope.get("method") in ("GET", "HEAD")
              and scope.get("path", "").endswith("/_stcore/health")
              and header(scope, b"sec-fetch-site") != "cross-site"):
            send = self._issuing(scope, send)
        await self.app(scope, receive, send)

    def _handed_on(self, scope):
        """The WebSocket's scope with the identity cookies replaced by the one verdict."""
        _, found, conflict = self._found(scope)
        kept = [chunk.strip() for text in cookie_headers(scope) for chunk in text.split(";")
                if chunk.strip() and chunk.split("=", 1)[0].strip() not in identity.NAMES]
        verdict = found.value if found else identity.CONFLICT if conflict else None
        if verdict:
            kept.append(f"{identity.COOKIE}={verdict}")
        headers = [(k, v) for k, v in scope.get("headers") or () if k.lower() != b"cookie"]
        if kept:
            headers.append((b"cookie", "; ".join(kept).encode("latin-1")))
        return {**scope, "headers": headers}

    def _issuing(self, scope, send):
        secure, found, conflict = self._found(scope)
        if conflict or (found and time.time() - found.issued < identity.ROTATE_S):
            return send
        value = identity.issue(self._secret, found.id if found else None)
        cookie = identity.set_cookie(identity.cookie_name(secure, self.path), value,
                                     self.path, secure).encode("latin-1")

        async def sending(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*(message.get("headers") or ()),
                                                  (b"set-cookie", cookie)]}
            await send(message)
        return sending
