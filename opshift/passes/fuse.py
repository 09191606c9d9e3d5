"""``fuse``: decomposed PRelu / LeakyRelu / Selu patterns back into single ops, where exact.

The rules are :func:`opshift.rewriters.rules` (onnxscript pattern rules); this module runs them
over ``onnx_ir`` with onnxscript's matcher and replacement -- main graph, If/Loop/Scan
subgraphs and model-local functions -- and reports every fusion and every refusal with its
reason.

Output: :func:`fuse_proto` edits the node lists of a copy of the input ModelProto where
something was fused (the IR only finds and makes the fusions), so the result differs from the
input only in the fused regions: the new nodes, the matched nodes and constants left unused
by them gone, and their value_info with them. Nothing else is re-serialized.

Shapes: the checks need static shapes and element types, so :func:`fuse` runs onnx shape
inference on the side; nothing it infers is written into the result.
"""
from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx_ir as ir
from onnx_ir import passes as ir_passes

from .. import validate
from .._gc import no_cyclic_gc
from ..errors import function_label
from ..graph.scopes import may_hold_subgraphs, node_kinds, subgraphs
from ..modelio import ModelLike, to_proto
from ..rewriters import rules as _rules
from ..rewriters._report import Event, Recorder, recording


@dataclass
class Region:
    """One fusion as two small models (nodes before / after) for local verification."""

    label: str
    before: onnx.ModelProto
    after: onnx.ModelProto
    signed_zero_exact: bool = True  # compare the sign of zeros too


@dataclass
class FuseResult:
    """What :func:`fuse` did: fusions made and matches refused (with reasons)."""

    fused: list[Event] = field(default_factory=list)
    refused: list[Event] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)

    @property
    def modified(self) -> bool:
        return bool(self.fused)

    def summary(self) -> str:
        by_op: dict[str, int] = {}
        for e in self.fused:
            op = e.detail.split("(")[0]
            by_op[op] = by_op.get(op, 0) + 1
        parts = ", ".join(f"{k} x{v}" for k, v in sorted(by_op.items()))
        s = f"fused {len(self.fused)} pattern(s)" + (f" ({parts})" if parts else "")
        if self.refused:
            s += f"; refused {len(self.refused)} (-v for reasons)"
        return s

    def lines(self) -> list[str]:
        """One line per fusion and per refusal."""
        out = []
        for e in self.fused:
            out.append(f"fused   {_at(e)} -> {e.detail} [{e.rule}]")
        for e in self.refused:
            out.append(f"refused {_at(e)} [{e.rule}]: {e.detail}")
        return out

    def to_dict(self) -> dict[str, Any]:
        def ev(e: Event) -> dict[str, str]:
            return {"rule": e.rule, "graph": e.where, "node": e.node, "op": e.op}

        return {"fused": [{**ev(e), "produced": e.detail} for e in self.fused],
                "refused": [{**ev(e), "reason": e.detail} for e in self.refused]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)


def _at(e: Event) -> str:
    where = "" if not e.where else (f"{e.where} " if e.where.startswith("function ")
                                    else f"graph {e.where!r} ")
    return f"{where}node {e.node!r} ({e.op})"


# -- the core over onnx_ir ------------------------------------------------------------------


def _unused(nodes: list[ir.Node]) -> list[ir.Node]:
    """Of the constant producers (Constant / Cast / CastLike ...) the fusions may have left
    unused, those that are.

    ``nodes`` lists each chain outer node first (CastLike before its Constant), so one pass
    finds every node whose outputs are used only by nodes already found.
    """
    dead: dict[int, ir.Node] = {}
    for node in nodes:
        if id(node) in dead or node.graph is None:
            continue
        if all(not v.is_graph_output() and all(id(u) in dead for u, _ in v.uses())
               for v in node.outputs):
            dead[id(node)] = node
    return list(dead.values())


def _remove(nodes: list[ir.Node]) -> None:
    """Remove ``nodes`` from their graphs, one call per graph."""
    by_graph: dict[int, tuple[ir.Graph, list[ir.Node]]] = {}
    for node in nodes:
        by_graph.setdefault(id(node.graph), (node.graph, []))[1].append(node)
    for graph, group in by_graph.values():
        graph.remove(group, safe=True)


@functools.cache
def _rule_set(allow_rounding: bool):
    """:func:`opshift.rewriters.rules`, dispatched by the node's op type (same rewrites, in
    the same order). Built once per process: the rules keep no state between runs (a check's
    plan lives only until its rewrite; the recorder is per run)."""
    from onnxscript.rewriter import RewriteRuleSet

    from ..rewriters._report import ByRootOp

    return RewriteRuleSet([ByRootOp(_rules(allow_rounding=allow_rounding).rules)])


