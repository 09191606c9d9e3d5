"""A command writes its named output and nothing else: no file in the home folder, the cache
folder, the temp folder, the working directory or beside the input, whatever it does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from conftest import MODELS, ROOT

from opshift.inline import inline

#: (name, argv) with IN, FUSED (an inlined model) and OUT as placeholders; OUT is the one
#: file the command may create.
RUNS = [
    ("convert", ["convert", "IN", "--opset", "9", "-o", "OUT", "--verify"]),
    ("inline", ["inline", "IN", "-o", "OUT"]),
    ("inline-verify", ["inline", "IN", "-o", "OUT", "--verify", "--functions", "all"]),
    ("fuse", ["fuse", "FUSED", "-o", "OUT", "--verify"]),
    ("fix", ["fix", "IN", "-o", "OUT", "--verify"]),
    ("fix-dry-run", ["fix", "IN", "--dry-run"]),
    ("inspect", ["inspect", "IN", "--opset", "9", "--json"]),
    ("verify", ["verify", "IN", "IN"]),
    ("ops", ["ops", "--json"]),
]


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root``: relative path -> (size, mtime_ns)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath, name)
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.parametrize("label,argv", RUNS, ids=[r[0] for r in RUNS])
def test_a_command_writes_nothing_but_its_output(tmp_path, label, argv):
    home, cache, tmp, cwd, work = (tmp_path / d for d in ("home", "cache", "tmp", "cwd", "work"))
    for d in (home, cache, tmp, cwd, work):
        d.mkdir()
    src = work / "in.onnx"
    shutil.copy(MODELS / "local_function.onnx", src)
    (work / "fused.onnx").write_bytes(inline(onnx.load(src)).SerializeToString())
    out = work / "out.onnx"
    paths = {"IN": str(src), "FUSED": str(work / "fused.onnx"), "OUT": str(out)}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "OPSHIFT_"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(cache), TMPDIR=str(tmp),
               PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    before = _tree(tmp_path)
    p = subprocess.run([sys.executable, "-m", "opshift", *[paths.get(a, a) for a in argv]],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    after = _tree(tmp_path)
    created = set(after) - set(before)
    assert created == ({"work/out.onnx"} if "OUT" in argv else set()), created
    assert not set(before) - set(after)
    changed = [k for k in before if before[k] != after[k] and k not in ("home", "cache",
                                                                          "tmp", "cwd", "work")]
    assert changed == []  # the inputs untouched (folders are checked by what they hold)
    if "OUT" in argv:
        onnx.checker.check_model(onnx.load(out), full_check=True)
