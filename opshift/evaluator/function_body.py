"""Op versions whose schema defines them by a function body run that body.

An op version whose schema carries a function body (``OpSchema.has_function``, or
``has_context_dependent_function`` for bodies built from the node's input types) means that
body: opshift's runtime runs it node by node, each inner node on its own kernel. The body is
the one onnx.defs gives for the newest body version at or below the node's opset (else the
oldest, which imports the later opset it is written in), expanded
for the node: its version's attribute defaults are written out, attributes referring to a
calling function's are bound, and context-dependent bodies are built for the node's input
types. An opshift kernel in the registry is kept only where it follows the body bit for bit,
but for two: PRelu, LeakyRelu and Selu on float16 and bfloat16 are computed in float32 and
rounded once, as runtimes compute them, where their bodies round after every step (see
:mod:`opshift.evaluator.ops.activations`); AffineGrid's body cannot run a batch of one (its
Squeeze drops the batch axis too), so its kernel computes the grid itself (see
:mod:`opshift.evaluator.ops.sampling`). A body computing a variance as ``mean(x^2) -
mean(x)^2`` (LayerNormalization, GroupNormalization, MeanVarianceNormalization) runs it in
two passes, ``mean((x - mean(x))^2)``: the same in real numbers, what runtimes compute and
what ``convert`` writes below those ops (:mod:`opshift.graph.variance`).
"""

from __future__ import annotations

from typing import Any

import onnx

from opshift import opsets
from opshift.evaluator.values import type_of
from opshift.graph.variance import two_pass_variance

SOURCE = "function body"


def has_body(domain: str, op: str, version: int) -> bool:
    """Whether the schema of ``op`` at ``version`` defines it by a function body."""
    return opsets.since_version(op, version, domain) == version \
        and opsets.has_function_body(op, version, domain)


def node_with_defaults(ctx) -> onnx.NodeProto:
    """``ctx.node`` with every default of its version written out and attributes that refer
    to the calling function's replaced by their values (dropped where the call does not set
    them, so the default applies)."""
    node = ctx.node
    out = onnx.NodeProto()
    out.CopyFrom(node)
    del out.attribute[:]
    for a in node.attribute:
        if not a.ref_attr_name:
            out.attribute.append(a)
        elif ctx.fattrs and a.ref_attr_name in ctx.fattrs:
            b = out.attribute.add()
            b.CopyFrom(ctx.fattrs[a.ref_attr_name])
            b.name = a.name
    present = {a.name for a in out.attribute}
    for name, a in opsets.schema(ctx.op, ctx.version, ctx.domain).attributes.items():
        if name not in present and a.default_value is not None and a.default_value.name:
            out.attribute.append(a.default_value)
    return out


def run(ctx, *inputs) -> list[Any]:
    """Run ``ctx.node`` through its version's function body with opshift's runtime."""
    node = node_with_defaults(ctx)
    try:
        f = opsets.function_body(ctx.op, ctx.opsets.get(ctx.domain, ctx.version), ctx.domain,
                                 node, [type_of(v) for v in inputs])
    except Exception as e:  # onnx.defs refuses to build the body for these inputs
        first = (str(e).strip().splitlines() or [""])[0]
        raise ctx.error(f"its function body cannot be built: {type(e).__name__}: {first}"
                        ) from e
    if f is None or not f.node:
        raise ctx.error("its function body cannot be built for these input types")
    # the variance in two passes, as convert writes the body and runtimes compute it (the
    # body's mean(x^2) - mean(x)^2 cancels in float32): see opshift.graph.variance
    names = iter(range(1 << 62))
    nodes, _ = two_pass_variance(list(f.node), lambda what: f"__opshift_{what}_{next(names)}",
                                 set(f.output))
    del f.node[:]
    f.node.extend(nodes)
    # a body built for the node computes only the outputs the node asks for
    asked = [i for i, name in enumerate(node.output) if name]
    outputs = [f.output[i] for i in asked]
    del f.output[:]
    f.output.extend(outputs)
    values = ctx.runtime.run_function(f, node, list(inputs), ctx.opsets, None)
    results: list[Any] = [None] * len(node.output)
    for i, v in zip(asked, values):
        results[i] = v
    return results
