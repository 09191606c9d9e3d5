"""Speed and memory of ``opshift convert`` next to onnx's converter and the load+save floor.

Builds synthetic models of 1,000 / 10,000 / 100,000 nodes (Conv -> Add -> PRelu ->
LeakyRelu -> Selu blocks on tiny tensors) at opsets 9 and 16, then measures, each in a fresh
subprocess, for 9 -> 16 and 16 -> 9:

* floor: ``onnx.load`` + ``onnx.save`` of the same file (C++ protobuf parsing);
* opshift: ``opshift convert IN --opset N -o OUT`` (its CLI entry point, in the child);
* onnx: ``onnx.load`` + ``onnx.version_converter.convert_version`` + ``onnx.save`` (skipped
  when no op other than the three activations changes between the opsets: opshift then does
  not use it either).

"time" is the work itself, measured inside the child after its imports (interpreter start-up
and ``import onnx`` are the same for all three and are reported separately as "total").
Peak RSS is the child's ``ru_maxrss`` from ``os.wait4``. Each run writes a new output file
(removed before the timing, for every mode; ``--overwrite`` times replacing it instead).

usage: python bench/bench_convert.py [--sizes 1000,10000,100000] [--repeat 5] [--overwrite]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from _harness import FRESH_OUTPUT, parse_args
from onnx import TensorProto, helper, numpy_helper

# (_harness makes the children run with bytecode caches, like an installed opshift)

CHILD = r"""
import json, sys, time
mode, src, dst, opset = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
import onnx
if mode == "opshift":
    from opshift.cli import build_parser, main
    import opshift.passes.convert, opshift.commands.convert, opshift.validate
    import opshift.external, opshift.progress
    import opshift.conversion.steps  # registered by the engine on first use
    build_parser()  # imports every subcommand module: outside the timing, like "import onnx"
""" + FRESH_OUTPUT + r"""
t0 = time.perf_counter()
if mode == "floor":
    m = onnx.load(src)
    onnx.save(m, dst)
elif mode == "onnx":
    import onnx.version_converter
    m = onnx.load(src)
    m = onnx.version_converter.convert_version(m, opset)
    onnx.save(m, dst)
else:
    rc = main(["convert", src, "--opset", str(opset), "-o", dst, "-q"])
    assert rc == 0, rc
print(json.dumps({"time": time.perf_counter() - t0}))
"""

BLOCK = 5  # nodes per block


def build(n_nodes: int, opset: int, kind: str = "conv") -> onnx.ModelProto:
    """``n_nodes`` nodes in blocks of Conv(1x1) -> Add -> PRelu -> LeakyRelu -> Selu
    (``kind="conv"``), or of PRelu -> LeakyRelu -> Selu only (``kind="chain"``)."""
    c = 4
    nodes, inits = [], []
    w = numpy_helper.from_array(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1) * 0.5, "w")
    b = numpy_helper.from_array(np.full([c, 1, 1], 0.1, np.float32), "b")
    s = numpy_helper.from_array(np.linspace(0.1, 0.4, c, dtype=np.float32).reshape(c, 1, 1),
                                "slope")
    inits += [w, b, s]
    cur = "x"
    block = BLOCK if kind == "conv" else 3
    for i in range(n_nodes // block):
        if kind == "conv":
            nodes += [helper.make_node("Conv", [cur, "w"], [f"c{i}"], name=f"conv{i}"),
                      helper.make_node("Add", [f"c{i}", "b"], [f"a{i}"], name=f"add{i}")]
            cur = f"a{i}"
        nodes += [
            helper.make_node("PRelu", [cur, "slope"], [f"p{i}"], name=f"prelu{i}"),
            helper.make_node("LeakyRelu", [f"p{i}"], [f"l{i}"], name=f"lrelu{i}", alpha=0.2),
            helper.make_node("Selu", [f"l{i}"], [f"s{i}"], name=f"selu{i}"),
        ]
        cur = f"s{i}"
    nodes[-1].output[0] = "y"
    shape = [1, c, 2, 2]
    graph = helper.make_graph(nodes, "bench", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                        shape)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    from opshift.opsets import ir_version_for_opset

    m.ir_version = ir_version_for_opset(opset)
    return m


def measure(mode: str, src: Path, dst: Path, opset: int) -> dict:
    """One fresh child: its own timing of the work, and its peak RSS by /usr/bin/time (the
    ru_maxrss of a forked child can include pages of this process)."""
    timer = "/usr/bin/time" if Path("/usr/bin/time").exists() else None
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        cmd = [sys.executable, "-c", CHILD, mode, str(src), str(dst), str(opset)]
        if timer:
            cmd = [timer, "-f", "%M", "-o", tf.name, *cmd]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True)
        total = time.perf_counter() - t0
        if p.returncode != 0:
            return {"error": p.stderr.decode(errors="replace").strip().splitlines()[-1:]}
        d = json.loads(p.stdout.decode().strip().splitlines()[-1])
        d["total"] = total
        lines = tf.read().strip().splitlines() if timer else []
        d["rss_mb"] = int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else float("nan")
    return d


def best(mode, src, dst, opset, repeat) -> dict:
    runs = [measure(mode, src, dst, opset) for _ in range(repeat)]
    return _min(runs)


def _min(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    return min(ok, key=lambda r: r["time"])


def interleaved(modes, src, dst, opset, repeat) -> dict[str, dict]:
    """Alternate the modes run by run, so a busy spell of a shared machine hits all of them
    alike; keep each mode's fastest run."""
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(repeat):
        for m in modes:
            runs[m].append(measure(m, src, dst, opset))
    return {m: _min(r) for m, r in runs.items()}


