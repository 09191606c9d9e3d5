"""MatMulInteger and ConvInteger below 10 (from 7): the zero-point-free integers multiplied as
int32 (MatMul from 9) or as float32 or float64 cast to int32 (below 9, and Conv: float32 while
its sums are exact there), with zero points per
tensor, per row of A, per column of B and per output channel of W; bit for bit against the
ops on the evaluator, the extremes of each type included, and on onnxruntime where it runs;
float64 sums too long to stay within int32, and other types, refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, converted, make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError

RNG = np.random.default_rng(0)


def _ints(dtype, shape) -> np.ndarray:
    info = np.iinfo(dtype)
    v = RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    v.flat[:2] = (info.min, info.max)
    return v


def _matmul(at, bt, zero_points: str | None, k: int = 5):
    ins, inits = ["a", "b"], []
    if zero_points == "tensor":
        inits = [numpy_helper.from_array(_ints(at, ()), "za"),
                 numpy_helper.from_array(_ints(bt, ()), "zb")]
    elif zero_points == "row and column":
        inits = [numpy_helper.from_array(_ints(at, (3,)), "za"),
                 numpy_helper.from_array(_ints(bt, (4,)), "zb")]
    ins += [i.name for i in inits]
    ea, eb = (helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in (at, bt))
    return make_model([helper.make_node("MatMulInteger", ins, ["y"])],
                      [vi("a", ea, [3, k]), vi("b", eb, [k, 4])], [vi("y", T.INT32, [3, 4])],
                      opset=10, initializers=inits)


@pytest.mark.parametrize("target", [9, 8, 7])
@pytest.mark.parametrize("zero_points", [None, "tensor", "row and column"])
@pytest.mark.parametrize("at,bt", [(np.uint8, np.int8), (np.int8, np.int8),
                                   (np.uint8, np.uint8), (np.int8, np.uint8)])
def test_matmul_integer_below_10(at, bt, zero_points, target):
    m = _matmul(at, bt, zero_points)
    c = converted(m, target)
    ops = [n.op_type for n in c.graph.node]
    assert "MatMulInteger" not in ops and "MatMul" in ops
    a, b = _ints(at, (3, 5)), _ints(bt, (5, 4))
    meaning = None
    if zero_points is None:  # the meaning: the product of the integers
        meaning = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    assert_conversion_exact(m, c, {"a": a, "b": b}, meaning, output="y")


@pytest.mark.parametrize("target", [9, 7])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("channels", [3, 40])  # sums of 27 terms; of 360, in 2 parts of 180
def test_conv_integer_below_10(per_channel, target, channels):
    w = _ints(np.int8, (4, channels, 3, 3))
    zw = _ints(np.int8, (4,) if per_channel else ())
    m = make_model([helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"],
                                     pads=[1, 1, 1, 1], strides=[2, 1])],
                   [vi("x", T.UINT8, [1, channels, 6, 6])], [vi("y", T.INT32, [1, 4, 3, 6])],
                   opset=10, initializers=[numpy_helper.from_array(w, "w"),
                                           numpy_helper.from_array(np.array(128, np.uint8),
                                                                   "zx"),
                                           numpy_helper.from_array(zw, "zw")])
    c = converted(m, target)
    assert [n.op_type for n in c.graph.node].count("Conv") == (1 if channels == 3 else 2)
    wide = next(a.i for n in c.graph.node if n.op_type == "Cast" for a in n.attribute)
    assert wide == T.FLOAT
    assert_conversion_exact(m, c, {"x": _ints(np.uint8, (1, channels, 6, 6))}, output="y")


def test_int32_matmul_runs_on_onnxruntime():
    """A second opinion that MatMul-9 on int32 is what the converted model needs."""
    m = _matmul(np.uint8, np.int8, "tensor")
    c = converted(m, 9)
    got = onnxruntime_outputs(c, {"a": _ints(np.uint8, (3, 5)), "b": _ints(np.int8, (5, 4))})
    if isinstance(got, str):
        pytest.skip(got)
    assert got[0].dtype == np.int32


def test_long_sums_below_9_and_other_types_are_refused():
    with pytest.raises(ConversionError, match=r"its sums have 40000 terms: it is summed in "
                                              r"floats"):
        convert_proto(_matmul(np.uint8, np.int8, None, k=40000), 8)
    convert_proto(_matmul(np.uint8, np.int8, None, k=40000), 9)  # (int32 wraps as it does)
    m = _matmul(np.uint8, np.int8, None)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "k"
    m.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "k"  # (B's gives it else)
    with pytest.raises(ConversionError, match=r"the length of its sums is unknown"):
        convert_proto(m, 7)
    with pytest.raises(ConversionError, match=r"below opset 7"):
        convert_proto(_matmul(np.uint8, np.int8, None), 6)


# -- long sums in float32 parts: forms the runtimes run ----------------------------------------

def _openvino_outputs(model, feeds, tmp_path) -> list[np.ndarray]:
    """OpenVINO's outputs of ``model`` (a third opinion; the test is skipped without it)."""
    ov = pytest.importorskip("openvino")
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    compiled = ov.Core().compile_model(str(path), "CPU")
    result = compiled(feeds)
    return [result[o] for o in compiled.outputs]


