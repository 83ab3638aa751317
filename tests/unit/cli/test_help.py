"""Every command's --help prints, whatever its help texts hold."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("command", ["run", "list", "history", "jobs", "report", "export",
                                     "distributed", "recommend", "sensitivity", "mcp"])
def test_every_command_prints_its_help(command, capsys):
    """A help text with a literal % (a relative margin, 2%) must not break --help."""
    from benchmarks.cli.main import main
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert "usage: " in capsys.readouterr().out
