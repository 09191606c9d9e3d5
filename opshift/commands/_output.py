"""How rewrite commands (inline, fuse) print their result: --json, -q, -v, verify table."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

from ..errors import printable


def print_rewrite(args, result, report, notes: Iterable[str], details: Iterable[str]) -> None:
    """Print ``result`` (with ``to_dict()``/``summary()``) and the optional verify ``report``.

    ``details`` are the per-rewrite lines shown with ``-v``. A failed verification always
    prints its table on stderr; the output was then not written.
    """
    notes = list(notes)
    written = report is None or report.ok
    if args.json:
        out = {"input": args.input, "output": args.output if written else None,
               **result.to_dict(),
               "verify": None if report is None else report.to_dict(), "notes": notes}
        print(json.dumps(out, indent=1, default=str))
        return
    if report is not None and not report.ok:
        print(report.table(), file=sys.stderr)
    if args.quiet:
        return
    if args.verbose:
        for line in details:
            print(printable(line))
    for line in notes:
        print(f"note: {printable(line)}")
    if report is not None and report.ok and args.verbose:
        print(report.table())
    if report is not None:
        print(f"verify: {report.summary()}")
    tail = f"wrote {args.output}" if written else "nothing written"
    print(f"{result.summary()}; {tail}")
