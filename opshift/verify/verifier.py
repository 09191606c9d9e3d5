"""Running two models on the same inputs and pairing their outputs: what :func:`verify`,
:func:`check_rewrites`, :func:`verify_rewrites` and :func:`evaluator_supports` do (the
package's ``__init__`` names them; see it for the map of the modules)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from opshift import progress
from opshift.errors import EvaluationError, OpshiftError, UnsupportedError, VerificationError
from opshift.io.models import ModelLike, to_proto
from opshift.verify import policy as _policy
from opshift.verify.comparison import ULP_TOLERANCE, Comparison, compare, larger
from opshift.verify.inputs import (
    DEFAULT_DIM,
    RegionInputs,
    check_seed,
    describe_inputs,
    generate_round,
    index_bounds,
    input_specs,
    make_inputs,
    plain_round,
    round_count,
    size_profiles,
    special_values,
)
from opshift.verify.region import region_key, region_model
from opshift.verify.report import Gap, Row, VerifyReport

__all__ = [
    "DEFAULT_DIM", "ULP_TOLERANCE", "Comparison", "Gap", "Rewrite", "Row", "VerifyReport",
    "check_in_context", "check_rewrites", "compare", "evaluator_supports", "make_inputs",
    "region_inputs", "region_key", "region_model", "special_values", "verify",
    "verify_rewrites",
]


def _run(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray], who: str,
         capture: Collection[str] = ()) -> tuple[list[Any], dict[str, Any]]:
    """The outputs of ``proto`` on ``feeds``, in order, and the values named in ``capture``
    (the evaluator only)."""
    from opshift.evaluator import evaluate

    try:
        backend = _policy.current().backend
        if backend != "opshift":
            from opshift.verify.runtimes import run

            return run(backend, proto, feeds), {}
        with warnings.catch_warnings():  # (evaluate sets numpy's error state itself)
            warnings.simplefilter("ignore", RuntimeWarning)
            out = evaluate(proto, feeds, capture=capture)
    except OpshiftError as e:
        e.args = (f"{who}: {e}",) + tuple(e.args[1:])
        raise
    except RecursionError as e:
        raise EvaluationError(f"{who}: evaluator failed: graph nesting too deep") from e
    except Exception as e:  # an evaluator bug must still be one line naming the model
        first = str(e).splitlines()[0] if str(e) else ""
        raise EvaluationError(f"{who}: evaluator failed: {type(e).__name__}: {first}") from e
    outputs = [out.pop(vi.name) if vi.name not in capture else out[vi.name]
               for vi in proto.graph.output]
    return outputs, out


def _declared(graph: onnx.GraphProto) -> set[str]:
    return {vi.name for vi in graph.input}


def _feeds(graph: onnx.GraphProto, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = _declared(graph)
    return {k: v for k, v in inputs.items() if k in names}


def _compare_outputs(ref: onnx.ModelProto, cand: onnx.ModelProto, exp: list[Any],
                     act: list[Any], label: str, signed_zeros: bool) -> list[Row]:
    rows = []
    ro, co = list(ref.graph.output), list(cand.graph.output)
    for i in range(max(len(ro), len(co))):
        if i >= len(co):
            v = exp[i]
            rows.append(_row(ro[i].name, v, None, False, f"output {i} ({ro[i].name!r}) is "
                             "missing from the candidate", label))
            continue
        if i >= len(ro):
            v = act[i]
            rows.append(_row(co[i].name, v, None, False, f"candidate has an extra output {i} "
                             f"({co[i].name!r})", label))
            continue
        c = compare(exp[i], act[i], signed_zeros=signed_zeros)
        reason = c.reason
        ok = c.ok
        if ro[i].name != co[i].name:
            ok = False
            reason = (f"output {i} is named {ro[i].name!r} in the reference and "
                      f"{co[i].name!r} in the candidate" + (f"; {reason}" if reason else ""))
        rows.append(_row(ro[i].name, exp[i], c, ok, reason, label, _informative(exp[i])))
    return rows


def _informative(v: Any) -> bool:
    """Whether a value two models agree on tells anything: not a float tensor that is NaN or
    infinite everywhere (a network fed one NaN spreads it to every output)."""
    if isinstance(v, (list, tuple)):
        return not v or any(_informative(x) for x in v)
    if not isinstance(v, np.ndarray) or v.size == 0 or v.dtype.kind in "biuOUSb":
        return True
    try:
        with np.errstate(all="ignore"):
            return bool(np.isfinite(v).any())
    except TypeError:  # a float type numpy's isfinite does not know: judged as float32
        return bool(np.isfinite(v.astype(np.float32)).any())


def _row(name: str, v: Any, c: Comparison | None, ok: bool, reason: str, label: str,
         informative: bool = True) -> Row:
    from opshift.evaluator.values import dtype_and_shape

    dtype, shape = dtype_and_shape(v)
    return Row(name, dtype, shape, c.max_abs if c else None, c.max_ulp if c else None, ok,
               reason, label, informative)


def _merge_rows(acc: list[Row] | None, new: list[Row]) -> list[Row]:
    if acc is None:
        return new
    out = []
    for a, b in zip(acc, new):
        out.append(Row(a.output, a.dtype, a.shape, larger(a.max_abs, b.max_abs),
                       larger(a.max_ulp, b.max_ulp), a.ok and b.ok, a.reason or b.reason,
                       a.label, a.informative or b.informative))
    return out


def _load(model: ModelLike, role: str) -> tuple[onnx.ModelProto, str]:
    proto, kind, _ = to_proto(model, load_external_data=True)
    who = f"{role} {model}" if kind == "path" else role
    return proto, who


def _pair_rows(ref: onnx.ModelProto, cand: onnx.ModelProto, rwho: str, cwho: str,
               rounds: list[dict[str, Any]], label: str, signed_zeros: bool,
               report: VerifyReport, tables=None, *, rewritten: bool,
               first: list[Any] | None = None) -> list[Row]:
    """Both models on each round's inputs, their outputs compared (``first``: the
    reference's outputs on round 0, when already computed)."""
    report.rounds = max(report.rounds, len(rounds))
    if _policy.current().backend == "opshift":  # (which kernels ran: the evaluator's)
        if tables is None:
            from opshift.evaluator.kernels import kernels

            tables = [kernels(ref), kernels(cand)]
        for t in tables:
            report.kernels.update(t.sources)
    rows: list[Row] | None = None
    # a whole-model check (no label) can take minutes: count its runs on the progress line
    with progress.stage("whole model", 2 * len(rounds), "runs") if not label else \
            contextlib.nullcontext():
        for i, feeds in enumerate(rounds):
            exp = first if i == 0 and first is not None else \
                _run(ref, _feeds(ref.graph, feeds), rwho)[0]
            progress.advance()
            try:
                act = _run(cand, _feeds(cand.graph, feeds), cwho)[0]
            except EvaluationError as e:
                if not rewritten:
                    raise  # a model given to compare: bad input
                # the candidate fails where the reference runs: it computes something else
                raise VerificationError(f"{e}; {rwho} runs on the same inputs") from None
            progress.advance()
            rows = _merge_rows(rows, _compare_outputs(ref, cand, exp, act, label,
                                                      signed_zeros))
    return rows or []


