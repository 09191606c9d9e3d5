"""The options several commands share, added in one place so they read the same everywhere.

* :func:`add_common_options`: ``-v``, ``-q``, ``--json`` (every command; also accepted before
  the command name, see :data:`HOISTED`).
* :func:`add_model_options`: the input models (files, folders or globs; ``-`` for stdin),
  ``-o`` (a file, a folder, or ``-`` for stdout) and ``--force``, ``-j``, ``--input-shape``.
* :func:`add_verify_options`: ``--ulp``, ``--atol``, ``--rtol``, ``--backend``, ``--seed``.
"""

from __future__ import annotations

import argparse
import re

from opshift.errors import OpshiftError

#: Options that may come before the command name (``opshift -v convert ...``): name ->
#: whether it takes a value. They are moved after the command name before parsing.
HOISTED = {"-v": False, "--verbose": False, "-q": False, "--quiet": False, "--json": False,
           "-j": True, "--jobs": True, "--input-shape": True}


def add_common_options(p: argparse.ArgumentParser) -> None:
    """Add the options every command accepts to ``p``."""
    g = p.add_argument_group("output")
    g.add_argument("-v", "--verbose", action="count", default=0,
                   help="everything: each decision, full tables, tracebacks of errors")
    g.add_argument("-q", "--quiet", action="store_true",
                   help="print nothing on success (errors still go to stderr)")
    g.add_argument("--json", action="store_true",
                   help="one JSON object per model per line on stdout, keys: command, input, "
                   "output, ok, exit_code, changes, ops_before, ops_after, verify, notes, "
                   "error, details (README: --json)")


def add_model_options(p: argparse.ArgumentParser, *, writes: bool,
                      output_required: bool = True) -> None:
    """Inputs (one or many), ``-o`` when the command ``writes``, ``-j``, ``--input-shape``."""
    p.add_argument("inputs", nargs="+", metavar="IN.onnx",
                   help="model(s) to read, never modified: files, folders (their .onnx files, "
                   "recursively) or quoted globs; '-' reads one model from stdin")
    if writes:
        p.add_argument("-o", "--output", required=output_required, metavar="OUT",
                       help="output file, or a folder (required for several inputs); '-' "
                       "writes the model to stdout")
        p.add_argument("--force", action="store_true",
                       help="replace external data files beside OUT.onnx that differ from "
                            "the input's (a file with the same bytes is always reused; "
                            "without --force a different one is an error)")
    p.add_argument("-j", "--jobs", type=_positive, default=1, metavar="N",
                   help="process N models at once in worker processes (default 1)")
    add_input_shape_option(p)


def add_input_shape_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME:D0,D1,...",
                   help="shape of a graph input, for shape-dependent decisions and generated "
                   "inputs; repeatable; where it sizes a dim the model leaves open, the "
                   "output declares that size (it was rewritten and checked for it)")


def add_verify_options(p: argparse.ArgumentParser, *, flag: bool) -> None:
    """``--verify`` (when ``flag``: the command checks its rewrite on request) and the
    options of every check: tolerance, backend, seed."""
    g = p.add_argument_group("verification")
    if flag:
        g.add_argument("--verify", action="store_true",
                       help="check every rewrite, and the whole model, before writing")
    g.add_argument("--ulp", type=_non_negative_int, metavar="N",
                   help="allow N units in the last place for every float type (default: 4 "
                   "for float32/float64, 2 for float16/bfloat16)")
    g.add_argument("--atol", type=_non_negative_float, default=0.0, metavar="X",
                   help="also accept |actual - expected| <= X + rtol*|expected| (default 0)")
    g.add_argument("--rtol", type=_non_negative_float, default=0.0, metavar="X",
                   help="relative part of that bound (default 0)")
    g.add_argument("--backend", choices=("opshift", "onnxruntime", "openvino", "tract"),
                   default="opshift",
                   help="what runs the models: opshift's evaluator (default), or the runtime "
                   "you convert for, where installed (a model it cannot load is reported "
                   "as not checked, never as a pass)")
    g.add_argument("--seed", type=int, default=0, help="seed of generated inputs (default 0)")
    g.add_argument("--allow-incomplete", action="store_true",
                   help="exit 0 when nothing differs although something was left unchecked "
                   "(a rewrite, a whole model that does not run on generated inputs, an "
                   "output NaN everywhere); the verdict still says 'incomplete' (without "
                   "it: exit 4)")
    if flag:
        g.add_argument("--inputs", dest="feeds", metavar="FILE.npz",
                       help="run the whole model on these inputs instead of generated ones "
                       "(keys 'input:<name>' or '<name>', as opshift verify --inputs)")


def check_verify_options(args) -> None:
    """Tolerance and backend options are for checks: refuse them where none is made."""
    if getattr(args, "verify", True):
        return
    given = [o for o, v in (("--ulp", args.ulp is not None), ("--atol", args.atol),
                            ("--rtol", args.rtol),
                            ("--backend", args.backend != "opshift"),
                            ("--allow-incomplete", args.allow_incomplete),
                            ("--inputs", getattr(args, "feeds", None))) if v]
    if given:
        raise OpshiftError(f"{given[0]} only applies with --verify")


_SHAPE = re.compile(r"^(?P<name>.+):(?P<dims>\d+(?:,\d+)*)?$")


def parse_input_shapes(specs: list[str]) -> dict[str, list[int]]:
    """``["x:1,3,224,224", "s:"]`` -> ``{"x": [1, 3, 224, 224], "s": []}`` (a scalar)."""
    out: dict[str, list[int]] = {}
    for spec in specs:
        m = _SHAPE.match(spec)
        if not m:
            raise OpshiftError(f"bad --input-shape {spec!r}: expected NAME:D0,D1,... with "
                               "non-negative integer dims, e.g. --input-shape x:1,3,224,224")
        name = m.group("name")
        dims = [int(d) for d in m.group("dims").split(",")] if m.group("dims") else []
        if name in out and out[name] != dims:
            raise OpshiftError(f"--input-shape {name} given twice ({out[name]} and {dims})")
        out[name] = dims
    return out


def _positive(text: str) -> int:
    v = _non_negative_int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return v


def _non_negative(kind: type, what: str):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not 0 <= v < float("inf"):  # NaN too
            raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
        return v
    return parse


_non_negative_int = _non_negative(int, "an integer")
_non_negative_float = _non_negative(float, "a number")
