"""The README's Quickstart is what CI runs, and its first command's job works."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

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
    assert argv[argv.index("-o") + 1].startswith("/tmp/")  # not into the clone
    argv = [str(ROOT / a) if a.startswith("models/") else _in(tmp_path, a) for a in argv[1:]]
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0
    out = argv[argv.index("-o") + 1]
    assert (tmp_path / out).stat().st_size > 0


def _in(tmp_path, text: str) -> str:
    """``text`` with the README's /tmp/ paths in ``tmp_path`` instead (the tests write
    nothing outside their own folders)."""
    return text.replace("/tmp/", f"{tmp_path}/")


def _python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_readme_python_examples_run(tmp_path, monkeypatch):
    blocks = _python_blocks()
    assert len(blocks) >= 4
    (tmp_path / "models").symlink_to(ROOT / "models")
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(_in(tmp_path, code), "README.md", "exec"), {"__name__": "__readme__"})
    assert {p.name for p in tmp_path.glob("*.onnx")} == {"prelu13.onnx", "prelu13_gs.onnx"}


def _written_paths() -> list[str]:
    """Every file the README's examples write: ``-o X`` in its shell blocks, the path given
    to a ``save(...)`` in its Python blocks."""
    text = (ROOT / "README.md").read_text()
    sh = " ".join(re.findall(r"```sh\n(.*?)```", text, re.S))
    out = re.findall(r"(?:^|\s)-o\s+(\S+)", sh)
    out += [m for code in _python_blocks() for m in re.findall(r"save\(.*?,\s*\"([^\"]+)\"\)",
                                                                 code)]
    return out


def test_readme_examples_write_nothing_into_the_clone():
    """A path under /tmp, or one git ignores: a user who runs the examples in their clone
    finds no untracked files there."""
    paths = _written_paths()
    assert {"/tmp/prelu17.onnx", "/tmp/prelu13.onnx", "/tmp/prelu13_gs.onnx"} <= set(paths)
    inside = [p for p in paths if not p.startswith("/tmp/")]
    if inside:
        p = subprocess.run(["git", "check-ignore", "--no-index", *inside], cwd=ROOT,
                           capture_output=True, text=True)
        assert p.stdout.split() == inside, f"not ignored: {set(inside) - set(p.stdout.split())}"


def test_readme_inline_comment_lists_what_inline_writes():
    """The first Python example's comment names the nodes ``inline`` writes for the PRelu,
    run in a new process as a user runs it."""
    code = _python_blocks()[0]
    comment = re.search(r"opshift\.inline\(m17\)\s+# PRelu -> ([^\n(]+)", code)[1]
    said = [op.strip() for op in comment.split(",")]
    head = code.split("back = ", 1)[0]
    p = subprocess.run([sys.executable, "-c", head + "print(' '.join(n.op_type for n in "
                        "flat.graph.node))"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["Conv", *said]


def test_the_api_returns_what_the_readme_says():
    import onnx
    import onnx_ir as ir

    import opshift

    path = ROOT / "models" / "prelu6_conv_per_channel.onnx"
    for name in ("inline", "fuse", "fix"):
        f = getattr(opshift, name)
        assert isinstance(f(str(path)), onnx.ModelProto)
        assert isinstance(f(ir.load(path)), ir.Model)
        assert isinstance(f(onnx.load(path)), onnx.ModelProto)
    assert isinstance(opshift.convert(str(path), 17), onnx.ModelProto)
    assert opshift.inspect(str(path)).node_count == opshift.inspect(ir.load(path)).node_count