def _apply(model: ir.Model, rule) -> int:
    """Apply ``rule`` (the :class:`ByRootOp` of :func:`_rule_set`) to the main graph, its
    subgraphs and the model-local functions, as onnxscript's
    ``RewriteRuleSet.apply_to_model`` does -- the same matcher, checks and replacements, node
    order, rule-name tag and metadata merge -- without its model-wide side effects, which
    would make the output differ from the input outside the fused regions:

    * ``NameFixPass`` names every unnamed node and renames shared node names (here the
      fused node takes its anchor's name, its output the anchor's output's, and a new slope
      constant a fresh name from the rule);
    * constant propagation gives every Constant node's output a type and shape, which
      serialize as new value_info (the checks read Constant nodes' attributes themselves).
    Returns the number of rewrites."""
    functions = list(model.functions.values())  # not those a rewrite might add
    count = _apply_graph(model, model.graph, rule)
    for f in functions:
        count += _apply_graph(model, f, rule)
    return count


def _apply_graph(model: ir.Model, graph: ir.Graph | ir.Function, rule) -> int:
    from onnxscript.rewriter import RULE_NAME_TAG

    count = 0
    for node in graph:
        delta = rule.try_rewrite(model, graph, node)
        if delta is not None:
            assert not delta.new_initializers  # opshift's rewrites emit nodes only
            for n in delta.new_nodes:
                n.metadata_props[RULE_NAME_TAG] = rule.name
            ir.convenience.replace_nodes_and_values(graph, node, delta.match.nodes,
                                                    delta.new_nodes, delta.match.outputs,
                                                    delta.new_outputs)
            _metadata_merger().copy_merged_metadata(delta.match.nodes, delta.new_nodes)
            count += 1
        if may_hold_subgraphs(node.domain, node.op_type):  # (reading attributes costs)
            for g in _ir_subgraphs(node):
                count += _apply_graph(model, g, rule)
    return count


def _ir_subgraphs(node: ir.Node):
    """The graphs ``node`` holds, in attribute order (as
    :func:`opshift.graph.scopes.subgraphs` lists them for the NodeProto it was read from)."""
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            yield attr.value
        elif attr.type == ir.AttributeType.GRAPHS:
            yield from attr.value


@functools.cache
def _metadata_merger():
    """onnxscript's default merger: the matched nodes' metadata_props go to the new node,
    rule-name tags joined by commas."""
    from onnxscript.rewriter import RULE_NAME_TAG
    from onnxscript.utils import metadata_merger

    return metadata_merger.MetadataMerger({RULE_NAME_TAG: metadata_merger.comma_separator_merger})


def fuse_ir(model: ir.Model, *, allow_rounding: bool = False,
            capture_regions: bool = False, _unused_out: list | None = None) -> FuseResult:
    """Fuse in place in ``model`` (an ``onnx_ir.Model``); shapes are those ``model`` carries.

    (``_unused_out``: a list that receives the constant producers the fusions left unused,
    which then stay in ``model``: :func:`fuse_proto` leaves them out of the ModelProto it
    writes, so taking them out of the IR too would be work for nothing.)"""
    rec = Recorder(capture=capture_regions)
    for f in model.functions.values():
        name = function_label(f)
        rec.scope_labels[id(f.graph)] = name
        for g in f.graph.subgraphs():
            rec.scope_labels[id(g)] = f"{name}/{g.name or 'subgraph'}"
    rule_set = _rule_set(allow_rounding)
    with recording(rec):
        count = _apply(model, rule_set.rules[0])
    if count:
        unused = _unused(rec.cleanup)
        if _unused_out is None:
            _remove(unused)
        else:
            _unused_out.extend(unused)
    rec.finish()
    result = FuseResult(list(rec.fused), list(rec.refused))
    result.regions = [Region(*r) for r in rec.regions]
    return result


# -- the proto entry points -----------------------------------------------------------------


_CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})


def _graph_types(g: onnx.GraphProto, out: dict[str, onnx.TypeProto]) -> None:
    """Value name -> TypeProto for the typed values of ``g`` and its subgraphs."""
    for vis in (g.value_info, g.input, g.output):
        for vi in vis:
            out.setdefault(vi.name, vi.type)
    for n in g.node:
        if n.op_type in _CONTROL_FLOW or n.domain not in ("", "ai.onnx"):
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    _graph_types(a.g, out)
                for sg in a.graphs:
                    _graph_types(sg, out)


