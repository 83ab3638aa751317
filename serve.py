"""The dashboard's server: `streamlit run serve.py` (what `make run` starts).

``app.py`` is the page script; this wraps it in Streamlit's ASGI app with three additions
(``dashboard/asgi.py``, ``dashboard/upload_limits.py``), all in front of Streamlit:

- an HTTP request or WebSocket whose Host header is not in ``server.allowedHosts``
  (``.streamlit/config.toml``: localhost by default, ``[::1]`` included) is refused with 400.
  Streamlit itself checks that list on its WebSocket only, so a DNS-rebinding page (an
  attacker's name resolving to 127.0.0.1, opened in a team member's browser) would still load.
  To serve under another name (behind a reverse proxy), add that name to ``allowedHosts``.
- the browser's identity (who owns its runs without sign-in) is a cookie of the app's own,
  set here HttpOnly and SameSite=Strict, and a WebSocket opened by a page of another origin
  (another port of the same host included) is refused (``dashboard/identity.py``).
- uploads are capped in total, per session and for the whole server (413 with a one-line
  reason past either), counted as the body streams; uploads no widget claims are dropped.

It also starts the job queue's supervisor with the server, so jobs left queued by a restart
run again without waiting for someone to open a page.
"""

import sys
from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config

from dashboard.asgi import HostCheck, IdentityCookie
from dashboard.upload_limits import UploadLimits, drop_unclaimed_forever

def limits_or_exit():
    """The operator's limits (``benchmarks.spec.limits``, their one validation) read before the
    server listens: a bad value is its one line and exit 2, not the lifespan's traceback."""
    from benchmarks.spec.limits import Limits
    try:
        return Limits.from_env()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


limits_or_exit()

# An empty list means "any host" to Streamlit; here it falls back to the safe default.
ALLOWED_HOSTS = list(config.get_option("server.allowedHosts") or ["localhost", "127.0.0.1"])


@asynccontextmanager
async def supervised(_app):
    import asyncio

    from benchmarks.service.queue import JobQueue
    from benchmarks.store.database import default_store_path
    # The same queue object the pages take (dashboard.state.queue): one supervisor, which
    # starts and so reaps every worker of this server.
    queue = JobQueue.shared(default_store_path())
    sweeper = asyncio.create_task(drop_unclaimed_forever())
    try:
        yield None
    finally:
        sweeper.cancel()
        queue.stop_supervising()


app = st.App("app.py", lifespan=supervised, middleware=[
    Middleware(HostCheck, allowed_hosts=ALLOWED_HOSTS),
    Middleware(IdentityCookie, base_url_path=config.get_option("server.baseUrlPath")),
    Middleware(UploadLimits)])
