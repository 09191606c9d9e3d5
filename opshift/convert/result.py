"""What a conversion did: one :class:`Change` per node whose version changed, with, when
recorded, models of the rewrite alone for local verification."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import TensorProto

from opshift import opsets
from opshift.graph.facts import Facts
from opshift.graph.scopes import Scope

#: what a relabel (a node the schemas say is unaffected) says
RELABEL = "the schemas differ only in what this node does not use"


@dataclass(slots=True)
class Change:
    """One node whose version changed: ``action`` 'relabel' (the node is unchanged) or
    'rewrite'; what was done and why (``region`` only when recorded)."""

    node: str
    op: str
    scope: str
    from_version: int
    to_version: int | None  # None: the op does not exist at the target (replaced)
    action: str
    what: str
    why: str
    #: (before, after): models of just this rewrite (see :func:`record_region`)
    region: tuple[onnx.ModelProto, onnx.ModelProto] | None = field(default=None, repr=False)
    #: what the node became when it is no longer its op (see :func:`replacement`), e.g.
    #: 'Upsample-9', 'initializer'; None when it is still its op
    into: str | None = None

    @property
    def label(self) -> str:
        """``op-from->to``, e.g. ``PRelu-6->16``; ``op-from -> into`` for a node that
        became something else, e.g. ``Resize-11 -> Upsample-9``."""
        if self.into is not None or self.to_version is None:
            return f"{self.op}-{self.from_version} -> {self.into or 'removed'}"
        return f"{self.op}-{self.from_version}->{self.to_version}"

    def region_models(self) -> tuple[onnx.ModelProto, onnx.ModelProto] | None:
        """(before, after) models of just this rewrite, or None if it was not recorded."""
        return self.region

    def to_dict(self) -> dict[str, Any]:
        d = {"node": self.node, "op": self.label, "scope": self.scope, "what": self.what,
             "why": self.why}
        if self.action in ("fuse", "fold", "take_branch"):  # before converting: .fuse_first
            d["kind"] = self.action
        return d


#: ops that pass their first input on (as another type or shape): what replaced a node is
#: the op behind them
_PASSING_ON = frozenset({"Cast", "CastLike", "Identity", "Reshape", "Squeeze", "Unsqueeze",
                         "Flatten"})


def replacement(node: onnx.NodeProto, new: list[onnx.NodeProto], target: int) -> str:
    """What replaced ``node`` by ``new`` at opset ``target``, for a change's label: the op
    computing its first output (behind casts and reshapes), with its version, and how many
    other nodes it took, e.g. 'Upsample-9', 'Loop-1 + 15 nodes'; 'removed' when none of
    ``new`` computes it."""
    made = {o: b for b in new for o in b.output if o}
    b = made.get(node.output[0]) if node.output else None
    for _ in range(len(new)):  # (bounded: never a cycle in a plan, but cheap to be sure)
        if b is None or b.op_type not in _PASSING_ON or not b.input or b.input[0] not in made:
            break
        b = made[b.input[0]]
    if b is None:
        return "removed"
    v = opsets.since_version(b.op_type, target) if b.domain in ("", "ai.onnx") else None
    text = b.op_type if v is None else f"{b.op_type}-{v}"
    return text + (f" + {len(new) - 1} nodes" if len(new) > 2 else
                   " + 1 node" if len(new) == 2 else "")


def versions(op: str, v_from: int | None, v_to: int | None, target: int) -> str:
    """``Resize-11 -> 10`` for a refusal's location; ``Resize-11 -> opset 9`` when the op
    does not exist at the target."""
    start = op if v_from is None else f"{op}-{v_from}"  # (None: not at the source either)
    return f"{start} -> {v_to if v_to is not None else f'opset {target}'}"


def relabel(node: str, op: str, scope: str, v_from: int, v_to: int) -> Change:
    return Change(node, op, scope, v_from, v_to, "relabel", "relabel", RELABEL)


@dataclass(frozen=True)
class Relabels:
    """Every default-domain node of ``scope`` whose op is in ``walks`` is only relabelled
    (listed when asked for: a big model has one per node)."""

    scope: Scope
    walks: dict  # op -> Walk

    @property
    def count(self) -> int:
        """How many nodes that is, from the scope's node counts (no pass over its nodes)."""
        return sum(k for (op, dom), k in self.scope.counts.items()
                   if op in self.walks and dom in ("", "ai.onnx"))

    def entries(self) -> list[tuple]:
        sc, walks = self.scope, self.walks
        out = []
        for i, n in enumerate(sc.nodes):
            w = walks.get(n.op_type)
            if w is not None and n.domain in ("", "ai.onnx"):
                out.append((n.name or f"<{n.op_type} #{i}>", n.op_type, sc.label, w.v_from,
                            w.v_to))
        return out


def all_changes(entries: list) -> list[Change]:
    """Planner entries as Changes: relabels are kept as (node, op, scope, from, to) tuples
    or :class:`Relabels` until asked for."""
    out = []
    for e in entries:
        if isinstance(e, Change):
            out.append(e)
        elif isinstance(e, Relabels):
            out.extend(relabel(*t) for t in e.entries())
        else:
            out.append(relabel(*e))
    return out