def _regionround_count(ref: onnx.ModelProto, cand: onnx.ModelProto, rwho: str, cwho: str,
                   dims, seed: int, finite: Collection[str], report: VerifyReport,
                   region: tuple[RegionInputs, dict[str, int]] | None
                   ) -> list[dict[str, Any]]:
    """A rewrite's inputs: rounds with special values mixed in."""
    specs = _specs_of_both(ref, cand, rwho, cwho, dims, finite)
    if region is not None and all(s.name in region[1] for s in specs):
        rounds, described = region[0].rounds(specs, region[1])
    else:  # (a region holding subgraphs keeps its value names: seeded by name)
        rounds = [generate_round(specs, seed, p) for p in range(round_count(specs))]
        described = describe_inputs(rounds[0], "generated", finite)
    report.inputs.update(described)
    return rounds


def _specs_of_both(ref, cand, rwho, cwho, dims, finite, sizes=None) -> list:
    specs = input_specs(ref.graph, dims, finite, sizes)
    ref_names = {s.name for s in specs}
    extra = [s for s in input_specs(cand.graph, dims, finite, sizes)
             if s.name not in ref_names]
    if extra:
        raise EvaluationError(f"{cwho}: input {extra[0].name!r} is not an input of "
                              f"{rwho}, so the two cannot be fed the same inputs")
    return specs