def _calls(g: onnx.GraphProto, key: tuple[str, str], out: list[onnx.NodeProto]) -> None:
    for n in g.node:
        if (n.domain, n.op_type) == key:
            out.append(n)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _calls(a.g, key, out)
            for sg in a.graphs:
                _calls(sg, key, out)


def function_types(model: onnx.ModelProto) -> dict[tuple[str, str], dict[str, onnx.TypeProto]]:
    """Types of the values inside each model-local function, inferred from its call sites
    in the (shape-inferred) ``model`` when they all agree on an input's type (else that
    input stays untyped), then propagated through the body by onnx shape inference."""
    known: dict[str, onnx.TypeProto] = {}
    _graph_types(model.graph, known)
    for t in model.graph.initializer:
        known.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    known = {k: v for k, v in known.items()
             if v.HasField("tensor_type") and v.tensor_type.elem_type}
    out: dict[tuple[str, str], dict[str, onnx.TypeProto]] = {}
    for f in model.functions:
        calls: list[onnx.NodeProto] = []
        _calls(model.graph, (f.domain, f.name), calls)
        if not calls:
            continue
        inputs = []
        for i, name in enumerate(f.input):
            ts = {known[c.input[i]].SerializeToString() for c in calls
                  if i < len(c.input) and c.input[i] in known}
            if len(ts) == 1 and all(i < len(c.input) and c.input[i] in known for c in calls):
                t = onnx.TypeProto()
                t.ParseFromString(ts.pop())
                inputs.append(onnx.helper.make_value_info(name, t))
            else:
                inputs.append(onnx.helper.make_value_info(name, onnx.TypeProto()))
        graph = onnx.helper.make_graph(list(f.node), "body", inputs,
                                       [onnx.helper.make_value_info(o, onnx.TypeProto())
                                        for o in f.output])
        imports = {i.domain: i.version for i in model.opset_import}
        imports.update({i.domain: i.version for i in f.opset_import})
        body = onnx.helper.make_model(
            graph, opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in imports.items()],
            functions=list(model.functions))
        body.ir_version = model.ir_version
        types: dict[str, onnx.TypeProto] = {}
        with contextlib.suppress(Exception):
            inferred = onnx.shape_inference.infer_shapes(body, strict_mode=False)
            _graph_types(inferred.graph, types)
        out[(f.domain, f.name)] = types
    return out


def _function_values(f: ir.Function) -> list[ir.Value]:
    return list(f.inputs) + [v for n in f for v in n.outputs]


def _annotate_functions(ir_model: ir.Model, types) -> set[int]:
    """Give function values the inferred types; returns the ids of the values that had a
    type before, so that :func:`_clear_function_types` can take the others away again."""
    typed: set[int] = set()
    for f in ir_model.functions.values():
        table = types.get((f.domain, f.name)) or {}
        for v in _function_values(f):
            if v.type is not None:
                typed.add(id(v))
                continue
            t = table.get(v.name or "")
            if t is not None:
                v.type = ir.serde.deserialize_type_proto_for_type(t)
                v.shape = ir.serde.deserialize_type_proto_for_shape(t)
    return typed


def _clear_function_types(ir_model: ir.Model, typed: set[int]) -> None:
    """Function bodies keep only the types they had (fused ops' outputs included)."""
    for f in ir_model.functions.values():
        for v in _function_values(f):
            if id(v) not in typed:
                v.type = None
                v.shape = None


def _function_graphs(ir_model: ir.Model) -> set[int]:
    """ids of the graphs of model-local functions (and of subgraphs inside them)."""
    out: set[int] = set()
    for f in ir_model.functions.values():
        out.add(id(f.graph))
        out.update(id(g) for g in f.graph.subgraphs())
    return out


def fuse_typed(ir_model: ir.Model, proto: onnx.ModelProto, *, allow_rounding: bool = False,
               capture_regions: bool = False, _unused_out: list | None = None) -> FuseResult:
    """:func:`fuse_ir` on ``ir_model`` with the types onnx shape inference finds for
    ``proto`` (the same model as a ModelProto): value types of the main graph and its
    subgraphs, and of function bodies from their call sites. Nothing inferred is written into
    ``ir_model``."""
    from ..rewriters._values import INFERRED_TYPES

    types: dict[str, onnx.TypeProto] = {}
    inferred = proto
    with contextlib.suppress(Exception):  # best effort: checks refuse what they cannot prove
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
        _graph_types(inferred.graph, types)
    typed = (_annotate_functions(ir_model, function_types(inferred))
             if proto.functions else None)
    token = INFERRED_TYPES.set((types, _function_graphs(ir_model)))
    try:
        return fuse_ir(ir_model, allow_rounding=allow_rounding,
                       capture_regions=capture_regions, _unused_out=_unused_out)
    finally:
        INFERRED_TYPES.reset(token)
        if typed is not None:
            _clear_function_types(ir_model, typed)


