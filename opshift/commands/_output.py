"""What the commands that write a model share: the --force option, the refusal of an output
that is the input, and how rewrite commands (inline, fuse) print their result (--json, -q,
-v, verify table)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from ..errors import OpshiftError, printable


def add_force_option(p) -> None:
    """``--force``, for every command that writes a model (convert, inline, fuse, fix)."""
    p.add_argument("--force", action="store_true",
                   help="replace external data files beside OUT.onnx that differ from the "
                        "input's (a file with the same bytes is always reused; without "
                        "--force a different one is an error)")


def check_not_input(input_path: str | os.PathLike, output_path: str | os.PathLike) -> None:
    """Refuse to write over the input file (the input is never modified)."""
    src, out = Path(input_path), Path(output_path)
    try:
        same = out.exists() and os.path.samefile(src, out)
    except OSError:
        same = False
    if same or src.resolve() == out.resolve():
        raise OpshiftError(f"{out}: output is the input file; write the result elsewhere "
                           "(the input is never modified)")


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
