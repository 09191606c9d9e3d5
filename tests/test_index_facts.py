"""The structural check's reading of the main graph, handed to Facts (``ModelIndex(facts=True)``):
the names of its entries and the names its nodes read, so that convert reads
them once. Facts must answer with them exactly as it answers reading the model itself."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

from opshift.check import structure
from opshift.convert.engine import convert_proto
from opshift.graph.declared import Declared
from opshift.graph.facts import Facts
from opshift.graph.names import all_names

X = [1, 4, 3, 3]


def _checked(m: onnx.ModelProto, facts: bool = True, **kw) -> structure.ModelIndex:
    index = structure.ModelIndex(full=False, facts=facts)
    structure.check(m, index=index, **kw)
    return index


def _with_subgraphs_and_function() -> onnx.ModelProto:
    """A main graph whose If branches read outer values and output them, a custom-domain
    node holding a graph, and a model-local function (its own root)."""
    then = h.make_graph([h.make_node("Relu", ["a"], ["t_out"])], "then", [],
                        [h.make_tensor_value_info("t_out", TP.FLOAT, X)])
    other = h.make_graph([h.make_node("Neg", ["a"], ["e_out"]),
                          h.make_node("Add", ["e_out", "s"], ["e2"])], "else", [],
                         [h.make_tensor_value_info("e2", TP.FLOAT, X)])
    held = h.make_graph([h.make_node("Abs", ["a"], ["c_out"])], "held", [],
                        [h.make_tensor_value_info("c_out", TP.FLOAT, X)])
    f = h.make_function("local", "Twice", ["u"], ["v"],
                        [h.make_node("Add", ["u", "u"], ["v"])],
                        [h.make_opsetid("", 13)])
    nodes = [h.make_node("Relu", ["x"], ["a"]),
             h.make_node("If", ["cond"], ["b"], then_branch=then, else_branch=other),
             h.make_node("Holder", ["a"], ["c"], domain="custom", body=held),
             h.make_node("Twice", ["b"], ["d"], domain="local"),
             h.make_node("Add", ["d", "a"], ["y"])]
    g = h.make_graph(nodes, "main",
                     [h.make_tensor_value_info("x", TP.FLOAT, X),
                      h.make_tensor_value_info("cond", TP.BOOL, [])],
                     [h.make_tensor_value_info("y", TP.FLOAT, X),
                      h.make_tensor_value_info("a", TP.FLOAT, X)],
                     [nh.from_array(np.ones(X, np.float32), "s")],
                     value_info=[h.make_tensor_value_info("b", TP.FLOAT, X)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("local", 1),
                                          h.make_opsetid("custom", 1)], functions=[f])


def test_the_index_lists_the_main_graph_entries_only_when_asked():
    m = _with_subgraphs_and_function()
    index = _checked(m)
    g = m.graph
    for which, entries in (("inputs", g.input), ("outputs", g.output),
                           ("value_infos", g.value_info), ("initializers", g.initializer)):
        assert index.declared.positions(which) == {e.name: i for i, e in enumerate(entries)}
    light = _checked(m, facts=False)
    assert light.declared is None and light.reads is None and light.uses() is None


def test_uses_from_the_index_are_the_counts_facts_makes_itself():
    m = _with_subgraphs_and_function()
    index = _checked(m)
    shared, alone = Facts(m, index=index), Facts(m)
    names = all_names(m) | {"s", "cond", "nothing"}
    for sc in alone.scopes():  # the main graph's tree and the function's body
        mine = next(s for s in shared.scopes() if s.label == sc.label)
        for name in names:
            assert shared.uses(mine, name) == alone.uses(sc, name), (sc.label, name)
    assert index.reads is None  # counted once, from what the walk read
    # both If branches, Holder's body, Holder, Add, the graph output
    assert alone.uses(alone.scopes()[0], "a") == 6


def test_declared_from_listed_names_answers_as_read_and_notices_edits():
    m = _with_subgraphs_and_function()
    index = _checked(m)
    g = m.graph
    listed, read = Declared(g, index.declared), Declared(g)
    for name in ("x", "cond", "y", "a", "b", "s", "nothing"):
        assert listed.shape(name) == read.shape(name)
        assert listed.elem_type(name) == read.elem_type(name)
    assert listed.initializer_positions() == {"s": 0}
    g.value_info.insert(0, h.make_tensor_value_info("z", TP.DOUBLE, [2]))  # moves "b"
    del g.initializer[:]
    assert listed.shape("b") == tuple(X) and listed.elem_type("z") == TP.DOUBLE
    assert listed.initializer("s") is None and listed.shape("s") is None


def _prelu6(shared_outputs: bool = False) -> onnx.ModelProto:
    """Opset-6 PRelu with [C] slopes: one slope read by two nodes, one by one node, one
    read by a node and output by the graph."""
    acts, prev = [], "x"
    slopes = ["shared", "shared", "own", "out"]
    for i, s in enumerate(slopes):
        acts.append(h.make_node("PRelu", [prev, s], [f"p{i}"], name=f"prelu{i}"))
        prev = f"p{i}"
    inits = [nh.from_array(np.linspace(0.1, 0.4, 4).astype(np.float32) + k, s)
             for k, s in enumerate(dict.fromkeys(slopes))]
    g = h.make_graph(acts, "g", [h.make_tensor_value_info("x", TP.FLOAT, X)],
                     [h.make_tensor_value_info(prev, TP.FLOAT, X),
                      h.make_tensor_value_info("out", TP.FLOAT, [4])], inits,
                     value_info=[h.make_tensor_value_info(f"p{i}", TP.FLOAT, X)
                                 for i in range(len(slopes) - 1)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 6)])
    m.ir_version = 4
    return m


def test_convert_with_the_index_writes_the_same_model():
    m, alone = _prelu6(), _prelu6()
    index = _checked(m)
    with_index = convert_proto(m, 17, facts=Facts(m, index=index))
    assert index.reads is None  # the planner took the walk's counts
    without = convert_proto(alone, 17)
    assert m.SerializeToString() == alone.SerializeToString()
    whats = [c.what for c in with_index.changes]
    assert whats == [c.what for c in without.changes]
    # 'shared': copied for its first reader, reshaped for its last; 'out' is an output
    assert [w.split(" ", 3)[3].split(" ")[0] for w in whats] == [
        "copied", "reshaped", "reshaped", "copied"]
