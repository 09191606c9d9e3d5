"""Every subcommand's help shows a runnable example, and the top-level help lists them all."""

from __future__ import annotations

import pytest

from opshift.cli import COMMANDS, main


@pytest.mark.parametrize("command", COMMANDS)
def test_subcommand_help_has_an_example(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out.lower()
    assert f"opshift {command}" in out


def test_top_level_help_lists_commands_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out
    assert "exit codes" in out


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out
