"""Security defaults of the dashboard server: loopback only, XSRF on, uploads capped."""

from __future__ import annotations

import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers import ROOT, scaled, scaled_ms

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


@pytest.mark.parametrize("script", ["app.py", "pages/results.py", "pages/history.py",
                                    "pages/experiment.py", "pages/distributed.py"])
def test_sign_in_is_required_once_an_identity_provider_is_configured(tmp_path, monkeypatch,
                                                                     script):
    """On the app and on every page's own URL: a deep link (``/results?run=...``) is served
    by Streamlit as the page file alone, without app.py, and must ask for sign-in too."""
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(tmp_path / "results.db"))
    at = AppTest.from_file(str(ROOT / script), default_timeout=scaled(60))
    at.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback",
                          "cookie_secret": "x" * 32, "client_id": "bench",
                          "client_secret": "s", "server_metadata_url":
                              "http://localhost:9/.well-known/openid-configuration"}
    at.query_params["run"] = "any"
    at.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Log in"]  # nothing else is reachable
    assert not at.title or [t.value for t in at.title] == ["Compression benchmark"]


# -- the team server: DNS rebinding, private files, sessions bound to their browser -----------

def _http_status(port: int, host: str, path: str = "/", origin: str | None = None,
                 websocket: bool = False) -> int:
    """The status line's code of one raw request with the given Host (and Origin): a
    WebSocket handshake answers 101 when accepted."""
    import base64
    import os
    import socket
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    if websocket:
        lines[-1] = "Connection: Upgrade"
        lines += ["Upgrade: websocket", "Sec-WebSocket-Version: 13",
                  f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}"]
    if origin:
        lines.append(f"Origin: {origin}")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head = s.recv(4096).split(b"\r\n", 1)[0]
    return int(head.split()[1])


def test_a_foreign_host_header_is_refused_for_pages_and_websockets(tmp_path):
    """DNS rebinding: an attacker's name resolving to 127.0.0.1, opened in a team member's
    browser, sends its own Host and Origin. The page and the WebSocket are refused; the
    configured names are served."""
    from tools.browser import running_server
    assert "localhost" in config()["server"]["allowedHosts"]
    with running_server(tmp_path / "results.db") as (_, url):
        port = int(url.rsplit(":", 1)[1])
        evil = f"rebind.example:{port}"
        assert _http_status(port, f"localhost:{port}") == 200
        assert _http_status(port, f"127.0.0.1:{port}") == 200
        assert _http_status(port, f"[::1]:{port}") == 200  # configured: served (issue 21.8)
        assert _http_status(port, f"[::2]:{port}") == 400
        assert _http_status(port, evil) == 400
        assert _http_status(port, evil, "/_stcore/health") == 400
        assert _http_status(port, f"localhost:{port}", "/_stcore/stream",
                            f"http://localhost:{port}", websocket=True) == 101
        assert _http_status(port, evil, "/_stcore/stream", f"http://{evil}",
                            websocket=True) == 400
        assert _http_status(port, f"localhost:{port}", "/_stcore/stream", f"http://{evil}",
                            websocket=True) != 101  # a foreign page's script, local Host


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.browser
def test_store_log_secret_and_cache_are_owner_only_and_hold_no_session_key(tmp_path):
    """What the server and its worker create is readable by their owner only, and the
    database keeps owners as digests, never a session key or the browser's identity."""
    from playwright.sync_api import expect

    from benchmarks.service.queue import JobQueue
    from benchmarks.spec.sweep import SweepSpec
    from helpers import chromium, wait_until
    from tools.browser import running_server
    folder, cache = tmp_path / "srv", tmp_path / "cache"
    store = folder / "results.db"
    with chromium() as browser, running_server(store, {"COMPRESSION_BENCH_CACHE": str(cache)}
                                               ) as (_, url):
        page = browser.new_page()
        page.goto(url)
        expect(page.get_by_role("button", name="Run benchmark")).to_be_visible(
            timeout=scaled_ms(60_000))
        page.get_by_role("button", name="Run benchmark").click()
        queue = JobQueue(store)
        job = wait_until(lambda: (js := queue.jobs()) and js[0].run_id
                         and queue.store.run(js[0].run_id)["variants"] and js[0], 240,
                         "the first variant")
        key = page.url.split("session=", 1)[1].split("&", 1)[0]
        (browser_id,) = [c["value"].split(".")[0] for c in page.context.cookies()
                         if c["name"] == "cb_identity"]
        queue.cancel(job.job_id)
        wait_until(lambda: queue.get(job.job_id).finished, 60, "the cancel")
        extra = queue.submit("sweep", SweepSpec(epochs=1, min_time_s=0.05).to_dict(),
                             session="t")
        wait_until(lambda: queue.get(extra).finished, 240, "a second job")
    own = folder / "results.db.server"  # the server's own: secret, the worker's log and lock
    assert _mode(folder) == 0o700 and _mode(cache) == 0o700 and _mode(own) == 0o700
    assert {p.name for p in own.iterdir()} >= {"secret", "worker-cpu.log", "worker-cpu.lock"}
    for path in [store, store.with_name("results.db-wal"), store.with_name("results.db-shm"),
                 *own.iterdir(), *cache.iterdir()]:
        if path.exists():
            assert _mode(path) == 0o600, (path, oct(_mode(path)))
    assert list(cache.glob("*.safetensors"))
    stored = b"".join(p.read_bytes() for p in folder.glob("results.db*") if p.is_file())
    assert key.encode() not in stored and key[:16].encode() not in stored
    assert browser_id.encode() not in stored  # nor the browser's identity


