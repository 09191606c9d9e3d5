"""The cost of ``--verify``: each writing command on a model of ``--nodes`` nodes (default
50k) with and without ``--verify``, whole processes, in the same rounds. Target (issue 17):
the command with ``--verify`` at most 10x the time of the same command without it (the
rewrite it verifies). Also printed: the extra time alone, in multiples of the plain command,
and both peak RSS.

Cases (bench/cases.py): convert 6->17, 9->16, 16->9, fix, inline at opsets 18 and 9, fuse;
PRelu slopes distinct (``--slopes`` to change).

usage: python bench/bench_verify.py [--nodes 50k] [--cases convert,fix,...] [--repeat 3]
       [--opshift-path DIR] [--compare DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys

import _harness as h
from cases import CASES, select

TARGET = 10.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="50k")
    ap.add_argument("--cases", default=",".join(k for k, c in CASES.items() if c.writes))
    ap.add_argument("--slopes", default="distinct", choices=("shared", "every4", "distinct"))
    h.add_tree_options(ap)
    args = ap.parse_args()
    trees = h.trees(args)
    n = h.parse_sizes(args.nodes)[0]
    out_dir = h.scratch()
    rows = []
    try:
        for case in select(args.cases):
            if not case.writes:
                continue
            h.header(f"{case.key}: opshift {' '.join(case.args)} [--verify], "
                     f"{h.size_label(n)} nodes, slopes {args.slopes}")
            src = h.model(case.model_spec(n, slopes=args.slopes))
            jobs = [job for tree in trees for job in (
                case.job(tree, src, out_dir),
                case.job(tree, src, out_dir, "--verify", tag=" --verify"))]
            res = h.measure(jobs, args.repeat)
            for tree in trees:
                plain, ver = res[tree.label], res[f"{tree.label} --verify"]
                r = h.ratio(ver, plain)
                extra = f"{r - 1:5.2f}x" if r is not None else "-"
                print(f"    {tree.label:<14} plain   {h.cell(plain)}")
                print(f"    {'':<14} verify  {h.cell(ver)}   --verify / plain "
                      f"{h.verdict(r, TARGET)} (the check alone {extra})")
                rows.append((case.key, tree.label, plain, ver, r))
            h.check_parent_rss(res)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    h.header(f"summary: --verify / plain at {h.size_label(n)} nodes (target <= {TARGET:g}x)")
    for key, label, plain, ver, r in rows:
        print(f"  {key:<13} {label:<14} plain {plain.wall:7.2f} s  --verify {ver.wall:7.2f} s"
              f"  {h.verdict(r, TARGET)}" if r is not None else
              f"  {key:<13} {label:<14} error: {plain.error or ver.error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