@functools.cache
def _rule_ops(allow_rounding: bool) -> tuple[frozenset[str], ...]:
    """For each rule, the op types every operand order of its pattern contains (a match
    needs nodes of all of them; comparison alternatives are not counted)."""
    from ..rewriters._report import skeleton_ops

    return tuple(skeleton_ops(rule) for rule in _rule_set(allow_rounding).rules[0].rules)


def _may_match(ops: set[str], allow_rounding: bool) -> bool:
    """Whether some rule's ops all occur among ``ops``, the model's op types of any domain
    (else no rule can match anywhere, so there is nothing to fuse and nothing to refuse, and
    the IR need not be built)."""
    return any(need <= ops for need in _rule_ops(allow_rounding))


def fuse_proto(model: onnx.ModelProto, *, allow_rounding: bool = False,
               capture_regions: bool = False, census: validate.Census | None = None
               ) -> tuple[onnx.ModelProto, FuseResult]:
    """Fuse ``model`` (not modified); returns the new ModelProto and the result.

    The result is a copy of ``model`` whose node lists are edited where something was fused:
    everything else -- the other nodes, initializers, value_info, metadata -- is the input's,
    byte for byte (value_info of values a fusion removed is dropped).
    ``census``: what :func:`opshift.validate.check` saw of this very ``model`` (its kinds of
    node), which spares a walk over the model's nodes.
    """
    with no_cyclic_gc():  # building the rules and the IR allocates much and frees little
        return _fuse_proto(model, allow_rounding, capture_regions,
                           census.kinds if census is not None else node_kinds(model))


def _fuse_proto(model: onnx.ModelProto, allow_rounding: bool, capture_regions: bool,
                kinds: set[tuple[str, str]]) -> tuple[onnx.ModelProto, FuseResult]:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if not _may_match({op for _, op in kinds}, allow_rounding):
        return out, FuseResult()  # no rule's ops are all present: nothing to fuse or refuse
    ir_model = ir.serde.deserialize_model(model)
    holders = any(may_hold_subgraphs(d, op) for d, op in kinds)
    scopes = _paired_scopes(ir_model, out, holders)
    unused: list[ir.Node] = []
    result = fuse_typed(ir_model, model, allow_rounding=allow_rounding,
                        capture_regions=capture_regions, _unused_out=unused)
    if result.modified:
        gone = set(map(id, unused))
        # subgraphs before the graphs holding them: rebuilding a node list copies its nodes,
        # subgraphs included, so a subgraph is edited while its owner is still in place
        for graph, proto, before in reversed(scopes):
            _write_back(graph, proto, before, gone)
    return out, result


def _paired_scopes(ir_model: ir.Model, proto: onnx.ModelProto, holders: bool
                   ) -> list[tuple[ir.Graph | ir.Function, Any, list[ir.Node]]]:
    """(IR graph or function, the GraphProto or FunctionProto it was read from, its nodes
    now) for the main graph, the functions and, if ``holders`` (some node may hold a
    subgraph), every subgraph: the IR keeps the proto's node order, node for node."""
    out: list = []

    def pair(graph, container) -> None:
        nodes = list(graph)
        out.append((graph, container, nodes))
        if not holders:
            return
        for node, p in zip(nodes, container.node):
            for sub, (_, sub_proto) in zip(_ir_subgraphs(node), subgraphs(p)):
                pair(sub, sub_proto)

    pair(ir_model.graph, proto.graph)
    for f, fp in zip(ir_model.functions.values(), proto.functions):
        pair(f, fp)
    return out


