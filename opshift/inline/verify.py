"""``inline --verify``: each replacement checked against the node it replaced, then the whole
model, with the bundled evaluator."""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from opshift.errors import OpshiftError
from opshift.graph.edit import constant_node
from opshift.graph.facts import Facts
from opshift.graph.scopes import subgraphs
from opshift.inline.result import InlineResult
from opshift.verify.region import value_info


def _slope_sources(model: onnx.ModelProto, nodes: list) -> list[str]:
    """The graph inputs the slopes of ``nodes`` (accepted PRelu nodes) are computed from:
    each slope and everything it is computed from, back to the main graph's inputs (a node
    holding subgraphs reads what its subgraphs read; a slope inside a function is computed
    from everything its call sites pass)."""
    reads: dict[str, list[str]] = {}  # value -> what its producer reads
    calls: dict[tuple[str, str], list[str]] = {}  # function -> what its call sites pass

    def scope(ns) -> list[str]:
        read: list[str] = []
        for n in ns:
            got = [i for i in n.input if i]
            for _, g in subgraphs(n):
                got += scope(g.node)
            for o in n.output:
                reads[o] = got
            calls.setdefault((n.domain, n.op_type), []).extend(got)
            read += got
        return read

    scope(model.graph.node)
    todo = [i for n in nodes for i in ([n.before.input[1]] if n.function is None
                                        else calls.get(n.function, []))]
    seen: set[str] = set()
    while todo:
        v = todo.pop()
        if v not in seen:
            seen.add(v)
            todo.extend(reads.get(v, ()))
    return [vi.name for vi in model.graph.input if vi.name in seen]


def _vi(name: str, elem_type: int, shape) -> onnx.ValueInfoProto:
    if shape is not None:
        shape = [d if isinstance(d, int) else f"d{i}" if d is None else d
                 for i, d in enumerate(shape)]
    return value_info(name, elem_type, shape)


@dataclass
class InlineChecks:
    """What checking an inline takes: each replacement's region pair (:attr:`rewrites`),
    the nodes with none and why (:attr:`alone`), whether signs of zero are compared on the
    whole model, the graph inputs generated finite, and the notes saying so."""

    rewrites: list
    alone: list[tuple[str, str]]
    signed_zeros: bool
    finite: list[str]
    notes: list[str]


def inline_checks(original: onnx.ModelProto, inlined: onnx.ModelProto,
                  result: InlineResult) -> InlineChecks:
    """The checks of ``result`` (from ``inline_proto(original, ..., keep_before=True)``,
    which made ``inlined``), for :func:`verify_inline` or a command that inlines as one of
    its steps (``convert --inline``)."""
    alone: list[tuple[str, str]] = []
    rewrites = list(_regions(original, inlined, result, alone))
    notes = [f"{rw.label}: slope {s!r} generated without +-inf and NaN ({_ACCEPTED})"
             for rw in rewrites for s in rw.finite]
    accepted = [n for n in result.nodes if n.note and n.op == "PRelu"]
    finite = _slope_sources(original, accepted) if accepted else []
    if finite:
        notes.append(f"whole model: input(s) {', '.join(map(repr, finite))} generated "
                     "without +-inf and NaN: the slope of "
                     f"{', '.join(repr(n.label) for n in accepted)} is computed from "
                     f"them ({_ACCEPTED})")
    return InlineChecks(rewrites, alone, all(n.signed_zero_exact for n in result.nodes),
                        finite, notes)


def verify_inline(original: onnx.ModelProto, inlined: onnx.ModelProto, result: InlineResult,
                  *, seed: int = 0):
    """Check each inlined node against its replacement with the evaluator (a small region
    model each, real constants, generated inputs with special values; identical regions
    once), then the whole model when the evaluator runs all of it. Signed zeros are compared
    except for the replacements the decompose table documents. A PRelu inlined although its
    slope is not a constant (``allow_nonfinite_slope``: its form differs where the slope is
    +-inf or NaN) is checked on finite slopes: its region's slope, and the graph inputs its
    slope is computed from in the whole model, are generated without +-inf and NaN (a note
    says so). What could not be checked is a gap of the report
    (:func:`opshift.verify.rewritten.verify_rewritten`). Returns ``(VerifyReport, notes)``.
    ``result`` must come from ``inline_proto(..., keep_before=True)``.
    """
    from opshift.verify.rewritten import verify_rewritten

    c = inline_checks(original, inlined, result)
    report = verify_rewritten(original, inlined, c.rewrites, seed=seed,
                              signed_zeros=c.signed_zeros, finite=c.finite, unchecked=c.alone)
    return report, c.notes


_ACCEPTED = "non-finite slopes accepted with --allow-nonfinite-slope / allow_nonfinite_slope"


def _regions(original: onnx.ModelProto, inlined: onnx.ModelProto, result: InlineResult,
             alone: list[tuple[str, str]]):
    """The region model of each inlined node that can be checked alone, its slope in
    ``finite`` when it is generated without +-inf and NaN (see :func:`verify_inline`); each
    node that cannot be checked alone, and why, in ``alone``. A constant slope is read as
    the pass read it (:attr:`~.result.InlinedNode.slope_value`)."""
    from opshift.verify.region import region_model
    from opshift.verify.verifier import Rewrite

    facts, facts2 = Facts(original), Facts(inlined)
    for n in result.nodes:
        if n.before is None:
            raise OpshiftError("verify_inline needs inline_proto(..., keep_before=True)")
        x, y = n.before.input[0], n.before.output[0]
        if any(a.ref_attr_name for a in n.before.attribute):
            alone.append((n.label, "its attributes refer to the enclosing function's"))
            continue
        fn = None
        if n.function is not None:
            fn = next((f for f in original.functions
                       if (f.domain, f.name) == n.function), None)
        et = facts.elem_type(x, fn) or facts2.elem_type(x, fn)
        if not et:
            alone.append((n.label, "the element type of X is unknown"))
            continue
        pre: list[onnx.NodeProto] = []
        ins = []
        finite: list[str] = []
        xs = facts.shape(x) or facts2.shape(x)
        if n.op == "PRelu":
            s = n.before.input[1]
            t = n.slope_value
            if t is not None:
                pre.append(constant_node(s, t))
                if xs is None:
                    xs = tuple(t.dims)
            else:
                ss = facts.shape(s) or facts2.shape(s)
                if ss is None:
                    alone.append((n.label, "the slope's shape is unknown"))
                    continue
                ins.append(_vi(s, facts.elem_type(s) or et, ss))
                if xs is None:
                    xs = ss
                if n.note:
                    finite.append(s)
        elif xs is None:
            xs = (8,)
        ins.insert(0, _vi(x, et, xs))
        outs = [_vi(y, et, None)]
        imports = {"": n.opset}
        yield Rewrite(n.label, region_model(pre + [n.before], ins, outs, opset_imports=imports),
                      region_model(pre + n.after, ins, outs, opset_imports=imports),
                      n.signed_zero_exact, tuple(finite))
