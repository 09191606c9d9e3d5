"""One node walked from its schema version to the target's, one version step at a time.

At each step the functions registered for it (:mod:`.registry`) run, then the schema check
(:mod:`.generic`); a finisher set by a step runs once the node reached the target's version.
An op that does not exist at the target is walked down to its first version and then
replaced (a registered replacement, else its own onnx function body).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import onnx

from opshift import opsets
from opshift.convert.generic import SchemaStep, schema_step, versions_between
from opshift.convert.registry import Registered, replacement_for, steps_for
from opshift.convert.result import versions
from opshift.convert.step import Context, NodeState, NotConstant, Refuse, Step
from opshift.errors import BranchNeededError, ConstantNeededError, ConversionError, MissingOpError
from opshift.graph.facts import Facts
from opshift.graph.scopes import Scope


@dataclass(frozen=True)
class Walk:
    """The steps of ``op`` from ``v_from`` to ``v_to`` (None: the op does not exist at the
    target), each with the registered functions that can act on this model."""

    op: str
    v_from: int | None  # None: the op does not exist at the source (refused when walked)
    v_to: int | None
    steps: tuple[tuple[int, int, tuple[Registered, ...], SchemaStep], ...]

    @cached_property
    def walk_to(self) -> int:
        """The version the steps end at: the target's, else the op's first."""
        return self.v_to if self.v_to is not None else opsets.versions(self.op)[0]

    @cached_property
    def up(self) -> bool:
        return self.v_from is not None and self.v_from < self.walk_to

    def inert(self, facts: Facts) -> bool:
        """No node of this op can change beyond its version number."""
        return self.v_from is not None and self.v_to is not None and all(
            not fns and schema.inert(facts) for _, _, fns, schema in self.steps)


def walk_for(facts: Facts, op: str, v_from: int, v_to: int | None) -> Walk:
    walk_to = v_to if v_to is not None else opsets.versions(op)[0]
    up = v_from < walk_to
    steps = []
    for lo, hi in versions_between(op, v_from, walk_to):
        fns = tuple(r for r in steps_for(op, hi) if r.may_act(op, lo, hi, up, facts))
        src, dst = (lo, hi) if up else (hi, lo)
        steps.append((lo, hi, fns, schema_step(op, src, dst)))
    return Walk(op, v_from, v_to, tuple(steps))


def walk_node(ctx: Context, sc: Scope, i: int, n: onnx.NodeProto, src: int,
              v_from: int | None, v_to: int | None, name: str, *, depth: int = 0,
              walk: Walk | None = None) -> tuple[list[onnx.NodeProto] | None, NodeState]:
    """Walk one node from ``v_from`` to ``v_to``; its replacement (None: the node stays as it
    is) and its plan. Raises :class:`ConversionError` naming node, versions and scope."""
    op = n.op_type
    if v_from is None:
        raise ConversionError(f"{_loc(n, name, v_from, v_to, sc, ctx.target)}: {op} does "
                              f"not exist at opset {src}")
    if walk is None:
        walk = walk_for(ctx.facts, op, v_from, v_to)
    up = walk.up
    state = NodeState()
    for lo, hi, fns, schema in walk.steps:
        if state.removed:
            break
        if not fns and schema.passes(state.work or n):
            continue  # the schema check would leave the node as it is
        st = Step(n, op, lo, hi, up, ctx, sc, i, state)
        try:
            for r in fns:
                r.fn(st)
            if not state.removed and not schema.passes(state.work or n):
                schema.check(st)  # (passes: the check would leave the node as it is)
        except Refuse as e:
            why = f"step {op}-{st.src} -> {op}-{st.dst}: no exact adapter: {e}"
            msg = f"{_loc(n, name, v_from, v_to, sc, ctx.target)}: {why}"
            if isinstance(e, NotConstant):
                raise ConstantNeededError(msg, e.value, sc, why) from None
            if op == "If":  # (the branch its condition takes may convert: .taken_branch)
                raise BranchNeededError(msg, sc) from None
            raise ConversionError(msg) from None
    if (state.finisher is None or state.removed) and (v_to is not None or state.removed):
        return _result(n, state), state
    loc = _loc(n, name, v_from, v_to, sc, ctx.target)
    walk_to = walk.walk_to
    end = Step(n, op, walk_to, walk_to, False, ctx, sc, i, state)
    if state.finisher is not None and not state.removed:
        try:
            state.finisher(end)
        except Refuse as e:
            raise ConversionError(f"{loc}: at {op}-{walk_to}: {e}") from None
    if v_to is None and not state.removed:
        replace = replacement_for(op)
        try:
            if replace is not None:
                replace(end)
            else:
                from opshift.convert.steps.missing_ops import write_function_body

                write_function_body(end, src, depth)
        except Refuse as e:
            why = f"{op} does not exist at opset {ctx.target} and no exact decomposition " \
                  f"applies: {e}"
            raise MissingOpError(f"{loc}: {why}", why) from None
    return _result(n, state), state


def walk_on(st: Step, nodes: list[onnx.NodeProto], opset: int, what: str, depth: int = 0
            ) -> list[onnx.NodeProto]:
    """``nodes``, written at ``opset`` in place of ``st``'s node, each converted on to the
    target as any node is, their planned edits joined to the node's; a refusal says they are
    ``what`` (e.g. "its function body (opset 18)")."""
    out: list[onnx.NodeProto] = []
    for b in nodes:
        bf = opsets.since_version(b.op_type, opset)
        bt = opsets.since_version(b.op_type, st.target)
        if bf == bt:
            out.append(b)
            continue
        try:
            new, inner = walk_node(st.ctx, st.scope, st.index, b, opset, bf, bt,
                                   b.name or st.label, depth=depth + 1)
        except ConversionError as e:
            raise Refuse(f"{what}: {e}") from None
        st.state.pending.absorb(inner.pending)
        out.extend(new if new is not None else [b])
    return out


def _loc(n: onnx.NodeProto, name: str, v_from: int | None, v_to: int | None, sc: Scope,
         target: int) -> str:
    """Where a refusal is: node, versions, scope (made only for a refusal)."""
    return f"node {name!r} ({versions(n.op_type, v_from, v_to, target)}, {sc.label})"


def _result(n: onnx.NodeProto, state: NodeState) -> list[onnx.NodeProto] | None:
    """The nodes replacing ``n`` after its walk, None when it stays as it is."""
    if state.removed:
        return [*state.pre, *state.post]
    if state.work is not None or state.pre or state.post:
        node = state.work
        if node is None:  # the original stays in place: a copy, since the list is rebuilt
            node = onnx.NodeProto()
            node.CopyFrom(n)
        return [*state.pre, node, *state.post]
    return None
