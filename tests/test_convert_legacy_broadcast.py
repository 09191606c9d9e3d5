"""convert down to opsets <= 6: binary ops with legacy ``broadcast``/``axis`` and PRelu slopes
that keep their form (issue 15).

The model mimics PyTorch's TorchScript exporter (torch 2.x, opset 13, dynamic ``N``/``H``/
``W``) on a small CNN whose per-channel terms are ``[1, C, 1, 1]`` constants, as
``x * scale + bias`` and folded BatchNorms export: Conv -> Add(bias) -> PRelu(slope
``[C, 1, 1]``, as ``symbolic_opset9.prelu`` unsqueezes it) -> Mul(scale, x) (the constant
first, as ``scale * x`` exports) -> ``1 - x`` (``rsub``: Sub of a scalar Constant) ->
Greater(threshold, x); the bias constant is shared by a second branch.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_outputs_exact, attrs, make_model, run_onnxruntime, vi
from onnx import TensorProto, helper, numpy_helper

from opshift.convert import convert
from opshift.convert.steps.broadcast_legacy import Placement, legacy_placement
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

F = TensorProto.FLOAT
C = 8


def torchscript_cnn(opset: int = 13, x_shape=("N", 3, "H", "W")) -> onnx.ModelProto:
    rng = np.random.default_rng(2)

    def arr(name, shape, scale=1.0):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    inits = [arr("conv.weight", (C, 3, 3, 3)), arr("bias", (1, C, 1, 1)),
             arr("scale", (1, C, 1, 1)), arr("threshold", (1, C, 1, 1), 0.1),
             numpy_helper.from_array((0.1 + np.arange(C) / 20).astype(np.float32)
                                     .reshape(C, 1, 1), "prelu.weight")]
    one = helper.make_node("Constant", [], ["/Constant_output_0"], name="/Constant",
                           value=numpy_helper.from_array(np.array(1.0, np.float32)))
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight"], ["/conv/Conv_output_0"],
                         name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["/conv/Conv_output_0", "bias"], ["/Add_output_0"],
                         name="/Add"),
        helper.make_node("PRelu", ["/Add_output_0", "prelu.weight"], ["/prelu/PRelu_output_0"],
                         name="/prelu/PRelu"),
        helper.make_node("Mul", ["scale", "/prelu/PRelu_output_0"], ["/Mul_output_0"],
                         name="/Mul"),
        one,
        helper.make_node("Sub", ["/Constant_output_0", "/Mul_output_0"], ["y"], name="/Sub"),
        helper.make_node("Greater", ["threshold", "y"], ["mask"], name="/Greater"),
        helper.make_node("Add", ["/conv/Conv_output_0", "bias"], ["z"], name="/Add_1"),
    ]
    return make_model(nodes, [vi("x", F, list(x_shape))],
                      [vi("y", F, 4), vi("mask", TensorProto.BOOL, 4), vi("z", F, 4)],
                      opset=opset, initializers=inits)


def feeds(h=6, w=7) -> dict[str, np.ndarray]:
    x = np.random.default_rng(h * w).standard_normal((2, 3, h, w)).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    return {"x": x}


def node(m: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in m.graph.node if n.name == name)


def dims(m: onnx.ModelProto, name: str) -> list[int]:
    return next(list(t.dims) for t in m.graph.initializer if t.name == name)


@pytest.mark.parametrize("target", [6, 1])
def test_cnn_down_to_legacy_broadcasting_is_exact(target):
    m = torchscript_cnn()
    out = convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    # [1, C, 1, 1] constants are read as [C] at axis 1
    add = node(out, "/Add")
    assert attrs(add) == {"broadcast": 1, "axis": 1} and dims(out, add.input[1]) == [C]
    assert dims(out, node(out, "/Add_1").input[1]) == [C]
    # the constant-first Mul swaps its operands; Greater(c, x) becomes Less(x, c)
    mul = node(out, "/Mul")
    assert mul.input[0] == "/prelu/PRelu_output_0" and attrs(mul) == {"broadcast": 1,
                                                                       "axis": 1}
    gt = node(out, "/Greater")
    assert gt.op_type == "Less" and list(gt.input)[0] == "y"
    # 1 - x: Add(Neg(x), 1) with the scalar broadcast
    sub = node(out, "/Sub")
    assert sub.op_type == "Add" and attrs(sub) == {"broadcast": 1}
    assert any(n.op_type == "Neg" for n in out.graph.node)
    # the PRelu slope keeps its [C, 1, 1] form: per channel under both readings
    assert dims(out, "prelu.weight") == [C, 1, 1]
    for f in (feeds(), feeds(5, 9)):
        assert_outputs_exact(evaluate(m, f), evaluate(out, f), f"opset {target}")


def test_cnn_round_trip_through_6_on_onnxruntime():
    # onnxruntime runs opset >= 7 only: the legacy model, converted back up, as a second
    # opinion on the forms written at 6
    m = torchscript_cnn()
    back = convert(convert(m, 6), 13)
    f = feeds()
    assert_outputs_exact(evaluate(m, f), evaluate(back, f))
    want, got = run_onnxruntime(m, f), run_onnxruntime(back, f)
    # onnxruntime fuses Conv + Add(bias) differently for the two bias shapes: its float sums
    # differ in their last bits, so its outputs y and z agree within rounding only
    for i in (0, 2):
        np.testing.assert_allclose(got[i], want[i], rtol=1e-5, atol=1e-5)


def test_refused_where_legacy_broadcasting_cannot_express_it():
    # X's channel count is symbolic: [1, C, 1, 1] may meet a dim of 1 (numpy then widens X)
    m = make_model([helper.make_node("Add", ["x", "b"], ["y"], name="/Add")],
                   [vi("x", F, ["N", "C", "H", "W"])], [vi("y", F, 4)], opset=13,
                   initializers=[numpy_helper.from_array(np.ones((1, 4, 1, 1), np.float32),
                                                         "b")])
    with pytest.raises(ConversionError, match=r"node '/Add' \(Add-13 -> 6.*dim 1 is 4 "
                                              r"against C"):
        convert(m, 6)
    # a constant dividend broadcast to a dynamic X: Div cannot trade its operands, and A
    # cannot be widened to an output shape that is not static
    m = make_model([helper.make_node("Div", ["b", "x"], ["y"], name="/Div")],
                   [vi("x", F, ["N", 4, "H", "W"])], [vi("y", F, 4)], opset=13,
                   initializers=[numpy_helper.from_array(np.ones((1, 4, 1, 1), np.float32),
                                                         "b")])
    with pytest.raises(ConversionError, match=r"node '/Div'.*cannot swap.*not static"):
        convert(m, 6)
    # both operands broadcast to a dynamic output, neither by a 1 against a known size (which
    # a Tile could widen: tests/test_convert_legacy_broadcast_tile.py): no legacy form
    m = make_model([helper.make_node("Mul", ["x", "z"], ["y"], name="/Mul")],
                   [vi("x", F, ["N", 1, 3]), vi("z", F, ["K", 4, 3])], [vi("y", F, 3)],
                   opset=13)
    with pytest.raises(ConversionError, match=r"node '/Mul'.*cannot express.*not static"):
        convert(m, 6)


def test_computed_operand_read_through_squeeze():
    m = make_model([helper.make_node("Sub", ["x", "s"], ["y"], name="/Sub")],
                   [vi("x", F, [2, 3, 4, 5]), vi("s", F, [1, 3, 4, 1])], [vi("y", F, 4)],
                   opset=13)
    out = convert(m, 6)
    sq = next(n for n in out.graph.node if n.op_type == "Squeeze")
    assert attrs(sq) == {"axes": [0, 3]} and attrs(node(out, "/Sub")) == {"broadcast": 1,
                                                                            "axis": 1}
    rng = np.random.default_rng(0)
    f = {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32),
         "s": rng.standard_normal((1, 3, 4, 1)).astype(np.float32)}
    assert_outputs_exact(evaluate(m, f), evaluate(out, f))


@pytest.mark.parametrize("big,small,want", [
    ((2, 3, 4, 5), (), Placement((), None)),
    ((2, 3, 4, 5), (1, 1), Placement((1, 1), None)),
    ((2, 3, 4, 5), (5,), Placement((5,), None)),
    ((2, 3, 4, 5), (4, 5), Placement((4, 5), None)),
    ((2, 3, 4, 5), (3, 1, 1), Placement((3,), 1, (1, 2))),
    ((2, 3, 4, 5), (1, 3, 4, 1), Placement((3, 4), 1, (0, 3))),
    ((2, 3, 4, 5), (2, 1, 1, 1), Placement((2,), 0, (1, 2, 3))),
    (("N", 3, "H", "W"), (1, 3, 1, 1), Placement((3,), 1, (0, 2, 3))),
    (("N", 1, 4, 5), (1, 1, 4, 1), Placement((4,), 2, (0, 1, 3))),
    ((2, 1, 4, 5), (3, 1, 1), "dim 1 is 3 against 1"),
    ((2, 3, 4, 5), (3, 1, 5), "dim 2 is 1 against 4"),
    ((3, 4), (1, 1, 1), "rank 3 > rank 2"),
])
def test_legacy_placement(big, small, want):
    got = legacy_placement(big, small)
    if isinstance(want, str):
        assert isinstance(got, str) and want in got
    else:
        assert got == want


@pytest.mark.parametrize("slope_shape,axis,legacy_dims", [((3, 1, 1), 1, [3]),
                                                          ((1, 1, 4, 1), 2, [4]),
                                                          ((4, 5), None, [4, 5])])
def test_integer_prelu_at_6_places_its_slope_with_legacy_mul(slope_shape, axis, legacy_dims):
    # PRelu-6 has no int32: x + (x < 0) * (slope * x - x), the slope placed by Mul-6
    n = int(np.prod(slope_shape))
    s = numpy_helper.from_array(np.arange(-3, n - 3, dtype=np.int32).reshape(slope_shape), "s")
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"], name="p")],
                   [vi("x", TensorProto.INT32, [2, 3, 4, 5])], [vi("y", TensorProto.INT32, 4)],
                   opset=16, initializers=[s])
    out = convert(m, 6)
    mul = next(n for n in out.graph.node if n.op_type == "Mul" and "s" in n.input)
    assert attrs(mul) == ({"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis})
    assert dims(out, "s") == legacy_dims
    x = np.random.default_rng(0).integers(-100, 100, (2, 3, 4, 5)).astype(np.int32)
    assert_outputs_exact(evaluate(m, {"x": x}), evaluate(out, {"x": x}))


def _runs(x_shape: tuple) -> list[tuple]:
    """Every constant shape numpy broadcasts to ``x_shape`` that is one run of its dims with
    1s around it, with and without the leading 1s."""
    r = len(x_shape)
    out = []
    for lo in range(r):
        for hi in range(lo, r):
            full = tuple(d if lo <= i <= hi else 1 for i, d in enumerate(x_shape))
            out += [full, full[lo:]]
    return out


@pytest.mark.parametrize("op,first", [("Add", False), ("Sub", False), ("Div", False),
                                      ("Pow", False), ("Mul", True), ("Sub", True),
                                      ("Greater", True), ("Less", False)])
def test_every_run_shaped_constant_converts_exactly(op, first):
    rng = np.random.default_rng(3)
    x_shape = (2, 3, 4, 5)
    x = rng.standard_normal(x_shape).astype(np.float32)
    x.flat[:4] = [np.nan, np.inf, -0.0, 0.0]
    for c_shape in _runs(x_shape):
        c = rng.standard_normal(c_shape).astype(np.float32) + 2.0
        inputs = ["c", "x"] if first else ["x", "c"]
        out_t = TensorProto.BOOL if op in ("Greater", "Less") else F
        m = make_model([helper.make_node(op, inputs, ["y"], name="n")],
                       [vi("x", F, list(x_shape))], [vi("y", out_t, 4)], opset=13,
                       initializers=[numpy_helper.from_array(np.asarray(c), "c")])
        for target in (6, 1):
            out = convert(m, target)
            assert_outputs_exact(evaluate(m, {"x": x}), evaluate(out, {"x": x}),
                                 f"{op} {c_shape} at {target}")


def _special(shape: tuple, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    v.flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0][:v.size]
    return v


@pytest.mark.parametrize("op", ["Div", "Pow"])
@pytest.mark.parametrize("computed", [False, True])
@pytest.mark.parametrize("source,target", [(13, 6), (13, 1), (7, 6), (7, 1)])
def test_div_pow_with_a_broadcast_first_operand_widen_it(op, computed, source, target):
    # A [1, C, 1, 1] broadcasts to x [2, C, 4, 5]: neither op trades its operands, so A is
    # given the static output shape (a constant rewritten, a computed A multiplied by ones)
    a = _special((1, C, 1, 1), 1)
    inits = [] if computed else [numpy_helper.from_array(a, "a")]
    ins = [vi("x", F, [2, C, 4, 5])] + ([vi("a", F, [1, C, 1, 1])] if computed else [])
    m = make_model([helper.make_node(op, ["a", "x"], ["y"], name="/n")], ins, [vi("y", F, 4)],
                   opset=source, initializers=inits)
    out = convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    n = node(out, "/n")
    assert n.op_type == op and n.input[1] == "x" and attrs(n) == {}
    if computed:
        mul = next(k for k in out.graph.node if k.op_type == "Mul")
        assert attrs(mul) == {"broadcast": 1, "axis": 1} and n.input[0] == mul.output[0]
        assert dims(out, mul.input[0]) == [2, C, 4, 5]
    else:
        assert [k.op_type for k in out.graph.node] == [op]
        assert dims(out, n.input[0]) == [2, C, 4, 5] and "a" not in {
            t.name for t in out.graph.initializer}
    f = {"x": _special((2, C, 4, 5), 2)} | ({"a": a} if computed else {})
    got = evaluate(out, f)
    assert_outputs_exact(evaluate(m, f), got, f"{op} {source} -> {target}")
    assert np.isnan(got["y"]).any()  # the special values reached the output


def test_shared_constant_first_operand_is_copied_when_widened():
    a = numpy_helper.from_array(_special((1, C, 1, 1), 3), "a")
    m = make_model([helper.make_node("Div", ["a", "x"], ["y"], name="/Div"),
                    helper.make_node("Add", ["x", "a"], ["z"], name="/Add")],
                   [vi("x", F, [2, C, 4, 5])], [vi("y", F, 4), vi("z", F, 4)], opset=13,
                   initializers=[a])
    out = convert(m, 6)
    assert node(out, "/Div").input[0] != "a" and dims(out, node(out, "/Div").input[0]) == [
        2, C, 4, 5]
    assert dims(out, node(out, "/Add").input[1]) == [C]
    f = {"x": _special((2, C, 4, 5), 4)}
    assert_outputs_exact(evaluate(m, f), evaluate(out, f))


@pytest.mark.parametrize("const_b", [False, True])
def test_both_operands_broadcast_to_a_static_shape(const_b):
    # [2, 1, 4, 1] + [1, 3, 1, 5]: A widened to [2, 3, 4, 5] by Mul with ones; B is not one
    # run of it, so B is widened too (a constant rewritten, a computed B multiplied by ones)
    b = _special((1, 3, 1, 5), 5)
    inits = [numpy_helper.from_array(b, "b")] if const_b else []
    ins = [vi("a", F, [2, 1, 4, 1])] + ([] if const_b else [vi("b", F, [1, 3, 1, 5])])
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="/Add")], ins,
                   [vi("y", F, 4)], opset=13, initializers=inits)
    out = convert(m, 6)
    onnx.checker.check_model(out, full_check=True)
    muls = [k for k in out.graph.node if k.op_type == "Mul"]
    assert len(muls) == (1 if const_b else 2) and attrs(node(out, "/Add")) == {}
    # A's dims 0 and 2 are no run of [2, 3, 4, 5]: ones [3, 5, 2, 4] * A[2, 4], transposed back
    tr = next(k for k in out.graph.node if k.op_type == "Transpose")
    assert attrs(tr) == {"perm": [2, 0, 3, 1]} and dims(out, muls[0].input[0]) == [3, 5, 2, 4]
    f = {"a": _special((2, 1, 4, 1), 6)} | ({} if const_b else {"b": b})
    assert_outputs_exact(evaluate(m, f), evaluate(out, f))


def test_both_broadcast_with_b_placed_after_widening_a():
    # [2, 1, 5] * [3, 1]: out [2, 3, 5]; after A is widened B [3, 1] is not a run either,
    # but [2, 1, 1] / [3, 5] places B as the trailing run [3, 5]
    m = make_model([helper.make_node("Div", ["a", "b"], ["y"], name="/Div")],
                   [vi("a", F, [2, 1, 1]), vi("b", F, [3, 5])], [vi("y", F, 3)], opset=13)
    out = convert(m, 6)
    assert attrs(node(out, "/Div")) == {"broadcast": 1}
    f = {"a": _special((2, 1, 1), 7), "b": _special((3, 5), 8)}
    assert_outputs_exact(evaluate(m, f), evaluate(out, f))


def test_bool_operand_that_needs_widening_by_mul_is_refused():
    # And on bool: A [1, 3, 1, 1] and B [2, 1, 4, 5] both broadcast; Mul has no bool
    B = TensorProto.BOOL
    m = make_model([helper.make_node("And", ["a", "b"], ["y"], name="/And")],
                   [vi("a", B, [1, 3, 1, 1]), vi("b", B, [2, 1, 4, 5])], [vi("y", B, 4)],
                   opset=13)
    with pytest.raises(ConversionError, match=r"node '/And'.*Mul-6 accepts, not bool"):
        convert(m, 6)


def test_integer_div_widens_a_computed_first_operand_at_6():
    # Mul-6 takes int32: A [3, 1] widened to [2, 3, 5] by ones; integer division truncates
    I = TensorProto.INT32
    m = make_model([helper.make_node("Div", ["a", "x"], ["y"], name="/Div")],
                   [vi("a", I, [3, 1]), vi("x", I, [2, 3, 5])], [vi("y", I, 3)], opset=13)
    out = convert(m, 6)
    rng = np.random.default_rng(9)
    f = {"a": rng.integers(-50, 50, (3, 1)).astype(np.int32),
         "x": rng.choice([-7, -3, -1, 1, 2, 5], (2, 3, 5)).astype(np.int32)}
    assert_outputs_exact(evaluate(m, f), evaluate(out, f))
