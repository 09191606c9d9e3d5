"""Convert every default-domain op other than the activations between opsets, in place.

For each node whose schema version differs between the source and the target opset, the
conversion walks the op's schema versions one step at a time (up or down). A step is either

* listed in :data:`opshift.passes.other_ops_table.TABLE` -- its meaning changed in a way the
  schemas do not show (legacy broadcasting, attributes turned into inputs, coerced-2-D
  Softmax, negative axes, ...). The listed adapter rewrites the node exactly or refuses; or
* judged from the two ``onnx.defs`` schemas alone (``other_ops_schema.generic_step``): the
  node is unaffected when the schemas differ only in types the node does not use, attributes
  it does not set (or sets to the older default), optional inputs it does not use, and
  input/output counts it respects. Then nothing but the version in force changes.

Listed steps still go through the schema check after their adapter. Ops missing at the
target may have an exact replacement (``other_ops_table.DECOMPOSE``). A node that cannot be
converted exactly raises :class:`~opshift.errors.ConversionError` naming op, node, scope and
versions; nothing is written into the model until every node is planned, so a refusal leaves
the model untouched. The opset imports are left to the caller (call this before changing
them: each scope's source opset is read from its imports, falling back to ``source``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import onnx
from onnx import helper

from .. import opsets
from ..errors import ConversionError, function_id
from ._graph import Scope, iter_scopes, splice, subgraphs
from .other_ops_body import function_body, inline_body
from .other_ops_facts import constant_tensor
from .other_ops_schema import fast_ok, fast_walk, generic_step, versions_between
from .other_ops_step import Conversion, NodeState, Refuse, Step
from .other_ops_table import DECOMPOSE, TABLE

ACTIVATIONS = opsets.ACTIVATIONS

__all__ = ["ACTIVATIONS", "Change", "convert_other_ops", "other_ops_change"]


@dataclass
class Change:
    """One converted node: what was done and why."""

    node: str
    op: str
    scope: str
    from_version: int
    to_version: int | None  # None: the op does not exist at the target (decomposed)
    action: str  # "relabel" (node unchanged) or "rewrite"
    reason: str


_RELABEL = "the schemas differ only in what this node does not use"


def _scope_source(scope: Scope, source: int, model_opset: int | None) -> int:
    """``source`` for the model's own scopes; a function's own import (also inside its
    subgraphs) where it differs from the model's."""
    v = scope.opsets.get("")
    return v if v is not None and v != model_opset else source


def _skip_set(skip: Iterable[str]) -> frozenset[str]:
    return frozenset(skip)


def other_ops_change(model: onnx.ModelProto, source: int, target: int,
                     skip: Iterable[str] = ACTIVATIONS) -> bool:
    """True when some default-domain node not in ``skip`` changes schema version."""
    skip = _skip_set(skip)
    model_opset = opsets.opset_of(model)
    for sc in iter_scopes(model):
        src = _scope_source(sc, source, model_opset)
        if src == target:
            continue
        seen: set[str] = set()
        for n in sc.nodes:
            op = n.op_type
            if op in seen or op in skip or opsets.normalize_domain(n.domain) != "":
                continue
            seen.add(op)
            if opsets.since_version(op, src) != opsets.since_version(op, target):
                return True
    return False


def convert_other_ops(model: onnx.ModelProto, source: int, target: int, *,
                      skip: Iterable[str] = ACTIVATIONS) -> list[Change]:
    """Convert every default-domain node whose op is not in ``skip`` from ``source`` to ``target``.

    Edits ``model`` in place (main graph, subgraphs, model-local functions, each with its own
    source opset) and returns what changed. Leaves the opset imports alone. Raises
    :class:`ConversionError` naming op, node, scope and versions when a node cannot be
    converted exactly; the model is then unchanged.
    """
    skip = _skip_set(skip)
    table_keys = frozenset(TABLE)
    conv = Conversion(model, source, target)
    changes: list[Change] = []
    plans: list[tuple[Scope, dict[int, list[onnx.NodeProto]]]] = []
    model_opset = opsets.opset_of(model)
    function: onnx.FunctionProto | None = None
    for sc in iter_scopes(model):
        if sc.function is not None:
            function = sc.function  # functions (and their subgraphs) come after the graphs
        src = _scope_source(sc, source, model_opset)
        if src == target:
            continue
        variants = (conv.facts.function_variants(function) if function is not None
                    else [((), None)])
        repl: dict[int, list[onnx.NodeProto]] = {}
        per_op: dict[str, tuple] = {}  # op -> (v_from, v_to, fast walk or None)
        for i, n in enumerate(sc.nodes):
            op = n.op_type
            known = per_op.get(op)
            if known is None:
                v_from = opsets.since_version(op, src)
                v_to = opsets.since_version(op, target)
                fw = (fast_walk(op, v_from, v_to, table_keys)
                      if v_from is not None and v_to is not None and v_from != v_to else None)
                known = per_op[op] = (v_from, v_to, fw, op in skip)
            v_from, v_to, fw, skipped = known
            if skipped or v_from == v_to:
                continue
            dom = n.domain
            if dom and dom != "ai.onnx":
                continue
            name = n.name or f"<{op} #{i}>"
            if function is None:
                new, change = _plan_node(conv, sc, i, n, src, target, v_from, v_to, fw, name)
            else:
                new, change = _plan_function_node(conv, sc, i, n, src, target, v_from, v_to,
                                                  fw, name, function, variants)
            if new is not None:
                repl[i] = new
            changes.append(change)
        plans.append((sc, repl))
    # Nothing is written before every node is planned. Subgraphs come after their parents in
    # iter_scopes; splicing them first keeps their edits when a parent list is rebuilt.
    for sc, repl in reversed(plans):
        splice(sc.nodes, repl)
    for sc, names in conv.dropped.values():
        _remove_unused_constants(sc, names)
    # New initializers are not listed as graph inputs: the caller picks an IR version >= 4
    # (or lists every initializer) when it declares the target's IR version.
    for graph, tensor, _main in conv.pending_inits:
        graph.initializer.append(tensor)
    return changes


