"""The progress bar is drawn only on a terminal and never with -q or --json."""

from __future__ import annotations

import argparse

from opshift import progress


def test_drawn_phases_end_with_a_newline(capsys):
    bar = progress.Progress("convert", 2, enabled=True)
    with bar.phase("load"):
        pass
    with bar.phase("save"):
        pass
    err = capsys.readouterr().err
    assert "opshift convert [" in err and "2/2 save" in err and err.endswith("\n")


def test_quiet_json_and_pipes_get_no_bar(capsys, monkeypatch):
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    for flags in ({"quiet": True, "json": False}, {"quiet": False, "json": True}):
        bar = progress.for_args(argparse.Namespace(**flags), "inline", 1)
        with bar.phase("inline"):
            pass
        bar.close()
    assert capsys.readouterr().err == ""
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    bar = progress.for_args(argparse.Namespace(quiet=False, json=False), "fix", 1)
    assert not bar.enabled
