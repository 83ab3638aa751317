"""The root-worker warning only where it matters (issue 32.16): a plain local `make run` (bound
to localhost, the person's own machine) shows none; a server others can reach shows it."""

from __future__ import annotations

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest


def _card():
    from dashboard import widgets
    widgets.device_card({"device_name": "cpu", "devices": ["cpu"], "torch": "2", "threads": 1,
                         "cpu": "test", "user": "root"})


@pytest.mark.parametrize("address, warned", [("localhost", False), ("127.0.0.1", False),
                                              ("0.0.0.0", True), ("", True)])
def test_the_root_worker_warning_shows_only_on_a_server_others_reach(address, warned):
    before = config.get_option("server.address")
    config.set_option("server.address", address)
    try:
        at = AppTest.from_function(_card).run()
    finally:
        config.set_option("server.address", before)
    assert not at.exception
    shown = any("runs as root" in c.value for c in at.caption)
    assert shown is warned
