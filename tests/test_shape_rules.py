"""Shapes and ranks by each op's own rules (opshift.graph.shape_rules) and how Facts uses
them: symbolic dims kept, unknown dims None, onnx's inference never contradicted."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import init, make_model, vi
from onnx import TensorProto, helper

from opshift.graph.facts import Facts
from opshift.graph.shape_rules import broadcast, merge, output_shape


def shape_by_rule(op: str, shapes: list, version: int = 18, consts: dict | None = None,
                  **attrs):
    """The rule's output shape for ``op`` with inputs ``i0, i1, ...`` of ``shapes`` (None:
    rank unknown) and constant inputs ``consts`` (name -> array)."""
    names = [f"i{k}" for k in range(len(shapes))]
    node = helper.make_node(op, names, ["y"], **attrs)
    table = dict(zip(names, shapes))
    consts = consts or {}
    return output_shape(node, version, table.get, lambda n: consts.get(n))


@pytest.mark.parametrize("ta,tb,a,b,want", [
    (0, 0, ("N", 48), (48, 10), ("N", 10)),
    (0, 1, ("N", 48), (10, 48), ("N", 10)),
    (1, 0, (48, "N"), (48, 10), ("N", 10)),
    (0, 1, None, (10, 48), (None, 10)),  # A's rank unknown: still 2-D
    (0, 0, None, None, (None, None)),
])
def test_gemm_is_2d_with_dims_from_a_and_b(ta, tb, a, b, want):
    assert shape_by_rule("Gemm", [a, b], transA=ta, transB=tb) == want


def test_gemm_takes_a_dim_from_c_only_where_c_is_not_1():
    assert shape_by_rule("Gemm", [None, None, (10,)], 11) == (None, 10)
    assert shape_by_rule("Gemm", [None, None, (1,)], 11) == (None, None)
    assert shape_by_rule("Gemm", [None, None, (4, 1)], 11) == (4, None)


@pytest.mark.parametrize("axis,x,want", [
    (1, ("N", 3, 4, 4), ("N", 48)),
    (2, ("N", 3, 4, 4), (None, 16)),  # N * 3 is no name
    (0, ("N", 3), (1, None)),
    (-1, (2, "C", 5), (None, 5)),
    (4, (2, 3, 1, 1), (6, 1)),
    (1, None, (None, None)),
    (0, None, (1, None)),
    (1, ("N", 3, 1, 1), ("N", 3)),
])
def test_flatten(axis, x, want):
    assert shape_by_rule("Flatten", [x], 13, axis=axis) == want


@pytest.mark.parametrize("x,target,want", [
    (("N", 3, 4, 4), [0, -1], ("N", 48)),  # 0 copies, -1 cancels the name
    ((2, 3, 4), [-1, 4], (6, 4)),
    ((2, 3, 4), [4, 0, -1], (4, 3, 2)),
    (("N", 3, 4), [-1, 12], ("N", 12)),  # N*12 / 12
    (("N", 3, 4), [-1], (None,)),  # N*12 is no single name
    (("N", "M"), [-1, 0], ("N", "M")),  # N*M / M
    (("N", "M"), [-1, 1, 0], (None, 1, None)),  # index 2 is past the rank
    (None, [0, -1], (None, None)),
    ((2, None, 4), [2, -1], (2, None)),
])
def test_reshape_constant_shape_zero_and_minus_one(x, target, want):
    got = shape_by_rule("Reshape", [x, (len(target),)], 13,
                        {"i1": np.array(target, np.int64)})
    assert got == want


def test_reshape_allowzero_and_attribute_form():
    shape = {"i1": np.array([0, 3], np.int64)}
    assert shape_by_rule("Reshape", [(0, 3), (2,)], 14, shape, allowzero=1) == (0, 3)
    assert shape_by_rule("Reshape", [(5, 3), (2,)], 14, shape) == (5, 3)
    assert shape_by_rule("Reshape", [("N", 6)], 1, shape=[0, 2, 3]) == ("N", 2, 3)


def test_reshape_to_a_computed_shape_has_its_length_as_rank():
    assert shape_by_rule("Reshape", [("N", 3, 4), (2,)], 13) == (None, None)
    assert shape_by_rule("Reshape", [("N", 3, 4), (None,)], 13) is None


@pytest.mark.parametrize("a,b,want", [
    ((3, 4), (4,), (3,)),
    ((4,), (4, 5), (5,)),
    ((4,), (4,), ()),
    (("B", 1, 3, 4), (7, 4, 5), ("B", 7, 3, 5)),
    ((3, 4), None, None),
])
def test_matmul(a, b, want):
    assert shape_by_rule("MatMul", [a, b]) == want


@pytest.mark.parametrize("shapes,want", [
    ([(2, 3, 4), (4,)], (2, 3, 4)),
    ([("N", 1), (1, 5)], ("N", 5)),
    ([("N",), (5,)], (5,)),  # N must be 1 or 5
    ([("N",), ("M",)], (None,)),  # either may be 1
    ([("N",), ("N",)], ("N",)),
    ([(None,), (1,)], (None,)),
    ([(1,), (1, 1)], (1, 1)),
    ([(3,), None], None),
])
def test_numpy_broadcast(shapes, want):
    assert broadcast(shapes) == want


def test_binary_ops_broadcast_from_7_and_follow_a_before():
    assert shape_by_rule("Add", [(2, 3, 4), (3, 1)], 14) == (2, 3, 4)
    assert shape_by_rule("Add", [(2, 3, 4), (3,)], 6, broadcast=1, axis=1) == (2, 3, 4)
    # without broadcast=1 legacy inputs have one shape: what either says
    assert shape_by_rule("Mul", [(2, None), (None, 5)], 6) == (2, 5)
    assert shape_by_rule("Sum", [(2, 1), (1, 3)], 8) == (2, 3)
    assert shape_by_rule("Sum", [(2, None), (None, 3)], 6) == (2, 3)
    assert shape_by_rule("Where", [(1, 3), (2, 1), ()], 16) == (2, 3)


def test_same_shape_ops():
    for op in ("Relu", "Softmax", "Cast", "Identity", "BatchNormalization", "PRelu", "Sigmoid"):
        assert shape_by_rule(op, [("N", 3), (3,)]) == ("N", 3), op
    assert shape_by_rule("Relu", [None]) is None


@pytest.mark.parametrize("perm,x,want", [
    ([0, 2, 1], ("N", 3, 4), ("N", 4, 3)),
    (None, ("N", 3, 4), (4, 3, "N")),
    ([1, 0], None, (None, None)),
])
def test_transpose(perm, x, want):
    kw = {} if perm is None else {"perm": perm}
    assert shape_by_rule("Transpose", [x], **kw) == want


def test_squeeze_and_unsqueeze_by_attribute_and_by_constant_input():
    axes = {"i1": np.array([0, -1], np.int64)}
    assert shape_by_rule("Squeeze", [(1, "N", 1), (2,)], 13, axes) == ("N",)
    assert shape_by_rule("Squeeze", [(1, "N", 1)], 11, axes=[0]) == ("N", 1)
    assert shape_by_rule("Squeeze", [(1, 3, 1)], 11) == (3,)
    assert shape_by_rule("Squeeze", [(1, "N", 1)], 11) is None  # N may be 1
    assert shape_by_rule("Squeeze", [(1, "N"), (1,)], 13) is None  # computed axes
    assert shape_by_rule("Unsqueeze", [("N", 3), (2,)], 13, axes) == (1, "N", 3, 1)
    assert shape_by_rule("Unsqueeze", [("N",)], 1, axes=[1]) == ("N", 1)
    assert shape_by_rule("Unsqueeze", [None], 1, axes=[1]) is None


def test_concat_sums_the_axis_and_keeps_the_rest():
    assert shape_by_rule("Concat", [("N", 2), ("N", 3)], 13, axis=1) == ("N", 5)
    assert shape_by_rule("Concat", [("N", 2), None], 13, axis=-1) == ("N", None)
    assert shape_by_rule("Concat", [(1,), (1,)], 4, axis=0) == (2,)


def test_conv_and_pooling_keep_the_rank():
    assert shape_by_rule("Conv", [("N", 3, "H", 8), (16, 3, 3, 3)]) == ("N", 16, None, 6)
    assert shape_by_rule("Conv", [None, (16, 3, 3)]) == (None, 16, None)
    assert shape_by_rule("ConvTranspose", [("N", 4, 5), (4, 2, 3)], group=2) == ("N", 4, None)
    assert shape_by_rule("MaxPool", [("N", 3, 8, 8)], kernel_shape=[2, 2],
                         ceil_mode=1) == ("N", 3, None, None)
    assert shape_by_rule("Conv", [(1, 3, 8), (16, 3, 3)], strides=[1, 1]) == (1, 16, None)
    assert shape_by_rule("GlobalAveragePool", [("N", 3, 8, 8)]) == ("N", 3, 1, 1)


@pytest.mark.parametrize("op,x,w,attrs", [
    ("Conv", (1, 2, 9, 7), (4, 2, 3, 2), {}),
    ("Conv", (2, 2, 544), (4, 2, 256), {"strides": [64]}),
    ("Conv", (1, 4, 9, 7), (4, 2, 3, 3), {"group": 2, "pads": [1, 0, 2, 1],
                                          "strides": [2, 3], "dilations": [2, 1]}),
    ("Conv", (1, 2, 9, 7), (3, 2, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("Conv", (1, 2, 9, 7), (3, 2, 3, 2), {"auto_pad": "SAME_LOWER", "strides": [4, 3]}),
    ("Conv", (1, 2, 9, 7), (3, 2, 3, 2), {"auto_pad": "VALID", "strides": [2, 2]}),
    ("MaxPool", (1, 2, 9, 7), None, {"kernel_shape": [3, 2], "strides": [2, 3],
                                     "pads": [1, 1, 1, 0]}),
    ("AveragePool", (1, 2, 9, 7), None, {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER",
                                         "strides": [2, 2]}),
    ("MaxPool", (1, 2, 9, 7), None, {"kernel_shape": [2, 2], "dilations": [2, 3]}),
])
def test_window_sizes_are_what_the_evaluator_computes(op, x, w, attrs):
    """Conv's and the pools' spatial sizes by the window arithmetic (kernel from W or
    kernel_shape; strides, dilations, pads or auto_pad), as the evaluator runs the op."""
    from opshift.evaluator import evaluate

    inits = [] if w is None else [init("w", np.ones(w, np.float32))]
    m = make_model([helper.make_node(op, ["x"] + ["w"] * (w is not None), ["y"], **attrs)],
                   [vi("x", shape=x)], [vi("y")], opset=18, initializers=inits)
    want = evaluate(m, {"x": np.ones(x, np.float32)})["y"].shape
    assert shape_by_rule(op, [x] + [w] * (w is not None), **attrs) == want


def test_shape_gather_and_constant_of_shape():
    assert shape_by_rule("Shape", [("N", 3, 4)]) == (3,)
    assert shape_by_rule("Shape", [("N", 3, 4)], 15, start=1) == (2,)
    assert shape_by_rule("Shape", [None]) == (None,)
    assert shape_by_rule("Gather", [(4,), ()], axis=0) == ()
    assert shape_by_rule("Gather", [("N", 5, 6), (2, 3)], axis=1) == ("N", 2, 3, 6)
    assert shape_by_rule("ConstantOfShape", [(2,)], 9, {"i0": np.array([2, 5])}) == (2, 5)
    assert shape_by_rule("ConstantOfShape", [(2,)], 9) == (None, None)
    assert shape_by_rule("ConstantOfShape", [(0,)], 9, {"i0": np.zeros(0, np.int64)}) == ()


def test_malformed_nodes_give_no_shape():
    assert shape_by_rule("Transpose", [(2, 3)], perm=[0, 5]) is None
    assert shape_by_rule("Concat", [(2, 3), (2,)], axis=0) is None
    assert shape_by_rule("Flatten", [(2, 3)], axis=5) is None
    assert shape_by_rule("Unknown", [(2, 3)]) is None


def test_merge_fills_unknown_dims_and_never_contradicts():
    assert merge(("N", None, 3), (None, 4, 5)) == ("N", 4, 3)
    assert merge(("N", 3), (2, 3)) == (2, 3)  # an int says more than a name
    assert merge((2, 3), (2, 3, 4)) == (2, 3)  # ranks disagree: the first stands
    assert merge(None, (2,)) == (2,)
    assert merge((2,), None) == (2,)


def _ir3(nodes, inputs, outputs, inits, opset=7):
    m = make_model(nodes, inputs, outputs, opset=opset, initializers=inits, ir_version=3)
    for t in inits:
        m.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    return m


def test_facts_rank_where_onnx_inference_has_none():
    """An opset-7 classifier head: onnx's inference leaves Gemm's output without a shape; the
    rules give it (1, 10) and Softmax's output the same."""
    nodes = [helper.make_node("Flatten", ["x"], ["f"]),
             helper.make_node("Gemm", ["f", "w", "b"], ["g"], transB=1),
             helper.make_node("Softmax", ["g"], ["y"])]
    m = _ir3(nodes, [vi("x", shape=[1, 3, 4, 4])], [vi("y")],
             [init("w", np.ones((10, 48), np.float32)), init("b", np.ones(10, np.float32))])
    facts = Facts(m)
    assert facts.shape("y") == (1, 10)
    assert facts.shape("g") == (1, 10)
    assert facts.shape("f") == (1, 48)


