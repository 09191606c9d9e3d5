"""What IR 3 asks of a converted model's graphs (the IR version it declares:
:mod:`opshift.graph.ir_versions`)."""

from __future__ import annotations

import onnx
from onnx import helper

from opshift.graph.scopes import iter_scopes, walk_nodes


def initializers_as_inputs(model: onnx.ModelProto) -> None:
    """IR < 4 lists every initializer among its graph's inputs. A subgraph takes no inputs
    but its own (a Loop body's iteration number, condition and loop-carried values; none
    for a branch), so a subgraph's initializers move to the main graph, whose values every
    subgraph reads: renamed where the main graph, or another subgraph's moved initializer,
    already has the name."""
    g = model.graph
    holding = [sc.graph for sc in iter_scopes(model, functions=False)
               if sc.parent and len(sc.graph.initializer)]
    taken = set()
    if holding:  # (the names in use read only when some subgraph holds an initializer)
        taken = {v.name for v in g.input} | {t.name for t in g.initializer}
        taken |= {o for n in walk_nodes(g.node) for o in n.output}
    moved: list[onnx.TensorProto] = []
    for sg in holding:
        renamed = {}
        for t in sg.initializer:
            name = t.name
            if name in taken:
                k = 1
                while f"{name}_{k}" in taken:
                    k += 1
                renamed[name] = f"{name}_{k}"
            moved.append(t)
            t.name = renamed.get(name, name)
            taken.add(t.name)
        if renamed:
            _rename_reads(sg, renamed)
        del sg.initializer[:]
    g.initializer.extend(moved)
    have = {i.name for i in g.input}
    for t in g.initializer:
        if t.name not in have:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))


def _rename_reads(g: onnx.GraphProto, renamed: dict[str, str]) -> None:
    """Rename what ``g`` (with its subgraphs) reads or hands out of ``renamed``."""
    for n in walk_nodes(g.node):
        for i, x in enumerate(n.input):
            if x in renamed:
                n.input[i] = renamed[x]
    for entries in (g.output, g.value_info):
        for v in entries:
            if v.name in renamed:
                v.name = renamed[v.name]
