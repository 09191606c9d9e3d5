"""Every command, as users run it (``python -m opshift ...``, process start to exit), next to
its floor measured in the same rounds: time and peak RSS ratios, and the cost per node.

Cases (bench/cases.py): convert 9->16, 16->9 and 6->17, fix, inspect, inline at opsets 18
and 9, fuse; targets (issue 17): convert and fix <= 1.5x ``onnx.load`` + ``onnx.save`` of
the input, in time and in peak RSS; inspect <= 1.2x of it (the ``onnx.load`` alone is shown
too; so is the load+read+save floor: one Python pass reading every node, value_info entry
and initializer between load and save, which bounds any command that reads the graph; for
convert 6->17 and fix also the same edits written by hand, bench/by_hand.py, with no check
and no report: what the edits themselves cost); inline <= 1.5x ``onnx.load`` +
``onnx.save`` of its own output; fuse <= 2x ``onnx_ir.load`` + ``onnx_ir.save``. A ratio
over its target is marked ``!``.

Each case is also run on a model of ``--startup-nodes`` nodes: the cost per node is
``(time - time on that model) / (nodes - its nodes)``, which stays flat across sizes when
the command grows linearly.

usage: python bench/bench_commands.py [--sizes 10k,100k] [--commands convert,fix,...]
       [--repeat 3] [--opshift-path DIR] [--compare DIR] [--slopes shared|every4|distinct]
"""

from __future__ import annotations

import argparse
import shutil
import sys

import _harness as h
from cases import CASES, Case, floor_job, select


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10k,100k", help="node counts (k, M allowed)")
    ap.add_argument("--commands", default=",".join(CASES),
                    help=f"cases or commands (default: all of {', '.join(CASES)})")
    ap.add_argument("--slopes", default="distinct", choices=("shared", "every4", "distinct"))
    ap.add_argument("--startup-nodes", type=int, default=30)
    h.add_tree_options(ap)
    args = ap.parse_args()
    trees = h.trees(args)
    sizes = [args.startup_nodes, *h.parse_sizes(args.sizes)]
    out_dir = h.scratch()
    summary: dict[tuple[str, str], dict[int, str]] = {}
    try:
        for case in select(args.commands):
            h.header(f"{case.key}: opshift {' '.join(case.args)}  (floor {case.floor}, "
                     f"target {case.target}x; slopes {args.slopes})")
            startup: dict[str, tuple[float, int]] = {}
            for i, n in enumerate(sizes):
                _size(case, n, i == 0, args, trees, out_dir, startup, summary)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    _summary(summary, sizes, trees)
    return 0


def _size(case: Case, n: int, first: bool, args, trees, out_dir, startup, summary) -> None:
    src = h.model(case.model_spec(n, slopes=args.slopes))
    nodes = h.describe(src)["nodes"]
    floors = {}
    jobs = []
    if case.floor == "onnx_out":
        for tree in trees:  # the output is the floor's input
            res = h.measure([case.job(tree, src, out_dir)], repeat=1, warmup=0)[tree.label]
            if res.ok:
                kept = out_dir / f"output-{case.key}-{len(floors)}.onnx"
                case.job(tree, src, out_dir).output.replace(kept)
                name = f"onnx out of {tree.label}"
                floors[tree.label] = name
                jobs.append(floor_job("onnx_out", kept, out_dir, name))
    else:
        name = {"onnx": "onnx load+save", "onnx_ir": "onnx_ir load+save"}[case.floor]
        jobs.append(floor_job(case.floor, src, out_dir, name))
        floors = {tree.label: name for tree in trees}
    if case.key == "inspect":
        jobs.append(floor_job("load", src, out_dir, "onnx load"))
    if case.floor == "onnx":
        jobs.append(floor_job("read", src, out_dir, "onnx load+read+save"))
    if case.by_hand:
        jobs.append(floor_job(case.key, src, out_dir, "by hand"))
    jobs += [case.job(tree, src, out_dir) for tree in trees]
    res = h.measure(jobs, args.repeat)
    label = "startup" if first else h.size_label(n)
    print(f"  {label:>7} ({nodes} nodes)")
    for job in jobs:
        if job.name in (t.label for t in trees):
            continue
        print(f"           {job.name:<24} {h.cell(res[job.name])}")
    for tree in trees:
        r = res[tree.label]
        floor = res.get(floors.get(tree.label, ""), h.Result(error="no floor"))
        rt, rm = h.ratio(r, floor), h.ratio(r, floor, "rss_kib")
        extra = ""
        if case.key == "inspect":
            extra = f"  (x onnx load {h.verdict(h.ratio(r, res['onnx load']), 99)})"
        if case.floor == "onnx":
            extra += f"  (x load+read+save {h.verdict(h.ratio(r, res['onnx load+read+save']), 99)})"
        if case.by_hand:
            hand = res["by hand"]
            extra += (f"  (x by hand {h.verdict(h.ratio(r, hand), 99)} / "
                      f"{h.verdict(h.ratio(r, hand, 'rss_kib'), 99)}; by hand x floor "
                      f"{h.verdict(h.ratio(hand, floor), 99)} / "
                      f"{h.verdict(h.ratio(hand, floor, 'rss_kib'), 99)})")
        per_node = ""
        if first and r.ok:
            startup[tree.label] = (r.wall, nodes)
        elif r.ok and tree.label in startup:
            t0, n0 = startup[tree.label]
            per_node = f"{(r.wall - t0) / (nodes - n0) * 1e6:6.1f} us/node"
        print(f"           {tree.label:<24} {h.cell(r)}  time {h.verdict(rt, case.target)}"
              f"  rss {h.verdict(rm, case.target)}  {per_node}{extra}")
        if r.ok and job_output(case, tree, src, out_dir) is not None:
            d = h.describe(job_output(case, tree, src, out_dir))
            print(f"           {'':<24} -> opset {d['opset']}, IR {d['ir_version']}, "
                  f"{d['nodes']} nodes")
        summary.setdefault((case.key, tree.label), {})[n] = (
            f"{r.wall:6.2f} s" if first and r.ok else
            f"{h.verdict(rt, case.target)}/{h.verdict(rm, case.target)} {per_node.strip()}"
            if r.ok else "ERROR")
    h.check_parent_rss(res)


def job_output(case: Case, tree, src, out_dir):
    out = case.job(tree, src, out_dir).output
    return out if out is not None and out.exists() else None


def _summary(summary, sizes, trees) -> None:
    h.header("summary: time / peak RSS ratio to the floor, cost per node above startup")
    print(f"  {'case':<13} {'tree':<14} " + "  ".join(
        f"{'startup' if i == 0 else h.size_label(n):<34}" for i, n in enumerate(sizes)))
    for (key, label), row in summary.items():
        print(f"  {key:<13} {label:<14} " + "  ".join(f"{row.get(n, '-'):<34}"
                                                      for n in sizes))


if __name__ == "__main__":
    sys.exit(main())
