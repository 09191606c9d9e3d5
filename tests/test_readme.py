"""The README's Quickstart is what CI runs, and its first command's job works."""

from __future__ import annotations

import re
import shlex

from conftest import ROOT


def _quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_quickstart_has_exactly_two_commands():
    cmds = _quickstart_commands()
    assert len(cmds) == 2
    assert all("\n" not in c for c in cmds)


def test_ci_runs_the_second_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _quickstart_commands()[1] in ci


def test_first_command_main_job_runs(tmp_path, monkeypatch):
    from opshift.cli import main

    cmd = _quickstart_commands()[0].split("&&")[-1].strip()
    argv = shlex.split(cmd)
    assert argv[0].endswith("opshift")
    argv = [a if not a.startswith("models/") else str(ROOT / a) for a in argv[1:]]
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    out = argv[argv.index("-o") + 1]
    assert (tmp_path / out).stat().st_size > 0


def _python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_python_examples_run(tmp_path, monkeypatch):
    blocks = _python_blocks()
    assert len(blocks) >= 4
    (tmp_path / "models").symlink_to(ROOT / "models")
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