def test_facts_keeps_declared_symbolic_dims_and_fills_unknown_ones():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("CustomOp", ["r"], ["c"], domain="custom"),
             helper.make_node("Gemm", ["c", "w"], ["y"])]
    m = make_model(nodes, [vi("x", shape=["N", 4])], [vi("y", shape=["N", None])], opset=13,
                   initializers=[init("w", np.ones((4, 6), np.float32))],
                   extra_opsets=[helper.make_opsetid("custom", 1)])
    facts = Facts(m)
    assert facts.shape("r") == ("N", 4)
    assert facts.shape("c") is None  # a custom op: nothing known
    assert facts.shape("y") == ("N", 6)


def test_facts_walks_a_long_chain_without_recursion():
    n = 5000
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h0"], name="gemm")]
    nodes += [helper.make_node("Relu", [f"h{i}"], [f"h{i + 1}"]) for i in range(n)]
    m = _ir3(nodes, [vi("x", shape=["N", 4])], [vi(f"h{n}")],
             [init("w", np.ones((4, 6), np.float32))])
    m.graph.input[0].type.tensor_type.ClearField("shape")  # no inference of anything
    assert Facts(m).shape(f"h{n}") == (None, 6)


def test_facts_cycle_does_not_hang():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])]
    m = make_model(nodes, [vi("x", shape=None)], [vi("b")], opset=13)
    assert Facts(m).shape("b") is None


