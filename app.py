"""The compression trade-off dashboard: `make run` (streamlit run app.py).

Page config, the shared sidebar (the worker's device card) and navigation. Pages are thin:
they read state, call the engine through the job queue, and render with dashboard/.
Nothing here imports torch: the sweep runs in the queue's worker process.
"""

import streamlit as st

from dashboard import state, widgets

st.set_page_config(page_title="Compression benchmark", page_icon=":material/compress:", layout="wide")

state.require_login()
state.session_key()
state.ensure_worker_once()
if st.session_state.pop(state.NEW_SESSION, False):
    st.warning("This link's session was not issued to this browser, so a new session started. "
               "To show someone a run, send the link on its Results page.")

pages = [
    st.Page("pages/experiment.py", title="Experiment", icon=":material/science:", default=True),
    st.Page("pages/results.py", title="Results", icon=":material/bar_chart:"),
    st.Page("pages/history.py", title="History", icon=":material/history:"),
    st.Page("pages/distributed.py", title="Distributed", icon=":material/hub:"),
]
page = st.navigation(pages)

with st.sidebar:
    st.caption("Benchmark worker")
    widgets.device_card(widgets.worker_card("cpu"))
    widgets.my_jobs_panel()
    st.caption(state.cache_line())

page.run()