@dataclass
class ConvertResult:
    """What :func:`~opshift.convert.engine.convert_proto` did: opsets, IR versions, one
    :class:`Change` per node the conversion rewrote or noted something about, and how many
    nodes were only relabelled (the schemas differ in nothing they use)."""

    source_opset: int
    target_opset: int
    ir_version: tuple[int, int] = (0, 0)
    #: Changes in node order, and relabels as (node, op, scope, from, to) tuples
    entries: list = field(default_factory=list, repr=False)
    #: the regions fused before converting (:mod:`.fuse_first`), when recorded
    fused_regions: list = field(default_factory=list, repr=False)
    #: what the conversion did to the model as a whole, one line each (annotations the
    #: written IR version does not define, dropped)
    notes: list[str] = field(default_factory=list)

    @property
    def changes(self) -> list[Change]:
        return [e for e in self.entries if isinstance(e, Change)]

    @property
    def relabelled(self) -> int:
        return sum(0 if isinstance(e, Change) else e.count if isinstance(e, Relabels) else 1
                   for e in self.entries)

    @property
    def modified(self) -> bool:
        return (self.source_opset != self.target_opset or bool(self.entries)
                or self.ir_version[0] != self.ir_version[1])

    def to_dict(self) -> dict[str, Any]:
        return {"source_opset": self.source_opset, "target_opset": self.target_opset,
                "ir_version": list(self.ir_version),
                "changes": [c.to_dict() for c in self.changes], "relabelled": self.relabelled,
                **({"notes": self.notes} if self.notes else {})}


_REGION_EXTERNAL_LIMIT = 64 << 20


def record_region(facts: Facts, scope: Scope, node: onnx.NodeProto,
                  after: list[onnx.NodeProto], dims: dict[int, tuple], target: int,
                  base_dir) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """Models of ``node`` (of ``scope``) before and after it is rewritten into ``after``
    (copies: the plan goes on to edit the model), with the constants they read; ``dims``:
    id(tensor) -> the shape the plan gives it in place."""
    # (the verify package is imported here: only --verify records regions)
    from opshift.verify.region import region_model

    before_consts = _constants(facts, scope, [node], {}, base_dir)
    ins, outs = _value_infos(facts, node, before_consts)
    made = {o for n in after for o in n.output}
    after_consts = _constants(facts, scope, after, dims, base_dir)
    for v in outs:  # an output the plan made a constant (a Constant turned initializer)
        c = facts.constant(scope, v.name) if v.name not in made else None
        if c is not None and not c.tensor.external_data:
            t = c.tensor
            if t.name != v.name:
                t = onnx.TensorProto()
                t.CopyFrom(c.tensor)
                t.name = v.name
            after_consts[v.name] = t
            made.add(v.name)
    outs = [v for v in outs if v.name in made] or outs  # (a step drops outputs read by none)
    return (region_model([node], ins, outs, before_consts.values(), scope.opsets),
            region_model(after, ins, outs, after_consts.values(),
                         {**scope.opsets, "": target}))


def _constants(facts: Facts, scope: Scope, nodes, dims: dict[int, tuple], base_dir
               ) -> dict[str, onnx.TensorProto]:
    """The constants ``nodes`` read, named as they read them, in the shape the plan gives
    them (the region model copies them)."""
    out = {}
    local = {n.output[0] for n in nodes if n.op_type == "Constant" and n.output}
    for n in nodes:  # Constant nodes inside the region are part of it
        for i in n.input:
            c = facts.constant(scope, i) if i and i not in local else None
            if c is None:
                continue
            t = c.tensor
            if t.external_data:
                t = _loaded(t, base_dir)
                if t is None:
                    continue
            shape = dims.get(id(c.tensor))
            if t.name != i or shape is not None:
                t2 = onnx.TensorProto()
                t2.CopyFrom(t)
                t = t2
                t.name = i
                if shape is not None:
                    del t.dims[:]
                    t.dims.extend(shape)
            out[i] = t
    return out


def _loaded(t: onnx.TensorProto, base_dir) -> onnx.TensorProto | None:
    """A copy of external tensor ``t`` with its data read (from inside ``base_dir`` only),
    for a verification region; None when there is no folder or it is over 64 MiB."""
    from onnx import numpy_helper

    from opshift.io.tensors import entry, tensor_array

    if base_dir is None or (entry(t).length or 0) > _REGION_EXTERNAL_LIMIT:
        return None
    arr = tensor_array(t, base_dir)
    if arr.nbytes > _REGION_EXTERNAL_LIMIT:
        return None
    return numpy_helper.from_array(arr, t.name)


def _value_infos(facts: Facts, node: onnx.NodeProto, consts
                 ) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    """Declared types and shapes of a node's non-constant inputs and its outputs."""
    from opshift.verify.region import value_info  # (see record_region)

    def vi(name: str) -> onnx.ValueInfoProto:
        ts = facts.type_str(name)
        if ts is not None and not ts.startswith("tensor("):  # a sequence, an optional
            return onnx.helper.make_value_info(name, opsets.type_proto(ts))
        shape = facts.shape(name)
        return value_info(name, facts.elem_type(name) or TensorProto.FLOAT,
                          None if shape is None else [d if d is not None else "?"
                                                      for d in shape])

    ins = [vi(i) for i in dict.fromkeys(node.input) if i and i not in consts]
    return ins, [vi(o) for o in node.output if o]
