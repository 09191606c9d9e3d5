"""Speed of ``opshift fuse`` next to the load+save floors, on 1,000 / 10,000 / 100,000 nodes.

Synthetic models: blocks of Conv(1x1) -> Add -> activation, the activation cycling through
PRelu ([C,1,1] slope), LeakyRelu and Selu, inlined by ``opshift inline`` (at opset 18: the
function bodies; at opset 13: typed constants), so that the *inlined* model -- fuse's input
-- has about the requested node count. Each measurement runs in a fresh subprocess:

* ``onnx``: ``onnx.load`` + ``onnx.save`` of the input (C++ protobuf);
* ``onnx_ir``: ``onnx_ir.load`` + ``onnx_ir.save`` (the floor of anything built on onnx_ir,
  which fuse is, through onnxscript's rewriter; the target is fuse <= 2x this floor);
* ``fuse``: ``opshift fuse IN -o OUT -q`` through its CLI entry point.

"time" is measured inside the child after its imports (interpreter start-up and imports are
excluded for all three: onnx_ir for the floor, every module opshift imports lazily and the
CLI's subcommand modules for fuse; building fuse's rule set is timed); the best of
``--repeat`` runs is kept, the modes taking turns round by round. The last column shows
growth per 10x nodes (linear: about x10).

The figures measured are in the README (Benchmarks).

Every tenth node of these models is the root of a fusion (the densest case); per fusion the
cost is onnxscript's matcher and replacement plus opshift's exactness check, and growth is
linear (each node is offered only to the rules whose pattern ends in its op type, and
their variants only when its inputs have the pattern's shape). The cyclic garbage
collector is paused while the IR exists (it would walk every IR object on each full pass).

usage: python bench/bench_fuse.py [--sizes 1000,10000,100000] [--opsets 18,13] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from _harness import best_interleaved, run_child, warm_schema_cache
from onnx import TensorProto, helper, numpy_helper

# Children run like an installed opshift: with bytecode caches (a pip install writes them),
# not recompiling every module per run as PYTHONDONTWRITEBYTECODE would make them.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

CHILD = r"""
import json, sys, time
mode, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
import onnx
if mode == "onnx_ir":
    import onnx_ir
if mode == "fuse":
    # every module fuse imports lazily is imported before the timing, as onnx_ir is for the
    # floor (the same convention as bench_convert); building the rule set stays timed
    from opshift.cli import build_parser, main
    import opshift.passes.fuse, opshift.commands.fuse, opshift.validate  # noqa
    import opshift.external, opshift.progress, opshift.rewriters.activations  # noqa
    build_parser()  # imports every subcommand module
t0 = time.perf_counter()
if mode == "onnx":
    onnx.save(onnx.load(src), dst)
elif mode == "onnx_ir":
    onnx_ir.save(onnx_ir.load(src), dst)
else:
    rc = main(["fuse", src, "-o", dst, "-q"])
    assert rc == 0, rc
t = time.perf_counter() - t0
print(json.dumps({"time": t}))
"""

MODES = ("onnx", "onnx_ir", "fuse")
NODES_PER_BLOCK = (2 * 3 + 5 + 7 + 13) / 3  # Conv+Add, then the inlined PRelu/LeakyRelu/Selu


def build(n_nodes: int, opset: int) -> onnx.ModelProto:
    """An inlined model of about ``n_nodes`` nodes."""
    from opshift.passes.inline import inline_proto

    c = 4
    w = numpy_helper.from_array(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1) * 0.5, "w")
    b = numpy_helper.from_array(np.full([c, 1, 1], 0.1, np.float32), "b")
    s = numpy_helper.from_array(np.linspace(-0.4, 0.4, c, dtype=np.float32).reshape(c, 1, 1),
                                "slope")
    nodes = []
    cur = "x"
    for i in range(max(3, round(n_nodes / NODES_PER_BLOCK))):
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
    inline_proto(m)
    return m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--opsets", default="18,13")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    warm_schema_cache()
    rows = []
    print(f"{'opset':>5} {'nodes':>7} {'out nodes':>9} | {'onnx load+save':>14} | "
          f"{'onnx_ir load+save':>17} | {'opshift fuse':>12} | fuse/onnx_ir  fuse/onnx  growth")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        tmp = Path(tmp)
        for opset in (int(o) for o in args.opsets.split(",")):
            prev = None
            for n in (int(s) for s in args.sizes.split(",")):
                src, dst = tmp / f"in{n}_{opset}.onnx", tmp / "out.onnx"
                m = build(n, opset)
                onnx.save(m, src)
                row = {"opset": opset, "nodes": len(m.graph.node)}
                row.update(best_interleaved(args.repeat, CHILD,
                                            {mode: (mode, src, dst) for mode in MODES}))
                if "error" not in row["fuse"]:
                    main_out = tmp / "fused.onnx"
                    run_child(CHILD, "fuse", src, main_out)
                    row["out_nodes"] = len(onnx.load(main_out).graph.node)
                rows.append(row)
                prev = _print(row, prev)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


def _ms(r: dict) -> str:
    return f"{'error':>11}" if "error" in r else f"{r['time'] * 1000:8.1f} ms"


def _print(row: dict, prev: dict | None) -> dict:
    f, o, z = row["onnx"], row["onnx_ir"], row["fuse"]
    ratio_ir = ratio = growth = ""
    if "error" not in z:
        ratio_ir = f"{z['time'] / o['time']:.2f}x" if "error" not in o else "-"
        ratio = f"{z['time'] / f['time']:.2f}x" if "error" not in f else "-"
        if prev is not None and "error" not in prev["fuse"]:
            growth = (f"x{z['time'] / prev['fuse']['time']:.1f} for "
                      f"x{row['nodes'] / prev['nodes']:.0f} nodes")
    print(f"{row['opset']:>5} {row['nodes']:>7} {row.get('out_nodes', 0):>9} | {_ms(f):>14} | "
          f"{_ms(o):>17} | {_ms(z):>12} | {ratio_ir:>12}  {ratio:>9}  {growth}", flush=True)
    if "error" in z:
        print(f"      fuse error: {z['error']}")
    return row


if __name__ == "__main__":
    sys.exit(main())
