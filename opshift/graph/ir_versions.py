"""One rule for the IR version a model declares, asked by ``convert``, ``inspect`` and ``fix``.

- What a model holds may need an IR version: initializers that are not graph inputs need
  IR 4, model-local functions IR 8, default attribute values in functions IR 9, overloads
  IR 10, device configurations IR 11 (:func:`content_need`). A declared IR version below
  that is a defect: readers of that IR reject or misread the model; ``fix`` raises it.
- Annotations (``metadata_props`` of nodes, graphs, functions, values and tensors, and the
  ``value_info`` of functions: IR 10) change nothing a runtime computes. Below the IR that
  defines them they are dropped (:func:`drop_annotations`), never a reason to raise the IR;
  ``convert`` can keep the nodes' in the model's ``metadata_props`` instead
  (:func:`node_metadata_to_model`).
- An IR version above the one onnx's ``VERSION_TABLE`` pairs with the opset is no defect:
  every runtime that reads that IR runs the older opset (a dynamo export at IR 10 and
  opset 18, ``make_model``'s IR 8 at opset 12). ``convert`` to a lower opset is the way to
  reach an older era: it writes the IR of the target's era (:func:`converted_ir`).
"""

from __future__ import annotations

from operator import attrgetter

import onnx
from onnx import helper

from opshift import opsets
from opshift.graph.scopes import may_hold_subgraphs, subgraphs

#: the IR version that defines annotations (metadata_props beyond the model's, function
#: value_info)
ANNOTATIONS_IR = 10
#: the IR version that defines a node's own fields beyond IR 3's (overload)
OVERLOADS_IR = 10


def release(ir: int) -> str:
    """The first onnx release whose files declare IR ``ir`` ('onnx 1.4.1'), from onnx's own
    ``VERSION_TABLE``; '' when it has none."""
    for row in helper.VERSION_TABLE:
        if row[1] == ir:
            return f"onnx {row[0]}"
    return ""


def named(ir: int) -> str:
    """'IR 4 (onnx 1.4.1)'."""
    r = release(ir)
    return f"IR {ir} ({r})" if r else f"IR {ir}"


def imports_ir(model: onnx.ModelProto, target: int | None = None) -> int:
    """The IR version onnx's ``VERSION_TABLE`` pairs with the model's opset imports (the
    default domain's taken as ``target`` when given)."""
    default = opsets.opset_of(model) if target is None else target
    ir = opsets.ir_version_for_opset(default) if default is not None else 3
    others = [helper.make_opsetid(opsets.normalize_domain(i.domain), i.version)
              for i in model.opset_import if opsets.normalize_domain(i.domain) != ""]
    if others:
        ir = max(ir, helper.find_min_ir_version_for(others, ignore_unknown=True))
    return ir


_NODE_FIELDS = onnx.NodeProto.DESCRIPTOR.fields_by_name
_METADATA = attrgetter("metadata_props")
_OVERLOAD = attrgetter("overload")
_DEVICES = attrgetter("device_configurations")
_FUNCTION_FIELDS = onnx.FunctionProto.DESCRIPTOR.fields_by_name


def content_need(model: onnx.ModelProto, *, initializers: bool = True,
                 node_fields: bool = True) -> tuple[int, str]:
    """The lowest IR version what ``model`` holds needs (annotations aside), and the feature
    that needs it ('' when none needs more than IR 3). ``initializers=False``: leave out
    initializers that are not graph inputs (``convert`` lists them as inputs below IR 4);
    ``node_fields=False``: leave out the nodes' own fields (overloads, device
    configurations), for a model whose IR defines none (no walk of its nodes)."""
    need, feature = 3, ""

    def at_least(ir: int, what: str) -> None:
        nonlocal need, feature
        if ir > need:
            need, feature = ir, what

    if len(getattr(model, "configuration", ())):
        at_least(11, "device configurations")
    if len(model.functions):
        at_least(8, "model-local functions")
    for f in model.functions:
        if len(getattr(f, "attribute_proto", ())):
            at_least(9, "default attribute values of functions")
        if getattr(f, "overload", ""):
            at_least(10, "function overloads")
    devices = "device_configurations" in _NODE_FIELDS
    overloads = "overload" in _NODE_FIELDS
    if not (node_fields or initializers):
        return need, feature
    graphs = [model.graph]
    bodies = [f.node for f in model.functions]
    while graphs or bodies:
        if graphs:
            g = graphs.pop()
            if initializers and need < 4 and len(g.initializer) and not (
                    {t.name for t in g.initializer} <= {v.name for v in g.input}):
                at_least(4, "initializers that are not graph inputs")
            nodes = g.node
        else:
            nodes = bodies.pop()
        if node_fields and overloads and any(map(_OVERLOAD, nodes)):
            at_least(10, "node overloads")
        if node_fields and devices and any(map(len, map(_DEVICES, nodes))):
            at_least(11, "device configurations")
        graphs.extend(_subgraphs_of(nodes))
    return need, feature


