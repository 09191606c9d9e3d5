"""Folding before converting, where that is the only way.

A step that needs an input as a constant (Pad's pads below opset 11, Slice's starts and ends
below 10, Reshape's shape below 5, ...) refuses one a node computes. Where it depends on
constants alone (:mod:`opshift.graph.constant_values`), it is folded: the evaluator computes it
from those constants and it becomes an initializer of its graph, and the nodes that computed
it go where nothing else reads them (with the Constant nodes and initializers only they read).
Then the model is planned again. Only values a refused step needs are folded; the folded model
computes the same as the input, bit for bit.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain

import onnx

from opshift import opsets
from opshift.convert.result import Change
from opshift.errors import ConstantNeededError
from opshift.graph import constant_values as values
from opshift.graph.edit import remove_unused_constants, used_names
from opshift.graph.facts import Facts
from opshift.graph.scopes import Scope, iter_scopes, may_hold_subgraphs, splice, subgraphs


def would_fold(facts: Facts, scope: Scope, value: str) -> bool:
    """Whether :func:`fold` folds ``value`` (read by a node of ``scope``) when a step refuses
    it as not a constant: a step with another exact form for a computed value leaves a
    foldable one to the fold, whose result is simpler."""
    place = values.home(facts, scope, value)
    return place is not None and values.chain(facts, place, value) is not None


def fold(model: onnx.ModelProto, source: int, refused: list, planned: list
         ) -> tuple[onnx.ModelProto, list[Change]] | None:
    """A copy of ``model`` with each value a :class:`ConstantNeededError` of ``refused``
    ((node, name, scope label, version, error) tuples, as the planner collects them) names
    folded into an initializer where it is computed from constants alone; the folds as
    changes. None when none can be folded. ``planned``: the scopes of ``model`` the planner
    saw, which the errors name (its facts may hold constants of edits it did not make)."""
    facts = Facts(model, source)
    scopes_now = facts.scopes()
    at_planned = {id(s): k for k, s in enumerate(planned)}
    where = {id(s): k for k, s in enumerate(scopes_now)}
    positions: dict[int, dict[str, int]] = {}  # per scope: value -> its node's position
    plans: dict[tuple[int, str], tuple] = {}
    for _node, name, _label, _version, err in refused:
        if not isinstance(err, ConstantNeededError) or id(err.scope) not in at_planned:
            continue
        home = values.home(facts, scopes_now[at_planned[id(err.scope)]], err.value)
        key = (where[id(home)], err.value) if home is not None else None
        if key is None or key in plans:
            continue
        found = values.chain(facts, home, err.value)
        if found is None:
            continue
        index = positions.get(id(home))
        if index is None:
            index = positions[id(home)] = {o: i for i, n in enumerate(home.nodes)
                                           for o in n.output if o}
        at = sorted(index[next(o for o in n.output if o)] for n in found[0])
        value = values.evaluate(home.opsets, err.value, *found)
        if value is not None:
            plans[key] = (home, at, value, name, err)
    if not plans:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    scopes = list(iter_scopes(out))
    by_scope: dict[int, list] = {}
    for (k, v), plan in plans.items():
        by_scope.setdefault(k, []).append((v, plan[1], plan[2]))
    gone = {k: _replace(scopes[k], folds, positions[id(scopes_now[k])])
            for k, folds in by_scope.items()}
    changes = []
    for (k, v), (home, at, _, refused_name, err) in plans.items():
        made = home.nodes[positions[id(home)][v]]
        ops = ", ".join(dict.fromkeys(home.nodes[i].op_type for i in at))
        left = sum(i not in gone[k] for i in at)
        changes.append(Change(
            made.name or f"<{made.op_type}>", made.op_type, home.label,
            opsets.since_version(made.op_type, home.opset or source) or 0, None, "fold",
            f"folded {v!r}, computed from constants by {len(at)} node(s) ({ops}), into an "
            "initializer first" + (f" ({left} of them kept: other nodes read them)"
                                   if left else ""),
            f"node {refused_name!r}: {err.reason}; the value depends on constants only, "
            "through ops every runtime computes alike", into="initializer"))
    return out, changes


def _replace(scope: Scope, folds: list[tuple[str, list[int], onnx.TensorProto]],
             index: dict[str, int]) -> set[int]:
    """Each folded value an initializer of ``scope``'s graph, its node's output renamed; the
    nodes that computed them and that nothing reads any more removed, with the constants
    only they read and their value_info. Returns the positions of the nodes removed."""
    g, nodes = scope.graph, scope.nodes
    taken = set(index) | {t.name for t in g.initializer} | {v.name for v in g.input}
    for value, _, tensor in folds:
        made = nodes[index[value]]
        fresh, k = f"{value}/folded", 1
        while fresh in taken:
            fresh, k = f"{value}/folded_{k}", k + 1
        taken.add(fresh)
        made.output[list(made.output).index(value)] = fresh
        g.initializer.append(tensor)
    reads = Counter(chain.from_iterable(n.input for n in nodes))
    reads.update(o.name for o in g.output)
    for n in nodes:  # what subgraphs read of this graph's values (once each: enough)
        if may_hold_subgraphs(n.domain, n.op_type):
            for _, sg in subgraphs(n):
                reads.update(used_names(sg.node) | {o.name for o in sg.output})
    gone: dict[int, list] = {}
    for i in sorted(set(chain.from_iterable(at for _, at, _ in folds)), reverse=True):
        n = nodes[i]
        if all(not o or not reads[o] for o in n.output):
            gone[i] = []
            reads.subtract(n.input)
    dead = {o for i in gone for o in nodes[i].output}
    leaves = {x for i in gone for x in nodes[i].input} - dead
    splice(nodes, gone)
    keep = [vi for vi in g.value_info if vi.name not in dead]
    if len(keep) != len(g.value_info):
        del g.value_info[:]
        g.value_info.extend(keep)
    remove_unused_constants(scope, leaves)
    return set(gone)