def _whole_model_inputs(ref: onnx.ModelProto, cand: onnx.ModelProto, rwho: str, cwho: str,
                        dims, seed: int, finite: Collection[str], report: VerifyReport,
                        capture: Collection[str]
                        ) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """Generated inputs a whole model runs on: realistic values (:func:`.inputs.plain_round`:
    finite floats, integers within the tables they index), open dims sized by the first of
    :func:`.inputs.size_profiles` the reference runs at. Returns the inputs, the reference's
    outputs on them and the values named in ``capture``."""
    bounds = index_bounds(ref.graph)
    specs = _specs_of_both(ref, cand, rwho, cwho, dims, finite)
    profiles: Sequence[Mapping[str, int] | None] = \
        size_profiles(ref.graph) if any(s.guessed for s in specs) else (None,)
    failed: list[str] = []
    for sizes in profiles:
        if sizes is not None:
            specs = _specs_of_both(ref, cand, rwho, cwho, dims, finite, sizes)
        feeds = plain_round(specs, seed, bounds)
        try:
            exp, captured = _run(ref, _feeds(ref.graph, feeds), rwho, capture)
        except EvaluationError as e:
            if sizes is None:
                raise
            failed.append(f"{_sizes_text(sizes)}: {e}")
            continue
        report.inputs.update(describe_inputs(feeds, "generated, realistic", finite))
        for s in specs:
            if s.name in bounds and s.dtype.kind in "iu":
                report.inputs[s.name]["source"] += f", in [0, {bounds[s.name]})"
        if sizes is not None:
            guessed = ", ".join(f"{s.name} {list(s.shape)}" for s in specs if s.guessed)
            report.notes.append(f"whole model: open dims sized {_sizes_text(sizes)} "
                                f"({guessed})" + (f"; it does not run at the {len(failed)} "
                                                  "size(s) tried first" if failed
                                                  else "") +
                                "; --input-shape or --inputs gives real ones")
        return feeds, exp, captured
    raise EvaluationError(f"{rwho}: does not run on generated inputs at any of the sizes "
                          f"tried for its open dims; at {failed[0]} (--input-shape NAME:D0,"
                          "D1,... or --inputs FILE.npz gives real ones)")


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sizes.items())


def verify(reference: ModelLike, candidate: ModelLike,
           inputs: Mapping[str, np.ndarray] | None = None, *,
           dims: Mapping[str, int] | None = None, seed: int = 0,
           signed_zeros: bool = True, finite: Collection[str] = (),
           rewritten: bool = False, capture: Collection[str] = ()) -> VerifyReport:
    """Run both models through the evaluator on the same inputs and compare every output.

    ``inputs`` (name -> array) are fed to each model that declares them; a name neither
    declares is an error. Without ``inputs``, those of the policy in force (``--inputs``),
    else one round of realistic inputs generated from the reference graph (finite floats,
    integers within the tables they index; ``dims`` names sizes of open dims, the others
    take the first of :func:`.inputs.size_profiles` the reference runs at; special values
    belong to the rewrites' own checks, where they test an op's edges: in a whole network
    they spread to every output). An output NaN or infinite everywhere on both sides tells
    nothing: the report is then not :attr:`~VerifyReport.complete`. ``capture`` names
    values of the reference's main graph kept from its run (:attr:`VerifyReport.context`).
    Outputs are matched by position. Evaluator failures
    raise an :class:`OpshiftError` naming the model and node (exit 2); with ``rewritten``
    (the candidate is a rewrite of the reference, as every command's ``--verify`` checks)
    the candidate failing on inputs the reference runs on is a :class:`VerificationError`
    (exit 1): it computes something else there. Mismatches are report rows.
    """
    ref, rwho = _load(reference, "reference")
    cand, cwho = _load(candidate, "candidate")
    if inputs is None:
        inputs = _policy.current().inputs
    report = VerifyReport(seed=None if inputs is not None else seed, signed_zeros=signed_zeros)
    if inputs is not None:
        feeds = check_given(inputs, ref, cand, rwho, cwho)
        report.inputs.update(describe_inputs(feeds, "given"))
        exp, report.context = _run(ref, _feeds(ref.graph, feeds), rwho, capture)
    else:
        check_seed(seed)
        feeds, exp, report.context = _whole_model_inputs(ref, cand, rwho, cwho, dims, seed,
                                                         finite, report, capture)
    report.rows = _pair_rows(ref, cand, rwho, cwho, [feeds], "", signed_zeros, report,
                             rewritten=rewritten, first=exp)
    return report


def check_given(inputs: Mapping[str, np.ndarray], ref: onnx.ModelProto,
                cand: onnx.ModelProto, rwho: str, cwho: str) -> dict[str, np.ndarray]:
    """The inputs given to compare ``ref`` and ``cand`` on (``rwho``/``cwho`` name them in
    errors), as arrays, once each names an input of either model and fits its declaration."""
    from opshift.evaluator import check_inputs

    names = _declared(ref.graph) | _declared(cand.graph)
    for k in inputs:
        if k not in names:
            raise EvaluationError(f"input {k!r} is not an input of either model (inputs: "
                                  f"{', '.join(sorted(names)) or 'none'})")
    out = {k: v if isinstance(v, (list, tuple, dict)) or v is None else np.asarray(v)
           for k, v in inputs.items()}  # (sequences, maps and optionals as they are)
    for proto, who in ((ref, rwho), (cand, cwho)):
        try:
            check_inputs(proto.graph, _feeds(proto.graph, out))
        except OpshiftError as e:
            raise type(e)(f"{who}: {e}") from None
    return out