def _pytorch_pads(x: str, pad: str) -> list:
    """Pad's pads as PyTorch's exporter computes them from constants (F.pad(x, (0, 32),
    "reflect") of a [N, T] input): ConstantOfShape, Concat, Reshape, a reversing Slice,
    Transpose, Reshape and Cast."""
    const, i64 = helper.make_tensor, TensorProto.INT64
    return [
        helper.make_node("Constant", [], ["n"], value=const("n", i64, [1], [2])),
        helper.make_node("ConstantOfShape", ["n"], ["zeros"], value=const("z", i64, [1], [0])),
        helper.make_node("Constant", [], ["last"], value=const("l", i64, [2], [0, 32])),
        helper.make_node("Concat", ["last", "zeros"], ["flat"], axis=0),
        helper.make_node("Constant", [], ["two"], value=const("t", i64, [2], [-1, 2])),
        helper.make_node("Reshape", ["flat", "two"], ["pairs"]),
        helper.make_node("Constant", [], ["s"], value=const("s", i64, [1], [-1])),
        helper.make_node("Constant", [], ["e"], value=const("e", i64, [1], [-(2**63)])),
        helper.make_node("Constant", [], ["a"], value=const("a", i64, [1], [0])),
        helper.make_node("Slice", ["pairs", "s", "e", "a", "s"], ["reversed"]),
        helper.make_node("Transpose", ["reversed"], ["cols"], perm=[1, 0]),
        helper.make_node("Constant", [], ["m1"], value=const("m", i64, [1], [-1])),
        helper.make_node("Reshape", ["cols", "m1"], ["pads64"]),
        helper.make_node("Cast", ["pads64"], [pad], to=i64),
        helper.make_node("Pad", [x, pad], ["padded"], mode="reflect")]


