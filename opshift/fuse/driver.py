"""``fuse``: decomposed PRelu / LeakyRelu / Selu patterns back into single ops, where exact.

The rules are :func:`opshift.fuse.rules.rules` (onnxscript pattern rules); this module runs them
over ``onnx_ir`` with onnxscript's matcher and replacement -- main graph, If/Loop/Scan
subgraphs and model-local functions -- and reports every fusion and every refusal with its
reason.

Output: :func:`fuse_proto` edits the node lists of a copy of the input ModelProto where
something was fused (the IR only finds and makes the fusions), so the result differs from the
input only in the fused regions: the new nodes, the matched nodes and the constants (Constant
nodes, initializers) left unused by them gone, and their value_info with them. Nothing else
is re-serialized.

Shapes: the checks need static shapes and element types, so :func:`fuse` runs onnx shape
inference on the side; nothing it infers is written into the result.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import onnx
import onnx_ir as ir

from opshift.fuse.engine import (
    FuseResult,
    Region,
    Unused,
    fuse_ir,
    fuse_typed,
    ir_subgraphs,
    may_match,
)
from opshift.graph.facts import Facts
from opshift.graph.scopes import arrange, may_hold_subgraphs, node_kinds, subgraphs
from opshift.io.models import ModelLike, has_external_data, to_proto
from opshift.io.tensors import read_through_opshift
from opshift.memory import no_cyclic_gc

__all__ = ["FuseResult", "Region", "fuse_ir", "fuse_proto", "fuse_typed", "fuse_with_result",
           "verify_fuse", "would_fuse"]


# -- the proto entry points -----------------------------------------------------------------


def fuse_proto(model: onnx.ModelProto, *, allow_rounding: bool = False,
               capture_regions: bool = False, facts: Facts | None = None,
               base_dir: str | os.PathLike | None = None,
               only: Sequence[tuple[onnx.NodeProto, object]] | None = None
               ) -> tuple[onnx.ModelProto, FuseResult]:
    """Fuse ``model`` (not modified); returns the new ModelProto and the result.

    The result is a copy of ``model`` whose node lists are edited where something was fused:
    everything else -- the other nodes, initializers, value_info, metadata -- is the input's,
    byte for byte (value_info of values a fusion removed is dropped).
    ``facts``: the :class:`~opshift.graph.facts.Facts` of this very ``model`` (its kinds of
    node, from the structural check's index when it has one, spare a walk over the model's
    nodes). ``base_dir``: the model's folder,
    for constants the checks read that are kept in external data. ``only``: (node of
    ``model``, tag) pairs; then only the regions holding one of these nodes are fused, and
    each fusion's ``Event.tags`` lists the tags of those it holds.
    """
    with no_cyclic_gc():  # building the rules and the IR allocates much and frees little
        return _fuse_proto(model, allow_rounding, capture_regions,
                           (facts if facts is not None else Facts(model)).kinds(),
                           base_dir, only)


def _fuse_proto(model: onnx.ModelProto, allow_rounding: bool, capture_regions: bool,
                kinds: set[tuple[str, str]], base_dir=None, only=None
                ) -> tuple[onnx.ModelProto, FuseResult]:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if not may_match({op for _, op in kinds}, allow_rounding):
        return out, FuseResult()  # no rule's ops are all present: nothing to fuse or refuse
    ir_model = ir.serde.deserialize_model(model)
    if has_external_data(model):
        read_through_opshift(ir_model, base_dir)
    holders = any(may_hold_subgraphs(d, op) for d, op in kinds)
    scopes = _paired_scopes(ir_model, out, holders)
    unused = Unused()
    result = fuse_typed(ir_model, model, allow_rounding=allow_rounding,
                        capture_regions=capture_regions, _unused_out=unused,
                        only=None if only is None else _ir_nodes(ir_model, model, only))
    if result.modified:
        gone = set(map(id, unused.nodes))
        # subgraphs before the graphs holding them: rebuilding a node list copies its nodes,
        # subgraphs included, so a subgraph is edited while its owner is still in place
        for graph, proto, before in reversed(scopes):
            _write_back(graph, proto, before, gone)
        _drop_initializers(scopes, unused.initializers)
    return out, result


#: How a refusal ends when ``allow_rounding`` would fuse the match (opshift.fuse.rules.base).
_ROUNDING_ONLY = "; not exact (allow_rounding=True fuses it anyway)"
_SIGN_ONLY = "; not exact in the sign of zero (allow_rounding=True fuses it anyway)"


def would_fuse(model: onnx.ModelProto, *, kinds: set[tuple[str, str]] | None = None,
               base_dir: str | os.PathLike | None = None) -> dict[str, list[dict[str, Any]]]:
    """What ``fuse`` would do to ``model`` (not modified), nothing written: ``patterns``, a
    dict per decomposed activation it fuses (``allow_rounding``: only with
    ``--allow-rounding``; ``why``: what differs then), and ``refused``, the other matches
    with the reason. ``kinds``: the model's (domain, op type) pairs, if known.

    The rules run on an ``onnx_ir`` copy only when the model's op types let some rule match;
    a second run, with ``allow_rounding``, only when the first refused a match for rounding
    or the sign of zero (it says what that fuses)."""
    kinds = node_kinds(model) if kinds is None else kinds
    ops = {op for _, op in kinds}
    from opshift.fuse.anchors import may_hold_patterns

    if not may_hold_patterns(ops) or not may_match(ops, True):
        return {"patterns": [], "refused": []}
    with no_cyclic_gc():
        exact = _dry_fuse(model, False, base_dir)
        why = {(e.where, e.node, e.rule): e.detail for e in exact.refused
               if e.detail.endswith((_ROUNDING_ONLY, _SIGN_ONLY))}
        loose = _dry_fuse(model, True, base_dir) if why else FuseResult()
    done = {(e.where, e.node) for e in exact.fused}
    patterns = [_pattern(e, None) for e in exact.fused]
    for e in loose.fused:
        if (e.where, e.node) in done:
            continue
        done.add((e.where, e.node))
        reason = next((r for (w, n, rule), r in why.items() if (w, n) == (e.where, e.node)
                       and rule in e.rule.split("+")), None) or next(
            (r for (_, _, rule), r in why.items() if rule in e.rule.split("+")),
            e.zero_sign or "it rounds otherwise than the op")
        patterns.append(_pattern(e, reason.removesuffix(_ROUNDING_ONLY)
                                 .removesuffix(_SIGN_ONLY)))
    refused, seen = [], set()
    # the second run's refusals, when it ran: a part of a match that fuses with rounding
    # (refused as a pattern of its own there) is no refusal of its own
    for e in (loose if why else exact).refused:
        key = (e.where, e.node, e.detail)
        if (e.where, e.node) in done or key in seen:
            continue
        seen.add(key)
        refused.append({"rule": e.rule, "graph": e.where, "node": e.node, "op": e.op,
                        "reason": e.detail})
    return {"patterns": patterns, "refused": refused}


def _dry_fuse(model: onnx.ModelProto, allow_rounding: bool, base_dir) -> FuseResult:
    ir_model = ir.serde.deserialize_model(model)
    if has_external_data(model):
        read_through_opshift(ir_model, base_dir)
    # (the unused constants are only collected, not removed: the IR is thrown away)
    return fuse_typed(ir_model, model, allow_rounding=allow_rounding, _unused_out=Unused())


def _pattern(e, why: str | None) -> dict[str, Any]:
    return {"rule": e.rule, "graph": e.where, "node": e.node, "op": e.op, "into": e.detail,
            "form": list(reversed(e.matched)), "allow_rounding": why is not None, "why": why,
            "zero_sign": e.zero_sign or None}


def _ir_nodes(ir_model: ir.Model, model: onnx.ModelProto,
              only: Sequence[tuple[onnx.NodeProto, object]]) -> dict[int, object]:
    """id(IR node) -> tag for the NodeProtos of ``model`` in ``only`` (the IR keeps the
    proto's node order, scope for scope)."""
    tags = {id(p): tag for p, tag in only}
    return {id(node): tags[id(p)] for _, proto, nodes in _paired_scopes(ir_model, model, True)
            for node, p in zip(nodes, proto.node) if id(p) in tags}


def _drop_initializers(scopes, dead: list[ir.Value]) -> None:
    """Remove the initializers ``dead`` (and their value_info) from the GraphProtos of
    ``scopes`` holding them."""
    names: dict[int, set[str]] = {}
    for v in dead:
        names.setdefault(id(v.graph), set()).add(v.name)
    for graph, proto, _ in scopes:
        drop = names.get(id(graph))
        if not drop or not isinstance(proto, onnx.GraphProto):
            continue
        for field in (proto.initializer, proto.value_info):
            kept = [t for t in field if t.name not in drop]
            if len(kept) != len(field):
                del field[:]
                field.extend(kept)


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
            for sub, (_, sub_proto) in zip(ir_subgraphs(node), subgraphs(p)):
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
    arrange(proto.node, new[first:], first)
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


def fuse_with_result(model: ModelLike, *, allow_rounding: bool = False,
                     capture_regions: bool = False) -> tuple[Any, FuseResult]:
    """:func:`fuse` and its :class:`FuseResult`."""
    proto, kind, base_dir = to_proto(model)
    out, result = fuse_proto(proto, allow_rounding=allow_rounding,
                             capture_regions=capture_regions, base_dir=base_dir)
    if kind == "ir":
        return ir.serde.deserialize_model(out), result
    return out, result


def verify_fuse(original: onnx.ModelProto, fused: onnx.ModelProto, result: FuseResult,
                *, seed: int = 0):
    """Check each fusion locally (the matched nodes against the new op, on the real shapes
    and constants, generated inputs with special values), then the whole model when the
    evaluator runs all of it. Signed zeros are compared except for the fusions whose
    pattern fixes the sign of zero differently (see ``opshift.fuse.rules.base.Rule``).
    ``result`` must come from ``fuse_proto(..., capture_regions=True)``.
    Returns ``(VerifyReport, notes)``.
    """
    from opshift.verify.rewritten import verify_rewritten
    from opshift.verify.verifier import Rewrite

    missing = len(result.fused) - len(result.regions)
    alone = [(f"{missing} of {len(result.fused)} fusions", "no type information for the "
              "region, e.g. inside a function")] if missing else []
    exact = all(r.signed_zero_exact for r in result.regions) and not missing
    report = verify_rewritten(original, fused, (Rewrite(r.label, r.before, r.after,
                                                        r.signed_zero_exact)
                                                for r in result.regions),
                              seed=seed, signed_zeros=exact, unchecked=alone)
    return report, []
