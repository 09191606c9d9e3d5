"""What a command reports about one model, for people and for ``--json``.

Every command that reads a model (convert, inline, fuse, fix, inspect, verify) returns one
:class:`Outcome` per model. ``--json`` prints it as one JSON object on one line of stdout
(several models: one line each, JSON lines), with the same keys for every command:

``command``      the subcommand, e.g. ``"convert"``
``input``        the model read, as given (``"-"``: stdin); verify: the reference
``output``       the file written (``"-"``: stdout), null when nothing was written
``ok``           true when the command did what was asked (no error, no mismatch)
``exit_code``    0 ok, 1 verification mismatch, 2 bad input or impossible request, 4 a check
                 that left something unchecked (the model is written)
``changes``      one object per change: ``node``, ``op``, ``scope``, ``what``, ``why``
                 (fix adds ``kind``; convert adds ``kind: "fuse"`` to a region it fused
                 into one op first, ``kind: "fold"`` to a value it folded into a
                 constant first and ``kind: "take_branch"`` to an If it replaced by the
                 branch taken, the only ways to convert them); empty when nothing changed
``ops_before``   op type -> node count of the model read (``domain::Op`` outside ai.onnx;
                 every graph, subgraph and function counted)
``ops_after``    the same for the model written (or, for verify, the candidate), else null
``verify``       null without a check; else ``ok``, ``verdict`` (``ok``, ``FAIL`` or
                 ``incomplete``), ``complete``, ``unchecked`` (``what``, ``why`` of each
                 thing not checked), ``backend``, ``tolerance`` (``ulp`` per
                 dtype, ``atol``, ``rtol``), ``seed``, ``rounds``, ``checks``
                 (``rewrites``: regions checked one by one, ``whole_model``: whether both
                 whole models were run and compared), ``kernels`` (``Op-version`` -> the
                 evaluator kernel's source), ``rows`` (one per compared output:
                 ``label``, ``output``, ``dtype``, ``shape``, ``max_abs``, ``max_ulp``,
                 ``ok``, ``reason``), ``notes`` (what could not be checked, and why)
``notes``        other remarks, one string each
``error``        null, or ``message``, ``file``, ``node``, ``op`` (null when not known)
``details``      what only this command has (convert: ``source_opset``, ``target_opset``,
                 ``ir_version``, ``relabelled``, ``fused``; inspect: its whole report;
                 ops: ``ops``, one object per op: ``domain``, ``op``, ``versions``,
                 ``sources`` (version -> kernel source),
                 ``no_kernel``, ``convert`` (null outside the default domain, else
                 ``below`` and ``steps``, one per version boundary: ``from``, ``to``,
                 ``refused``, ``functions`` (``name``, ``module``, ``doc``, ``when``,
                 ``refusal``), ``schema_up`` and ``schema_down`` (``refused``, ``writes``,
                 ``required``, ``dropped``, ``retyped``, ``narrowed``, ``counts``,
                 ``replaced`` (the function replacing every node, or ""), ``relabel``));
                 ...)
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from opshift.errors import EXIT_INCOMPLETE, printable

#: The keys of every JSON object, in order.
KEYS = ("command", "input", "output", "ok", "exit_code", "changes", "ops_before", "ops_after",
        "verify", "notes", "error", "details")


@dataclass
class Outcome:
    """One model's result: the JSON fields, and the lines people read."""

    command: str
    input: str | None
    output: str | None = None
    exit_code: int = 0
    changes: list[dict[str, Any]] = field(default_factory=list)
    ops_before: dict[str, int] | None = None
    ops_after: dict[str, int] | None = None
    verify: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    #: for people: the body (single model only), the verify table, the op-count table,
    #: the closing line
    lines: list[str] = field(default_factory=list)
    verify_lines: list[str] = field(default_factory=list)
    count_lines: list[str] = field(default_factory=list)
    summary: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        d = {"command": self.command, "input": self.input, "output": self.output,
             "ok": self.ok, "exit_code": self.exit_code,
             "changes": [_clean_change(c) for c in self.changes],
             "ops_before": self.ops_before, "ops_after": self.ops_after,
             "verify": self.verify, "notes": self.notes, "error": self.error,
             "details": self.details}
        return {k: d[k] for k in KEYS}

    def json_line(self) -> str:
        return json.dumps(self.to_dict(), default=str, allow_nan=False)

    def fail(self, error: BaseException, exit_code: int, file: str | None) -> Outcome:
        """Record ``error`` (nothing written)."""
        self.exit_code = exit_code
        self.output = None
        self.error = error_dict(str(error), file)
        return self


def _clean_change(c: dict[str, Any]) -> dict[str, Any]:
    out = {k: c.get(k, "") for k in ("node", "op", "scope", "what", "why")}
    out.update({k: v for k, v in c.items() if k not in out})
    node = out["node"]
    if isinstance(node, str) and len(node) >= 2 and node[0] == node[-1] and node[0] in "'\"":
        with contextlib.suppress(ValueError, SyntaxError):  # a repr() from a message: the
            out["node"] = ast.literal_eval(node)  # JSON holds the name itself
    return out


# node 'name' (Op-7 ... or node 'name' (domain::Op, ...: how errors.where() names a node
_NODE = re.compile(r"""node (?P<q>['"])(?P<node>.*?)(?P=q) \((?P<op>(?:[\w.]+::)?[\w]+(?:-\d+)?)""")


def error_dict(message: str, file: str | None) -> dict[str, Any]:
    """``message``, ``file``, and the ``node``/``op`` the message names (else None)."""
    m = _NODE.search(message)
    return {"message": message, "file": file, "node": m.group("node") if m else None,
            "op": m.group("op") if m else None}


def emit(o: Outcome, args, *, single: bool) -> None:
    """Print ``o``: a JSON line, or for people the body (``single`` model only), the
    verify table, the op counts and the closing line; errors on stderr."""
    to_stdout_model = getattr(args, "output", None) == "-"
    out = sys.stderr if to_stdout_model else sys.stdout
    if args.json:
        print(o.json_line(), file=sys.stdout, flush=True)
        if o.error is not None:
            print(f"opshift {o.command}: error: {o.error['message']}", file=sys.stderr)
        return
    if not args.quiet:
        if single:
            for line in (*o.lines, *o.verify_lines, *o.count_lines):
                print(printable(line), file=out)
            if o.summary:
                print(printable(o.summary), file=out)
        elif o.summary:
            where = o.input if o.output in (None, "-") else f"{o.input} -> {o.output}"
            print(printable(f"{where}: {o.summary}"), file=out)
        out.flush()
    elif o.exit_code == 1:  # a mismatch: what differs, then why nothing was written
        for line in o.verify_lines:
            if line.lstrip().startswith("FAIL"):
                print(printable(line.lstrip()), file=sys.stderr)
    elif o.exit_code == EXIT_INCOMPLETE:  # -q hides no check that left something out
        for line in o.verify_lines:
            if line.startswith(("verify: incomplete", "  not checked:")):
                print(printable(f"{o.input}: {line.strip()}"), file=sys.stderr)
    if o.error is not None:
        print(f"opshift {o.command}: error: {printable(o.error['message'])}",
              file=sys.stderr)