def _subgraphs_of(nodes) -> list[onnx.GraphProto]:
    """The subgraphs ``nodes`` hold (their attributes read only for the kinds that can)."""
    holders = {o for o, d in {(n.op_type, n.domain) for n in nodes} if may_hold_subgraphs(d, o)}
    return [g for n in nodes if holders and n.op_type in holders for _, g in subgraphs(n)]


def _holders(model: onnx.ModelProto):
    """Every message of ``model`` that may hold annotations, with its kind."""
    for g in _graphs(model):
        yield "graph", g
        for entries in (g.input, g.output, g.value_info):
            for v in entries:
                yield "value", v
        for t in g.initializer:
            yield "tensor", t
        for n in g.node:
            yield "node", n
    for f in model.functions:
        yield "function", f
        for n in f.node:  # (their subgraphs' nodes come with the graphs)
            yield "node", n


def _graphs(model: onnx.ModelProto):
    graphs = [model.graph]
    for f in model.functions:
        graphs.extend(_subgraphs_of(f.node))
    while graphs:
        g = graphs.pop()
        yield g
        graphs.extend(_subgraphs_of(g.node))


def annotations(model: onnx.ModelProto) -> dict[str, int]:
    """How many annotations (IR 10's fields) ``model`` holds, by where they are ('node
    metadata', 'function value_info', ...); empty when none."""
    out: dict[str, int] = {}
    if "metadata_props" not in _NODE_FIELDS:
        return out

    def count(kind: str, messages) -> None:
        k = sum(map(len, map(_METADATA, messages)))  # (C loops: no frame per message)
        if k:
            out[f"{kind} metadata"] = out.get(f"{kind} metadata", 0) + k

    for g in _graphs(model):  # (a sum per field: a walk of 1M nodes in 0.1 s)
        count("graph", (g,))
        for entries in (g.input, g.output, g.value_info):
            count("value", entries)
        count("tensor", g.initializer)
        count("node", g.node)
    count("function", model.functions)
    for f in model.functions:
        count("node", f.node)
        if "value_info" in _FUNCTION_FIELDS and len(f.value_info):
            out["function value_info"] = out.get("function value_info", 0) + len(f.value_info)
    return out


def drop_annotations(model: onnx.ModelProto, ir: int) -> dict[str, int]:
    """Drop the annotations IR ``ir`` does not define from ``model``, in place; return how
    many were dropped, by where they were (see :func:`annotations`)."""
    if ir >= ANNOTATIONS_IR:
        return {}
    found = annotations(model)
    if found:
        for kind, msg in _holders(model):
            del msg.metadata_props[:]
            if kind == "function" and "value_info" in _FUNCTION_FIELDS:
                del msg.value_info[:]
    return found


#: the key a node's metadata entry is moved to in the model's (:func:`node_metadata_to_model`)
NODE_KEY = "node:{node}:{key}"