def _write_back(graph: ir.Graph | ir.Function, proto, before: list[ir.Node],
                gone: set[int]) -> None:
    """Edit ``proto``'s node list as fusion edited ``graph``, whose nodes were ``before``
    (``proto.node`` in the same order), less the nodes whose ids are in ``gone``: kept nodes
    stay the proto's own, new ones are serialized; value_info of values that are gone is
    dropped."""
    after = [n for n in graph if id(n) not in gone] if gone else list(graph)
    if len(after) == len(before) and all(a is b for a, b in zip(after, before)):
        return
    position = {id(n): i for i, n in enumerate(before)}  # ``before`` keeps the ids alive
    old = list(proto.node)
    new = []
    for n in after:
        i = position.get(id(n))
        new.append(old[i] if i is not None else ir.serde.serialize_node(n))
    first = next((k for k, (a, b) in enumerate(zip(new, old)) if a is not b),
                 min(len(new), len(old)))
    del proto.node[first:]
    proto.node.extend(new[first:])
    if not proto.value_info:
        return
    kept = set(map(id, after))
    dropped = {v.name for n in before if id(n) not in kept for v in n.outputs}
    dropped.difference_update(v.name for n in after if id(n) not in position
                              for v in n.outputs)  # a new node's output keeps its name
    infos = [vi for vi in proto.value_info if vi.name not in dropped]
    if len(infos) != len(proto.value_info):
        del proto.value_info[:]
        proto.value_info.extend(infos)


def fuse(model: ModelLike, *, allow_rounding: bool = False):
    """Fuse decomposed PRelu / LeakyRelu / Selu patterns back into single ops where exact.

    Accepts an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path; returns the same kind
    (a ModelProto for a path). The input is not modified. :func:`fuse_with_result` also
    returns what was fused and refused.
    """
    return fuse_with_result(model, allow_rounding=allow_rounding)[0]


def fuse_with_result(model: ModelLike, *, allow_rounding: bool = False,
                     capture_regions: bool = False) -> tuple[Any, FuseResult]:
    """:func:`fuse` and its :class:`FuseResult`."""
    proto, kind, _ = to_proto(model)
    out, result = fuse_proto(proto, allow_rounding=allow_rounding,
                             capture_regions=capture_regions)
    if kind == "ir":
        return ir.serde.deserialize_model(out), result
    return out, result


def verify_fuse(original: onnx.ModelProto, fused: onnx.ModelProto, result: FuseResult,
                *, seed: int = 0):
    """Check each fusion locally (the matched nodes against the new op, on the real shapes
    and constants, generated inputs with special values), then the whole model when the
    evaluator runs all of it. Signed zeros are compared except for the fusions whose
    pattern fixes the sign of zero differently (see ``opshift.rewriters._checks``).
    ``result`` must come from ``fuse_proto(..., capture_regions=True)``.
    Returns ``(VerifyReport, notes)``.
    """
    from ..errors import OpshiftError
    from ..verify import VerifyReport, evaluator_supports, verify, verify_rewrites

    report = VerifyReport(seed=seed)
    notes: list[str] = []
    for r in result.regions:
        try:
            report.merge(verify_rewrites([(r.label, r.before, r.after)], seed=seed,
                                         signed_zeros=r.signed_zero_exact))
        except OpshiftError as e:
            notes.append(f"{r.label}: not verified locally: {e}")
    missing = len(result.fused) - len(result.regions)
    if missing:
        notes.append(f"{missing} of {len(result.fused)} fusions not verified locally (no "
                     "type information for the region, e.g. inside a function)")
    why = evaluator_supports(original) or evaluator_supports(fused)
    if why is not None:
        notes.append(f"whole model: not verified: {why}")
    else:
        exact = all(r.signed_zero_exact for r in result.regions) and not missing
        try:
            report.merge(verify(original, fused, seed=seed, signed_zeros=exact))
        except OpshiftError as e:
            notes.append(f"whole model: not verified: {e}")
    return report, notes


class FusePass(ir_passes.InPlacePass):
    """``onnx_ir`` pass running the fusion rules in place; ``modified`` is True only if a
    pattern was fused. The checks need static types and shapes: with ``infer_shapes`` (the
    default) the pass serializes the model once and runs onnx shape inference on it, using
    the result without writing it into the model (see :func:`fuse_typed`); without, only the
    types the model carries are used. The last :class:`FuseResult` is :attr:`last_result`."""

    def __init__(self, *, allow_rounding: bool = False, infer_shapes: bool = True) -> None:
        super().__init__()
        self.allow_rounding = allow_rounding
        self.infer_shapes = infer_shapes
        self.last_result: FuseResult | None = None

    def call(self, model: ir.Model) -> ir_passes.PassResult:
        with no_cyclic_gc():
            return self._call(model)

    def _call(self, model: ir.Model) -> ir_passes.PassResult:
        if self.infer_shapes:
            proto = ir.serde.serialize_model(model)
            self.last_result = fuse_typed(model, proto, allow_rounding=self.allow_rounding)
        else:
            self.last_result = fuse_ir(model, allow_rounding=self.allow_rounding)
        return ir_passes.PassResult(model, self.last_result.modified)
