"""Linear growth: each command at N and 2N nodes (default 10k and 20k), where the time should
double, not quadruple. Finds per-node scans of graph inputs, initializers or value_info, and
constants rewritten once per user instead of once.

Cases (bench/cases.py; every model carries value_info for each intermediate tensor, and the
opset-6 and opset-9 models list their weights as graph inputs, IR 3 and 4):

* convert 6->17 and inspect on IR-3 models with PRelu slopes ``shared`` (one initializer
  for every PRelu: it is rewritten once), ``every4`` (every 4th PRelu has its own slope) and
  ``distinct``;
* convert 9->16 (shared, distinct) and 16->9 (distinct); fix (shared, every4, distinct);
  inline at opsets 18 and 9, and fuse (distinct).

For each case and tree the command runs on models of ``--startup-nodes`` (start-up and
imports), N and 2N nodes, and ``onnx.load`` + ``onnx.save`` on the same three models, all in
the same rounds. "growth" is ``(t(2N) - t0) / (t(N) - t0)``, ``t0`` the start-up model's
time: about 2 for a linear command, 4 for a quadratic one. Over ``--limit`` (default 2.5)
it is marked ``SUPERLINEAR``.

usage: python bench/bench_scaling.py [--nodes 10k] [--cases convert-6-17/shared,...]
       [--repeat 3] [--opshift-path DIR] [--compare DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys

import _harness as h
from cases import CASES, floor_job

#: (case, slopes)
SCALING = [
    ("convert-6-17", "shared"), ("convert-6-17", "every4"), ("convert-6-17", "distinct"),
    ("inspect", "shared"), ("inspect", "every4"), ("inspect", "distinct"),
    ("convert-9-16", "shared"), ("convert-9-16", "distinct"), ("convert-16-9", "distinct"),
    ("fix", "shared"), ("fix", "every4"), ("fix", "distinct"),
    ("inline-18", "distinct"), ("inline-9", "distinct"), ("fuse", "distinct"),
]

NO_GROWTH = "    {}: no growth (an error, or N's time within 10% of the start-up's)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="10k", help="N (the models have N and 2N nodes)")
    ap.add_argument("--cases", default=",".join(f"{c}/{s}" for c, s in SCALING),
                    help="CASE/SLOPES, comma-separated (default: all)")
    ap.add_argument("--startup-nodes", type=int, default=30)
    ap.add_argument("--limit", type=float, default=2.5)
    h.add_tree_options(ap)
    args = ap.parse_args()
    trees = h.trees(args)
    n = h.parse_sizes(args.nodes)[0]
    sizes = (args.startup_nodes, n, 2 * n)
    out_dir = h.scratch()
    rows = []
    try:
        for item in args.cases.split(","):
            key, _, slopes = item.strip().partition("/")
            case = CASES[key]
            slopes = slopes or "distinct"
            h.header(f"{key} / slopes {slopes}: opshift {' '.join(case.args)}")
            srcs = {m: h.model(case.model_spec(m, slopes=slopes)) for m in sizes}
            nodes = {m: h.describe(srcs[m])["nodes"] for m in sizes}
            jobs = [floor_job("onnx", srcs[m], out_dir, f"floor @{m}") for m in sizes]
            jobs += [case.job(tree, srcs[m], out_dir, tag=f" @{m}") for tree in trees
                     for m in sizes]
            res = h.measure(jobs, args.repeat)
            for job in jobs:
                print(f"    {job.name:<22} {nodes[int(job.name.rsplit('@')[1])]:>7} nodes  "
                      f"{h.cell(res[job.name])}")
            t0, t1, t2 = (res[f"floor @{m}"] for m in sizes)
            floor = _growth(t1, t2, t0)
            print(f"    floor growth x{floor:.2f}" if floor else NO_GROWTH.format("floor"))
            for tree in trees:
                t0, t1, t2 = (res[f"{tree.label} @{m}"] for m in sizes)
                g = _growth(t1, t2, t0)
                mark = "" if g is None or g <= args.limit else "  SUPERLINEAR"
                print(f"    {tree.label} growth x{g:.2f}{mark}" if g is not None
                      else NO_GROWTH.format(tree.label))
                rows.append((f"{key}/{slopes}", tree.label, t1, t2, g, floor, mark))
            h.check_parent_rss(res)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    h.header(f"summary: time at {h.size_label(n)} and {h.size_label(2 * n)} nodes, growth "
             f"net of start-up (linear ~2, quadratic ~4)")
    print(f"  {'case':<22} {'tree':<14} {h.size_label(n):>9} {h.size_label(2 * n):>9} "
          f"{'growth':>8} {'floor':>6}")
    for case, label, t1, t2, g, floor, mark in rows:
        def secs(r):
            return f"{r.wall:8.2f}s" if r.ok else "    error"
        gs = f"x{g:.2f}" if g is not None else "-"
        fs = f"x{floor:.2f}" if floor else "-"
        print(f"  {case:<22} {label:<14} {secs(t1)} {secs(t2)} {gs:>8} {fs:>6}{mark}")
    return 0


def _growth(t1: h.Result, t2: h.Result, t0: h.Result) -> float | None:
    """``(t2 - t0) / (t1 - t0)``; None on an error, or when N's time is within 10% of the
    start-up's (the noise of a shared machine would be all the quotient says)."""
    if not (t1.ok and t2.ok and t0.ok) or t1.wall - t0.wall < 0.1 * t0.wall:
        return None
    return (t2.wall - t0.wall) / (t1.wall - t0.wall)


if __name__ == "__main__":
    sys.exit(main())
