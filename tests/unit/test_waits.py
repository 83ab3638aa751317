"""The suite's one wait grants a loaded machine more time, in proportion to its load per core
and within a cap, so a busy CI machine makes tests slower rather than red; on a quiet machine
it fails at its written timeout."""

from __future__ import annotations

import os
import time

import pytest

import helpers
from helpers import MAX_SLOWDOWN, machine_slowdown, scaled, scaled_ms, wait_until


def _load(monkeypatch, per_core: float) -> None:
    cores = os.cpu_count() or 1
    monkeypatch.setattr(helpers.os, "getloadavg", lambda: (per_core * cores, 0.0, 0.0))


def test_a_quiet_machine_fails_at_the_written_timeout(monkeypatch):
    _load(monkeypatch, 0.2)
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"never did not happen .*0.2 s on a quiet machine, x1.0"):
        wait_until(lambda: False, 0.2, "never", every=0.01)
    assert time.monotonic() - t0 < 0.2 * 2.5


def test_a_loaded_machine_waits_longer_in_proportion_to_its_load(monkeypatch):
    _load(monkeypatch, 3.0)
    assert machine_slowdown() == pytest.approx(3.0)
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match="x3.0 for the load"):
        wait_until(lambda: False, 0.1, "never", every=0.01)
    assert time.monotonic() - t0 >= 0.3
    # What would have failed at 0.1 s on a quiet machine succeeds within the loaded grant.
    ready = time.monotonic() + 0.2
    assert wait_until(lambda: time.monotonic() > ready, 0.1, "ready", every=0.01)


def test_the_grant_is_capped_so_a_hang_still_fails(monkeypatch):
    _load(monkeypatch, 100.0)
    assert machine_slowdown() == MAX_SLOWDOWN


def test_the_waits_that_cannot_poll_are_granted_the_same_slowdown(monkeypatch):
    """A subprocess's timeout and Playwright's milliseconds scale as wait_until does."""
    _load(monkeypatch, 0.5)
    assert scaled(120) == 120 and scaled_ms(420_000) == 420_000
    _load(monkeypatch, 2.5)
    assert scaled(120) == pytest.approx(300) and scaled_ms(420_000) == 1_050_000
    assert isinstance(scaled_ms(1000), int)  # Playwright takes whole milliseconds
    _load(monkeypatch, 100.0)
    assert scaled(600) == 600 * MAX_SLOWDOWN


def test_the_per_test_limit_is_granted_the_slowdown_too(request):
    """conftest gives each test pytest-timeout's limit times the slowdown at its start (the
    marker it reads), so a scaled wait is not cut off at the quiet machine's limit."""
    marker = request.node.get_closest_marker("timeout")
    given = request.config.getoption("timeout")
    limit = float(request.config.getini("timeout") if given is None else given)
    if limit == 0:  # --timeout 0: no limit, and none is added
        assert marker is None
        return
    assert limit <= marker.args[0] <= limit * MAX_SLOWDOWN