def _plan_node(conv: Conversion, sc: Scope, i: int, n: onnx.NodeProto, src: int, target: int,
               v_from: int | None, v_to: int | None, fw, name: str
               ) -> tuple[list[onnx.NodeProto] | None, Change]:
    """One node's replacement (None: relabel) and its change record."""
    op = n.op_type
    if fw is not None and fast_ok(fw, n, conv.facts):
        return None, Change(name, op, sc.label, v_from, v_to, "relabel", _RELABEL)
    new, state = _convert_node(conv, sc, i, n, src, target, v_from, v_to, name)
    return new, Change(
        node=name, op=op, scope=sc.label, from_version=v_from, to_version=v_to,
        action="rewrite" if new is not None else "relabel",
        reason="; ".join(state.notes) or _RELABEL)


def _types_str(ins: tuple[int, ...], f: onnx.FunctionProto) -> str:
    return "(" + ", ".join(f"{x}: {opsets.tensor_type_name(t) if t else 'unknown'}"
                           for x, t in zip(f.input, ins)) + ")"


def _plan_function_node(conv: Conversion, sc: Scope, i: int, n: onnx.NodeProto, src: int,
                        target: int, v_from: int | None, v_to: int | None, fw, name: str,
                        f: onnx.FunctionProto, variants: list
                        ) -> tuple[list[onnx.NodeProto] | None, Change]:
    """Plan a node of a function body once per tuple of input types its call sites pass; the
    node is converted only when every tuple gives the same result."""
    fid = function_id(f)
    if not variants:
        conv.facts.local = {}
        try:
            return _plan_node(conv, sc, i, n, src, target, v_from, v_to, fw, name)
        except ConversionError as e:
            raise ConversionError(f"{e} (function {fid} is never called from the model's "
                                  "graphs, so the types of its inputs are unknown)") from None
        finally:
            conv.facts.local = None
    first: tuple | None = None
    first_ins: tuple[int, ...] = ()
    try:
        for ins, types in variants:
            conv.facts.local = types
            pending = len(conv.pending_inits)
            try:
                new, change = _plan_node(conv, sc, i, n, src, target, v_from, v_to, fw, name)
            except ConversionError as e:
                more = (f" (one of {len(variants)} call-site type combinations)"
                        if len(variants) > 1 else "")
                raise ConversionError(f"{e}; function {fid} called with inputs "
                                      f"{_types_str(ins, f)}{more}") from None
            if first is None:
                first, first_ins = (new, change), ins
                continue
            del conv.pending_inits[pending:]  # this variant's plan is only compared
            if _canonical(new, n) != _canonical(first[0], n):
                raise ConversionError(
                    f"node {name!r} ({n.op_type}-{v_from} -> {v_to}, {sc.label}): function "
                    f"{fid} is called with inputs {_types_str(first_ins, f)} and "
                    f"{_types_str(ins, f)}, which need different conversions of this node")
    finally:
        conv.facts.local = None
    assert first is not None
    return first


def _canonical(nodes: list[onnx.NodeProto] | None, orig: onnx.NodeProto) -> list | None:
    """``nodes`` with fresh value names numbered in order and node names left out."""
    if nodes is None:
        return None
    keep = {*orig.input, *orig.output}
    names: dict[str, str] = {}

    def ren(v: str) -> str:
        return v if not v or v in keep else names.setdefault(v, f"#{len(names)}")

    out = []
    for b in nodes:
        attrs = []
        for a in b.attribute:
            c = onnx.AttributeProto()
            c.CopyFrom(a)
            if c.HasField("t"):
                c.t.name = ""
            attrs.append(c.SerializeToString(deterministic=True))
        out.append((b.op_type, b.domain, [ren(v) for v in b.input],
                    [ren(v) for v in b.output], attrs))
    return out


