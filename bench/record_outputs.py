"""Record what every command writes and prints for the bundled models, so that a change that
should not alter behaviour (a refactor) can be shown to leave it byte for byte as it was.

    python bench/record_outputs.py OUT_DIR        # then: diff -r BEFORE_DIR OUT_DIR

For every model under models/ and tests/data/: convert to every opset 1..onnx's newest (the
model's sha256 or the error line), convert --verify to opsets 6, 9, 13 and 17, inline, fuse,
fix (the model's sha256 and the --json line) and inspect --json. Paths in the JSON are
replaced by placeholders so that runs compare.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx.defs

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opshift", *args], capture_output=True,
                          text=True, cwd=tempfile.gettempdir())


def _scrub(text: str, tmp: str) -> str:
    return text.replace(tmp, "<out>").replace(str(ROOT), "<root>")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "-"


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    models = sorted([*ROOT.glob("models/*.onnx"), *ROOT.glob("tests/data/*.onnx")])
    with tempfile.TemporaryDirectory() as tmp:
        lines = []
        for opset in range(1, onnx.defs.onnx_opset_version() + 1):
            dest = Path(tmp, f"opset{opset}")
            r = _run(["--json", "convert", *map(str, models), "--opset", str(opset),
                      "-o", f"{dest}/"])
            for line in r.stdout.splitlines():
                row = json.loads(line)
                written = Path(row["output"]) if row.get("output") else None
                row["sha256"] = _digest(written) if written else "-"
                lines.append(_scrub(json.dumps(row, sort_keys=True), tmp))
            lines.append(f"opset {opset} exit {r.returncode} stderr {_scrub(r.stderr, tmp)!r}")
        (out / "convert.txt").write_text("\n".join(lines) + "\n")
        lines = []
        for opset in (6, 9, 13, 17):  # the verdicts and gaps --verify reports
            r = _run(["--json", "convert", *map(str, models), "--opset", str(opset),
                      "-o", f"{tmp}/verified{opset}/", "--verify", "--allow-incomplete"])
            lines += [_scrub(line, tmp) for line in r.stdout.splitlines()]
            lines.append(f"opset {opset} exit {r.returncode}")
        (out / "convert_verify.txt").write_text("\n".join(lines) + "\n")
        for command in ("inline", "fuse", "fix", "inspect"):
            lines = []
            for model in models:
                dest = Path(tmp, command, model.name)
                args = ["--json", command, str(model)]
                if command != "inspect":
                    args += ["-o", str(dest)]
                r = _run(args)
                lines.append(f"{model.name} exit {r.returncode} sha256 {_digest(dest)}")
                lines.append(_scrub(r.stdout.strip(), tmp))
                lines.append(_scrub(r.stderr.strip(), tmp))
            (out / f"{command}.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
