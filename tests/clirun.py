"""Run ``python -m opshift`` as a user does: a new process, its exit code, stdout, stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def opshift(*argv, stdin: bytes | None = None, cwd: Path | None = None,
            binary: bool = False) -> subprocess.CompletedProcess:
    """``python -m opshift *argv`` (paths given as Path objects are made strings)."""
    p = subprocess.run([sys.executable, "-m", "opshift", *map(str, argv)], input=stdin,
                       capture_output=True, cwd=cwd or ROOT)
    if not binary:
        p.stdout = p.stdout.decode()
    p.stderr = p.stderr.decode()
    return p


def json_lines(text: str) -> list[dict]:
    """Every line of ``text`` parsed as one JSON object."""
    return [json.loads(line) for line in text.splitlines()]