def test_facts_read_values_computed_from_constants():
    """A rule's constant input computed from constants alone (PyTorch's pads) is evaluated:
    the Pad's output and a Conv after it get their sizes; pads read from a run-time size are
    not a constant, and give unknown sizes."""
    nodes = _pytorch_pads("x", "pads") + [
        helper.make_node("Unsqueeze", ["padded", "one"], ["u"]),
        helper.make_node("Conv", ["u", "w"], ["y"], strides=[16])]
    m = make_model(nodes, [vi("x", shape=[1, 512])], [vi("y")], opset=16,
                   initializers=[init("one", np.array([1])), init("w", np.ones((8, 1, 64),
                                                                               np.float32))])
    facts = Facts(m)
    assert facts.shape("padded") == (1, 544)
    assert facts.shape("y") == (1, 8, 31)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "T"
    assert not isinstance(Facts(m).shape("padded")[1], int)
    nodes = [helper.make_node("Shape", ["x"], ["size"]),
             helper.make_node("Slice", ["size", "one", "two"], ["t"]),
             helper.make_node("Concat", ["zero", "t", "zero", "zero"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["padded"])]
    m = make_model(nodes, [vi("x", shape=[1, "T"])], [vi("padded")], opset=16,
                   initializers=[init("one", np.array([1])), init("two", np.array([2])),
                                 init("zero", np.array([0]))])
    assert not isinstance(Facts(m).shape("padded")[1], int)


def test_facts_rules_in_a_function_body():
    body = [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Softmax", ["f"], ["y"])]
    f = helper.make_function("local", "Head", ["x"], ["y"], body,
                             [helper.make_opsetid("", 11)])
    m = make_model([helper.make_node("Head", ["x"], ["y"], domain="local")],
                   [vi("x", shape=["N", 3, 2])], [vi("y")], opset=11, functions=[f],
                   extra_opsets=[helper.make_opsetid("local", 1)])
    facts = Facts(m)
    facts.enter_function(m.functions[0], {})
    try:
        assert facts.shape("f") == (None, None)
        assert facts.shape("y") == (None, None)
    finally:
        facts.enter_function(None, None)
    assert facts.shape("f") is None  # not a name of the main graph


def _ints(*vs):
    return {f"i{k}": np.array(v, np.int64) for k, v in vs}


@pytest.mark.parametrize("x,n,consts,want", [
    ((5, 6, 7), 4, _ints((1, [1]), (2, [4]), (3, [0])), (3, 6, 7)),
    ((5, 6, 7), 4, _ints((1, [-3]), (2, [100]), (3, [2])), (5, 6, 3)),  # clamped at the end
    ((5, 6, 7), 5, _ints((1, [4, 0]), (2, [-10, 3]), (3, [0, 1]), (4, [-1, 1])), (5, 3, 7)),
    ((5, 6, 7), 5, _ints((1, [-1]), (2, [-1000]), (3, [1]), (4, [-2])), (5, 3, 7)),
    ((5, 6, 7), 4, _ints((1, [2]), (2, [2]), (3, [2])), (5, 6, 0)),  # empty
    # a start before -size with a negative step is clamped to 0 (numpy's slice: nothing)
    ((5, 6, 7), 5, _ints((1, [-9]), (2, [-10]), (3, [0]), (4, [-1])), (1, 6, 7)),
    ((5, 6, 7), 5, _ints((1, [-9]), (2, [-9]), (3, [0]), (4, [-1])), (1, 6, 7)),
    (("N", 6, 7), 3, _ints((1, [0, 1]), (2, [9, 3])), (None, 2, 7)),  # no axes: 0 and 1
    (("N", 6, 7), 4, _ints((3, [2])), ("N", 6, None)),  # computed starts: that axis unknown
    (("N", 6, 7), 5, _ints((1, [0]), (2, [1]), (3, [1])), ("N", None, 7)),  # computed steps
    (("N", 6, 7), 4, _ints((1, [0]), (2, [1])), (None, None, None)),  # computed axes: rank
    (("N", 6, 7), 3, {}, (None, 6, 7)),  # no axes, computed starts: its length, 1
    (None, 3, {}, None),
])
def test_slice_keeps_the_rank_and_computes_what_it_can(x, n, consts, want):
    shapes = [x] + [(1,)] * (n - 1)
    assert shape_by_rule("Slice", shapes, 13, consts) == want


def test_slice_1_reads_its_attributes():
    assert shape_by_rule("Slice", [(4, 5)], 1, starts=[1], ends=[-1], axes=[1]) == (4, 3)


def test_slice_of_computed_starts_of_unknown_length_knows_only_the_rank():
    assert shape_by_rule("Slice", [(4, 5), None, None], 13) == (None, None)


@pytest.mark.parametrize("op,version,axes,attrs,want", [
    ("ReduceMean", 11, None, {"axes": [-1]}, ("N", 3, 1)),
    ("ReduceMean", 11, None, {"axes": [0, 2], "keepdims": 0}, (3,)),
    ("ReduceMean", 11, None, {}, (1, 1, 1)),  # no axes: every axis
    ("ReduceMean", 18, [1], {}, ("N", 1, 4)),
    ("ReduceMean", 18, [1, -1], {"keepdims": 0}, ("N",)),
    ("ReduceMean", 18, None, {"noop_with_empty_axes": 1}, ("N", 3, 4)),
    ("ReduceSum", 13, [0], {"keepdims": 0}, (3, 4)),
    ("ReduceMax", 18, None, {"keepdims": 0}, ()),
    ("ArgMax", 13, None, {"axis": -1}, ("N", 3, 1)),
    ("ArgMin", 13, None, {"axis": 1, "keepdims": 0}, ("N", 4)),
    ("ReduceL2", 18, "computed", {}, (None, None, None)),  # computed axes: the rank
    ("ReduceL2", 18, "computed", {"keepdims": 0}, None),
])
def test_reductions(op, version, axes, attrs, want):
    shapes = [("N", 3, 4)]
    consts = {}
    if axes is not None:
        shapes.append((1,))
        if axes != "computed":
            consts["i1"] = np.array(axes, np.int64)
    assert shape_by_rule(op, shapes, version, consts, **attrs) == want


def test_a_made_up_dim_name_is_worked_out_by_the_rules():
    # onnx's inference (and tf2onnx) name a dim nobody knows 'unk__N': where that is all the
    # other sources say, the rules still look (a real name is taken as it is)
    from opshift.graph.shape_walk import ShapeWalk

    consts = {"s": np.array([0], np.int64), "e": np.array([1], np.int64)}
    nodes = {"sh": helper.make_node("Shape", ["x"], ["sh"]),
             "one": helper.make_node("Slice", ["sh", "s", "e"], ["one"])}

    def walk(said: str) -> ShapeWalk:
        base = {"x": ("N", 3), "sh": (said,), "one": (said,)}
        return ShapeWalk(base.get, lambda v: (nodes[v], 13, consts.get, 0) if v in nodes
                         else None)

    assert walk("unk__7").shape("one") == (1,)
    assert walk("unk__7").shape("sh") == (2,)
    assert walk("batch_len").shape("one") == ("batch_len",)


def test_every_rule_agrees_with_onnx_node_tests():
    """Each one-node test of onnx whose op has a rule: the rule's shape of the test's first
    output, given the inputs' shapes and their small integer values as constants, never
    contradicts the expected output's (a dim it leaves unknown or names is no
    contradiction)."""
    import warnings

    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.case.node import collect_testcases

    from opshift import opsets
    from opshift.graph.shape_rules import ALL_OUTPUTS, rules

    def array(t):
        return numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else t

    with warnings.catch_warnings():  # (onnx's case generators cast out of range on purpose)
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    checked, wrong = 0, []
    for case in cases:
        g = case.model.graph
        if "expanded" in case.name or len(g.node) != 1:
            continue
        n = g.node[0]
        if n.domain not in ("", "ai.onnx") or n.op_type not in rules():
            continue
        opset = next(o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx"))
        inputs, outputs = case.data_sets[0]
        arrays = {vi.name: array(t) for vi, t in zip(g.input, inputs)}
        arrays = {k: a for k, a in arrays.items() if isinstance(a, (np.ndarray, np.generic))}
        consts = {k: a for k, a in arrays.items()
                  if np.asarray(a).dtype.kind in "iu" and np.ndim(a) <= 1 and np.size(a) <= 64}
        k = list(n.output).index(g.output[0].name)  # (LSTM's tests give only Y_h)
        if k and n.op_type not in ALL_OUTPUTS:
            continue
        got = output_shape(n, opsets.since_version(n.op_type, opset),
                           {k: np.shape(a) for k, a in arrays.items()}.get, consts.get, k)
        want = array(outputs[0])
        if got is None or not isinstance(want, (np.ndarray, np.generic)):
            continue
        checked += 1
        if len(got) != np.ndim(want) or any(isinstance(d, int) and d != w
                                            for d, w in zip(got, np.shape(want))):
            wrong.append((case.name, got, np.shape(want)))
    assert checked > 900 and not wrong, wrong[:5]


@pytest.mark.parametrize("op,gates", [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_recurrent_outputs_are_what_the_evaluator_computes(op, gates, direction, layout):
    """Y and Y_h (and LSTM's Y_c): sequence, directions, batch and hidden size (from W when
    the attribute is not set), batch first with layout=1."""
    from opshift.evaluator import evaluate

    dirs, hidden, seq, batch, size = 1 + (direction == "bidirectional"), 5, 4, 3, 2
    x = (batch, seq, size) if layout else (seq, batch, size)
    outs = ["y", "y_h"] + ["y_c"] * (op == "LSTM")
    attrs = {"direction": direction, "layout": layout}
    if layout == 0:
        attrs["hidden_size"] = hidden  # (else read from W)
    w = init("w", np.full((dirs, gates * hidden, size), 0.1, np.float32))
    r = init("r", np.full((dirs, gates * hidden, hidden), 0.1, np.float32))
    m = make_model([helper.make_node(op, ["x", "w", "r"], outs, **attrs)],
                   [vi("x", shape=x)], [vi(o) for o in outs], opset=14, initializers=[w, r])
    got = evaluate(m, {"x": np.ones(x, np.float32)})
    facts = Facts(m)
    for o in outs:
        assert facts.shape(o) == got[o].shape, o


def test_if_gives_the_dims_both_branches_agree_on():
    a = helper.make_graph([helper.make_node("Relu", ["x"], ["a"])], "a", [], [vi("a")])
    b = helper.make_graph([helper.make_node("Transpose", ["x"], ["b"], perm=[1, 0])], "b", [],
                          [vi("b")])
    same = helper.make_graph([helper.make_node("Neg", ["x"], ["s"])], "s", [], [vi("s")])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=a, else_branch=b),
             helper.make_node("If", ["c"], ["z"], then_branch=a, else_branch=same)]
    m = make_model(nodes, [vi("c", TensorProto.BOOL, []), vi("x", shape=[3, 3])],
                   [vi("y"), vi("z")], opset=13)
    m.graph.input[1].type.tensor_type.shape.dim[1].dim_value = 4  # x [3, 4]
    facts = Facts(m)
    assert not any(isinstance(d, int) for d in facts.shape("y"))
    assert facts.shape("z") == (3, 4)
