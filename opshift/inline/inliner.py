"""The inliner: :func:`inline_proto` edits an ``onnx.ModelProto`` in place (see
:mod:`opshift.inline`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import onnx

from opshift import opsets, progress
from opshift.check import structure
from opshift.errors import OpshiftError
from opshift.graph.constant_values import tensor_of
from opshift.graph.facts import Facts
from opshift.graph.names import Names
from opshift.graph.scopes import Scope
from opshift.inline import decompose as dec
from opshift.inline.functions import inline_functions
from opshift.inline.result import InlineResult
from opshift.inline.templates import FUNCTION, LEGACY, OPS, Form, band, form
from opshift.io.tensors import tensor_array


def _parse_ops(ops: Iterable[str] | str | None) -> frozenset[str]:
    if ops is None:
        return frozenset(OPS)
    if isinstance(ops, str):
        ops = [o for o in ops.split(",") if o.strip()]
    out = set()
    canon = {o.lower(): o for o in OPS}
    for o in ops:
        o = o.strip()
        if o.lower() == "none":
            continue
        if o.lower() not in canon:
            raise OpshiftError(f"--ops: unknown op {o!r} (choose from {', '.join(OPS)})")
        out.add(canon[o.lower()])
    return frozenset(out)


@dataclass
class _Work:
    """One node list to edit: a graph's or a function's."""

    owner: onnx.GraphProto | onnx.FunctionProto
    label: str
    gname: str
    opsets: dict[str, int]
    function: onnx.FunctionProto | None
    #: the nodes to inline: (index, node, op, name, inputs, outputs)
    sites: list[tuple[int, onnx.NodeProto, str, str, list[str], list[str]]]


_ALL_OPS = frozenset(OPS)


def _work_from_index(index: structure.ModelIndex, wanted: frozenset[str]) -> list[_Work]:
    """Every scope of the index (pre-order: a graph before its subgraphs, then functions)
    with its nodes to inline."""
    work = []
    for sc in index.scopes:
        is_graph = isinstance(sc.owner, onnx.GraphProto)
        gname = sc.owner.name if is_graph and not work else sc.label
        sites = sc.sites if wanted >= _ALL_OPS else [t for t in sc.sites if t[2] in wanted]
        work.append(_Work(sc.owner, sc.label, gname, sc.opsets, sc.function, sites))
    return work


def inline_proto(model: onnx.ModelProto, ops: Iterable[str] | str | None = None,
                 functions: Iterable[str] | str | None = None, *,
                 keep_before: bool = False, index: structure.ModelIndex | None = None,
                 base_dir: str | os.PathLike | None = None,
                 allow_nonfinite_slope: bool = False) -> InlineResult:
    """Inline ``ops`` (default: PRelu, LeakyRelu, Selu) and the model-local ``functions``
    (``"all"``, names, or None for none) in ``model``, in place.

    ``keep_before``: keep a copy of every replaced node in the result (for ``--verify``).
    ``index``: what :func:`opshift.check.structure.check` saw of this very ``model`` object, which
    saves inline running that walk again (ignored once functions are inlined, which rebuilds
    the model). ``base_dir``: the model's folder, for a PRelu slope in external data that
    the decomposition at opsets 1..8 depends on (without it such a slope is refused).
    ``allow_nonfinite_slope``: inline a PRelu whose slope is not a constant (nor computed
    from constants alone, as an ``Unsqueeze`` of an initializer is) at opsets 1..8,
    whose form is exact only for finite slopes (refused by default); each such node gets a
    note in the result.
    Raises ConversionError (naming node, op, version) when a node cannot be inlined exactly;
    the model is then partly edited, so callers that need atomicity work on a copy.
    """
    wanted = _parse_ops(ops)
    result = InlineResult()
    if functions:
        inline_functions(model, functions, result)
        if result.functions_inlined:
            index = None
    if not wanted:
        return result
    if index is None:  # the structural check's walk gathers what inline needs
        index = structure.ModelIndex()
        structure.problems(model, index)  # (whether the model passes is the caller's business)
    work = _work_from_index(index, wanted)
    if not any(w.sites for w in work):
        return result
    facts = Facts(model, base_dir=base_dir, index=index)  # (the index's names and types)
    names = facts.names
    forms: dict[tuple, Form] = {}
    todo = [w for w in work if w.sites and w.opsets.get("") is not None]
    with progress.stage("inline", sum(len(w.sites) for w in todo), "nodes"):
        # Deepest scopes first: a graph's new node list holds copies of its nodes, so a
        # subgraph is edited before the graph that holds it; the main graph comes last.
        for w in reversed(todo):
            _inline_scope(w, w.opsets[""], names, facts, forms, result, keep_before,
                          allow_nonfinite_slope)
    return result


def _inline_scope(w: _Work, opset: int, names: Names, facts: Facts, forms: dict[tuple, Form],
                  result: InlineResult, keep_before: bool,
                  allow_nonfinite_slope: bool = False) -> None:
    """Replace the sites of one scope. First every site's replacement is chosen (and refused,
    ConversionError, before anything changes); then the scope's node list is emptied and
    refilled, the kept nodes copied back (a node removed from a list stays readable) and
    each replacement added in its place. A row of the result holds where in the list its
    replacement is, and with ``keep_before`` a PRelu's constant slope (for ``--verify``). In
    the function and static bands a node's template depends only on (op, version,
    attributes, X's element type): its :class:`~.templates.Form` is made once per such key.
    A PRelu's slope is a constant as ``facts`` sees it from the scope, or a value computed
    from constants alone (:func:`~opshift.graph.constant_values.tensor_of`; looked up where
    the legacy band's forms depend on it, or for ``keep_before``)."""
    b = band(opset)
    function_band = b == FUNCTION
    scope: Scope | None = None
    versions: dict[str, int] = {}  # 0: the op does not exist at this opset
    chosen: list[tuple] = []  # (index, node, op, version, base, X, Y, slope, how, note, const)
    # The progress line counts a site where its work is: choosing its decomposition in the
    # legacy band (it reads the slope), writing its bound template in the others.
    legacy = b == LEGACY
    for i, node, op, name, ins, outs in w.sites:
        if legacy:
            progress.advance()
        version = versions.get(op)
        if version is None:
            version = versions[op] = opsets.since_version(op, opset) or 0
        if not version:
            continue
        base = name or f"{op.lower()}_{i}"
        const: onnx.TensorProto | None = None
        if op == "PRelu" and (legacy or keep_before):
            if scope is None:
                scope = facts.scope_of(w.owner)
            # (a scope Facts does not reach has no constants it could vouch for); a slope
            # computed from constants alone (Unsqueeze of an initializer) is one too
            const = tensor_of(facts, scope, ins[1]) if scope is not None else None
        # (the function band's CastLike body needs X's type only where 16 bits need Casts)
        et = 0 if function_band and op == "PRelu" else facts.elem_type(ins[0], w.function) or 0
        if b != LEGACY:
            attrs = node.attribute
            key = (b, op, version, et, *[(a.name, a.f, a.ref_attr_name) for a in attrs]) \
                if attrs else (b, op, version, et)
            f = forms.get(key)
            if f is None:
                f = forms[key] = form(dec.band_template(
                    dec.Site(node, version, opset, et, graph=w.gname)))
            how: Form | list[onnx.NodeProto] = f
            note = ""
        else:
            how, note = _legacy(w, node, op, version, opset, et, base, names, facts, const,
                                allow_nonfinite_slope)
        chosen.append((i, node, op, version, base, ins[0], outs[0],
                       ins[1] if op == "PRelu" else None, how, note, const))
    if not legacy and len(chosen) < len(w.sites):
        progress.advance(len(w.sites) - len(chosen))  # sites of ops absent at this opset
    if not chosen:
        return
    fkey = None if w.function is None else (w.function.domain, w.function.name)
    rows = result.rows
    nodes = w.owner.node
    old = list(nodes)
    del nodes[:]
    add = nodes.add
    prev = 0
    zeros: dict = {}  # one zero Constant per element type serves the scope's every site
    for i, node, op, version, base, x, y, slope, how, note, const in chosen:
        nodes.extend(old[prev:i])
        prev = i + 1
        start = len(nodes)
        borrowed = ()
        if isinstance(how, Form):
            borrowed = how.bind(add, x, y, slope, base, names, zeros)
        else:
            nodes.extend(how)
        before = slope_value = None
        if keep_before:
            before = onnx.NodeProto()
            before.CopyFrom(node)
            slope_value = const
        rows.append((base, op, version, opset, b, w.label, before, (w.owner, start, len(nodes)),
                     w.opsets, fkey, note, slope_value, borrowed))
        if note:
            result.notes.append(note)
        if not legacy:
            progress.advance()
    nodes.extend(old[prev:])


def _legacy(w: _Work, node: onnx.NodeProto, op: str, version: int, opset: int, et: int,
            base: str, names: Names, facts: Facts, const: onnx.TensorProto | None,
            allow_nonfinite_slope: bool) -> tuple[list[onnx.NodeProto], str]:
    """A node's replacement in the legacy band (opsets 1..8), where a PRelu's decomposition
    also depends on its slope's value (``const``, None when it is not a constant) and shape
    and on X's shape; and the note :func:`.decompose.decompose` made of it ("" for none)."""
    site = dec.Site(node, version, opset, et, graph=w.gname,
                    allow_nonfinite_slope=allow_nonfinite_slope)
    if op == "PRelu":
        if const is not None:
            site.slope_value = tensor_array(const, facts.base_dir)
            site.slope_shape = tuple(site.slope_value.shape)
        if opset <= 6:
            site.x_shape = facts.shape(node.input[0])
            if site.slope_shape is None:
                site.slope_shape = facts.shape(node.input[1])
    return dec.decompose(site, base, names), site.note