@dataclass(frozen=True)
class Rewrite:
    """One rewrite to check locally: its ``before`` and ``after`` region models (see
    :func:`region_model`), compared with signed zeros told apart or not, ``finite`` naming
    inputs given no +-inf or NaN."""

    label: str
    before: ModelLike
    after: ModelLike
    signed_zeros: bool = True
    finite: tuple[str, ...] = ()


def check_rewrites(rewrites: Iterable[Rewrite], *, seed: int = 0,
                   dims: Mapping[str, int] | None = None
                   ) -> Iterator[tuple[str, VerifyReport | OpshiftError]]:
    """Check each rewrite on generated inputs; yield, in order, ``(label, its report)`` or
    ``(label, the OpshiftError that kept it from being checked)``.

    Rewrites whose regions compute the same thing up to value names (the same ops, versions,
    attributes, types, shapes and constants, see :func:`region_key`) are checked once: each
    of them gets that check's rows under its own label and output names. Inputs are made
    per structure, not per name (:class:`~.inputs.RegionInputs`): regions that differ only in
    their constants are fed the same inputs.
    """
    check_seed(seed)
    done: dict[tuple, _Checked] = {}
    inputs, kinds = RegionInputs(seed), _RegionKinds()
    for rw in rewrites:
        try:
            before, _ = _load(rw.before, "before")
            after, _ = _load(rw.after, "after")
        except OpshiftError as e:
            yield rw.label, e
            continue
        names: dict[str, int] = {}
        key = (rw.signed_zeros, region_key(before, names), region_key(after, names))
        key += (tuple(sorted(names.get(n, -1) for n in rw.finite)),)
        first = done.get(key)
        if first is None:
            first = done[key] = _Checked(rw.label, names, _check_region(
                rw.label, before, after, seed, dims, rw.signed_zeros, rw.finite,
                (inputs, names), kinds))
        progress.advance()
        yield rw.label, first.as_for(rw.label, names)


@dataclass
class _Checked:
    """The outcome of one region check, and the value names it was made with."""

    label: str
    names: dict[str, int]
    outcome: VerifyReport | OpshiftError

    def as_for(self, label: str, names: dict[str, int]) -> VerifyReport | OpshiftError:
        """The outcome as the rewrite ``label`` with value names ``names`` would have had."""
        if names is self.names:
            return self.outcome
        if isinstance(self.outcome, OpshiftError):
            e = copy.copy(self.outcome)
            text = str(self.outcome)
            for role in ("rewrite", "before", "after"):
                text = text.replace(f"{role} {self.label}:", f"{role} {label}:")
            e.args = (f"{text} (found checking the identical region of {self.label})",)
            return e
        theirs = {i: n for n, i in names.items()}
        rename = {n: theirs.get(i, n) for n, i in self.names.items()}
        src = self.outcome
        out = VerifyReport(seed=src.seed, signed_zeros=src.signed_zeros, policy=src.policy)
        out.rows = [dataclasses.replace(r, output=rename.get(r.output, r.output), label=label)
                    for r in src.rows]
        out.inputs = {rename.get(k, k): v for k, v in src.inputs.items()}
        out.rounds, out.kernels = src.rounds, dict(src.kernels)
        return out


class _RegionKinds:
    """The evaluator's kernel table of each region, made once per kind of region: the same
    opsets and the same ops in the same order (a region holding subgraphs or functions, or
    one without a kernel somewhere, which the table names by node, gets its own)."""

    def __init__(self) -> None:
        self._tables: dict[tuple, Any] = {}

    def table(self, model: onnx.ModelProto):
        from opshift.evaluator.kernels import kernels
        from opshift.graph.scopes import may_hold_subgraphs

        nodes = [(n.op_type, n.domain) for n in model.graph.node]
        if model.functions or any(may_hold_subgraphs(d, o) for o, d in nodes):
            return kernels(model)
        key = (tuple((i.domain, i.version) for i in model.opset_import), tuple(nodes))
        t = self._tables.get(key)
        if t is None:
            t = kernels(model)
            if t.missing is None:
                self._tables[key] = t
        return t


