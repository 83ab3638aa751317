"""Issue 31.1, 31.2, 31.3 and 31.10 where they were seen: the real server and Debian's Chromium. A
link whose parameter names and values are Markdown (a sign-in link, an image on a host the
link chose) draws them as text in the app's own warning, and the viewer's browser fetches
nothing from that host; a ``?run=`` link opened in a second browser context (someone who does
not own the run) shows no button that queues work on it, and a request to queue one anyway is
refused by the queue in one line."""

from __future__ import annotations

import http.server
import re
import threading
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from benchmarks.service.queue import JobQueue
from dashboard.identity import session_owner
from helpers import chromium, scaled_ms
from test_text_not_markup import SECRET, recommendation, store_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PAGE_MS = 60_000


class _Logger(http.server.BaseHTTPRequestHandler):
    """The host a hostile link points images at: it records every request it gets."""

    seen: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.seen.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def image_host():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Logger)
    _Logger.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Logger.seen
    finally:
        server.shutdown()
        server.server_close()


def markup_in_dom(page, host: str) -> dict:
    """What the page's DOM holds that only Markdown from the link or the store could make."""
    return page.evaluate("""host => ({
        links: [...document.querySelectorAll('[data-testid="stMain"] a, [data-testid="stSidebar"] a')]
            .map(a => a.getAttribute('href') || '')
            .filter(h => h.includes('evil.example') || h.includes(host) || h.startsWith('data:')),
        images: [...document.querySelectorAll('img')].map(i => i.getAttribute('src') || '')
            .filter(s => s.includes(host) || s.includes('127.0.0.1:1')),
        bold: [...document.querySelectorAll('strong, b')].map(b => b.textContent)
            .filter(t => t === 'bold' || t === 'x'),
    })""", host)


def test_hostile_links_are_text_and_a_shared_link_queues_nothing(tmp_path, image_host):
    from playwright.sync_api import expect

    from tools.browser import running_server
    host, requests = image_host
    store = tmp_path / "results.db"
    run_id = store_run(store, owner="session:alice", recommendation=recommendation())
    image = f"![p]({host}/name.png)"
    phish = "[Click to sign in again](https://evil.example/phish)"
    with chromium() as browser, running_server(store) as (_, url):
        # The Experiment page: a parameter named as a link, a model given as an image.
        page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        page.goto(f"{url}/?{urlencode({phish: '1', 'model': image})}")
        warning = page.get_by_text("This link's", exact=False)
        expect(warning).to_be_visible(timeout=scaled_ms(PAGE_MS))
        expect(warning).to_contain_text(phish)
        expect(warning).to_contain_text(image)
        assert markup_in_dom(page, host) == {"links": [], "images": [], "bold": []}

        # The run's link in a second browser: someone who does not own the run.
        other = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        other.goto(f"{url}/results?" + urlencode({"run": run_id, "tab": "Sensitivity",
                                                   "margin": image, image: "1"}))
        expect(other.get_by_text("Only the person who ran it can draw a sensitivity map")
               ).to_be_visible(timeout=scaled_ms(PAGE_MS))
        expect(other.get_by_text("Only the person who ran it can queue this recipe")
               ).to_be_visible(timeout=scaled_ms(PAGE_MS))
        # The page warns of the link's unusable parameters last, once its script has drawn
        # everything else.
        expect(other.get_by_text("This link's", exact=False)).to_contain_text(
            image, timeout=scaled_ms(PAGE_MS))
        # The stored texts (the model path, a variant's name, the errors) are text too.
        expect(other.get_by_text("A shared run (read-only)", exact=False)).to_contain_text(
            "[Click](https://evil.example/p)")
        assert markup_in_dom(other, host) == {"links": [], "images": [], "bold": []}
        for queuing in ("Draw sensitivity map", "Run this", "Apply as schedule",
                        "Export model"):
            assert other.get_by_role("button", name=queuing).count() == 0, queuing
        assert SECRET not in other.locator('[data-testid="stMain"]').inner_text()
        assert not other.get_by_text("Traceback").count()

        # A crafted request, as that person, to queue work on the run anyway: refused.
        other.wait_for_url(re.compile(r"[?&]session="), timeout=scaled_ms(PAGE_MS))
        viewer = session_owner(parse_qs(urlsplit(other.url).query)["session"][0])
        queue = JobQueue(store)
        for kind, payload in (
                ("sensitivity", {"sweep": {}, "sensitivity": {}, "source_run": run_id}),
                ("sweep", {"model": "mlp", "variants": [], "source_run": run_id})):
            with pytest.raises(PermissionError) as refused:
                queue.submit(kind, payload, session=viewer, owner=viewer)
            assert "\n" not in str(refused.value), str(refused.value)
        assert queue.jobs() == []

        # 31.3 where it was seen: one malformed variant row put a traceback on History for
        # every visitor; it is one line there now, and the page stands.
        import sqlite3
        db = sqlite3.connect(store)
        position, text = db.execute("SELECT position, result FROM variants WHERE run_id=? "
                                    "ORDER BY position DESC LIMIT 1", (run_id,)).fetchone()
        db.execute("UPDATE variants SET result=? WHERE run_id=? AND position=?",
                   (text[:len(text) // 2], run_id, position))
        db.commit()
        db.close()
        other.goto(f"{url}/history")
        expect(other.get_by_text("unreadable, skipped", exact=False).first).to_be_visible(
            timeout=scaled_ms(PAGE_MS))
        assert not other.get_by_text("Traceback").count()
        assert not other.locator('[data-testid="stException"]').count()
    assert requests == []  # no viewer's browser fetched from the host the link chose
