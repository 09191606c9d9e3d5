"""What the bench scripts share: run a measurement in a fresh child process, keep the best."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# Children run like an installed opshift: with bytecode caches (a pip install writes them),
# not recompiling every module per run as PYTHONDONTWRITEBYTECODE would make them.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def run_child(code: str, *args: object) -> dict:
    """Run ``python -c code args...``; its last stdout line is a JSON object with "time".
    A failed child gives ``{"error": <its last stderr line>}``."""
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def best_of(repeat: int, code: str, *args: object) -> dict:
    """The fastest of ``repeat`` child runs, or the first error if none succeeded."""
    runs = [run_child(code, *args) for _ in range(repeat)]
    good = [r for r in runs if "error" not in r]
    return min(good, key=lambda r: r["time"]) if good else runs[0]


def best_interleaved(repeat: int, code: str, jobs: dict[str, tuple]) -> dict[str, dict]:
    """The fastest of ``repeat`` child runs per job (name -> child args), run in rounds that
    take every job once, so that a burst of load on the machine hits all of them alike
    rather than whichever was being measured at the time."""
    runs: dict[str, list[dict]] = {name: [] for name in jobs}
    for _ in range(repeat):
        for name, args in jobs.items():
            runs[name].append(run_child(code, *args))
    out = {}
    for name, rs in runs.items():
        good = [r for r in rs if "error" not in r]
        out[name] = min(good, key=lambda r: r["time"]) if good else rs[0]
    return out


#: Child-script lines run before its timing (``dst`` is the output path): the output is
#: removed first, for every mode alike, so that each run writes a new file as a command
#: usually does. With ``--overwrite`` (BENCH_OVERWRITE=1) it is kept, and each run replaces
#: an existing file; on ext4 that costs opshift's atomic rename over it ~3 ms more per run
#: (ext4 then allocates and flushes the new file's blocks at once) and ``onnx.save``'s
#: in-place truncate and rewrite about 1 ms.
FRESH_OUTPUT = """
import os
if os.environ.get("BENCH_OVERWRITE") != "1" and os.path.exists(dst):
    os.remove(dst)
"""


def parse_args(doc: str, *, repeat: int, extra=None) -> argparse.Namespace:
    """The options the convert, inline and fuse benches share: ``--sizes``, ``--repeat``,
    ``--json`` and ``--overwrite`` (replace an existing output instead of writing a new
    file, see ``FRESH_OUTPUT``), plus what ``extra(parser)`` adds. Passes ``--overwrite``
    on to the child processes."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=repeat)
    if extra is not None:
        extra(ap)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--overwrite", action="store_true",
                    help="time writes over an existing output file (default: a new file)")
    args = ap.parse_args()
    if args.overwrite:
        os.environ["BENCH_OVERWRITE"] = "1"
    return args


def opsets_option(ap) -> None:
    """``--opsets`` of the inline and fuse benches."""
    ap.add_argument("--opsets", default="18,13")


def ms(r: dict) -> str:
    """A child's time, right-aligned in milliseconds, or ``error``."""
    return f"{'error':>11}" if "error" in r else f"{r['time'] * 1000:8.1f} ms"


def cli_child(command: str, imports: str) -> str:
    """A child script (argv: mode, src, dst) timing one of: ``onnx`` (``onnx.load`` +
    ``onnx.save``), ``onnx_ir`` (``onnx_ir.load`` + ``onnx_ir.save``) or ``command``
    (``opshift <command> src -o dst -q`` through the CLI's ``main``). Imports, ``imports``
    (the modules opshift imports lazily) and building the CLI's parsers come before the
    timing, as ``import onnx_ir`` does for its floor; so does removing the output (see
    ``FRESH_OUTPUT``)."""
    return f"""
import json, sys, time
mode, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
import onnx
if mode == "onnx_ir":
    import onnx_ir
if mode == {command!r}:
    from opshift.cli import build_parser, main
    import {imports}  # noqa
    build_parser()  # imports every subcommand module
{FRESH_OUTPUT}
t0 = time.perf_counter()
if mode == "onnx":
    onnx.save(onnx.load(src), dst)
elif mode == "onnx_ir":
    onnx_ir.save(onnx_ir.load(src), dst)
else:
    rc = main([{command!r}, src, "-o", dst, "-q"])
    assert rc == 0, rc
print(json.dumps({{"time": time.perf_counter() - t0}}))
"""