def _assert_runs_exactly(m, c, feeds, tmp_path) -> None:
    """``c`` computes ``m``'s y bit for bit on the evaluator, in no float64, and onnxruntime
    and OpenVINO run it to the original's numbers (the point of the form: not skipped when
    onnxruntime cannot load it)."""
    assert not any(a.name == "to" and a.i == T.DOUBLE for n in c.graph.node
                   for a in n.attribute)
    assert_conversion_exact(m, c, feeds, output="y")
    pytest.importorskip("onnxruntime")
    from opshift.evaluator import evaluate

    want = evaluate(m, feeds)["y"]
    theirs = onnxruntime_outputs(c, feeds)
    assert not isinstance(theirs, str), theirs
    np.testing.assert_array_equal(theirs[0], want)
    np.testing.assert_array_equal(_openvino_outputs(c, feeds, tmp_path)[0], want)


def _conv(xt, wt, channels: int, zero_points: bool, *, group: int = 1, kernel=(3, 3)):
    w = _ints(wt, (4, channels // group, *kernel))
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if zero_points:  # per tensor for x, per output channel for W
        inits += [numpy_helper.from_array(_ints(xt, ()), "zx"),
                  numpy_helper.from_array(_ints(wt, (4,)), "zw")]
        ins += ["zx", "zw"]
    ex, ew = (helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in (xt, wt))
    pads = [k // 2 for k in kernel] * 2
    return make_model([helper.make_node("ConvInteger", ins, ["y"], pads=pads, group=group)],
                      [vi("x", ex, [1, channels, 5, 5])], [vi("y", T.INT32, [1, 4, 5, 5])],
                      opset=10, initializers=inits)


@pytest.mark.parametrize("target", [9, 7])
@pytest.mark.parametrize("zero_points", [False, True])
@pytest.mark.parametrize("channels", [64, 256])  # 576 and 2304 terms: 3 and 10 parts
@pytest.mark.parametrize("xt,wt", [(np.uint8, np.int8), (np.int8, np.uint8),
                                   (np.uint8, np.uint8)])
def test_conv_integer_long_sums_in_float32_parts(xt, wt, channels, zero_points, target,
                                                 tmp_path):
    m = _conv(xt, wt, channels, zero_points)
    c = converted(m, target)
    parts = -(-channels // (258 // 9))  # whole channels of 9 terms, at most 28 a part
    assert [n.op_type for n in c.graph.node].count("Conv") == parts
    _assert_runs_exactly(m, c, {"x": _ints(xt, (1, channels, 5, 5))}, tmp_path)


def test_grouped_conv_integer_in_parts(tmp_path):
    """Each part takes the same input channels of every group."""
    m = _conv(np.uint8, np.int8, 128, True, group=2)  # 64 per group: 3 parts
    c = converted(m, 9)
    assert [n.op_type for n in c.graph.node].count("Conv") == 3
    _assert_runs_exactly(m, c, {"x": _ints(np.uint8, (1, 128, 5, 5))}, tmp_path)


@pytest.mark.parametrize("target", [8, 7])
def test_matmul_integer_long_sums_in_float32_parts(target, tmp_path):
    m = _matmul(np.uint8, np.int8, "row and column", k=600)  # 3 parts of 200
    c = converted(m, target)
    assert [n.op_type for n in c.graph.node].count("MatMul") == 3
    _assert_runs_exactly(m, c, {"a": _ints(np.uint8, (3, 600)), "b": _ints(np.int8, (600, 4))},
                         tmp_path)


def test_conv_integer_with_a_kernel_too_big_for_parts_says_what_cannot_run_it():
    """A kernel of 17 x 17 = 289 terms cannot be cut by channels: float64, exact, and the
    change says in one line that onnxruntime has no float64 Conv."""
    m = _conv(np.uint8, np.int8, 2, True, kernel=(17, 17))
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 17
    m.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 17
    m.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 17
    m.graph.output[0].type.tensor_type.shape.dim[3].dim_value = 17
    c = onnx.ModelProto()
    c.CopyFrom(m)
    result = convert_proto(c, 9)
    (change,) = [ch for ch in result.changes if ch.op == "ConvInteger"]
    assert "\n" not in change.what
    assert change.what.endswith("in double (578 terms; onnxruntime has no float64 Conv "
                                "kernel: it cannot run this model)")
    assert_conversion_exact(m, c, {"x": _ints(np.uint8, (1, 2, 17, 17))}, output="y")
