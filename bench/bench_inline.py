"""Speed of ``opshift inline`` as a user runs it, next to onnx's load+save floors.

Every measurement is a whole process, from its start to its exit, with its CPU time and
peak RSS:

* ``floor in``: ``python -c "import onnx; onnx.save(onnx.load(IN), OUT)"`` on the input;
* ``floor out``: the same on the *inlined* model (3-4x the nodes of the input): no command
  that writes that model can beat it;
* ``inline``: ``python -m opshift inline IN -o OUT -q`` (interpreter start, imports, the
  structural check every command runs, inline, the atomic save);
* ``base`` (with ``--base DIR``): the same command run from another checkout of opshift.

Synthetic models: blocks of Conv(1x1) -> Add -> activation, the activation cycling through
PRelu ([C,1,1] slope), LeakyRelu and Selu (a third of the nodes are activations; each
becomes 4..13 primitive nodes), at opset 18 (function-body band) and opset 13 (typed
constants band, which also needs element types). The best of ``--repeat`` runs is kept, the
modes taking turns round by round so that load on the machine hits them alike. The ratio
columns are inline / floor out (target <= 1.5x at 100k nodes) and inline / floor in, of
wall times and (in brackets) of CPU times, which other work on the machine disturbs less.

usage: python bench/bench_inline.py [--sizes 1000,100000] [--million] [--opsets 18,13]
       [--repeat 3] [--base /path/to/other/checkout] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR = "import onnx, sys; onnx.save(onnx.load(sys.argv[1]), sys.argv[2])"


def build(n_nodes: int, opset: int):
    """``n_nodes`` nodes in blocks of Conv(1x1) -> Add -> PRelu|LeakyRelu|Selu."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    c = 4
    w = numpy_helper.from_array(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1) * 0.5, "w")
    b = numpy_helper.from_array(np.full([c, 1, 1], 0.1, np.float32), "b")
    s = numpy_helper.from_array(np.linspace(-0.4, 0.4, c, dtype=np.float32).reshape(c, 1, 1),
                                "slope")
    nodes = []
    cur = "x"
    for i in range(n_nodes // 3):
        act = ("PRelu", "LeakyRelu", "Selu")[i % 3]
        inputs = [f"a{i}", "slope"] if act == "PRelu" else [f"a{i}"]
        attrs = {"alpha": 0.2} if act == "LeakyRelu" else {}
        nodes += [helper.make_node("Conv", [cur, "w"], [f"c{i}"], name=f"conv{i}"),
                  helper.make_node("Add", [f"c{i}", "b"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node(act, inputs, [f"r{i}"], name=f"act{i}", **attrs)]
        cur = f"r{i}"
    nodes[-1].output[0] = "y"
    shape = [1, c, 2, 2]
    graph = helper.make_graph(
        nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], [w, b, s])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def run(argv: list[str], extra_env: dict[str, str] | None = None) -> dict:
    """Run ``argv`` to its exit: wall time from start to exit, CPU time (user + system) and
    peak RSS (from ``wait4``), or ``{"error": <last stderr line>}``. (Linux keeps a peak RSS
    across fork and exec, so this process stays small: the models are built and read by
    children.) The command runs in the system's temp folder: ``python -m opshift`` looks
    for opshift in its working directory first, before ``PYTHONPATH``."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # run like an installed package: bytecode cached
    env.update(extra_env or {})
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env,
                             cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(p.pid, 0)
        elapsed = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            lines = err.read().decode(errors="replace").strip().splitlines() or ["?"]
            return {"error": lines[-1]}
    return {"time": elapsed, "cpu": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024}


def _child(*args: object) -> str:
    """This script's ``--child`` mode (building or reading a model) in a new process."""
    return subprocess.run([sys.executable, __file__, "--child", *map(str, args)], check=True,
                          capture_output=True, text=True).stdout.strip()


def commands(src: Path, inlined: Path, out: Path, base: str | None) -> dict[str, tuple]:
    """mode -> (argv, environment additions) of one measurement."""
    py = sys.executable
    inline = [py, "-m", "opshift", "inline", str(src), "-o", str(out), "-q"]
    jobs = {"floor_in": ([py, "-c", FLOOR, str(src), str(out)], None),
            "floor_out": ([py, "-c", FLOOR, str(inlined), str(out)], None),
            "inline": (inline, {"PYTHONPATH": str(ROOT)})}
    if base is not None:
        jobs["base"] = (inline, {"PYTHONPATH": base})
    return jobs


def best_interleaved(repeat: int, jobs: dict[str, tuple], out: Path) -> dict[str, dict]:
    """The fastest of ``repeat`` runs per job, in rounds taking every job once; each run
    writes a new output file (removed before it, as a command usually creates one)."""
    runs: dict[str, list[dict]] = {name: [] for name in jobs}
    for _ in range(repeat):
        for name, (argv, env) in jobs.items():
            out.unlink(missing_ok=True)
            runs[name].append(run(argv, env))
    best = {}
    for name, rs in runs.items():
        good = [r for r in rs if "error" not in r]
        best[name] = min(good, key=lambda r: r["time"]) if good else rs[0]
    return best


def fmt(r: dict) -> str:
    if "error" in r:
        return f"{'error':>24}"
    return f"{r['time']:6.2f} s {r['cpu']:5.2f} s {r['rss_mb']:4.0f} MB"


def child(what: str, *args: str) -> None:
    import onnx

    if what == "build":
        onnx.save(build(int(args[0]), int(args[1])), args[2])
    else:  # the node count of a model
        print(len(onnx.load(args[0]).graph.node))


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(*sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--million", action="store_true", help="also 1,000,000 nodes (minutes)")
    ap.add_argument("--opsets", default="18,13")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", metavar="DIR", help="also time opshift from this checkout")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] + ([1_000_000] if args.million else [])
    modes = ["floor_in", "floor_out", "inline"] + (["base"] if args.base else [])
    print("each mode: wall time (start to exit), CPU time (user + system), peak RSS; the "
          "ratios are of wall times (of CPU times in brackets)")
    print(f"{'opset':>5} {'nodes':>8} {'out nodes':>9} | "
          + " | ".join(f"{m:>24}" for m in modes) + " | inline/out       inline/in"
          + ("        base/out" if args.base else ""))
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        tmp = Path(tmp)
        for opset in (int(o) for o in args.opsets.split(",")):
            for n in sizes:
                src, inlined, out = tmp / f"in{n}_{opset}.onnx", tmp / "inlined.onnx", \
                    tmp / "out.onnx"
                _child("build", n, opset, src)
                jobs = commands(src, inlined, out, args.base)
                first = run(*jobs["inline"])  # untimed: the output
                if "error" in first:
                    print(f"{opset:>5} {n:>8}  inline error: {first['error']}")
                    continue
                out.replace(inlined)
                if args.base:
                    run(*jobs["base"])  # untimed: compiles its bytecode, fills its cache
                row = {"opset": opset, "nodes": n,
                       "out_nodes": int(_child("count", inlined)),
                       **best_interleaved(args.repeat, jobs, out)}
                rows.append(row)
                _print(row, modes)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


def _print(row: dict, modes: list[str]) -> None:
    def ratio(a: str, b: str) -> str:
        if "error" in row[a] or "error" in row[b]:
            return "-"
        return (f"{row[a]['time'] / row[b]['time']:.2f}x "
                f"({row[a]['cpu'] / row[b]['cpu']:.2f}x)")

    line = (f"{row['opset']:>5} {row['nodes']:>8} {row['out_nodes']:>9} | "
            + " | ".join(fmt(row[m]) for m in modes)
            + f" | {ratio('inline', 'floor_out'):>14}  {ratio('inline', 'floor_in'):>14}")
    if "base" in row:
        line += f"  {ratio('base', 'floor_out'):>14}"
    print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
