"""The run every rewriting command (convert, inline, fuse, fix) shares: open the model,
count its ops, rewrite it, check the rewrite (``--verify``), write it, count again, report.

A command supplies only its rewrite: a function from the opened model to a
:class:`Rewritten`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import onnx

from opshift import progress
from opshift.cli.batch import Job
from opshift.cli.checks import policy_of, verify_dict, verify_lines
from opshift.cli.models import Opened, fixed_dims, open_model, restore_inputs, write_model
from opshift.cli.opcount import full_table, one_line, op_counts
from opshift.cli.options import check_verify_options, parse_input_shapes
from opshift.cli.output import Outcome, error_dict
from opshift.errors import EXIT_INCOMPLETE, OpshiftError
from opshift.tables import plural


@dataclass
class Rewritten:
    """What a command's rewrite made of one model."""

    model: onnx.ModelProto  # the result
    changes: list[dict[str, Any]]  # change dicts (node, op, scope, what, why)
    summary: str  # e.g. 'opset 6 -> 13, IR 3 -> 7: 2 nodes changed'
    details: dict[str, Any] = field(default_factory=dict)
    #: the body printed for a single model (made only then), e.g. one line per change
    lines: Callable[[], Iterable[str]] = lambda: ()
    #: the --verify check: (VerifyReport, notes); total: rewrites it checks one by one
    check: Callable[[], tuple[Any, list[str]]] | None = None
    check_total: int = 0
    groups: dict[str, str] | None = None  # rewrite label -> what the verify table sums by
    notes: list[str] = field(default_factory=list)
    write: bool = True  # False: nothing to write (fix --dry-run)


Rewrite = Callable[[Any, Opened], Rewritten]


#: Changes a command lists without ``-v``; the rest are counted (``-v`` lists all).
LISTED = 20


def listed(lines: Iterable[str], total: int, what: str = "") -> list[str]:
    """The first :data:`LISTED` of ``lines`` (``total`` of them), then how many more ``-v``
    lists (``what``: e.g. ``", with reasons"``)."""
    out = list(islice(lines, LISTED))
    if total > LISTED:
        out.append(f"  ... {total - LISTED:,} more (-v lists all{what})")
    return out


def reported(args) -> bool:
    """Whether the run shows what changed (without -q, or with --json): else no change list
    or op count need be made."""
    return args.json or not args.quiet


def run(args, job: Job, rewrite: Rewrite, *, allow=(), index=None,
        repair: bool = True) -> Outcome:
    """One model through ``rewrite``; see the module docs."""
    check_verify_options(args)
    o = Outcome(args.command, job.input)
    people = not args.quiet and not args.json
    with progress.stage("load"):
        src = open_model(job.input, allow=allow, index=index,
                         shapes=parse_input_shapes(args.input_shape), repair=repair)
    o.changes.extend(src.repairs)
    counted = reported(args)
    verified: str | None = None  # what --verify found: its verdict
    if counted:
        o.ops_before = op_counts(src.model)
    feeds = given_inputs(args.feeds, src) if args.verify and args.feeds else None
    with policy_of(args, feeds):
        with progress.stage(args.command):
            try:
                r = rewrite(args, src)
            except OpshiftError as e:
                if "input shapes" in str(e) and not args.input_shape:
                    e.args = (f"{e} (--input-shape NAME:D0,D1,... gives them)",)
                raise
            if src.index is not None:  # what the check read no longer describes the model
                src.index.forget_reading()
        if args.verify and r.check is not None:
            with progress.stage("verify", r.check_total or None, "rewrites"):
                report, notes = r.check()
            verified = report.verdict
            if args.json:  # (a row per rewrite: made only when shown)
                o.verify = verify_dict(report, notes)
            else:
                o.verify_lines = verify_lines(report, notes, verbose=bool(args.verbose),
                                              groups=r.groups)
            if report.mismatch:
                o.exit_code = 1
                msg = (f"{src.origin}: the {args.command} result computes something other "
                       f"than the original; nothing written")
                o.error = error_dict(msg, src.origin)
            elif not report.complete and not args.allow_incomplete:
                o.exit_code = EXIT_INCOMPLETE
    o.changes.extend(r.changes)
    o.notes.extend(r.notes)
    fixed = fixed_dims(r.model, src.declared) if r.write and src.declared else {}
    if fixed:
        o.notes.append(f"--input-shape sized what the model leaves open "
                       f"({'; '.join(fixed.values())}): "
                       "the written model declares those sizes, the only ones it was rewritten "
                       "and checked for (an input of another size is refused by the "
                       "declaration, never computed wrongly)")
    o.details = r.details
    written, size = "", None
    if o.error is None and job.output is not None and r.write:
        # an input --input-shape sized keeps the sizes (onnxsim's --overwrite-input-shape):
        # the rewrite may hold for them only; one it gave no open dim is put back as declared
        restore_inputs(r.model, {k: v for k, v in src.declared.items()
                                 if k not in fixed})
        with progress.stage("save"):
            size = write_model(r.model, job.output, src.source_dir,
                               make_parents=job.make_parents, force=args.force)
        o.output = job.output
        written = "; wrote <stdout>" if job.output == "-" else f"; wrote {job.output}"
    elif r.write and job.output is not None:
        written = "; nothing written"
    if counted:
        o.ops_after = op_counts(r.model)
    o.summary = r.summary + (written if job.single else "")
    if people:
        if job.single:
            o.lines = [*(f"note: {n}" for n in o.notes),
                       *(_repair_line(c) for c in src.repairs), *r.lines()]
            o.count_lines = (full_table(o.ops_before, o.ops_after,
                                        (src.size, size))
                             if args.verbose else [one_line(o.ops_before, o.ops_after)])
        else:  # one line: nodes before and after, and what the check found
            n0, n1 = sum(o.ops_before.values()), sum(o.ops_after.values())
            o.summary += f"; {n0:,} -> {plural(n1, 'node')}" if n0 != n1 else ""
            if verified is not None:
                o.summary += f"; verify: {verified}"
    return o


def _repair_line(c: dict[str, Any]) -> str:
    return f"repaired: {c['what']} -- {c['why']}"


def given_inputs(path: str, src) -> dict:
    """``--inputs``: the arrays of ``path`` (an .npz), each an input of the model ``src``
    opened, of its declared type and rank (bad input: an error, as for the model itself)."""
    from opshift.cli.verify import load_npz
    from opshift.evaluator import check_inputs

    feeds = load_npz(path)
    g = src.model.graph
    inits = {t.name for t in g.initializer}
    names = [vi.name for vi in g.input if vi.name not in inits]
    for k in feeds:
        if k not in names:
            raise OpshiftError(f"{path}: {k!r} is not an input of {src.origin} (inputs: "
                               f"{', '.join(names) or 'none'})")
    try:
        check_inputs(g, feeds)
    except OpshiftError as e:
        raise OpshiftError(f"{path}: {e}") from None
    return feeds
