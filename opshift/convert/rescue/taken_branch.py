"""An If replaced by the branch its condition takes, before converting, where that is the only
way.

Before If-11 both branches of an If must give each output in one shape. PyTorch writes
``if x.shape[-1] == 1: x = x.squeeze(-1)`` as an If whose branches differ in rank, which no
older opset holds (an If can be refused for what its branches give in other ways too). Where
the condition of a refused If depends on constants and on shapes the model fixes (its inputs'
declared dims, ``--input-shape``'s, through the shape rules), it is computed as
:mod:`opshift.graph.constant_values` computes such values, and the If is replaced by the
branch it takes: the branch's nodes in the If's place, every value they define renamed to a
name no other graph uses, the first to give each output giving it under the If's name
(Identity where none can), its initializers and value_info moved along. The model computes
what the input does for inputs of those shapes. Then the model is planned again.
"""

from __future__ import annotations

import numpy as np
import onnx

from opshift.convert.result import Change
from opshift.errors import BranchNeededError
from opshift.graph import constant_values as values
from opshift.graph.facts import Facts
from opshift.graph.names import Names
from opshift.graph.scopes import Scope, iter_scopes, splice, subgraphs
from opshift.io.tensors import tensor_array


def take_branches(model: onnx.ModelProto, source: int, refused: list, planned: list
                  ) -> tuple[onnx.ModelProto, list[Change]] | None:
    """A copy of ``model`` with the Ifs of ``refused`` ((node, name, scope label, version,
    error) tuples, as the planner collects them) refused with a :class:`BranchNeededError`
    whose condition is known replaced by the branch each takes; the changes. None when no
    such condition is known. ``planned``: the scopes of ``model`` the planner saw, which the
    errors name. The Ifs of one scope at a time (the first such If's): an If taken may hold
    others, which the next planning refuses again."""
    facts = Facts(model, source)
    scopes_now = facts.scopes()
    at_planned = {id(s): k for k, s in enumerate(planned)}
    where, taken = None, {}
    for node, name, label, version, err in refused:
        k = at_planned.get(id(err.scope)) if isinstance(err, BranchNeededError) else None
        if k is None or where not in (None, k) or scopes_now[k].graph is None:
            continue
        branch = _condition(facts, scopes_now[k], node.input[0])
        at = None if branch is None else next(
            (i for i, n in enumerate(scopes_now[k].nodes) if n == node), None)
        if at is not None:
            where, taken[at] = k, (branch, Change(
                name, "If", label, version, None, "take_branch",
                f"replaced by its {'then' if branch else 'else'} branch: its condition "
                f"{node.input[0]!r} is {branch}, computed from constants and shapes the model "
                "fixes", f"node {name!r}: {err}; the branch taken depends on shapes only",
                into=f"its {'then' if branch else 'else'} branch"))
    if where is None:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    home, names = list(iter_scopes(out))[where], Names(out)
    made = {}
    for at, (branch, _) in taken.items():
        g = dict(subgraphs(home.nodes[at]))["then_branch" if branch else "else_branch"]
        made[at] = _branch_nodes(home.nodes[at], g, home.graph, names)
    splice(home.nodes, made)
    return out, [change for _, (_, change) in sorted(taken.items())]


def _condition(facts: Facts, scope: Scope, cond: str) -> bool | None:
    """The value of If condition ``cond`` when constants and fixed shapes decide it."""
    c = facts.constant(scope, cond)
    if c is not None:
        t = None if c.tensor.data_location == onnx.TensorProto.EXTERNAL else c.tensor
    else:
        home = values.home(facts, scope, cond)
        t = values.evaluated(facts, home, cond, shapes=True) if home is not None else None
    value = None if t is None else tensor_array(t)
    if value is None or value.size != 1 or value.dtype != np.bool_:  # (If's cond is a bool)
        return None
    return bool(value.reshape(-1)[0])


def _branch_nodes(node: onnx.NodeProto, branch: onnx.GraphProto, graph: onnx.GraphProto,
                  names: Names) -> list[onnx.NodeProto]:
    """``branch``'s nodes as nodes of ``graph`` in place of If ``node``: values renamed
    apart, outputs given the If's names; its initializers and value_info moved to ``graph``."""
    rename: dict[str, str] = {}
    for t in branch.initializer:
        rename[t.name] = names.fresh(t.name)
    made_here = {o for n in branch.node for o in n.output if o}
    given: set[str] = set()
    for b, y in zip((o.name for o in branch.output), node.output):
        if y and b in made_here and b not in given:  # the node making it gives the If's
            rename[b] = y
            given.add(b)
    for n in branch.node:
        for o in n.output:
            if o and o not in rename:
                rename[o] = names.fresh(o)
    for t in branch.initializer:
        graph.initializer.append(t)
        graph.initializer[-1].name = rename[t.name]
    for vi in branch.value_info:
        if vi.name in rename and rename[vi.name] not in node.output:
            graph.value_info.append(vi)
            graph.value_info[-1].name = rename[vi.name]
    out = []
    for n in branch.node:
        m = onnx.NodeProto()
        m.CopyFrom(n)
        _renamed(m, rename)
        out.append(m)
    for b, y in zip((o.name for o in branch.output), node.output):
        if y and rename.get(b) != y:
            out.append(onnx.helper.make_node("Identity", [rename.get(b, b)], [y],
                                             name=names.fresh(f"{node.name or 'If'}/{y}")))
    return out


def _renamed(n: onnx.NodeProto, rename: dict[str, str]) -> None:
    """Node ``n`` with its inputs and outputs renamed by ``rename``, and the outer-scope
    names its subgraphs read (names are unique: none of them defines one of these)."""
    n.input[:] = [rename.get(x, x) for x in n.input]
    n.output[:] = [rename.get(x, x) for x in n.output]
    for _, g in subgraphs(n):
        for m in g.node:
            _renamed(m, rename)
        for vi in g.output:
            vi.name = rename.get(vi.name, vi.name)
