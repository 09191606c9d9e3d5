"""Speed of ``opshift inline`` next to the load+save floors, on 1,000 / 10,000 / 100,000 nodes.

Synthetic models: blocks of Conv(1x1) -> Add -> activation, the activation cycling through
PRelu ([C,1,1] slope), LeakyRelu and Selu (a third of the nodes are activations; each
becomes 4..12 primitive nodes), at opset 18 (function-body band) and opset 13 (typed
constants band, which also needs element types). Each measurement runs in a fresh
subprocess:

* ``onnx``: ``onnx.load`` + ``onnx.save`` of the input (C++ protobuf; the target floor);
* ``onnx_ir``: ``onnx_ir.load`` + ``onnx_ir.save`` (the floor of anything built on onnx_ir);
* ``onnx out``: ``onnx.load`` + ``onnx.save`` of the *inlined* model (3-4x the nodes of the
  input): no pass that writes that model can beat it, so it bounds what "2x the floor" can
  mean when the output is this much larger;
* ``inline``: ``opshift inline IN -o OUT -q`` through the CLI's ``main`` (argument parsing,
  the structural check every command runs, inline, the atomic save).

"time" is measured inside the child after its imports (interpreter start-up and imports are
the same for all and excluded); the best of ``--repeat`` runs is kept, the modes taking
turns round by round so that load on the machine hits them alike. Each run writes a new
output file (removed before the timing, for every mode; ``--overwrite`` times replacing an
existing one, which costs opshift's atomic rename ~3 ms more on ext4). The ratio column is
inline / onnx floor (target <= 2x), and the last column shows growth per 10x nodes.

usage: python bench/bench_inline.py [--sizes 1000,10000,100000] [--repeat 3] [--json]
       [--overwrite]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from _harness import best_interleaved, cli_child, ms, opsets_option, parse_args, run_child
from onnx import TensorProto, helper, numpy_helper

# (_harness makes the children run with bytecode caches, like an installed opshift)
CHILD = cli_child("inline", "opshift.passes.inline, opshift.commands.inline, "
                            "opshift.validate, opshift.external, opshift.progress")

MODES = ("onnx", "onnx_ir", "inline", "onnx_out")


def build(n_nodes: int, opset: int) -> onnx.ModelProto:
    """``n_nodes`` nodes in blocks of Conv(1x1) -> Add -> PRelu|LeakyRelu|Selu."""
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


def main() -> int:
    args = parse_args(__doc__, repeat=3, extra=opsets_option)
    rows = []
    print(f"{'opset':>5} {'nodes':>7} {'out nodes':>9} | {'onnx load+save':>14} | "
          f"{'onnx_ir load+save':>17} | {'onnx out':>11} | {'opshift inline':>14} | "
          f"inline/onnx  inline/onnx_ir  inline/onnx_out  growth")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        tmp = Path(tmp)
        for opset in (int(o) for o in args.opsets.split(",")):
            prev = None
            for n in (int(s) for s in args.sizes.split(",")):
                src, dst = tmp / f"in{n}_{opset}.onnx", tmp / "out.onnx"
                onnx.save(build(n, opset), src)
                row = {"opset": opset, "nodes": n}
                # one untimed inline for its output, the input of the "onnx out" floor
                first = run_child(CHILD, "inline", src, dst)
                jobs = {mode: (mode, src, tmp / "o.onnx") for mode in ("onnx", "onnx_ir",
                                                                        "inline")}
                if "error" not in first:
                    out_src = tmp / "inlined.onnx"
                    dst.replace(out_src)
                    row["out_nodes"] = len(onnx.load(out_src).graph.node)
                    jobs["onnx_out"] = ("onnx", out_src, tmp / "o2.onnx")
                row.update(best_interleaved(args.repeat, CHILD, jobs))
                row.setdefault("onnx_out", {"error": "-"})
                rows.append(row)
                prev = _print(row, prev)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


def _print(row: dict, prev: dict | None) -> dict:
    f, i, o = row["onnx"], row["inline"], row["onnx_ir"]
    fo = row.get("onnx_out", {"error": "-"})
    ratio = ratio_ir = ratio_out = growth = ""
    if "error" not in f and "error" not in i:
        ratio = f"{i['time'] / f['time']:.2f}x"
        ratio_ir = f"{i['time'] / o['time']:.2f}x" if "error" not in o else "-"
        ratio_out = f"{i['time'] / fo['time']:.2f}x" if "error" not in fo else "-"
        if prev is not None and "error" not in prev["inline"]:
            growth = (f"x{i['time'] / prev['inline']['time']:.1f} for "
                      f"x{row['nodes'] / prev['nodes']:.0f} nodes")
    print(f"{row['opset']:>5} {row['nodes']:>7} {row.get('out_nodes', 0):>9} | {ms(f):>14} | "
          f"{ms(o):>17} | {ms(fo):>11} | {ms(i):>14} | {ratio:>11}  {ratio_ir:>13}  "
          f"{ratio_out:>15}  {growth}", flush=True)
    if "error" in i:
        print(f"      inline error: {i['error']}")
    return row


if __name__ == "__main__":
    sys.exit(main())