def _check_region(label: str, before: onnx.ModelProto, after: onnx.ModelProto, seed: int,
                  dims, signed_zeros: bool, finite: Collection[str],
                  region: tuple[RegionInputs, dict[str, int]] | None, kinds: _RegionKinds,
                  given: list[dict[str, Any]] | None = None) -> VerifyReport | OpshiftError:
    report = VerifyReport(seed=seed, signed_zeros=signed_zeros)
    try:
        tables = [kinds.table(before), kinds.table(after)]
        if _policy.current().backend == "opshift":
            for t, role in zip(tables, ("before", "after")):
                if t.missing is not None:
                    raise UnsupportedError(f"cannot verify rewrite {label}: {role}: "
                                           f"{t.missing}")
        rwho, cwho = f"before {label}", f"after {label}"
        rounds = given if given is not None else _regionround_count(
            before, after, rwho, cwho, dims, seed, finite, report, region)
        report.rows = _pair_rows(before, after, rwho, cwho, rounds, label, signed_zeros,
                                 report, tables, rewritten=True)
        if given is None and not all(r.informative for r in report.rows):
            # special values alone made an output NaN or infinite everywhere (a reduction
            # over a few elements): a round of plain values tells what the node computes
            plain = plain_round(_specs_of_both(before, after, rwho, cwho, dims, finite),
                                seed, {})
            report.rows = _merge_rows(report.rows, _pair_rows(
                before, after, rwho, cwho, [plain], label, signed_zeros, report, tables,
                rewritten=True))
    except OpshiftError as e:
        return e
    return report


def region_inputs(rewrite: Rewrite) -> list[str]:
    """The values a rewrite's ``before`` region reads from the model around it (its graph
    inputs less its constants): what :func:`check_in_context` needs."""
    before, _ = _load(rewrite.before, "before")
    inits = {t.name for t in before.graph.initializer}
    return [vi.name for vi in before.graph.input if vi.name not in inits]


def check_in_context(rewrite: Rewrite, values: Mapping[str, Any]
                     ) -> VerifyReport | OpshiftError:
    """Check one rewrite on the values its inputs held in a run of the whole model
    (``values``: name -> value, e.g. :attr:`VerifyReport.context` of ``verify(...,
    capture=region_inputs(rewrite))``), for a rewrite that generated values leave
    meaningless (a Range over the type's extremes, a Reshape to a random shape). Returns its
    report, or the OpshiftError that kept it from being checked."""
    try:
        before, _ = _load(rewrite.before, "before")
        after, _ = _load(rewrite.after, "after")
    except OpshiftError as e:
        return e
    names = region_inputs(Rewrite(rewrite.label, before, after))
    missing = [n for n in names if n not in values]
    if missing:
        return UnsupportedError(f"rewrite {rewrite.label}: {missing[0]!r} is not a value of "
                                "the main graph's run")
    given = {n: values[n] for n in names}
    report = _check_region(rewrite.label, before, after, 0, None, rewrite.signed_zeros,
                           rewrite.finite, None, _RegionKinds(), given=[given])
    if isinstance(report, VerifyReport):
        report.inputs.update(describe_inputs(given, "computed by the whole model"))
    return report


def verify_rewrites(rewrites: Iterable[tuple[str, onnx.ModelProto, onnx.ModelProto]], *,
                    seed: int = 0, dims: Mapping[str, int] | None = None,
                    signed_zeros: bool = True, finite: Collection[str] = ()) -> VerifyReport:
    """Check each ``(label, before, after)`` region pair on the same generated inputs
    (``finite``: inputs given no +-inf or NaN).

    One row per output per rewrite, with the label in the row; identical regions are checked
    once (see :func:`check_rewrites`). A region the evaluator cannot run raises
    :class:`UnsupportedError` naming the label (nothing can be verified there).
    """
    report = VerifyReport(seed=seed, signed_zeros=signed_zeros)
    for label, part in check_rewrites((Rewrite(label, b, a, signed_zeros, tuple(finite))
                                       for label, b, a in rewrites), seed=seed, dims=dims):
        if isinstance(part, OpshiftError):
            raise part
        report.merge(part, label)
    return report


def evaluator_supports(model: ModelLike) -> str | None:
    """None if the evaluator has a kernel (opshift's own or onnx.reference's) for every node of
    ``model`` (graph, subgraphs, functions) at its version; else a reason naming the first
    node that has none. Under another backend (:mod:`opshift.verify.policy`) always None:
    that runtime says when it loads the model."""
    if _policy.current().backend != "opshift":
        return None
    from opshift.evaluator.kernels import kernels

    proto, _, _ = to_proto(model)
    return kernels(proto).missing
