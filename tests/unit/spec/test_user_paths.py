"""Issue 31.4: every path from the user goes through one check (spec.folders.check_user_path)
before anything runs: a name over 255 bytes, a control character or a folder that is not
there is one line and exit 2, never ENAMETOOLONG's traceback."""

from __future__ import annotations

import pytest

from benchmarks.cli.main import main
from benchmarks.spec.folders import check_user_path

LONG = "a" * 300


@pytest.mark.parametrize("argv", [
    ["run", "--model", "mlp", "--json", "{tmp}/" + LONG + ".json"],
    ["run", "--model", "mlp", "--csv", "{tmp}/" + LONG + ".csv"],
    ["run", "--model", "mlp", "--store", "{tmp}/" + LONG + ".db"],
    ["history", "--store", "{tmp}/" + LONG + "/results.db"],
    ["export", "r", "v", "--out", "{tmp}/" + LONG],
    ["report", "r", "--html", "{tmp}/" + LONG + ".html"],
])
def test_an_over_long_name_is_one_line_and_exit_2(tmp_path, capsys, argv):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "is 30" in err and "at most 255 bytes" in err
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing was written


def test_the_check_names_each_problem(tmp_path):
    ok = tmp_path / "out.json"
    assert check_user_path(ok, "--json") == ok
    with pytest.raises(ValueError, match="control characters"):
        check_user_path(tmp_path / "a\nb.json", "--json")
    with pytest.raises(ValueError, match="does not exist"):
        check_user_path(tmp_path / "missing" / "out.json", "--json")
    # A store's folders are made for it: only the name lengths count there.
    assert check_user_path(tmp_path / "new" / "s.db", "--store", parent_must_exist=False)
    with pytest.raises(ValueError, match="--store: the name 'aaaa"):
        check_user_path(tmp_path / LONG / "s.db", "--store", parent_must_exist=False)
    with pytest.raises(ValueError, match="may be at most 4095 bytes"):
        check_user_path("/".join(["b" * 200] * 30), "--out")
    # 255 bytes of a multi-byte name is the limit, counted in bytes, not characters.
    with pytest.raises(ValueError, match="is 256 bytes"):
        check_user_path(tmp_path / ("é" * 128), "--out")
