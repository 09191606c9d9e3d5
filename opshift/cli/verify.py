"""``opshift verify``: run two models on the same inputs and compare every output."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx

from opshift.cli.checks import policy_of, verify_dict, verify_lines
from opshift.cli.models import STDIO
from opshift.cli.options import add_input_shape_option, add_verify_options, parse_input_shapes
from opshift.cli.output import Outcome, error_dict
from opshift.errors import EXIT_INCOMPLETE, OpshiftError
from opshift.tables import plural

DESCRIPTION = """\
Run REFERENCE and CANDIDATE through the bundled evaluator on the same inputs and compare
every output (matched by position). Inputs come from --inputs, or are generated from the
reference's input types and shapes: finite normal floats, integers within the tables they
index (an embedding's rows; else 0/1), open dims from --dim/--input-shape, else the first
of a few sizes (batch 2, images 64, sequences 16; then larger) at which the reference runs.
A candidate that fails where the reference runs differs from it. An output NaN or
infinite everywhere in both tells nothing: the check is then incomplete.

Comparison: integers and bool exact; floats within 4 ulp (float32, float64) or 2 ulp
(float16, bfloat16), or --ulp N for all, or also |diff| <= --atol + --rtol*|expected|; NaN
equals NaN; infinities and the sign of zero must match. --backend onnxruntime runs both
models on onnxruntime instead of the bundled evaluator (an error where it cannot), with its
basic graph optimizations only (its fusions differ between opsets and round differently).

examples:
  opshift verify model.onnx model9.onnx
  opshift verify model.onnx model9.onnx --dim batch=4 --seed 1 --json
  opshift verify model.onnx model9.onnx --inputs inputs.npz
  opshift verify model.onnx model9.onnx --ulp 0 --backend onnxruntime

--inputs: an .npz whose keys are "input:<name>" (or plain "<name>"); "output:*" keys are
ignored. bfloat16 (and float8) inputs may be stored as their raw bits: numpy's V2, or uint16.

exit codes: 0 all outputs match, 1 an output differs (or the candidate fails to run), 2 bad
input, 4 incomplete (nothing differs, but an output told nothing; --allow-incomplete: 0)
"""

_DIM = re.compile(r"^([^=\s]+)=(\d+)$")


def register(sub, parent) -> None:
    p = sub.add_parser("verify", parents=[parent], help="compare two models output by output "
                       "on the same inputs", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference", metavar="REFERENCE.onnx", help="the model taken as correct "
                   "('-': stdin)")
    p.add_argument("candidate", metavar="CANDIDATE.onnx", help="the model checked against it "
                   "('-': stdin)")
    p.add_argument("--inputs", metavar="FILE.npz", help="inputs to use instead of generated "
                   "ones")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                   help="size of a symbolic dim for generated inputs (repeatable; default: the "
                   "first size tried at which the reference runs)")
    add_input_shape_option(p)
    add_verify_options(p, flag=False)
    p.set_defaults(func=run)


def parse_dims(specs: list[str]) -> dict[str, int]:
    """``["batch=4", ...]`` -> ``{"batch": 4}``; OpshiftError on bad syntax or repeats."""
    dims: dict[str, int] = {}
    for s in specs:
        m = _DIM.match(s.strip())
        if not m:
            raise OpshiftError(f"bad --dim {s!r}: expected NAME=SIZE with SIZE a non-negative "
                               "integer, e.g. --dim batch=4")
        name, size = m.group(1), int(m.group(2))
        if name in dims and dims[name] != size:
            raise OpshiftError(f"--dim {name} given twice ({dims[name]} and {size})")
        dims[name] = size
    return dims


def _symbolic_dims(graph: onnx.GraphProto) -> set[str]:
    out = set()
    for vi in graph.input:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            out.update(d.dim_param for d in vi.type.tensor_type.shape.dim if d.dim_param)
    return out


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Read an inputs .npz: ``input:<name>`` or ``<name>`` keys; ``output:*`` ignored."""
    p = Path(path)
    if not p.exists():
        raise OpshiftError(f"{path}: no such file")
    if p.is_dir():
        raise OpshiftError(f"{path}: is a directory, not an .npz file")
    try:
        with open(p, "rb") as f:
            magic = f.read(6)
    except OSError as e:
        raise OpshiftError(f"{path}: cannot read: {e.strerror or e}") from e
    if magic.startswith(b"\x93NUMPY"):
        raise OpshiftError(f"{path}: a single .npy array, not an .npz archive of named inputs")
    if not magic.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise OpshiftError(f"{path}: not an .npz archive (not a zip file)")
    try:
        z = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise OpshiftError(f"{path}: cannot read as .npz: {_first_line(e)}") from e
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise OpshiftError(f"{path}: not an .npz archive (a single .npy array?)")
    try:
        with z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise OpshiftError(f"{path}: cannot read as .npz: {_first_line(e)}") from e
    out: dict[str, np.ndarray] = {}
    for k, v in arrays.items():
        if k.startswith("output:"):
            continue
        name = k[len("input:"):] if k.startswith("input:") else k
        if name in out:
            raise OpshiftError(f"{path}: input {name!r} is given twice (as 'input:{name}' and "
                               f"{name!r})")
        out[name] = v
    return out


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def _fit_raw(inputs: dict[str, np.ndarray], graphs: list[onnx.GraphProto]) -> None:
    """View raw void arrays (how numpy stores bfloat16/float8) as the declared dtype, and
    numpy's strings (unicode or bytes) as ONNX strings."""
    declared = {}
    for g in graphs:
        for vi in g.input:
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                with contextlib.suppress(KeyError, TypeError, ValueError):
                    declared.setdefault(vi.name, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(
                        vi.type.tensor_type.elem_type)))
    for k, v in inputs.items():
        want = declared.get(k)
        if want is not None and want.kind == "O" and v.dtype.kind in "US":  # numpy's strings
            text = np.char.decode(v, "utf-8", "replace") if v.dtype.kind == "S" else v
            inputs[k] = text.astype(object)
            continue
        # ml_dtypes types (kind "V") have no .npz form: accept their raw bits, stored as
        # numpy's V2 or as unsigned ints of the same width.
        if want is None or want.kind != "V" or v.dtype == want:
            continue
        raw = v.dtype.kind == "V" and v.dtype.fields is None or v.dtype.kind == "u"
        if raw and v.dtype.itemsize == want.itemsize:
            inputs[k] = v.view(want)


