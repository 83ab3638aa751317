"""Limits with no way around them (issue 21.5) and read-only runs (21.6), on a real queue over
a private store (no worker: the queue's rules are checked at submission): the per-person cap,
the per-address cap that a new session does not reset, the server-wide cap on jobs from
sessions without sign-in, and a job on a stored run (an export) refused to anyone but the
run's owner. Also the client's address behind a proxy, and the Host check's parsing."""

from __future__ import annotations

import pytest

from benchmarks.service.queue import CapReached, JobQueue
from benchmarks.spec.limits import Limits
from dashboard import asgi, identity

JOB = {"model": "mlp"}


def queue(store_path, **limits) -> JobQueue:
    return JobQueue(store_path, limits=Limits(**limits))


def test_a_new_session_from_the_same_address_does_not_reset_the_cap(store_path):
    q = queue(store_path, max_jobs=2, max_jobs_per_address=3, max_anonymous_jobs=50)
    here = identity.client_digest("10.0.0.7")
    for _ in range(2):
        q.submit("sweep", JOB, session="s1", owner="session:one", client=here)
    with pytest.raises(CapReached) as person:
        q.submit("sweep", JOB, session="s1", owner="session:one", client=here)
    assert person.value.cap == "person" and "COMPRESSION_BENCH_MAX_JOBS)" in str(person.value)
    # The bare URL again: a new session, the same address. One more, then the address's cap.
    q.submit("sweep", JOB, session="s2", owner="session:two", client=here)
    with pytest.raises(CapReached) as address:
        q.submit("sweep", JOB, session="s2", owner="session:two", client=here)
    assert address.value.cap == "address"
    assert "COMPRESSION_BENCH_MAX_JOBS_PER_ADDRESS" in str(address.value)
    assert "a new session does not reset it" in str(address.value)
    # Another address is not held back, nor is a signed-in user from this one.
    q.submit("sweep", JOB, session="s3", owner="session:three",
             client=identity.client_digest("10.0.0.8"))
    q.submit("sweep", JOB, session="s4", owner="user:ann@example.com", client=here)
    # Cancelling frees the address's places.
    q.cancel(q.jobs(owner="session:two")[0].job_id)
    q.submit("sweep", JOB, session="s2", owner="session:two", client=here)


def test_sessions_without_sign_in_share_a_server_wide_cap(store_path):
    q = queue(store_path, max_jobs=3, max_jobs_per_address=3, max_anonymous_jobs=4)
    for i in range(4):
        q.submit("sweep", JOB, session=f"s{i}", owner=f"session:{i}",
                 client=identity.client_digest(f"10.0.1.{i}"))
    with pytest.raises(CapReached) as server:
        q.submit("sweep", JOB, session="s9", owner="session:9",
                 client=identity.client_digest("10.0.1.9"))
    assert server.value.cap == "server"
    assert "COMPRESSION_BENCH_MAX_ANONYMOUS_JOBS" in str(server.value)
    assert "\n" not in str(server.value)
    q.submit("sweep", JOB, session="s9", owner="user:bob@example.com")  # signed in: its own cap


def test_a_job_on_a_stored_run_is_for_its_owner_only(store_path):
    q = queue(store_path)
    run_id = q.store.start_run(model="m", dataset="d", device="cpu", spec={},
                               environment={}, owner="session:alice")
    payload = {"run_id": run_id, "variant": "baseline"}
    with pytest.raises(PermissionError, match="only the person who ran it can export"):
        q.submit("export", payload, session="b", owner="session:bob")
    assert q.jobs() == []  # nothing queued, nothing runs on the worker
    assert q.submit("export", payload, session="a", owner="session:alice")
    assert q.submit("export", payload, session="c", owner="user:admin@x", admin=True)
    shared = queue(store_path, shared_exports=True)
    assert shared.submit("export", payload, session="b", owner="session:bob")
    with pytest.raises(ValueError, match="not in the store"):
        q.submit("export", {**payload, "run_id": "nope"}, session="a", owner="session:alice")


def test_the_client_address_trusts_x_forwarded_for_only_from_a_trusted_proxy():
    assert identity.client_address(None, ["1.2.3.4"], ()) == "loopback"
    assert identity.client_address("10.0.0.5", ["1.2.3.4"], ()) == "10.0.0.5"
    trusted = identity.trusted_proxies({"COMPRESSION_BENCH_TRUSTED_PROXIES":
                                        "loopback, 10.0.0.0/24"})
    assert trusted == ("loopback", "10.0.0.0/24")
    # Behind the proxy: the nearest hop that is not a trusted proxy; what the client wrote
    # at the far end of the header does not count.
    assert identity.client_address(None, ["6.6.6.6, 1.2.3.4"], trusted) == "1.2.3.4"
    assert identity.client_address("10.0.0.9", ["1.2.3.4, 10.0.0.3"], trusted) == "1.2.3.4"
    assert identity.client_address("8.8.8.8", ["1.2.3.4"], trusted) == "8.8.8.8"  # not a proxy
    assert identity.client_address(None, [], trusted) == "loopback"
    assert identity.client_digest("1.2.3.4") != identity.client_digest("1.2.3.5")
    assert "1.2.3.4" not in identity.client_digest("1.2.3.4")


def test_the_host_check_reads_bracketed_ipv6():
    allowed = ["localhost", "127.0.0.1", "::1", "*.example.com"]
    for header, ok in (("[::1]:8501", True), ("[::1]", True), ("localhost:8501", True),
                       ("127.0.0.1", True), ("bench.example.com:443", True),
                       ("[::2]:8501", False), ("rebind.evil:8501", False), ("", False),
                       ("[::1", False), ("example.com", False)):
        assert asgi.host_allowed(asgi.host_name(header), allowed) is ok, header


def test_the_sidebar_warns_when_the_ray_cluster_is_not_private(monkeypatch):
    from dashboard import state
    monkeypatch.delenv("COMPRESSION_BENCH_RAY_ADDRESS", raising=False)
    assert state.cluster_exposure({"nodes": []}) == (None, None)
    local = {"nodes": [{"address": "127.0.0.1"}, {"address": "10.0.0.6"}]}
    for address, nodes, warned in (("127.0.0.1:6379", local, None),
                                   ("10.0.0.5:6379", local, None),
                                   ("8.8.4.4:6379", local, "public address (8.8.4.4)"),
                                   ("10.0.0.5:6379", {"nodes": [{"address": "1.1.1.1"}]},
                                    "public address (1.1.1.1)"),
                                   ("ray-head.example:6379", local, "named ray-head.example")):
        monkeypatch.setenv("COMPRESSION_BENCH_RAY_ADDRESS", address)
        shown, warning = state.cluster_exposure(nodes)
        assert shown == address
        assert (warning is None) if warned is None else (warned in warning), (address, warning)
