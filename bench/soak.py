"""Soak test: the property of tests/test_properties.py on many random examples.

    python bench/soak.py [--examples 10000] [--seed 0]

Prints how many examples passed, how many ended in a clean refusal (a one-line OpshiftError,
e.g. bfloat16 below opset 13), and exits non-zero on the first broken invariant, printing the
failing model's description and the chain of passes.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from model_strategies import activation_models, steps  # noqa: E402
from test_properties import check_chain  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    start = time.perf_counter()

    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(activation_models(), steps(max_len=4))
    def soak(case, chain):
        result = check_chain(case, chain)
        counts["passed" if result == "ok" else "refused cleanly"] += 1

    import hypothesis

    soak = hypothesis.seed(args.seed)(soak)
    try:
        soak()
    except AssertionError as e:
        print(f"FAILED after {sum(counts.values())} examples: {e}")
        return 1
    total = sum(counts.values())
    print(f"{total} examples in {time.perf_counter() - start:.0f} s: "
          f"{counts['passed']} passed every step, {counts['refused cleanly']} ended in a clean "
          "one-line refusal, 0 broke an invariant")
    return 0


if __name__ == "__main__":
    sys.exit(main())
