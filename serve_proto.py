import streamlit as st
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from streamlit import config
hosts = config.get_option("server.allowedHosts") or ["localhost"]
print("HOSTS", hosts, flush=True)
app = st.App("app.py", middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)])
