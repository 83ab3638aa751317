"""The server's way into the folders its worker writes (``benchmarks.spec.nofollow``): no link
is followed on the way or at the end, a file is read only if it is a regular file with one
name of an expected owner, and a folder is removed only below the folder it was asked for."""

from __future__ import annotations

import os

import pytest

from benchmarks.spec import nofollow

ME = {os.geteuid()}


@pytest.fixture
def tree(tmp_path):
    """top/exports/run/job/x.zip, and a secret beside top that links may point at."""
    top = tmp_path / "top"
    job = top / "exports" / "run" / "job"
    job.mkdir(parents=True)
    (job / "x.zip").write_bytes(b"PK zip")
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 32)
    return top, job, secret


def test_a_file_is_read_through_folders_that_are_not_links(tree):
    top, job, secret = tree
    assert nofollow.read_bytes(job / "x.zip", top, ME) == b"PK zip"
    (job / "x.zip").unlink()
    (job / "x.zip").symlink_to(secret)
    with pytest.raises(nofollow.Refused, match="is a link, not a file: refused"):
        nofollow.read_bytes(job / "x.zip", top, ME)
    # A folder on the way swapped for a link to one holding the same name.
    elsewhere = top.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.zip").write_bytes(b"not the worker's")
    os.rename(job, top / "exports" / "run" / "moved")
    job.symlink_to(elsewhere)
    with pytest.raises(nofollow.Refused, match="is not a folder"):
        nofollow.read_bytes(job / "x.zip", top, ME)
    with pytest.raises(nofollow.Refused, match="not a plain name"):
        nofollow.read_bytes(top / "exports" / ".." / "x.zip", top, ME)
    with pytest.raises(FileNotFoundError):
        nofollow.read_bytes(top / "exports" / "none.zip", top, ME)


def test_a_hard_link_a_fifo_and_another_owners_file_are_refused(tree):
    top, job, secret = tree
    os.link(job / "x.zip", job / "twin.zip")
    with pytest.raises(nofollow.Refused, match="2 names"):
        nofollow.read_bytes(job / "x.zip", top, ME)
    os.mkfifo(job / "pipe.zip")
    with pytest.raises(nofollow.Refused, match="not a regular file"):  # without blocking
        nofollow.read_bytes(job / "pipe.zip", top, ME)
    with pytest.raises(nofollow.Refused, match="owned by uid"):
        nofollow.read_bytes(job / "twin.zip", top, {os.geteuid() + 1})


def test_a_folder_is_removed_only_below_the_folder_asked_for(tree):
    top, job, secret = tree
    outside = top.parent / "outside"
    (outside / "run").mkdir(parents=True)
    (outside / "run" / "keep").write_bytes(b"keep")
    exports = top / "exports"
    os.rename(exports, top / "real-exports")
    exports.symlink_to(outside)  # exports/ swapped for a link: exports/run is outside
    assert not nofollow.remove_folder(exports / "run", top)
    assert (outside / "run" / "keep").exists()
    exports.unlink()
    os.rename(top / "real-exports", exports)
    (exports / "linked").symlink_to(outside)  # the folder itself a link
    assert not nofollow.remove_folder(exports / "linked", top)
    assert (outside / "run" / "keep").exists()
    (job / "out").symlink_to(outside)  # a link inside is removed, not followed
    assert nofollow.remove_folder(exports / "run", top)
    assert not (exports / "run").exists() and (outside / "run" / "keep").exists()
    assert nofollow.tree_bytes(exports, top, ME) == 0
