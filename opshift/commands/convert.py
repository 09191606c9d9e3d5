"""``opshift convert``: exact opset upgrade/downgrade of a model file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import OpshiftError, VerificationError, printable
from ._output import add_force_option, check_not_input

DESCRIPTION = """\
Convert IN.onnx to default-domain opset N and write OUT.onnx. PRelu, LeakyRelu and Selu
are converted exactly (consumed_inputs, changed defaults, PRelu per-channel slopes across
opset 6/7, types the target does not allow); every other op by opshift's schema-driven
adapters. External data is never loaded: its files are copied beside OUT.onnx (one already
there with the same bytes is kept; a different one is replaced only with --force).
The input file is never modified; OUT.onnx is written atomically and not at all on failure.

--verify checks every rewritten node against the original on its real shapes and constants
(with special values: +-0, +-inf, NaN, ...), and the whole model when the bundled evaluator
supports all of its ops; it prints the table and exits 1 (writing nothing) on a mismatch.

examples:
  opshift convert model.onnx --opset 9 -o model9.onnx --verify
  opshift convert legacy6.onnx --opset 17 -o model17.onnx -v
  opshift convert model.onnx --opset 21 -o out.onnx --json

exit codes: 0 ok, 1 verification mismatch, 2 bad input or impossible conversion
"""


def register(sub, parent) -> None:
    p = sub.add_parser("convert", parents=[parent], help="exact opset upgrade/downgrade",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="IN.onnx", help="model to convert (never modified)")
    p.add_argument("--opset", type=int, required=True, metavar="N",
                   help="target default-domain opset")
    p.add_argument("-o", "--output", required=True, metavar="OUT.onnx",
                   help="where to write the converted model")
    p.add_argument("--verify", action="store_true",
                   help="check every rewrite (and the whole model when possible)")
    add_force_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import modelio, opsets
    from ..conversion.engine import convert_proto

    src, out = Path(args.input), Path(args.output)
    if not 1 <= args.opset <= opsets.MAX_OPSET:
        raise OpshiftError(f"--opset {args.opset} is outside 1..{opsets.MAX_OPSET}")
    check_not_input(src, out)
    from .. import progress

    bar = progress.for_args(args, "convert", 3 + bool(args.verify))
    report = None
    try:
        with bar.phase("load"):
            model, source_dir = modelio.open_checked(src)
        original = None
        if args.verify:
            import onnx

            original = onnx.ModelProto()
            original.CopyFrom(model)
        log = None
        if args.verbose and not args.json:
            def log(msg: str) -> None:
                print(f"  {printable(msg)}")
        with bar.phase("convert"):
            try:
                result = convert_proto(model, args.opset, verbose_log=log, record=args.verify,
                                       base_dir=src.parent)
            except OpshiftError as e:
                raise type(e)(f"{src}: {e}") from None
        if args.verify:
            with bar.phase("verify"):
                report = _verify(original, model, result, src, source_dir, args)
        if report is not None and not report.ok:
            _print(args, result, report, written=False)
            raise VerificationError(f"{src}: the converted model differs from the original; "
                                    f"{out} was not written")
        with bar.phase("save"):
            modelio.save(model, out, source_dir, force=args.force)
    finally:
        bar.close()
    _print(args, result, report, written=True, out=out)
    return 0


_WHOLE_MODEL_EXTERNAL_LIMIT = 256 << 20


def _verify(original, converted, result, src: Path, source_dir: Path | None, args):
    """Each rewritten region, then the whole model (``source_dir``: where its external
    data is, None when it has none). A region the evaluator cannot run on generated inputs
    (an op it lacks, a shape computed at run time) is left to the whole-model check."""
    from ..verify import VerifyReport, evaluator_supports, verify, verify_rewrites

    report = VerifyReport()
    alone: list[str] = []
    for ch in result.changes:
        models = ch.region_models()
        if models is None:
            continue
        try:
            report.merge(verify_rewrites([(f"{ch.node} ({ch.label})", *models)]))
        except VerificationError:
            raise
        except OpshiftError as e:
            alone.append(f"{ch.node} ({ch.label}): {e}")
    why = evaluator_supports(original) or evaluator_supports(converted)
    if why is None and source_dir is not None:
        from ..external import external_files, load_external_data_safely

        size = sum(f.stat().st_size for f in external_files(original, source_dir).values())
        if size > _WHOLE_MODEL_EXTERNAL_LIMIT:
            why = (f"the model keeps {size / 2**20:.0f} MiB of weights in external data "
                   f"(whole-model check loads at most {_WHOLE_MODEL_EXTERNAL_LIMIT >> 20} MiB)")
        else:
            for m in (original, converted):  # copies: the converted one is saved afterwards
                m2 = type(m)()
                m2.CopyFrom(m)
                load_external_data_safely(m2, source_dir, str(src))
                if m is original:
                    original = m2
                else:
                    converted = m2
    if not args.quiet and not args.json:
        for line in alone:
            print(printable(f"rewrite not checked on its own: {line}"))
    if why is None:
        report = report.merge(verify(original, converted))
    elif not args.quiet and not args.json:
        print(f"whole-model check skipped: {why}")
    return report


def _print(args, result, report, *, written: bool, out: Path | None = None) -> None:
    if args.json:
        d = result.to_dict()
        d["written"] = str(out) if written else None
        if report is not None:
            d["verify"] = report.to_dict()
        print(json.dumps(d, indent=1, default=str))
        return
    if report is not None:
        print(report.table())
    if args.quiet:
        return
    n = len(result.changes)
    ir = result.ir_version
    ir_s = f", IR {ir[0]} -> {ir[1]}" if ir[0] != ir[1] else ""
    relabelled = f", {result.relabelled} relabelled" if result.relabelled else ""
    print(f"opset {result.source_opset} -> {result.target_opset}{ir_s}: {n} node"
          f"{'s' if n != 1 else ''} changed{relabelled}" + (f"; wrote {out}" if written else ""))
    if not args.verbose:
        for ch in result.changes[:20]:
            print(printable(f"  {ch.node} ({ch.label}): {ch.what}"))
        if n > 20:
            print(f"  ... {n - 20} more (-v lists all, with reasons)")