def node_metadata_to_model(model: onnx.ModelProto, ir: int) -> tuple[int, int]:
    """Move the node metadata IR ``ir`` does not define into the model's ``metadata_props``
    (which every IR version defines), in place, before :func:`drop_annotations` drops the
    rest: each entry under ``node:<node>:<key>``, ``<node>`` the node's name (unnamed:
    ``<OpType #i>``, its position in its graph), prefixed by ``<function>/`` for a node of a
    model-local function (``domain:name``, with ``:overload`` when it has one). A key the
    model already holds (its own or an earlier moved entry's) is never overwritten: the
    entry takes the first free key with ``#2``, ``#3``, ... appended. Returns (entries moved,
    entries given such a suffix)."""
    if ir >= ANNOTATIONS_IR or "metadata_props" not in _NODE_FIELDS:
        return 0, 0
    taken = {e.key for e in model.metadata_props}
    moved = suffixed = 0
    for prefix, nodes in _node_lists(model):
        for i, n in enumerate(nodes):
            if not len(n.metadata_props):
                continue
            node = prefix + (n.name or f"<{n.op_type} #{i}>")
            for e in n.metadata_props:
                key = base = NODE_KEY.format(node=node, key=e.key)
                k = 1
                while key in taken:
                    k += 1
                    key = f"{base}#{k}"
                suffixed += k > 1
                taken.add(key)
                model.metadata_props.add(key=key, value=e.value)
                moved += 1
            del n.metadata_props[:]
    return moved, suffixed


def _node_lists(model: onnx.ModelProto):
    """(prefix, node list) of every graph and function body of ``model``, subgraphs with
    their enclosing function's prefix."""
    todo = [("", model.graph.node)]
    for f in model.functions:
        overload = getattr(f, "overload", "")
        todo.append((f"{f.domain}:{f.name}{':' + overload if overload else ''}/", f.node))
    while todo:
        prefix, nodes = todo.pop(0)
        yield prefix, nodes
        for n in nodes:
            todo.extend((prefix, sg.node) for _, sg in subgraphs(n))


def moved_note(moved: int, suffixed: int, ir: int) -> str:
    """One line saying where :func:`node_metadata_to_model` moved node metadata, and why."""
    clash = (f"; {suffixed:,} under a key the model held already, with '#k' appended"
             if suffixed else "")
    return (f"moved node metadata ({moved:,}) to the model's metadata_props as "
            f"'{NODE_KEY.format(node='<node>', key='<key>')}'{clash}: {named(ir)} does not "
            f"define node metadata ({named(ANNOTATIONS_IR)} introduced it)")


def dropped_what(dropped: dict[str, int]) -> str:
    """'dropped node metadata (6), ...': what :func:`drop_annotations` dropped."""
    return "dropped " + ", ".join(f"{k} ({v:,})" for k, v in dropped.items())


def dropped_why(ir: int) -> str:
    """Why annotations are dropped at IR ``ir``."""
    return (f"{named(ir)} does not define them ({named(ANNOTATIONS_IR)} introduced them); "
            "runtimes read none of them")


def dropped_note(dropped: dict[str, int], ir: int) -> str:
    """One line saying what :func:`drop_annotations` dropped and why."""
    return f"{dropped_what(dropped)}: {dropped_why(ir)}"


def converted_ir(model: onnx.ModelProto, source: int, target: int, declared: int) -> int:
    """The IR version ``convert`` writes for ``model`` converted from ``source`` to
    ``target``: going down, the IR of the target's era (its imports' in onnx's
    ``VERSION_TABLE``), raised only where the model's content needs more (initializers
    left out: they are listed as inputs below IR 4); going up, never below ``declared``."""
    ir = max(imports_ir(model, target), content_need(
        model, initializers=False, node_fields=declared >= OVERLOADS_IR)[0])
    return ir if target < source else max(declared, ir)


def ir_defect(model: onnx.ModelProto) -> tuple[int, str] | None:
    """(the IR version needed, why) when ``model`` declares an IR version below what its
    content needs, else None. Annotations are no such defect (see :func:`drop_annotations`),
    and neither is an IR version above its opsets' era."""
    declared = model.ir_version
    need, feature = content_need(model)
    if declared >= need:
        return None
    return need, (f"{feature} need {named(need)}; readers of {named(declared)} reject or "
                  "misread them")