def main() -> int:
    args = parse_args(__doc__, repeat=5, extra=lambda ap: ap.add_argument(
        "--kinds", default="chain,conv",
        help="chain: PRelu/LeakyRelu/Selu only; conv: with Conv/Add around them"))
    sizes = [int(s) for s in args.sizes.split(",")]
    from opshift.conversion.engine import convert_nodes
    from opshift.opsets import ACTIVATIONS

    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        tmp = Path(tmp)
        for kind, n, (src_opset, dst_opset) in ((k, n, c) for k in args.kinds.split(",")
                                                for n in sizes for c in ((9, 16), (16, 9))):
            if True:  # noqa: SIM108 - keeps the loop body flat
                m = build(n, src_opset, kind)
                src = tmp / f"m{n}_{src_opset}.onnx"
                onnx.save(m, src)
                dst = tmp / f"out{n}.onnx"
                row = {"model": kind, "nodes": n, "convert": f"{src_opset}->{dst_opset}",
                       **interleaved(("floor", "opshift"), src, dst, dst_opset, args.repeat)}
                # opshift never calls onnx's converter; say whether onnx's would be needed
                # for the other ops at all, and measure it on the same model regardless
                row["other_ops_change"] = bool(convert_nodes(m, src_opset, dst_opset,
                                                             skip=ACTIVATIONS))
                row["onnx"] = best("onnx", src, dst, dst_opset, max(1, args.repeat - 1))
                del m
                rows.append(row)
                _print_row(row)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


def _fmt(r: dict) -> str:
    if "error" in r:
        msg = " ".join(r["error"]).rsplit(": ", 1)[-1]  # onnx: "... : No Adapter From ..."
        return f"{'fails: ' + msg[:50]:>22}"
    return f"{r['time'] * 1000:9.1f} ms {r['rss_mb']:7.0f} MB"


def _print_row(row: dict) -> None:
    if not hasattr(_print_row, "done"):
        print(f"{'model':>5} {'nodes':>7} {'conv':>6} | {'floor (load+save)':>21} | "
              f"{'opshift convert':>21} | {'onnx.version_converter':>22} | "
              "opshift/floor time, rss")
        _print_row.done = True
    f, o, x = row["floor"], row["opshift"], row["onnx"]
    ratio = ""
    if "error" not in f and "error" not in o:
        ratio = f"{o['time'] / f['time']:.2f}x, {o['rss_mb'] / f['rss_mb']:.2f}x"
    print(f"{row['model']:>5} {row['nodes']:>7} {row['convert']:>6} | {_fmt(f)} | {_fmt(o)} | "
          f"{_fmt(x):>22} | {ratio}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