def _convert_node(conv: Conversion, sc: Scope, i: int, n: onnx.NodeProto, src: int,
                  target: int, v_from: int | None, v_to: int | None, name: str,
                  depth: int = 0) -> tuple[list[onnx.NodeProto] | None, NodeState]:
    """Walk one node from ``v_from`` to ``v_to`` step by step; its replacement (None: the node
    stays as it is) and what was done."""
    op = n.op_type
    loc = f"node {name!r} ({op}-{v_from} -> {v_to}, {sc.label})"
    if v_from is None:
        raise ConversionError(f"{loc}: {op} does not exist at opset {src}")
    decompose = DECOMPOSE.get(op) if v_to is None else None
    walk_to = v_to if v_to is not None else opsets.versions(op)[0]
    state = NodeState()
    for lo, hi in versions_between(op, v_from, walk_to):
        if state.removed:
            break
        st = Step(n, op, lo, hi, v_from < walk_to, conv, sc, i, state)
        try:
            for adapter in TABLE.get((op, hi), ()):
                adapter(st)
            if not state.removed:
                generic_step(st)
        except Refuse as e:
            raise ConversionError(
                f"{loc}: step {op}-{st.src} -> {op}-{st.dst}: no exact adapter: {e}"
            ) from None
    if v_to is None:
        st = Step(n, op, walk_to, walk_to, False, conv, sc, i, state)
        try:
            if decompose is not None:
                decompose(st)
            else:
                _write_function_body(st, conv, sc, i, target, loc, depth)
        except Refuse as e:
            raise ConversionError(f"{loc}: {op} does not exist at opset {target} and no exact "
                                  f"decomposition applies: {e}") from None
    if state.removed:
        return [*state.pre, *state.post], state
    if state.work is not None or state.pre or state.post:
        return [*state.pre, state.work or n, *state.post], state
    return None, state


def _write_function_body(st: Step, conv: Conversion, sc: Scope, i: int, target: int,
                         loc: str, depth: int) -> None:
    """Replace the node by its onnx function body, each body node converted to ``target``."""
    if depth > 4:
        raise Refuse("function bodies nest too deep")
    body, body_opset = function_body(st)
    nodes = inline_body(st, body)
    conv.facts.propagate(nodes, body_opset)
    for b in nodes:
        c = constant_tensor(b)
        if c is not None:
            conv.scope_consts(sc)[b.output[0]] = c
    out: list[onnx.NodeProto] = []
    for b in nodes:
        bf = opsets.since_version(b.op_type, body_opset)
        bt = opsets.since_version(b.op_type, target)
        if bf == bt:
            out.append(b)
            continue
        try:
            new, _ = _convert_node(conv, sc, i, b, body_opset, target, bf, bt, b.name,
                                   depth + 1)
        except ConversionError as e:
            raise Refuse(f"its function body (opset {body_opset}): {e}") from None
        out.extend(new if new is not None else [b])
    _check_types(st, out, target)
    st.state.pre.extend(out)
    st.remove(f"written as its onnx function body ({', '.join(b.op_type for b in nodes)}) "
              f"converted to opset {target}")


def _check_types(st: Step, nodes: list[onnx.NodeProto], target: int) -> None:
    """Type-check the written body on its own (onnx builds some bodies, e.g. float16
    Attention's, that mix element types)."""
    made = {o for n in nodes for o in n.output}
    inputs = []
    for name in dict.fromkeys(i for n in nodes for i in n.input if i and i not in made):
        t = st.elem_type(name)
        if t is None:
            raise Refuse(f"the element type of {name!r} is unknown")
        inputs.append(helper.make_tensor_value_info(name, t, None))
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in st.w.output if o]
    g = helper.make_graph(nodes, "body", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", target)])
    try:
        onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    except Exception as e:  # onnx's message, first line
        first = str(e).splitlines()[0][:200]
        raise Refuse(f"the function body does not type-check: {first}") from None


def _used_names(nodes) -> set[str]:
    used: set[str] = set()
    for n in nodes:
        used.update(n.input)
        for _, g in subgraphs(n):
            used.update(_used_names(g.node))
            used.update(o.name for o in g.output)
    return used


def _remove_unused_constants(scope: Scope, names: set[str]) -> None:
    """Drop the Constant nodes and initializers of ``names`` that nothing uses any more."""
    used = _used_names(scope.nodes)
    if scope.graph is not None:
        used.update(o.name for o in scope.graph.output)
    if scope.function is not None:
        used.update(scope.function.output)
    dead = names - used
    if not dead:
        return
    gone = {i: [] for i, n in enumerate(scope.nodes)
            if n.op_type == "Constant" and len(n.output) == 1 and n.output[0] in dead}
    splice(scope.nodes, gone)
    g = scope.graph
    if g is not None and any(t.name in dead for t in g.initializer):
        inputs = {v.name for v in g.input}
        for i in reversed(range(len(g.initializer))):
            if g.initializer[i].name in dead and g.initializer[i].name not in inputs:
                del g.initializer[i]
