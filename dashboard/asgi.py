"""The ASGI layer serve.py puts in front of Streamlit: the Host check and the upload caps.

Both are plain ASGI middleware (no Starlette request objects: the upload body is counted as it
streams, never buffered here). ``HostCheck`` answers a request or WebSocket whose Host is not
in ``server.allowedHosts`` with 400; ``UploadLimits`` (``dashboard/upload_limits.py``) caps
what uploads may hold in the server's memory.
"""

from __future__ import annotations


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
