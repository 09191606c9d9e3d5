"""Cost on big models: a refusal known from the op list (an op with no form at the target,
in the main graph, computed from the inputs) comes before planning, with the error planning
gives; initializers the rewrites left without readers are dropped (never a graph input or
output, never one nothing read before); a long chain that only relabels needs no shape
inference and no rewrite, and external weights are never read."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import attrs, make_model, onnxruntime_outputs, vi
from convert_helpers import F, convert_other_ops
from onnx import TensorProto, helper, numpy_helper
from onnx import TensorProto as T

from opshift.convert import engine
from opshift.convert.early_refusal import FUSABLE_OPS
from opshift.convert.orphans import drop_orphaned_initializers, read_initializers
from opshift.errors import MissingOpError
from opshift.evaluator import evaluate

BIG = np.iinfo(np.int64).max


def _gpt_like(layers: int = 3, *, gather_from_constants: bool = False) -> onnx.ModelProto:
    """MatMul/Relu layers ending in a GatherND (opset 13: no form at 9)."""
    rng = np.random.default_rng(0)
    nodes, inits, h = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32),
                                             f"w{i}"))
        nodes += [helper.make_node("MatMul", [h, f"w{i}"], [f"m{i}"]),
                  helper.make_node("Relu", [f"m{i}"], [f"h{i}"])]
        h = f"h{i}"
    inits.append(numpy_helper.from_array(np.array([[0], [1]], np.int64), "idx"))
    if gather_from_constants:  # a shape gathered from a constant: a fold may take it away
        inits.append(numpy_helper.from_array(np.array([[4, 8], [8, 4]], np.int64), "shapes"))
        nodes += [helper.make_node("GatherND", ["shapes", "idx"], ["shape2"]),
                  helper.make_node("Reshape", ["shape2", "two"], ["shape"]),
                  helper.make_node("Reshape", [h, "shape"], ["y"])]
        inits.append(numpy_helper.from_array(np.array([-1], np.int64), "two"))
        return make_model(nodes, [vi("x", T.FLOAT, [4, 8])], [vi("y", T.FLOAT, None)],
                          opset=13, initializers=inits)
    nodes.append(helper.make_node("GatherND", [h, "idx"], ["y"]))
    return make_model(nodes, [vi("x", T.FLOAT, [4, 8])], [vi("y", T.FLOAT, [2, 8])], opset=13,
                      initializers=inits)


class Planned(Exception):
    pass


def _no_planning(*_args, **_kwargs):
    raise Planned("planning began")


def test_refusal_known_from_the_op_list_comes_before_planning(monkeypatch):
    m = _gpt_like()
    before = m.SerializeToString()
    with monkeypatch.context() as mp:  # what planning says, without the early check
        mp.setattr(engine, "refuse_early", lambda *_a, **_k: None)
        with pytest.raises(MissingOpError) as planned:
            engine.convert_proto(m, 9)
    assert m.SerializeToString() == before
    monkeypatch.setattr(engine, "plan_after_fusing_and_folding", _no_planning)
    with pytest.raises(MissingOpError) as early:
        engine.convert_proto(m, 9)
    assert str(early.value) == str(planned.value)
    assert str(early.value) == (
        "node '<GatherND #6>' (GatherND-13 -> opset 9, graph 'g'): GatherND does not exist "
        "at opset 9 and no exact decomposition applies: GatherND-11 has no function body in "
        "onnx.defs")
    assert m.SerializeToString() == before


def test_what_planning_may_rescue_is_left_to_it(monkeypatch):
    """A GatherND of constants (a fold may take it away), one inside an If branch (a taken
    branch may drop it), an op with a function body, a fusable op: planning decides."""
    monkeypatch.setattr(engine, "plan_after_fusing_and_folding", _no_planning)
    with pytest.raises(Planned):
        engine.convert_proto(_gpt_like(gather_from_constants=True), 9)
    branch = helper.make_graph([helper.make_node("GatherND", ["x", "idx"], ["b"])], "then", [],
                               [vi("b", T.FLOAT, None)])
    m = make_model([helper.make_node("If", ["c"], ["y"], then_branch=branch,
                                     else_branch=branch)],
                   [vi("x", T.FLOAT, [4, 8]), vi("c", T.BOOL, [])], [vi("y", T.FLOAT, None)],
                   opset=13, initializers=[numpy_helper.from_array(
                       np.array([[0], [1]], np.int64), "idx")])
    with pytest.raises(Planned):
        engine.convert_proto(m, 9)
    for op, opset in (("Mish", 18), ("Where", 16)):  # a body; fusable (into LeakyRelu, ...)
        m = make_model([helper.make_node(op, ["x"] if op == "Mish" else ["c", "x", "x"],
                                         ["y"])],
                       [vi("x", T.FLOAT, [4]), vi("c", T.BOOL, [4])], [vi("y", T.FLOAT, [4])],
                       opset=opset)
        with pytest.raises(Planned):
            engine.convert_proto(m, 5)


def test_fusable_ops_are_those_of_fuse_rules():
    from opshift.fuse.engine import rule_ops

    for allow_rounding in (False, True):
        for need in rule_ops(allow_rounding):
            assert need <= FUSABLE_OPS, sorted(need - FUSABLE_OPS)


# -- initializers left without readers -------------------------------------------------------

def _flip() -> onnx.ModelProto:
    """A Slice of step -1 (at 9 written without its bounds' tensors) and an initializer
    nothing reads ('spare')."""
    values = {"s": [-1], "e": [-BIG], "a": [1], "st": [-1], "spare": [7]}
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in values.items()]
    return make_model([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])],
                      [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])], opset=13,
                      initializers=inits)


def test_initializers_the_rewrite_orphaned_are_dropped():
    m = _flip()
    c = onnx.ModelProto()
    c.CopyFrom(m)
    result = engine.convert_proto(c, 9)
    onnx.checker.check_model(c, full_check=True)
    left = [t.name for t in c.graph.initializer]
    assert "spare" in left  # never read: the author's
    assert not {"s", "e", "a", "st"} & set(left)
    assert result.notes == ["dropped 4 initializer(s) the rewrites left without readers: "
                            "'s', 'e', 'a', 'st'"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(evaluate(c, {"x": x})["y"], evaluate(m, {"x": x})["y"])
    got = onnxruntime_outputs(c, {"x": x})
    if isinstance(got, str):
        pytest.skip(got)
    np.testing.assert_array_equal(got[0], x[:, ::-1])


def test_graph_inputs_outputs_and_readers_keep_theirs(tmp_path):
    """Of the initializers read before: one a graph input, one a graph output and one still
    read stay; one nothing reads any more goes, with its external data reference."""
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "kept"], ["y"])], "g",
        [vi("x", T.FLOAT, [1]), vi("w_in", T.FLOAT, [1])],
        [vi("y", T.FLOAT, [1]), vi("w_out", T.FLOAT, [1])],
        [numpy_helper.from_array(np.ones(1, np.float32), n)
         for n in ("kept", "w_in", "w_out", "gone")],
        value_info=[vi("gone", T.FLOAT, [1])])
    gone = g.initializer[3]
    gone.data_location = T.EXTERNAL
    gone.ClearField("raw_data")
    gone.external_data.add(key="location", value="weights.bin")
    assert read_initializers(g) == {"kept"}
    read_before = {"kept", "w_in", "w_out", "gone"}  # (as if rewrites stopped reading three)
    assert drop_orphaned_initializers(g, read_before) == ["gone"]
    assert [t.name for t in g.initializer] == ["kept", "w_in", "w_out"]
    assert not g.value_info
    assert "weights.bin" not in str(g)
    assert drop_orphaned_initializers(g, set()) == []


def chain(n: int, opset: int) -> onnx.ModelProto:
    """Conv -> Add -> PRelu repeated: the bench's shape of model."""
    w = numpy_helper.from_array(np.full((2, 2, 1, 1), 0.5, np.float32), "w")
    s = numpy_helper.from_array(np.full((2, 1, 1), 0.1, np.float32), "s")
    nodes, x = [], "x"
    for i in range(n):
        nodes += [helper.make_node("Conv", [x, "w"], [f"c{i}"], name=f"conv{i}"),
                  helper.make_node("Add", [f"c{i}", x], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("PRelu", [f"a{i}", "s"], [f"p{i}"], name=f"prelu{i}")]
        x = f"p{i}"
    return make_model(nodes, [vi("x", F, [1, 2, 3, 3])], [vi(x, F, [1, 2, 3, 3])],
                      opset=opset, initializers=[w, s])


def test_chain_needs_no_shape_inference_and_no_rewrite(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("shape inference was run")
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", boom)
    for src, tgt in ((9, 16), (16, 9)):
        m = chain(200, src)
        before = m.SerializeToString()
        changes = convert_other_ops(m, src, tgt)
        assert len(changes) == 400 and {c.action for c in changes} == {"relabel"}
        assert m.SerializeToString() == before


def test_external_weights_are_never_read(tmp_path):
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="missing.bin")
    m = make_model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                    helper.make_node("Unsqueeze", ["c", "ax"], ["y"], name="u")],
                   [vi("x", F, [1, 2, 3, 3])], [vi("y", F, [1, 1, 2, 3, 3])], opset=13,
                   initializers=[w, numpy_helper.from_array(np.array([0], np.int64), "ax")])
    convert_other_ops(m, 13, 9)
    assert attrs(m.graph.node[1]) == {"axes": [0]}
    assert m.graph.initializer[0].data_location == TensorProto.EXTERNAL
