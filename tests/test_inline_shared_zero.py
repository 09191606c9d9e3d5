"""inline writes one zero Constant per node list and element type, read by every activation
there (it wrote one per activation: 17 identical ones in a ResNet-18 with 17 PReLUs), and
the checks and fuse still see each replacement whole."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from clirun import opshift
from conftest import make_model
from onnx import TensorProto as T
from onnx import helper, numpy_helper

SHAPE = [2, 3, 4, 5]


def _model(opset: int) -> onnx.ModelProto:
    """Three float PRelus, a LeakyRelu and a Selu, and a float16 PRelu; an If whose branch
    holds a PRelu of its own."""
    s = [numpy_helper.from_array(np.full((3, 1, 1), v, np.float32), f"s{i}")
         for i, v in enumerate((0.25, 0.5, 0.125))]
    s16 = numpy_helper.from_array(np.full((3, 1, 1), 0.25, np.float16), "s16")
    branch = helper.make_graph(
        [helper.make_node("PRelu", ["l", "s0"], ["b"], name="inner")], "then", [],
        [helper.make_tensor_value_info("b", T.FLOAT, SHAPE)])
    other = helper.make_graph([helper.make_node("Identity", ["l"], ["c"])], "else", [],
                              [helper.make_tensor_value_info("c", T.FLOAT, SHAPE)])
    nodes = [helper.make_node("PRelu", ["x", "s0"], ["a"], name="p0"),
             helper.make_node("PRelu", ["a", "s1"], ["b0"], name="p1"),
             helper.make_node("PRelu", ["b0", "s2"], ["c0"], name="p2"),
             helper.make_node("LeakyRelu", ["c0"], ["d"], name="lr", alpha=0.1),
             helper.make_node("Selu", ["d"], ["l"], name="se"),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch,
                              else_branch=other),
             helper.make_node("Cast", ["x"], ["h"], name="half", to=T.FLOAT16),
             helper.make_node("PRelu", ["h", "s16"], ["y16"], name="p16")]
    vi = helper.make_tensor_value_info
    return make_model(nodes, [vi("x", T.FLOAT, SHAPE), vi("cond", T.BOOL, [])],
                      [vi("y", T.FLOAT, SHAPE), vi("y16", T.FLOAT16, SHAPE)], opset=opset,
                      initializers=[*s, s16])


def _zeros(graph: onnx.GraphProto) -> list[tuple[str, int]]:
    """(name, element type) of the Constant nodes of ``graph`` holding a zero scalar."""
    out = []
    for n in graph.node:
        if n.op_type == "Constant" and n.attribute[0].name == "value":
            t = n.attribute[0].t
            v = numpy_helper.to_array(t)
            if v.size == 1 and float(v.reshape(())) == 0:
                out.append((n.output[0], t.data_type))
    return out


@pytest.mark.parametrize(("opset", "types"), [(17, [T.FLOAT]), (13, [T.FLOAT, T.FLOAT16])])
def test_one_zero_per_node_list_and_type_checked_and_fused_back(tmp_path, opset, types):
    src, flat, back = tmp_path / "m.onnx", tmp_path / "flat.onnx", tmp_path / "back.onnx"
    onnx.save(_model(opset), src)
    p = opshift("inline", src, "-o", flat, "--verify")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verify: ok: 7 rewrites and the whole model (2 outputs) match" in p.stdout
    m = onnx.load(flat)
    zeros = _zeros(m.graph)
    # opset 17: Constant(float 0) + CastLike(zero, X) for every type; 13: a typed zero
    assert sorted(t for _, t in zeros) == sorted(types)
    assert len({name for name, _ in zeros}) == len(zeros)
    readers = [n for n in m.graph.node if any(i == zeros[0][0] for i in n.input)]
    assert len(readers) >= 5  # the five float activations of the main graph read one zero
    (if_node,) = [n for n in m.graph.node if n.op_type == "If"]
    then = next(a.g for a in if_node.attribute if a.name == "then_branch")
    assert len(_zeros(then)) == 1  # the branch is a node list of its own
    p = opshift("fuse", flat, "-o", back, "--verify")
    assert p.returncode == 0, p.stdout + p.stderr
    fused = onnx.load(back)
    assert _zeros(fused.graph) == []
    original = _model(opset)
    assert [(n.op_type, n.name) for n in fused.graph.node if n.op_type != "Constant"] == [
        (n.op_type, n.name) for n in original.graph.node]
