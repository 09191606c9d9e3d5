"""A refusal known from the op list, made before planning the model.

Planning a large model (facts of every value, every node walked, fusing and folding tried
where something is refused, the model copied for them) costs time and memory in proportion
to its size; when the conversion is bound to be refused, that work is wasted. A node of the
main graph is refused whatever the rest of the model holds when its op does not exist at the
target and nothing can stand in for it:

* no replacement is registered for the op and its first version has no function body in
  onnx.defs (the only two ways :mod:`.walk` writes an op the target lacks);
* no step function is registered on the way down to that first version (one could write the
  node as other ops);
* the node reads a value computed from a graph input, so no fold replaces it by a constant
  (:mod:`.fold_first`), and it is not in a subgraph, which a taken branch could drop
  (:mod:`.taken_branch`);
* its op is none of those fuse's patterns hold (:data:`FUSABLE_OPS`), so no fusion takes it
  away (:mod:`.fuse_first`).

For the first such node (in graph order) that one node is walked as planning walks it,
and the :class:`~opshift.errors.MissingOpError` that gives is raised: the same error,
before any other node is planned. (Planning raises the first refusal in node order, which
may be an earlier node refused for another reason; the model is refused either way.)
"""

from __future__ import annotations

import onnx

from opshift import opsets
from opshift.convert.generic import versions_between
from opshift.convert.registry import replacement_for, steps_for
from opshift.convert.step import Context
from opshift.convert.walk import walk_node
from opshift.errors import ConversionError, MissingOpError
from opshift.graph.edit import Edits
from opshift.graph.facts import Facts

#: the op types fuse's patterns hold: its rules' ops and the comparisons they accept in
#: either form (tests/test_convert_early_refusal.py checks this against the rules)
FUSABLE_OPS = frozenset({
    "Add", "Cast", "Clip", "Elu", "Exp", "LeakyRelu", "Max", "Min", "Mul", "Neg", "PRelu",
    "Relu", "Selu", "Sub", "Where", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
})


def no_form_at(op: str, v_from: int, target: int) -> bool:
    """Whether ``op``-``v_from`` has no way to the ``target`` opset whatever its node: the op
    does not exist there, no replacement or step function is registered for it, and its
    first version has no function body."""
    if opsets.since_version(op, target) is not None or op in FUSABLE_OPS:
        return False
    if replacement_for(op) is not None:
        return False
    first = opsets.versions(op)[0]
    if any(steps_for(op, hi) for _, hi in versions_between(op, v_from, first)):
        return False
    return opsets.schema(op, first) is not None and not opsets.has_function_body(op, first)


def refuse_early(facts: Facts, target: int) -> None:
    """Raise the :class:`MissingOpError` planning would raise for the first node of the
    main graph of ``facts.model`` that is refused unconditionally (see the module); return
    when there is none. ``facts``: the model's, which planning reads next (its node kinds
    are listed once, for both)."""
    model, source = facts.model, facts.source
    graph = model.graph
    verdict: dict[tuple[str, int], bool] = {}
    for domain, op in facts.kinds():  # (most models hold none: no walk of their values)
        v_from = opsets.since_version(op, source) if domain in ("", "ai.onnx") else None
        if v_from is not None:
            verdict[(op, v_from)] = no_form_at(op, v_from, target)
    if not any(verdict.values()):
        return
    constant = {t.name for t in graph.initializer}
    computed = {i.name for i in graph.input if i.name not in constant}
    for i, n in enumerate(graph.node):
        if not any(x in computed for x in n.input):
            continue  # (a subgraph's reads are not followed: its node may stay foldable)
        computed.update(o for o in n.output if o)
        if n.domain not in ("", "ai.onnx"):
            continue
        v_from = opsets.since_version(n.op_type, source)
        if v_from is None:
            continue
        key = (n.op_type, v_from)
        if key not in verdict:
            verdict[key] = no_form_at(n.op_type, v_from, target)
        if verdict[key]:
            _walk_one(facts, target, i, n, v_from)


def _walk_one(planned: Facts, target: int, i: int, n: onnx.NodeProto, v_from: int) -> None:
    """Walk node ``i`` of the main graph alone, as planning does; raise its refusal. (On a
    Facts of its own: the walk's edits, written or not, leave their types and constants in
    the Facts it plans on, and ``planned`` is the one planning reads next.)"""
    model, source = planned.model, planned.source
    facts = Facts(model, source, index=planned.index)
    scope = facts.scopes()[0]  # the main graph's
    ctx = Context(model, target, facts, Edits(facts))
    name = n.name or f"<{n.op_type} #{i}>"
    try:
        walk_node(ctx, scope, i, n, source, v_from, None, name)
    except MissingOpError:
        raise
    except ConversionError:
        return  # refused otherwise: planning says how, in order
