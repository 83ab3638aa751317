"""Caps on what a browser can make the server hold (issue 26.1), against a real server with
real HTTP uploads to Streamlit's endpoint (``PUT /_stcore/upload_file/SESSION/FILE``, under a
session this test opened over the WebSocket, with its XSRF cookie and token): ten 199 MB
uploads from one session, no widget involved, used to get 204 each and take the server from
250 MB to 2.2 GB. Now the session's total holds (the rest get 413 and one line), the server's
total holds across sessions, a body without Content-Length is cut off as it streams, the
server's RSS stays under the session's cap plus a small margin, and uploads no widget claims
are dropped within seconds."""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import scaled, wait_until

MB = 2**20
FILE_MB = 199
SESSION_MB, SERVER_MB = 400, 600
CHUNK = memoryview(bytes(MB))


class Session:
    """A Streamlit session opened as the browser does (the XSRF cookie from the health
    check, the token in the WebSocket's subprotocol), kept open on a thread of its own."""

    def __init__(self, url: str):
        with urllib.request.urlopen(url + "/_stcore/health") as r:
            cookies = r.headers.get_all("Set-Cookie") or []
        self.cookie = next(c for c in cookies if c.startswith("_streamlit_xsrf=")
                           ).split(";")[0].split("=", 1)[1]
        self.url, self.id = url, None
        self._ready, self._done = threading.Event(), None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()
        assert self._ready.wait(60), "no session"

    async def _run(self):
        import websockets
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        self._done = asyncio.Event()
        async with websockets.connect(
                self.url.replace("http", "ws") + "/_stcore/stream",
                subprotocols=["streamlit", self.cookie], max_size=None,
                additional_headers={"Cookie": f"_streamlit_xsrf={self.cookie}",
                                    "Origin": self.url}) as ws:
            rerun = BackMsg()
            rerun.rerun_script.SetInParent()
            await ws.send(rerun.SerializeToString())
            while not self._done.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), 0.2)
                except asyncio.TimeoutError:
                    continue
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                if msg.WhichOneof("type") == "new_session":
                    self.id = msg.new_session.initialize.session_id
                    self._ready.set()

    def close(self):
        if self._done is not None:
            self._done.set()
        self._thread.join(10)


def put(port: int, session: Session, file_id: str, size: int, chunked: bool = False):
    """One upload of ``size`` zero bytes as multipart, sent the way a careful client does:
    the body a MiB at a time, stopping as soon as the server answers. (status, body)."""
    boundary = "cb-test-boundary"
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{file_id}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    lines = [f"PUT /_stcore/upload_file/{session.id}/{file_id} HTTP/1.1",
             f"Host: localhost:{port}", f"Origin: http://localhost:{port}",
             f"Content-Type: multipart/form-data; boundary={boundary}",
             f"X-Xsrftoken: {session.cookie}", f"Cookie: _streamlit_xsrf={session.cookie}"]
    lines.append("Transfer-Encoding: chunked" if chunked
                 else f"Content-Length: {len(head) + size + len(tail)}")
    pieces = [head, *([CHUNK] * (size // MB)), CHUNK[:size % MB], tail]
    with socket.create_connection(("127.0.0.1", port), timeout=scaled(120)) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        for piece in pieces:
            if select.select([s], [], [], 0)[0]:
                break  # answered early: stop sending
            try:
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            except (BrokenPipeError, ConnectionResetError):
                break
        else:
            if chunked:
                s.sendall(b"0\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = s.recv(65536)
            if not data:
                break
            answer += data
        head_text, _, body = answer.partition(b"\r\n\r\n")
        status = int(head_text.split()[1])
        length = next((int(h.split(b":")[1]) for h in head_text.split(b"\r\n")
                       if h.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            data = s.recv(65536)
            if not data:
                break
            body += data
    return status, body.decode(errors="replace")


class Rss:
    """The server process's resident memory, sampled every 20 ms on a thread."""

    def __init__(self, pid: int):
        self.pid, self.peak, self.samples = pid, 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def now(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def _watch(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.now())

    def __enter__(self):
        self.base = self.now()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tools.browser import running_server
    store = tmp_path_factory.mktemp("uploads") / "results.db"
    env = {"COMPRESSION_BENCH_SESSION_UPLOAD_MB": str(SESSION_MB),
           "COMPRESSION_BENCH_UPLOAD_MB": str(SERVER_MB),
           "COMPRESSION_BENCH_UNCLAIMED_UPLOAD_S": "20"}
    with running_server(store, env) as (proc, url):
        yield proc, url, int(url.rsplit(":", 1)[1])


def test_ten_199_mb_uploads_from_one_session_hold_its_cap_and_the_rest_get_413(server):
    proc, url, port = server
    alice = Session(url)
    try:
        started = time.monotonic()
        with Rss(proc.pid) as rss:
            answers = [put(port, alice, f"a{i}", FILE_MB * MB) for i in range(10)]
        print(f"ten uploads answered in {time.monotonic() - started:.1f} s")
        statuses = [status for status, _ in answers]
        assert statuses == [204, 204] + [413] * 8, statuses
        refusal = answers[2][1].strip()
        assert "\n" not in refusal and "COMPRESSION_BENCH_SESSION_UPLOAD_MB" in refusal
        assert refusal.startswith("upload refused: this session already holds 398 MB")
        grown = rss.peak - rss.base
        print(f"server RSS {rss.base / MB:.0f} MB -> peak {rss.peak / MB:.0f} MB "
              f"(+{grown / MB:.0f} MB; the session's cap {SESSION_MB} MB)")
        assert grown <= (SESSION_MB + 64) * MB, grown
        # No Content-Length (chunked): counted as it streams and cut off, 413 and one line.
        status, body = put(port, alice, "chunked", FILE_MB * MB, chunked=True)
        assert status == 413 and "COMPRESSION_BENCH_SESSION_UPLOAD_MB" in body, (status, body)
        # The whole server's cap across sessions: another session gets one file in, not two.
        bob = Session(url)
        try:
            assert put(port, bob, "b0", FILE_MB * MB)[0] == 204
            status, body = put(port, bob, "b1", FILE_MB * MB)
            assert status == 413 and "COMPRESSION_BENCH_UPLOAD_MB" in body, (status, body)
            assert body.strip().startswith("upload refused: the server already holds 597 MB")
        finally:
            bob.close()
        # No widget claimed them: dropped within seconds, and the session may upload again.
        wait_until(lambda: put(port, alice, f"again{time.monotonic()}", MB)[0] == 204, 30,
                   "the unclaimed uploads dropped", every=1)
        wait_until(lambda: rss.now() < rss.base + 2 * FILE_MB * MB, 30,
                   "the server's memory given back", every=0.5)
        print(f"after the unclaimed uploads were dropped: {rss.now() / MB:.0f} MB")
    finally:
        alice.close()
