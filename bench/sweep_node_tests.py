"""Every command with ``--verify`` over onnx's own node tests, as a user runs it.

    python bench/sweep_node_tests.py [--opsets 1-28] [--up 1,6,7,9,11,13,16] [-j 2]

The node test models (``onnx.backend.test.case.node.collect_testcases``, ~1,900 one-node and
expanded models) are written to a scratch folder; then ``opshift convert DIR --opset N -o OUT
--verify -j J --json`` runs for every N of ``--opsets``; ``inline``, ``fuse`` and ``fix``
with ``--verify`` run on the folder once; and for every opset of ``--up`` the models
converted down to it are converted up again (3 opsets higher, and to the newest) with
``--verify``. Generated inputs mix in +-0, +-inf, NaN, subnormals and each type's extremes,
which the node tests' own data seldom holds. Prints per run how many models were written,
refused (exit 2) and failed (exit 1: the result computes something else; 3: an internal
error), each failure's message, and exits 1 when any failed.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import onnx

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opsets", default=f"1-{onnx.defs.onnx_opset_version()}",
                    help="targets of the down/up sweep: 'A-B' or a comma list")
    ap.add_argument("--up", default="1,6,7,9,11,13,16",
                    help="opsets converted down to, then up again (comma list; '' for none)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="opshift-sweep-") as tmp:
        models = Path(tmp) / "models"
        print(f"{_write_models(models)} node test models", flush=True)
        for n in _opsets(args.opsets):
            failed += _run(f"convert -> {n}", models, Path(tmp) / "out", args.jobs,
                           "convert", "--opset", str(n))
        for command in ("inline", "fuse", "fix"):
            failed += _run(command, models, Path(tmp) / "out", args.jobs, command)
        for n in _opsets(args.up) if args.up else ():
            down = Path(tmp) / f"down{n}"
            _cli(models, down, args.jobs, "convert", "--opset", str(n), verify=False)
            for up in sorted({n + 3, onnx.defs.onnx_opset_version()}):
                failed += _run(f"{n} -> {up}", down, Path(tmp) / "out", args.jobs,
                               "convert", "--opset", str(up))
    print(f"{failed} failed")
    return 1 if failed else 0


def _write_models(folder: Path) -> int:
    from onnx.backend.test.case.node import collect_testcases

    folder.mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if c.model is not None]
    for c in cases:
        onnx.save(c.model, folder / f"{c.name}.onnx")
    return len(cases)


def _opsets(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(t) for t in text.split(",")]


def _cli(src: Path, out: Path, jobs: int, *command: str, verify: bool = True) -> list[dict]:
    """``opshift COMMAND SRC -o OUT -j JOBS --json [--verify]``: one result per model."""
    p = subprocess.run([sys.executable, "-m", "opshift", *command, str(src), "-o", str(out),
                        "-j", str(jobs), "--json", *(["--verify"] if verify else [])],
                       capture_output=True, text=True, cwd=REPO)
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def _run(label: str, src: Path, out: Path, jobs: int, *command: str) -> int:
    """One command with --verify over ``src``: prints its counts and failures; how many
    failed."""
    shutil.rmtree(out, ignore_errors=True)
    results = _cli(src, out, jobs, *command)
    counts = collections.Counter(r["exit_code"] for r in results)
    bad = [r for r in results if r["exit_code"] not in (0, 2)]
    print(f"{label:>12}: {counts[0]:5} written, {counts[2]:5} refused, {len(bad)} failed",
          flush=True)
    for r in bad:
        print(f"    exit {r['exit_code']}: {(r['error'] or {}).get('message', '')}")
    return len(bad)


if __name__ == "__main__":
    sys.exit(main())
