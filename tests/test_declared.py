"""graph.declared: what a graph declares of its values, read on demand."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from opshift.graph.declared import Declared


def _graph():
    inits = [nh.from_array(np.zeros(k + 1, np.float32), f"w{k}") for k in range(3)]
    return h.make_graph(
        [h.make_node("Identity", ["x"], ["t"]), h.make_node("Identity", ["t"], ["y"])], "g",
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]),
         h.make_tensor_value_info("w1", T.FLOAT, [7])],
        [h.make_tensor_value_info("y", T.DOUBLE, [2, None])], inits,
        value_info=[h.make_tensor_value_info("t", T.FLOAT16, [2, 3]),
                    h.make_tensor_value_info("y", T.FLOAT, [2, 3])])


def test_types_and_shapes_by_precedence():
    d = Declared(_graph())
    assert d.shape("x") == ("N", 3) and d.elem_type("x") == T.FLOAT
    assert d.shape("t") == (2, 3) and d.elem_type("t") == T.FLOAT16
    assert d.shape("y") == (2, 3) and d.elem_type("y") == T.FLOAT  # value_info wins
    assert d.shape("w0") == (1,) and d.initializer("w0").name == "w0"
    assert d.shape("w1") == (7,)  # its graph input's declared shape (it may be fed)
    assert d.elem_type("nothing") == 0 and d.shape("nothing") is None


def test_an_edit_that_moves_entries_is_noticed():
    g = _graph()
    d = Declared(g)
    assert d.initializer("w2").dims == [3] and d.shape("t") == (2, 3)
    del g.initializer[0]
    del g.value_info[0]
    assert d.initializer("w2").dims == [3] and d.initializer("w0") is None
    assert d.shape("t") is None and d.shape("y") == (2, 3)


def _names(entries):
    return sorted((vi.name, vi.type.tensor_type.elem_type) for vi in entries)


def test_entries_are_every_declaration_of_the_names():
    d = Declared(_graph())
    assert d.shape("t") == (2, 3)  # indexed
    # y: its graph output and its value_info entry; w1: its graph input
    assert _names(d.entries({"y", "w1", "nothing"})) == [
        ("w1", T.FLOAT), ("y", T.FLOAT), ("y", T.DOUBLE)]
    assert list(d.entries(set())) == []


def test_entries_of_a_name_declared_twice_in_one_list_are_all_found():
    g = _graph()
    g.value_info.append(h.make_tensor_value_info("t", T.INT8, [4]))
    assert _names(Declared(g).entries({"t"})) == [("t", T.INT8), ("t", T.FLOAT16)]


def test_entries_after_an_edit_that_moves_entries():
    g = _graph()
    d = Declared(g)
    assert d.shape("t") == (2, 3)
    del g.value_info[0]  # y's value_info entry moves to position 0
    g.value_info.append(h.make_tensor_value_info("t", T.INT8, [4]))
    assert _names(d.entries({"y", "t"})) == [("t", T.INT8), ("y", T.FLOAT), ("y", T.DOUBLE)]
    assert list(d.input_names()) == ["x", "w1"]

