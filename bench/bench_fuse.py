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
``--repeat`` runs is kept, the modes taking turns round by round. Each run writes a new
output file (removed before the timing, for every mode; ``--overwrite`` keeps it). The last
column shows growth per 10x nodes (linear: about x10).

The figures measured are in the README (Benchmarks).

Every tenth node of these models is the root of a fusion (the densest case); per fusion the
cost is onnxscript's matcher and replacement plus opshift's exactness check, and growth is
linear (each node is offered only to the rules whose pattern ends in its op type, and
their variants only when its inputs have the pattern's shape). The cyclic garbage
collector is paused while the IR exists (it would walk every IR object on each full pass).

usage: python bench/bench_fuse.py [--sizes 1000,10000,100000] [--opsets 18,13] [--repeat 3]
       [--overwrite]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import onnx
from _harness import best_interleaved, cli_child, ms, opsets_option, parse_args, run_child

# (_harness makes the children run with bytecode caches, like an installed opshift); the
# rule set is built inside the timing
CHILD = cli_child("fuse", "opshift.passes.fuse, opshift.commands.fuse, opshift.validate, "
                          "opshift.external, opshift.progress, opshift.rewriters.activations, "
                          "opshift.rewriters.exporters")

MODES = ("onnx", "onnx_ir", "fuse")
NODES_PER_BLOCK = (2 * 3 + 5 + 7 + 13) / 3  # Conv+Add, then the inlined PRelu/LeakyRelu/Selu


def build(n_nodes: int, opset: int) -> onnx.ModelProto:
    """bench_inline's model, inlined, of about ``n_nodes`` nodes."""
    from bench_inline import build as build_input

    from opshift.passes.inline import inline_proto

    m = build_input(3 * max(3, round(n_nodes / NODES_PER_BLOCK)), opset)
    inline_proto(m)
    return m


def main() -> int:
    args = parse_args(__doc__, repeat=3, extra=opsets_option)
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


def _print(row: dict, prev: dict | None) -> dict:
    f, o, z = row["onnx"], row["onnx_ir"], row["fuse"]
    ratio_ir = ratio = growth = ""
    if "error" not in z:
        ratio_ir = f"{z['time'] / o['time']:.2f}x" if "error" not in o else "-"
        ratio = f"{z['time'] / f['time']:.2f}x" if "error" not in f else "-"
        if prev is not None and "error" not in prev["fuse"]:
            growth = (f"x{z['time'] / prev['fuse']['time']:.1f} for "
                      f"x{row['nodes'] / prev['nodes']:.0f} nodes")
    print(f"{row['opset']:>5} {row['nodes']:>7} {row.get('out_nodes', 0):>9} | {ms(f):>14} | "
          f"{ms(o):>17} | {ms(z):>12} | {ratio_ir:>12}  {ratio:>9}  {growth}", flush=True)
    if "error" in z:
        print(f"      fuse error: {z['error']}")
    return row


if __name__ == "__main__":
    sys.exit(main())
