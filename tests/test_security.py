"""Security defaults of the dashboard server: loopback only, XSRF on, uploads capped."""

from __future__ import annotations

import tomllib
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1 as /proc shows


def config() -> dict:
    return tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())


def test_config_binds_localhost_keeps_xsrf_and_caps_uploads():
    server = config()["server"]
    assert server["address"] == "localhost"
    assert server["enableXsrfProtection"] is True
    assert 0 < server["maxUploadSize"] <= 200
    assert config()["browser"]["gatherUsageStats"] is False



def test_config_turns_the_file_watcher_off():
    # Polling every imported module for edits cost each page load about a second on 2 cores
    # (docs/PERFORMANCE.md, first page drawn); users do not edit the app while they run it.
    assert config()["server"]["fileWatcherType"] == "none"


def _listening(port: int) -> list[str]:
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append(address)
    return found


def test_the_running_server_listens_on_loopback_only_and_refuses_forged_uploads(tmp_path):
    from tools.browser import running_server
    with running_server(tmp_path / "results.db") as (_, url):
        port = int(url.rsplit(":", 1)[1])
        addresses = _listening(port)
        assert addresses and set(addresses) <= LOOPBACK, addresses
        # An upload without the XSRF token (a forged cross-site request) is refused.
        forged = urllib.request.Request(f"{url}/_stcore/upload_file/session/file",
                                        data=b"x" * 16, method="PUT")
        try:
            urllib.request.urlopen(forged, timeout=10)
            raise AssertionError("the forged upload was accepted")
        except urllib.error.HTTPError as err:
            assert err.code == 403


def test_sign_in_is_required_once_an_identity_provider_is_configured(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(tmp_path / "results.db"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback",
                          "cookie_secret": "x" * 32, "client_id": "bench",
                          "client_secret": "s", "server_metadata_url":
                              "http://localhost:9/.well-known/openid-configuration"}
    at.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Log in"]  # nothing else is reachable
