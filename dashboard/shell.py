"""The frame every page is drawn in: page config, sign-in, the session, the worker, the
sidebar. ``app.py`` draws it and routes with ``st.navigation``.

A deep link (``/results?run=...`` opened in a new browser) is served by Streamlit as the page
file on its own, without ``app.py`` (its ``pages/`` folder is also a classic multipage app):
every page therefore calls ``standalone()`` first, which draws the same frame when
``app.py`` did not, so sign-in and the session hold on every URL. Both ways the page links are
drawn here (``st.page_link``); Streamlit's own lists are hidden
(``client.showSidebarNavigation = false``, ``st.navigation(position="hidden")``), so every
URL shows the same sidebar.
"""

from __future__ import annotations

import threading

import streamlit as st

from dashboard import identity, state, widgets
from dashboard.identity import trusted_proxies

PAGES = (("pages/experiment.py", "Experiment", ":material/science:"),
         ("pages/results.py", "Results", ":material/bar_chart:"),
         ("pages/history.py", "History", ":material/history:"),
         ("pages/distributed.py", "Distributed", ":material/hub:"))

_routed = threading.local()  # set while app.py runs the page it routed to


def frame() -> None:
    """Everything a page needs before it draws; stops the run for sign-in."""
    st.set_page_config(page_title="Compression benchmark", page_icon=":material/compress:",
                       layout="wide")
    if state.serves_others() or trusted_proxies():
        # Others reach this server (bound beyond the loopback, or behind a proxy): an error
        # no page caught shows its type only, never a traceback naming the server's files.
        st.set_option("client.showErrorDetails", "type")
    state.require_login()
    state.session_key()
    state.ensure_worker_once()
    if st.session_state.pop(state.NEW_SESSION, False):
        st.warning("This link's session was not issued to this browser, so a new session "
                   "started. To show someone a run, send the link on its Results page.")
    if state.browser_identity() == identity.CONFLICT:
        st.warning("This browser sent two identity cookies for this site: another page on "
                   "this host name set one. Neither is believed, so what you run in this tab "
                   "is yours only until it closes. Clear this site's cookies to start afresh.")


def sidebar() -> None:
    from streamlit.errors import StreamlitAPIException
    with st.sidebar:
        for path, title, icon in PAGES:
            try:
                st.page_link(path, label=title, icon=icon)
            except StreamlitAPIException:  # a page script run as its own app (AppTest)
                break
        st.caption("Benchmark worker")
        widgets.device_card(widgets.worker_card("cpu"))
        widgets.my_jobs_panel()
        st.caption(state.cache_line())
        this_browser()


def this_browser() -> None:
    """Without sign-in the browser owns its runs (its identity cookie): it may forget itself,
    on a shared computer say. With sign-in the user does, from any browser."""
    if state.signed_in_email():
        return
    found = state.browser_identity()
    if found is None:
        st.caption("This browser sent no identity cookie that verifies (are cookies blocked? "
                   "was it forgotten in another tab? reload): what you run here is yours "
                   "only while this tab is open.")
    if not isinstance(found, identity.Identity):
        return
    with st.popover("Forget this browser"):
        st.write("The runs and jobs this browser made stay with its old identity, read-only "
                 "for everyone from then on, this browser included; it starts afresh with a "
                 "new one. (Clearing this site's cookies instead would leave the old identity "
                 "valid wherever a copy of its cookie is.)")
        if st.button("Forget it", key="forget_browser", type="primary"):
            state.forget_browser()
            st.stop()


def route() -> None:
    """app.py: the frame, the navigation, the sidebar, then the chosen page."""
    frame()
    page = st.navigation([st.Page(path, title=title, icon=icon, default=i == 0)
                          for i, (path, title, icon) in enumerate(PAGES)], position="hidden")
    sidebar()
    _routed.active = True
    try:
        page.run()
    finally:
        _routed.active = False


def standalone() -> None:
    """At the top of every page: the frame and links to the other pages, unless app.py has
    drawn them already in this run."""
    if getattr(_routed, "active", False):
        return
    frame()
    sidebar()
