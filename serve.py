"""The dashboard's server: `streamlit run serve.py` (what `make run` starts).

``app.py`` is the page script; this wraps it in Streamlit's ASGI app with one addition: an
HTTP request or WebSocket whose Host header is not in ``server.allowedHosts``
(``.streamlit/config.toml``: localhost by default) is refused with 400 before Streamlit sees
it. Streamlit itself checks that list on its WebSocket only, so a DNS-rebinding page (an
attacker's name resolving to 127.0.0.1, opened in a team member's browser) would still load.
To serve under another name (behind a reverse proxy), add that name to ``allowedHosts``.
"""

import streamlit as st
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from streamlit import config

# An empty list means "any host" to Streamlit; here it falls back to the safe default.
ALLOWED_HOSTS = list(config.get_option("server.allowedHosts") or ["localhost", "127.0.0.1"])

app = st.App("app.py", middleware=[
    Middleware(TrustedHostMiddleware, allowed_hosts=ALLOWED_HOSTS, www_redirect=False)])
