"""Nodes of other domains whose meaning is a function body in ai.onnx ops.

convert keeps nodes outside the default domain as they are. Some of their ops are defined by a
schema function body (ai.onnx.preview's FlexAttention, for one) that uses ai.onnx ops without
importing ai.onnx: the body runs at the model's ai.onnx opset. Going down, a body whose nodes
do not exist at the target, or use attributes their version there does not have (Shape's
``start`` below 15), would leave the node without meaning: refused, naming the body's node.
"""

from __future__ import annotations

import onnx

from opshift import opsets
from opshift.graph.scopes import subgraphs


def body_refusal(node: onnx.NodeProto, opset: int, types: list[onnx.TypeProto],
                 target: int) -> str | None:
    """Why ``node`` (its domain at ``opset``; ``types``: its inputs') has no meaning at
    default-domain opset ``target``, or None (no such body, or it fits)."""
    try:
        body = opsets.function_body(node.op_type, opset, node.domain, node, types)
    except Exception:  # onnx.defs cannot build it (input types unknown): nothing to check
        return None
    if body is None or any(opsets.normalize_domain(i.domain) == "" for i in body.opset_import):
        return None  # no body, or one that names the ai.onnx opset it is written for
    return _misfit(body.node, target)


def _misfit(nodes, target: int) -> str | None:
    for n in nodes:
        if opsets.normalize_domain(n.domain) == "":
            s = opsets.schema(n.op_type, target, "")
            if s is None:
                return f"its function body uses {n.op_type}, which does not exist at opset " \
                       f"{target}"
            extra = [a.name for a in n.attribute if a.name not in s.attributes]
            if extra:
                return (f"its function body uses {n.op_type}'s {extra[0]!r}, which "
                        f"{n.op_type}-{s.since_version} (in force at opset {target}) does not "
                        "have")
        for _, g in subgraphs(n):
            why = _misfit(g.node, target)
            if why:
                return why
    return None
