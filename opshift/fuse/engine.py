"""The core of ``fuse`` over ``onnx_ir``: the rules of :func:`opshift.fuse.rules.rules` run with
onnxscript's matcher and replacement over the main graph, If/Loop/Scan subgraphs and
model-local functions, every fusion and refusal recorded with its reason
(:class:`FuseResult`)."""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx_ir as ir

from opshift import progress
from opshift.errors import function_label
from opshift.fuse.report import Event, Recorder
from opshift.fuse.rules import rules as _rules
from opshift.fuse.types import (
    annotate_functions,
    clear_function_types,
    function_graphs,
    function_types,
    graph_types,
)
from opshift.fuse.values import InferredTypes
from opshift.graph.scopes import may_hold_subgraphs


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
        return {"fused": [{**_ev(e), "produced": e.detail} for e in self.fused],
                "refused": self.refused_dicts()}

    def refused_dicts(self) -> list[dict[str, str]]:
        """``to_dict()["refused"]``, without the fused list."""
        return [{**_ev(e), "reason": e.detail} for e in self.refused]

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)


def _ev(e: Event) -> dict[str, str]:
    return {"rule": e.rule, "graph": e.where, "node": e.node, "op": e.op}


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


def _rule_set(allow_rounding: bool, recorder: Recorder | None = None,
              inferred: InferredTypes | None = None):
    """:func:`opshift.fuse.rules.rules` of one run (recording into ``recorder``, reading the
    ``inferred`` types), dispatched by the node's op type (same rewrites, in the same
    order). Cheap to make: the rules' patterns are traced once per process."""
    from onnxscript.rewriter import RewriteRuleSet

    from opshift.fuse.report import ByRootOp

    return RewriteRuleSet([ByRootOp(_rules(allow_rounding=allow_rounding, recorder=recorder,
                                           inferred=inferred).rules)])


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
    Returns the number of rewrites. The progress line counts the nodes of the main graph and
    of the functions (a node holding subgraphs counts once)."""
    functions = list(model.functions.values())  # not those a rewrite might add
    with progress.stage("fuse", len(model.graph) + sum(len(f) for f in functions), "nodes"):
        count = _apply_graph(model, model.graph, rule, top=True)
        for f in functions:
            count += _apply_graph(model, f, rule, top=True)
    return count


def _apply_graph(model: ir.Model, graph: ir.Graph | ir.Function, rule, *,
                 top: bool = False) -> int:
    from onnxscript.rewriter import RULE_NAME_TAG

    count = 0
    for node in graph:
        if top:
            progress.advance()
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
            for g in ir_subgraphs(node):
                count += _apply_graph(model, g, rule)
    return count


def ir_subgraphs(node: ir.Node):
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


@dataclass
class Unused:
    """What the fusions left unused: constant producers (Constant / Cast / CastLike ...) and
    initializers that only the fused nodes read."""

    nodes: list[ir.Node] = field(default_factory=list)
    initializers: list[ir.Value] = field(default_factory=list)


def _dead_initializers(values: list[ir.Value], unused: list[ir.Node]) -> list[ir.Value]:
    """Of ``values`` (initializers the fused nodes read), those no node reads any more but
    the ``unused`` ones, and that are no graph input (a default a caller may feed) or
    output."""
    gone = set(map(id, unused))
    dead: dict[int, ir.Value] = {}
    for v in values:
        if id(v) in dead or v.graph is None or v.is_graph_input() or v.is_graph_output():
            continue
        if all(id(u) in gone for u, _ in v.uses()):
            dead[id(v)] = v
    return list(dead.values())


def fuse_ir(model: ir.Model, *, allow_rounding: bool = False,
            capture_regions: bool = False, only: dict[int, object] | None = None,
            inferred: InferredTypes | None = None,
            _unused_out: Unused | None = None) -> FuseResult:
    """Fuse in place in ``model`` (an ``onnx_ir.Model``); types and shapes are those ``model``
    carries, completed by ``inferred`` (what onnx shape inference found, see
    :func:`fuse_typed`).
    Constant producers and initializers the fusions left unused are removed. ``only``:
    id(node) -> tag; then only the matches holding one of these nodes are fused (each
    fusion's ``Event.tags`` lists theirs).

    (``_unused_out``: receives them instead, and they stay in ``model``: :func:`fuse_proto`
    leaves them out of the ModelProto it writes, so taking them out of the IR too would be
    work for nothing.)"""
    rec = Recorder(capture=capture_regions, only=only)
    for f in model.functions.values():
        name = function_label(f)
        rec.scope_labels[id(f.graph)] = name
        for g in f.graph.subgraphs():
            rec.scope_labels[id(g)] = f"{name}/{g.name or 'subgraph'}"
    rule_set = _rule_set(allow_rounding, rec, inferred)
    count = _apply(model, rule_set.rules[0])
    if count:
        unused = _unused(rec.cleanup)
        dead = _dead_initializers(rec.initializers, unused)
        if _unused_out is None:
            _remove(unused)
            for v in dead:
                v.graph.initializers.pop(v.name)
        else:
            _unused_out.nodes.extend(unused)
            _unused_out.initializers.extend(dead)
    rec.finish()
    result = FuseResult(list(rec.fused), list(rec.refused))
    result.regions = [Region(*r) for r in rec.regions if r is not None]
    return result


def fuse_typed(ir_model: ir.Model, proto: onnx.ModelProto, *, allow_rounding: bool = False,
               capture_regions: bool = False, only: dict[int, object] | None = None,
               _unused_out: Unused | None = None) -> FuseResult:
    """:func:`fuse_ir` on ``ir_model`` with the types onnx shape inference finds for
    ``proto`` (the same model as a ModelProto): value types of the main graph and its
    subgraphs, and of function bodies from their call sites; shapes of the main graph and
    its subgraphs from :class:`~opshift.graph.facts.Facts` (inference completed by each op's
    rules). Nothing inferred is written into ``ir_model``."""
    from opshift.graph.facts import Facts

    types: dict[str, onnx.TypeProto] = {}
    inferred = proto
    with contextlib.suppress(Exception):  # best effort: checks refuse what they cannot prove
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False)
        graph_types(inferred.graph, types)
    typed = (annotate_functions(ir_model, function_types(inferred))
             if proto.functions else None)
    facts = Facts(proto, inferred=inferred)
    found = InferredTypes(types, function_graphs(ir_model), facts.shape)
    try:
        return fuse_ir(ir_model, allow_rounding=allow_rounding,
                       capture_regions=capture_regions, only=only, inferred=found,
                       _unused_out=_unused_out)
    finally:
        if typed is not None:
            clear_function_types(ir_model, typed)


@functools.cache
def rule_ops(allow_rounding: bool) -> tuple[frozenset[str], ...]:
    """For each rule, the op types every operand order of its pattern contains (a match
    needs nodes of all of them; comparison alternatives are not counted)."""
    from opshift.fuse.report import skeleton_ops

    return tuple(skeleton_ops(rule) for rule in _rule_set(allow_rounding).rules[0].rules)


def may_match(ops: set[str], allow_rounding: bool) -> bool:
    """Whether some rule's ops all occur among ``ops``, the model's op types of any domain
    (else no rule can match anywhere, so there is nothing to fuse and nothing to refuse, and
    the IR need not be built)."""
    return any(need <= ops for need in rule_ops(allow_rounding))
