"""Signed statements about who owns a run or a job: made by the server, which alone holds
the session secret, and verified by every store opened with it (``ResultsStore``)."""

from __future__ import annotations

import hashlib
import hmac
import json

# A tag is a signed statement: the HMAC-SHA256 (hex, MAC_HEX characters) with the server's
# session secret, a space, then what it says (the owner; a job's owner and session as JSON).
# What it says is read from the tag itself, so rewriting the owner column takes nothing from
# the person the tag names; a tag is bound to its run (or job) id, so one copied elsewhere
# does not verify.
MAC_HEX = 64


def _mac(secret: bytes, *fields: str) -> str:
    return hmac.new(secret, "\n".join(fields).encode(), hashlib.sha256).hexdigest()


def _said(secret: bytes, tag, kind: str, key: str) -> str | None:
    """What a tag says, where its MAC verifies for ``kind`` ``key``; else None."""
    if not isinstance(tag, str) or len(tag) <= MAC_HEX or tag[MAC_HEX] != " ":
        return None
    mac, said = tag[:MAC_HEX], tag[MAC_HEX + 1:]
    good = hmac.compare_digest(mac.encode(), _mac(secret, kind, key, said).encode())
    return said if good else None


def owner_tag(secret: bytes, run_id: str, owner: str) -> str:
    """The server's signed "run ``run_id`` is ``owner``'s" (the secret is the server's: the
    worker never reads it): the one owner a store with the secret believes."""
    return f"{_mac(secret, 'run', run_id, owner)} {owner}"


def tagged_owner(secret: bytes, run_id: str, tag) -> str | None:
    """The owner ``tag`` names for run ``run_id``, where it verifies; else None."""
    return _said(secret, tag, "run", run_id)


def job_tag(secret: bytes, job_id: str, owner: str, session: str) -> str:
    """The server's signed owner and session of job ``job_id`` (``JobQueue.submit``)."""
    said = json.dumps([owner, session])
    return f"{_mac(secret, 'job', job_id, said)} {said}"


def tagged_job(secret: bytes, job_id: str, tag) -> tuple[str, str] | None:
    """(owner, session) that ``tag`` names for job ``job_id``, where it verifies; else None."""
    said = _said(secret, tag, "job", job_id)
    if said is None:
        return None
    owner, session = json.loads(said)
    return owner, session