@pytest.mark.browser
def test_a_session_url_opened_in_another_browser_is_a_new_session(tmp_path):
    """A copied session URL (a shared link, a proxy log) in a second browser: not the same
    session; it neither sees nor can cancel the first browser's jobs. A refresh in the first
    browser keeps its session and its job."""
    from playwright.sync_api import expect

    from benchmarks.service.queue import JobQueue
    from benchmarks.spec.sweep import SweepSpec
    from helpers import chromium, wait_until
    from tools.browser import running_server
    store = tmp_path / "results.db"
    with chromium() as browser, running_server(store) as (_, url):
        queue = JobQueue(store)
        slow = SweepSpec.from_toggles(prune=0.5, amp=True, epochs=1, min_time_s=3.0)
        queue.submit("sweep", slow.to_dict(), session="someone else")
        first = browser.new_context().new_page()
        first.goto(url)
        run = first.get_by_role("button", name="Run benchmark")
        expect(run).to_be_visible(timeout=scaled_ms(60_000))
        run.click()
        expect(first.get_by_text("Queued: place", exact=False)).to_be_visible(
            timeout=scaled_ms(60_000))
        link = first.url
        key = link.split("session=", 1)[1].split("&", 1)[0]
        mine = wait_until(lambda: [j for j in queue.jobs() if j.session != "someone else"],
                          30, "the first browser's job")

        second = browser.new_context().new_page()  # another browser: its own cookies
        second.goto(link)
        expect(second.get_by_text("was not issued to this browser", exact=False)
               ).to_be_visible(timeout=scaled_ms(60_000))
        assert key not in second.url
        expect(second.get_by_text("My jobs (0 active)")).to_be_visible()
        expect(second.get_by_role("button", name="Cancel")).to_have_count(0)

        first.reload()  # the same browser keeps its session and finds its job
        expect(first.get_by_text("Queued: place", exact=False)).to_be_visible(
            timeout=scaled_ms(60_000))
        assert key in first.url
        expect(first.get_by_text("My jobs (1 active)")).to_be_visible()
        assert queue.get(mine[0].job_id).status in ("queued", "running")
        for job in queue.jobs():
            queue.cancel(job.job_id)