def run(args) -> int:
    from opshift.cli import progress_line
    from opshift.cli.output import emit

    if args.reference == args.candidate == STDIO:
        raise OpshiftError("only one of the two models can be read from stdin ('-')")
    bar = progress_line.for_args(args, "opshift verify")
    try:
        with bar.phase("verify"), policy_of(args):
            o = _run(args)
    finally:
        bar.close()
    emit(o, args, single=True)
    return o.exit_code


def _load(path: str):
    """The model at ``path`` (``-``: stdin), through the structural check every command runs;
    what fix repairs does not stop the evaluator, so a model and its fix can be compared."""
    from opshift.check import structure
    from opshift.check.opening import load_checked
    from opshift.io.models import parse_model_bytes

    if path != STDIO:
        return load_checked(path, load_external_data=True, allow=structure.REPAIRABLE)
    data = sys.stdin.buffer.read()
    if not data:
        raise OpshiftError("<stdin>: empty input (0 bytes), not an ONNX model")
    model = parse_model_bytes(data, "<stdin>")
    structure.check(model, "<stdin>", allow=structure.REPAIRABLE)
    return model


def _run(args) -> Outcome:
    from opshift import progress
    from opshift.cli.models import origin_of, set_input_shapes
    from opshift.graph.counts import op_counts
    from opshift.verify.verifier import check_given, verify

    dims = parse_dims(args.dim)
    shapes = parse_input_shapes(args.input_shape)
    with progress.stage("load"):
        ref, cand = _load(args.reference), _load(args.candidate)
    for name in shapes:
        for m, path in ((ref, args.reference), (cand, args.candidate)):
            if any(vi.name == name for vi in m.graph.input):
                set_input_shapes(m, {name: shapes[name]}, origin_of(path))
        if not any(vi.name == name for m in (ref, cand) for vi in m.graph.input):
            raise OpshiftError(f"--input-shape {name}: neither model has a graph input of "
                               "that name")
    inputs = None
    if args.inputs is not None:
        if dims:
            raise OpshiftError("--dim only applies to generated inputs, not with --inputs")
        inputs = load_npz(args.inputs)
        _fit_raw(inputs, [ref.graph, cand.graph])
        try:  # inputs that do not fit: name the .npz and the model
            check_given(inputs, ref, cand, f"reference {origin_of(args.reference)}",
                         f"candidate {origin_of(args.candidate)}")
        except OpshiftError as e:
            raise type(e)(f"{args.inputs}: {e}") from e
    else:
        known = _symbolic_dims(ref.graph) | _symbolic_dims(cand.graph)
        unknown = sorted(set(dims) - known)
        if unknown:
            raise OpshiftError(f"--dim {unknown[0]}: no input of either model has a symbolic "
                               f"dim of that name (symbolic dims: "
                               f"{', '.join(sorted(known)) or 'none'})")
    report = _verify(ref, cand, args, inputs, dims, verify)
    o = Outcome("verify", args.reference, ops_before=op_counts(ref),
                ops_after=op_counts(cand), verify=verify_dict(report, []),
                details={"candidate": args.candidate})
    if report.mismatch:
        o.exit_code = 1
        o.error = error_dict(f"{origin_of(args.candidate)}: computes something other than "
                             f"{origin_of(args.reference)}", args.candidate)
    elif not report.complete and not args.allow_incomplete:
        o.exit_code = EXIT_INCOMPLETE
    if not args.json and not args.quiet or o.exit_code:
        if args.verbose:
            src = (f"inputs from {args.inputs}" if inputs is not None else
                   f"generated inputs, seed {args.seed}, {plural(report.rounds, 'round')}")
            o.lines = [f"{src}:", *(f"  {name}: {d['dtype']} {d['shape']}"
                                    for name, d in report.inputs.items())]
        o.verify_lines = verify_lines(report, [], verbose=bool(args.verbose))
    return o


def _verify(ref, cand, args, inputs, dims, verify):
    # Name the files in evaluator errors even though the protos are passed in.
    try:
        # the candidate failing where the reference runs is a mismatch, not bad input
        return verify(ref, cand, inputs, dims=dims, seed=args.seed, rewritten=True)
    except OpshiftError as e:
        msg = str(e)
        for role, path in (("reference", args.reference), ("candidate", args.candidate)):
            if msg.startswith(f"{role}:"):
                msg = f"{role} {path}:" + msg[len(role) + 1:]
        raise type(e)(msg) from e
