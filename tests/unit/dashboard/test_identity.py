"""The browser's identity cookie (dashboard/identity.py) and the ASGI layer that sets and hands
it on (dashboard/asgi.py ``IdentityCookie``), driven in-process: what verifies, the cookie's
attributes over HTTP, TLS and behind a proxy, its rotation, revocation, a planted cookie, and
the WebSocket of a page of another origin."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from dashboard import identity
from dashboard.asgi import IdentityCookie, same_origin

SECRET = b"s" * 32
DAY = 24 * 3600


def test_a_value_verifies_only_as_issued_unexpired_and_unrevoked():
    value = identity.issue(SECRET)
    found = identity.read_cookie(value, SECRET)
    assert found and found.value == value and len(found.id) == identity.ID_HEX
    identity_id, issued, mac = value.split(".")
    for forged in (f"{'f' * 16}.{issued}.{mac}", f"{identity_id}.{int(issued) + 1}.{mac}",
                   f"{identity_id}.{issued}.{'0' * 32}", value.upper(), value + ".x", "",
                   None, identity.CONFLICT):
        assert identity.read_cookie(forged, SECRET) is None, forged
    assert identity.read_cookie(value, b"t" * 32) is None  # another server's secret
    now = int(issued)
    assert identity.read_cookie(value, SECRET, now=now + identity.COOKIE_MAX_AGE_S - 1)
    assert identity.read_cookie(value, SECRET, now=now + identity.COOKIE_MAX_AGE_S) is None
    assert identity.read_cookie(value, SECRET, now=now - 3600) is None  # issued "later"
    revoked = frozenset({identity.revocation(identity_id)})
    assert identity.read_cookie(value, SECRET, revoked) is None
    rotated = identity.issue(SECRET, identity_id, now=now + DAY)
    assert rotated != value
    assert identity.read_cookie(rotated, SECRET, now=now + DAY).id == identity_id


def test_a_session_key_is_bound_to_the_identity():
    """A browser's key: the same for its identity in every tab, another for another identity,
    made by this server alone; a key of a session with no browser (bound to nothing) verifies
    only where nothing is bound."""
    mine, theirs = identity.issue(SECRET).split(".")[0], identity.issue(SECRET).split(".")[0]
    own = identity.browser_key(SECRET, mine)
    assert own == identity.browser_key(SECRET, mine) and identity.verify(own, SECRET, mine)
    assert own != identity.browser_key(SECRET, theirs) != identity.browser_key(b"t" * 32, mine)
    assert not identity.verify(own, SECRET, theirs)
    assert not identity.verify(own, b"t" * 32, mine)
    bare = identity.mint(SECRET, "")
    assert identity.verify(bare, SECRET, "") and not identity.verify(bare, SECRET, mine)
    assert identity.session_owner(own) != identity.session_owner(identity.browser_key(SECRET,
                                                                                      theirs))


def test_only_the_name_for_the_scheme_counts_and_a_planted_identity_spoils_both():
    mine, theirs = identity.issue(SECRET), identity.issue(SECRET)
    forged = "0123456789abcdef.1700000000." + "0" * 32

    def found(header, secure=False, path="/"):
        return identity.from_cookies([header], secure, path, SECRET)

    assert found(f"a=1; cb_identity={mine}")[0].value == mine
    assert found(f"cb_identity={forged}; x=2; cb_identity={mine}")[0].value == mine
    assert found(f"cb_identity={mine}", secure=True) == (None, False)  # any HTTP page sets it
    assert found(f"__Host-cb_identity={mine}", secure=True)[0].value == mine
    assert found(f"__Host-cb_identity={mine}", secure=True, path="/bench") == (None, False)
    assert found(f"__Secure-cb_identity={mine}", secure=True, path="/bench")[0].value == mine
    assert found(f"cb_identity={theirs}; cb_identity={mine}") == (None, True)
    older = identity.issue(SECRET, mine.split(".")[0], now=time.time() - DAY)
    assert found(f"cb_identity={older}; cb_identity={mine}")[0].value == mine  # one identity


def test_names_and_paths():
    assert identity.cookie_path("") == identity.cookie_path(None) == "/"
    assert identity.cookie_path("bench/") == identity.cookie_path("/bench") == "/bench"
    assert identity.cookie_name(False, "/") == identity.cookie_name(False, "/bench") == \
        "cb_identity"
    assert identity.cookie_name(True, "/") == "__Host-cb_identity"
    assert identity.cookie_name(True, "/bench") == "__Secure-cb_identity"


def test_same_origin_is_the_same_name_and_port():
    assert same_origin("http://127.0.0.1:8501", "127.0.0.1:8501")
    assert same_origin("https://bench.example", "bench.example")
    assert same_origin("https://bench.example:443", "bench.example")
    assert same_origin("http://[::1]:8501", "[::1]:8501")
    assert not same_origin("http://127.0.0.1:8000", "127.0.0.1:8501")  # another port
    assert not same_origin("https://bench.example:9000", "bench.example")
    assert not same_origin("http://evil.example:8501", "127.0.0.1:8501")
    assert not same_origin("null", "127.0.0.1:8501")
    assert not same_origin("http://127.0.0.1:99999", "127.0.0.1:8501")


def test_revocations_are_the_servers_own(tmp_path):
    store = tmp_path / "results.db"
    identity.server_secret(store)
    path = identity.revocations_path(store)
    assert path.stat().st_mode & 0o777 == 0o600 and identity.revoked(store) == frozenset()
    identity.revoke(store, "0123456789abcdef")
    assert identity.revoked(store) == {identity.revocation("0123456789abcdef")}
    assert "0123456789abcdef" not in path.read_text()  # a digest, never the id
    os.chmod(path, 0o644)
    with pytest.raises(RuntimeError, match="not this server's own file"):
        identity.revoked(store)
    with pytest.raises(RuntimeError, match="not this server's own file"):
        identity.revoke(store, "0123456789abcdef")


# -- the ASGI layer ----------------------------------------------------------------------------

def _layer(tmp_path, base: str = "", **env) -> tuple[IdentityCookie, list]:
    reached: list = []

    async def app(scope, receive, send):
        reached.append(scope)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
        else:
            await send({"type": "websocket.accept"})
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        layer = IdentityCookie(app, base, store_path=tmp_path / "results.db")
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return layer, reached


def _call(layer, kind="http", path="/_stcore/health", cookie=None, scheme=None,
          client=("127.0.0.1", 40000), **headers) -> list:
    raw = [(b"host", b"127.0.0.1:8501")]
    raw += [(b"cookie", cookie.encode())] if cookie else []
    raw += [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": kind, "path": path, "headers": raw, "client": client,
             "scheme": scheme or ("ws" if kind == "websocket" else "http")}
    if kind == "http":
        scope["method"] = "GET"
    sent = []

    async def receive():
        return {"type": "websocket.connect"} if kind == "websocket" else \
            {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)
    asyncio.run(layer(scope, receive, send))
    return sent


def _set_cookie(sent) -> list[str]:
    return [v.decode() for k, v in sent[0].get("headers", []) if k == b"set-cookie"]


def _value(set_cookie: str) -> str:
    return set_cookie.split(";", 1)[0].split("=", 1)[1]


def test_the_health_check_issues_an_httponly_strict_cookie(tmp_path):
    layer, _ = _layer(tmp_path)
    (cookie,) = _set_cookie(_call(layer))
    name_value, *attributes = cookie.split("; ")
    assert name_value.startswith("cb_identity=")
    assert attributes == ["Path=/", f"Max-Age={30 * DAY}", "HttpOnly", "SameSite=Strict"]
    secret = identity.server_secret(tmp_path / "results.db")
    assert identity.read_cookie(_value(cookie), secret)
    assert _set_cookie(_call(layer, path="/")) == []  # only the health check sets it
    assert _set_cookie(_call(layer, **{"sec_fetch_site": "cross-site"})) == []


def test_under_tls_it_is_secure_and_host_prefixed_or_secure_prefixed_under_a_path(tmp_path):
    layer, _ = _layer(tmp_path)
    (cookie,) = _set_cookie(_call(layer, scheme="https"))
    assert cookie.startswith("__Host-cb_identity=") and cookie.endswith("; Secure")
    assert "; Path=/;" in cookie and "Domain" not in cookie
    based, _ = _layer(tmp_path, "bench")
    (cookie,) = _set_cookie(_call(based, path="/bench/_stcore/health", scheme="https"))
    assert cookie.startswith("__Secure-cb_identity=") and "; Path=/bench;" in cookie
    assert cookie.endswith("; Secure")
    # Behind a proxy: its X-Forwarded-Proto only where the operator trusts it.
    proxied, _ = _layer(tmp_path, COMPRESSION_BENCH_TRUSTED_PROXIES="loopback")
    (cookie,) = _set_cookie(_call(proxied, x_forwarded_proto="https"))
    assert cookie.startswith("__Host-cb_identity=") and cookie.endswith("; Secure")
    (cookie,) = _set_cookie(_call(proxied, client=("10.0.0.9", 1), x_forwarded_proto="https"))
    assert cookie.startswith("cb_identity=") and "Secure" not in cookie
    (cookie,) = _set_cookie(_call(layer, x_forwarded_proto="https"))  # nobody trusted
    assert cookie.startswith("cb_identity=")


def test_it_is_rotated_when_a_day_old_and_replaced_when_expired_or_revoked(tmp_path):
    layer, _ = _layer(tmp_path)
    store = tmp_path / "results.db"
    secret = identity.server_secret(store)
    fresh = identity.issue(secret)
    assert _set_cookie(_call(layer, cookie=f"cb_identity={fresh}")) == []
    old = identity.issue(secret, fresh.split(".")[0], now=time.time() - DAY - 1)
    (rotated,) = _set_cookie(_call(layer, cookie=f"cb_identity={old}"))
    assert _value(rotated).split(".")[0] == fresh.split(".")[0] and _value(rotated) != old
    expired = identity.issue(secret, now=time.time() - identity.COOKIE_MAX_AGE_S)
    (new,) = _set_cookie(_call(layer, cookie=f"cb_identity={expired}"))
    assert _value(new).split(".")[0] != expired.split(".")[0]
    identity.revoke(store, fresh.split(".")[0])
    (new,) = _set_cookie(_call(layer, cookie=f"cb_identity={fresh}"))
    assert _value(new).split(".")[0] != fresh.split(".")[0]
    # A planted identity beside the browser's own: nothing set, neither replaced.
    other = identity.issue(secret)
    assert _set_cookie(_call(layer, cookie=f"cb_identity={other}; cb_identity={_value(new)}")
                       ) == []


def test_the_websocket_sees_only_the_verified_identity_and_another_origin_is_refused(tmp_path):
    layer, reached = _layer(tmp_path)
    secret = identity.server_secret(tmp_path / "results.db")
    mine, theirs = identity.issue(secret), identity.issue(secret)
    forged = "0123456789abcdef.1700000000." + "0" * 32
    sent = _call(layer, "websocket", "/_stcore/stream", origin="http://127.0.0.1:8000",
                 cookie=f"cb_identity={mine}")
    assert sent[0]["type"] == "websocket.http.response.start" and sent[0]["status"] == 403
    assert reached == []
    _call(layer, "websocket", "/_stcore/stream", origin="http://127.0.0.1:8501",
          cookie=f'cb_identity={forged}; _streamlit_xsrf="2|a|b|1"; '
                 f"__Host-cb_identity={theirs}; cb_identity={mine}")
    (cookie,) = [v.decode() for k, v in reached[-1]["headers"] if k == b"cookie"]
    assert cookie == f'_streamlit_xsrf="2|a|b|1"; cb_identity={mine}'
    _call(layer, "websocket", "/_stcore/stream", cookie=f"cb_identity={theirs}; "
                                                       f"cb_identity={mine}")  # no Origin
    (cookie,) = [v.decode() for k, v in reached[-1]["headers"] if k == b"cookie"]
    assert cookie == f"cb_identity={identity.CONFLICT}"
    _call(layer, "websocket", "/_stcore/stream", cookie=f"cb_identity={forged}")
    assert not [v for k, v in reached[-1]["headers"] if k == b"cookie"]
