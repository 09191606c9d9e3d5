"""Broadcasting before opset 7/8, op by op (conversion/steps/broadcast_legacy.py): binary ops
with legacy ``broadcast``/``axis`` both ways, variadic ops (Sum, Max, Min, Mean) whose inputs
must all have the output's shape below 8, and Gemm's C below 7."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import attrs, make_model, vi
from convert_helpers import X234, F, convert, convert_other_ops, node, one, roundtrip, run_ort
from onnx import numpy_helper

from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def test_binary_broadcast_down_to_6_and_up_again():
    b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    m = make_model([one("Sub", ["x", "b"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=14, initializers=[b])
    roundtrip(m, 14, 6, {"x": X234})
    assert attrs(m.graph.node[0]) == {"broadcast": 1}
    roundtrip(m, 6, 7, {"x": X234})
    assert attrs(m.graph.node[0]) == {}


def test_binary_broadcast_commutative_swap_and_refusal():
    a = numpy_helper.from_array(np.arange(4, dtype=np.float32), "a")
    m = make_model([one("Add", ["a", "x"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=13, initializers=[a])
    roundtrip(m, 13, 6, {"x": X234})
    assert list(m.graph.node[0].input) == ["x", "a"]
    # Div cannot swap: its constant dividend is written broadcast to the static output shape
    m = make_model([one("Div", ["a", "x"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=13, initializers=[a])
    roundtrip(m, 13, 6, {"x": X234})
    assert [i.dims for i in m.graph.initializer] == [[2, 3, 4]]
    m = make_model([one("Div", ["a", "x"], ["y"])], [vi("x", F, ["N", 3, 4])],
                   [vi("y", F, ["N", 3, 4])], opset=13, initializers=[a])
    with pytest.raises(ConversionError, match=r"node 'n_div' \(Div-13 -> 6.*Div-7 -> Div-6.*"
                                              r"legacy broadcasting.*cannot swap"):
        convert_other_ops(m, 13, 6)
    # (z of [1, 4]: x is tiled to [N, 4], tests/test_convert_legacy_broadcast_tile.py)
    m = make_model([one("Mul", ["x", "z"], ["y"])], [vi("x", F, ["N", 1]), vi("z", F, ["K", 4])],
                   [vi("y", F, ["N", 4])], opset=13)
    with pytest.raises(ConversionError, match="cannot express"):
        convert_other_ops(m, 13, 5)


def test_binary_legacy_axis_upgrade_reshapes_b():
    b = numpy_helper.from_array(np.arange(3, dtype=np.float32) + 1, "b")
    m = make_model([one("Div", ["x", "b"], ["y"], broadcast=1, axis=1)],
                   [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], opset=6, initializers=[b])
    convert(m, 6, 7)
    assert attrs(m.graph.node[0]) == {}
    (y,) = run_ort(m, {"x": X234})
    np.testing.assert_allclose(y, X234 / (np.arange(3, dtype=np.float32) + 1)[:, None],
                               rtol=1e-6)
    # The evaluator's legacy broadcasting agrees with that reading of axis=1.
    m6 = make_model([one("Div", ["x", "b"], ["y"], broadcast=1, axis=1)],
                    [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])], opset=6, initializers=[b])
    np.testing.assert_allclose(evaluate(m6, {"x": X234})["y"], y, rtol=1e-6)


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
@pytest.mark.parametrize("target", [7, 6])
def test_variadic_inputs_widened_below_8(op, target):
    """Before 8 every input has the output's shape: a computed input of another shape is
    multiplied by ones of it (at 6 through legacy broadcast, a Transpose when its dims are
    not one run), a constant one written broadcast."""
    rng = np.random.default_rng(8)
    k = numpy_helper.from_array(rng.standard_normal((1, 3)).astype(np.float32), "k")
    m = make_model([one(op, ["x", "z", "w", "k"], ["y"])],
                   [vi("x", F, [2, 3]), vi("z", F, [3]), vi("w", F, [2, 1])],
                   [vi("y", F, [2, 3])], opset=13, initializers=[k])
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32),
             "z": np.array([-0.0, np.inf, np.nan], np.float32),
             "w": rng.standard_normal((2, 1)).astype(np.float32)}
    roundtrip(m, 13, target, feeds)
    (n,) = [n for n in m.graph.node if n.op_type == op]
    assert n.input[0] == "x" and all(i != name for i, name in zip(n.input[1:], "zwk"))


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
@pytest.mark.parametrize("target", [7, 6])
def test_variadic_inputs_tiled_to_a_symbolic_shape_below_8(op, target):
    """With a symbolic output shape, the input every other broadcasts into gives it at run
    time: the others (a scalar, a constant [1, 1, 1], a computed [3] and [n, 1, 3]) are
    given its rank and tiled by its shape where their dims are 1."""
    rng = np.random.default_rng(8)
    k = numpy_helper.from_array(np.array([[[0.25]]], np.float32), "k")
    s = numpy_helper.from_array(np.array(-0.0, np.float32), "s")
    m = make_model([one(op, ["x", "z", "s", "k", "w"], ["y"])],
                   [vi("x", F, ["n", 2, 3]), vi("z", F, [3]), vi("w", F, ["n", 1, 3])],
                   [vi("y", F, ["n", 2, 3])], opset=13, initializers=[k, s])
    for n in (1, 4):
        feeds = {"x": rng.standard_normal((n, 2, 3)).astype(np.float32),
                 "z": np.array([-0.0, np.inf, np.nan], np.float32),
                 "w": rng.standard_normal((n, 1, 3)).astype(np.float32)}
        c = onnx.ModelProto()
        c.CopyFrom(m)
        roundtrip(c, 13, target, feeds)
        assert [n.op_type for n in c.graph.node].count("Tile") == 4
        (node_,) = [n for n in c.graph.node if n.op_type == op]
        assert node_.input[0] == "x" and all(i != name for i, name in
                                             zip(node_.input[1:], "zskw"))


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
@pytest.mark.parametrize("target", [7, 6])
def test_variadic_inputs_tiled_to_their_broadcast_below_8(op, target):
    """With no input known to hold the output's shape ([n, 1] and [3]; [m, 21, 5] and [k, 21,
    5], as a TensorFlow maximum of two batches), the broadcast of their shapes is read at run
    time: a dim of 1 takes the others' (a 0 wins over a 1), and each input is tiled by it
    where its dims are 1."""
    rng = np.random.default_rng(9)
    special = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1.5, -2.5], np.float32)
    for (a, b, y), runs in ((["n", 1], ["j"], ["n", "i"]),
                            [((2, 1), (3,)), ((0, 1), (3,)), ((1, 1), (1,)), ((2, 1), (0,))]), \
            ((["m", 21, 5], ["k", 21, 5], ["j", 21, 5]),
             [((2, 21, 5), (2, 21, 5)), ((1, 21, 5), (3, 21, 5)), ((3, 21, 5), (1, 21, 5)),
              ((0, 21, 5), (1, 21, 5))]):
        m = make_model([one(op, ["x", "z"], ["y"])], [vi("x", F, a), vi("z", F, b)],
                       [vi("y", F, y)], opset=13)
        for sx, sz in runs:
            c = onnx.ModelProto()
            c.CopyFrom(m)
            roundtrip(c, 13, target, {"x": rng.choice(special, sx), "z": rng.choice(special, sz)})
            assert [n.op_type for n in c.graph.node].count("Tile") == 2


def test_variadic_inputs_of_unknown_rank_are_refused_below_8():
    m = make_model([one("Sum", ["x", "z"], ["y"])], [vi("x", F, ["n", 1]), vi("z", F, None)],
                   [vi("y", F, ["n", "j"])], opset=13)
    with pytest.raises(ConversionError, match=r"Sum-8 -> Sum-6.*one shape.*neither static nor "
                                              r"of a known rank"):
        convert_other_ops(m, 13, 7)


def test_gemm_optional_c_and_legacy_broadcast():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4))
    w = numpy_helper.from_array(b.astype(np.float32), "w")
    m = make_model([one("Gemm", ["a", "w"], ["y"])], [vi("a", F, [2, 3])], [vi("y", F, [2, 4])],
                   opset=13, initializers=[w])
    roundtrip(m, 13, 6, {"a": a})
    assert attrs(m.graph.node[0]) == {"broadcast": 1} and len(m.graph.node[0].input) == 3
    c = numpy_helper.from_array(np.arange(4, dtype=np.float32), "c")
    m = make_model([one("Gemm", ["a", "w", "c"], ["y"], broadcast=1)], [vi("a", F, [2, 3])],
                   [vi("y", F, [2, 4])], opset=6, initializers=[w, c])
    convert(m, 6, 13)
    np.testing.assert_allclose(run_ort(m, {"a": a})[0], a @ b.astype(np.float32) + np.arange(4),
                               rtol=1e-5)


@pytest.mark.parametrize("const", [True, False])
def test_gemm_c_with_outer_ones_below_7(const):
    """C of shape [1, 4] on Y [2, 4] is not a trailing shape of Y, but C without its outer
    1s is: Gemm-6 gets C as [4] (a constant reshaped in place, a computed one through
    Squeeze) with broadcast=1, the same values."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    w = numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "w")
    c = rng.standard_normal((1, 4)).astype(np.float32)
    inits = [w, numpy_helper.from_array(c, "c")] if const else [w]
    inputs = [vi("a", F, [2, 3])] + ([] if const else [vi("c", F, [1, 4])])
    m = make_model([one("Gemm", ["a", "w", "c"], ["y"], beta=0.5)], inputs,
                   [vi("y", F, [2, 4])], opset=13, initializers=inits)
    feeds = {"a": a} if const else {"a": a, "c": c}
    roundtrip(m, 13, 6, feeds)
    gemm = node(m, "Gemm")
    assert attrs(gemm)["broadcast"] == 1
    if const:
        assert [n.op_type for n in m.graph.node] == ["Gemm"]
        assert list(next(t for t in m.graph.initializer if t.name == gemm.input[2]).dims) == [4]
    else:
        assert [n.op_type for n in m.graph.node] == ["Squeeze", "Gemm"]
