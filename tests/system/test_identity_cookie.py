"""The browser's identity cookie, with the real server and Debian's Chromium ("a server that
trusts nothing the worker writes", item 4). A page on another port of the same host reads the
host's cookies, plants some (a forged identity, the XSRF cookie of its own browser) and opens
the app's WebSocket with the XSRF token it read: it sees no identity, its socket is refused,
and neither its browser (given the owner's XSRF cookie) nor anyone else gains the owner's
runs, which the owner keeps. A closed browser keeps its runs when it opens again (the cookie
has an expiry); "Forget this browser" revokes the identity: the run stays the old identity's,
and neither this browser nor a copy of the old cookie owns it any more."""

from __future__ import annotations

import http.server
import re
import threading
import time
from urllib.parse import parse_qs, urlsplit

import pytest

from dashboard.identity import COOKIE, mint, server_secret, session_owner
from helpers import chromium, owned_copy, scaled_ms, store_answer_run
from tools.browser import CHROMIUM, CHROMIUM_ARGS, running_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PAGE_MS = 120_000
FORGED = "0123456789abcdef.1700000000." + "0" * 32  # the shape of an identity, not this server's

# Another app on the same host: what its page's script can do with this browser's cookies.
ATTACK_PAGE = """<!doctype html><title>another app</title><script>
window.seen = document.cookie;
const params = new URL(location.href).searchParams, app = params.get("app");
const xsrf = (document.cookie.match(/_streamlit_xsrf=([^;]*)/) || [])[1] || "";
document.cookie = "%(cookie)s=%(forged)s; path=/";
document.cookie = "%(cookie)s=%(forged)s; path=/_stcore";
document.cookie = "_streamlit_xsrf=" + params.get("plant") + "; path=/";
window.socket = new Promise(resolve => {
  const ws = new WebSocket(app.replace("http:", "ws:") + "/_stcore/stream", ["streamlit", xsrf]);
  ws.onopen = () => resolve("open");
  ws.onerror = () => resolve("refused");
});
</script>""" % {"cookie": COOKIE, "forged": FORGED}


class _AnotherApp(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = ATTACK_PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _key(page) -> str:
    """The session key the page's address names (the owner is its digest)."""
    page.wait_for_url(re.compile(r"[?&]session="), timeout=scaled_ms(PAGE_MS))
    return parse_qs(urlsplit(page.url).query)["session"][0]


def _identity(context) -> dict:
    (cookie,) = [c for c in context.cookies() if c["name"] == COOKIE]
    return cookie


def _owns_runs(page, app: str) -> bool:
    """Whether the Results page lists runs of this browser's own ("Your runs"), or says it
    has none."""
    from playwright.sync_api import expect
    page.goto(f"{app}/results")
    either = page.get_by_role("combobox", name="Your runs").or_(
        page.get_by_text("You have no runs yet"))
    expect(either.first).to_be_visible(timeout=scaled_ms(PAGE_MS))
    return not page.get_by_text("You have no runs yet").count()


def test_a_page_on_another_port_reads_and_sets_cookies_and_gains_no_ownership(tmp_path):
    from playwright.sync_api import expect

    from benchmarks.store.database import ResultsStore
    store = tmp_path / "results.db"
    answer = store_answer_run(store)
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AnotherApp)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with chromium() as browser, running_server(store) as (_, url):
            app = url.replace("localhost", "127.0.0.1")  # the host the other app shares
            owner = browser.new_context()
            page = owner.new_page()
            page.goto(app)
            key = _key(page)
            mine = owned_copy(store, answer, session_owner(key))
            cookie = _identity(owner)
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            assert cookie["path"] == "/" and not cookie["secure"]
            assert cookie["expires"] > time.time() + 29 * 24 * 3600  # kept when it closes
            assert _owns_runs(page, app)

            attacker = browser.new_context()
            theirs = attacker.new_page()
            theirs.goto(app)
            _key(theirs)  # drawn: its cookies are set
            (their_xsrf,) = [c["value"] for c in attacker.cookies()
                             if c["name"] == "_streamlit_xsrf"]
            lure = owner.new_page()  # the owner opens a page of the other app
            lure.goto(f"http://127.0.0.1:{other.server_port}/?app={app}&plant={their_xsrf}")
            seen = lure.evaluate("window.seen")
            assert "_streamlit_xsrf=" in seen  # cookies are not separated by port...
            assert COOKIE not in seen and cookie["value"] not in seen  # ...but HttpOnly
            assert lure.evaluate("window.socket") == "refused"
            (xsrf,) = re.findall(r"_streamlit_xsrf=([^;]*)", seen)

            # The attacker's browser, given what the page read and a forged identity.
            attacker.add_cookies([{"name": "_streamlit_xsrf", "value": xsrf, "url": app},
                                  {"name": COOKIE, "value": FORGED, "url": app}])
            assert not _owns_runs(theirs, app)
            assert session_owner(_key(theirs)) != session_owner(key)
            theirs.goto(f"{app}/results?run={mine}")
            expect(theirs.get_by_text(re.compile(r"^A shared run \(read-only\)"))).to_be_visible(
                timeout=scaled_ms(PAGE_MS))
            with pytest.raises(PermissionError):
                ResultsStore(store).delete_run(mine, by=session_owner(_key(theirs)))
            # A key bound to nothing (what a session with no browser, AppTest's, is given) is
            # no one's on a real server either.
            bare = mint(server_secret(store), "")
            theirs.goto(f"{app}/?session={bare}")
            expect(theirs.get_by_text("was not issued to this browser", exact=False)
                   ).to_be_visible(timeout=scaled_ms(PAGE_MS))
            assert _key(theirs) != bare

            # The owner, with the planted cookies in its jar, keeps its runs and its key.
            page.reload()
            assert _owns_runs(page, app)
            assert _key(page) == key
            assert not page.get_by_text("two identity cookies").count()
            attacker.close()
            owner.close()
    finally:
        other.shutdown()


def test_a_closed_browser_keeps_its_runs_until_it_forgets_itself(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from benchmarks.store.database import ResultsStore
    chromium()  # skips where Chromium is missing
    store, profile = tmp_path / "results.db", tmp_path / "profile"
    answer = store_answer_run(store)
    with sync_playwright() as p, running_server(store) as (_, url):
        app = url.replace("localhost", "127.0.0.1")

        def launched():
            return p.chromium.launch_persistent_context(
                str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        browser = launched()
        page = browser.new_page()
        page.goto(app)
        key = _key(page)
        mine = owned_copy(store, answer, session_owner(key))
        assert _owns_runs(page, app)
        browser.close()

        browser = launched()  # the same profile: what a browser keeps when it closes
        page = browser.new_page()
        assert _owns_runs(page, app)
        assert _key(page) == key
        old = _identity(browser)["value"]

        page.get_by_role("button", name="Forget this browser").click()
        page.get_by_role("button", name="Forget it").click()
        page.wait_for_url(lambda u: "session=" in u and key not in u,
                          timeout=scaled_ms(PAGE_MS))
        assert not _owns_runs(page, app)
        assert _identity(browser)["value"].split(".")[0] != old.split(".")[0]
        assert ResultsStore(store).run(mine)["owner"] == session_owner(key)  # still its
        browser.close()

        # A copy of the old cookie (a backup of the profile, say) is no longer believed.
        copy = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = copy.new_context()
        context.add_cookies([{"name": COOKIE, "value": old, "url": app}])
        page = context.new_page()
        assert not _owns_runs(page, app)
        assert _key(page) != key
        expect(page.get_by_role("button", name="Forget this browser")).to_be_visible()
        copy.close()
