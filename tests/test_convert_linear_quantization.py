"""DequantizeLinear and QuantizeLinear where they cannot stay themselves -- per-axis scales
below 13, anything below 10 -- written from opset 7 as their formulas: (Cast(x) -
Cast(zero_point)) * scale in float32, bit for bit the op's values for int8, uint8 and int32;
Cast(Clip(Round(x / scale) + zero_point)) with NaN as the lowest value, bit for bit for
float x (saturating, ties, infinities); per tensor and per axis, any axis, onnxruntime
beside; below 7 and for other types refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, assert_exact, make_model, onnxruntime_outputs, vi
from convert_helpers import F, one, roundtrip
from onnx import TensorProto, helper, numpy_helper
from onnx import TensorProto as T

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

SHAPE = (2, 3, 4)


def _model(dtype, per_axis: int | None, zero_point: bool = True) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    n = SHAPE[per_axis] if per_axis is not None else None
    scale = (rng.uniform(1e-3, 3, n) if n else np.array(0.0137)).astype(np.float32)
    inits = [numpy_helper.from_array(scale, "scale")]
    ins = ["x", "scale"]
    if zero_point:
        info = np.iinfo(dtype)
        zp = rng.integers(info.min, info.max, n, endpoint=True) if n else np.array(7)
        if dtype == np.int32:
            zp = np.zeros_like(zp)
        inits.append(numpy_helper.from_array(zp.astype(dtype), "zp"))
        ins.append("zp")
    attrs = {"axis": per_axis} if per_axis is not None else {}
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return make_model([helper.make_node("DequantizeLinear", ins, ["y"], name="dq", **attrs)],
                      [vi("x", elem, list(SHAPE))], [vi("y", T.FLOAT, list(SHAPE))],
                      opset=13, initializers=inits)


def _x(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if dtype != np.int32 else (-2**30, 2**31 - 1)
    x = np.random.default_rng(1).integers(lo, hi, SHAPE, endpoint=True).astype(dtype)
    x.flat[:2] = (info.min, info.max)
    return x


@pytest.mark.parametrize("target", [12, 10, 9, 7])
@pytest.mark.parametrize("per_axis", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32], ids=lambda t: t.__name__)
def test_the_formula_gives_dequantize_linears_values(dtype, per_axis, target):
    m = _model(dtype, per_axis)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    if per_axis is None and target >= 10:
        convert_proto(c, target)  # per tensor it stays DequantizeLinear
        assert [n.op_type for n in c.graph.node] == ["DequantizeLinear"]
        return
    convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    assert "DequantizeLinear" not in {n.op_type for n in c.graph.node}
    assert "Reshape" not in {n.op_type for n in c.graph.node}  # constants written reshaped
    x = _x(dtype)
    want = evaluate(m, {"x": x})["y"]
    assert_exact(want, evaluate(c, {"x": x})["y"], f"axis {per_axis} at {target}")
    ort = onnxruntime_outputs(c, {"x": x})
    if not isinstance(ort, str):
        assert_exact(want, ort[0], f"onnxruntime, axis {per_axis} at {target}")


def test_no_zero_point_and_the_refusals():
    m = _model(np.uint8, 1, zero_point=False)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, 9)
    x = _x(np.uint8)
    assert_exact(evaluate(m, {"x": x})["y"], evaluate(c, {"x": x})["y"], "no zero point")
    with pytest.raises(ConversionError, match=r"its formula is written from opset 7"):
        convert_proto(_model(np.int8, None), 6)


def _quantize(out, per_axis: int | None, zero_point: bool = True) -> onnx.ModelProto:
    rng = np.random.default_rng(2)
    n = SHAPE[per_axis] if per_axis is not None else None
    scale = (rng.uniform(1e-3, 3, n) if n else np.array(0.0137)).astype(np.float32)
    inits, ins = [numpy_helper.from_array(scale, "scale")], ["x", "scale"]
    if zero_point:
        info = np.iinfo(out)
        zp = rng.integers(info.min, info.max, n, endpoint=True) if n else np.array(7)
        inits.append(numpy_helper.from_array(zp.astype(out), "zp"))
        ins.append("zp")
    attrs = {"axis": per_axis} if per_axis is not None else {}
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(out))
    return make_model([helper.make_node("QuantizeLinear", ins, ["y"], name="q", **attrs)],
                      [vi("x", T.FLOAT, list(SHAPE))], [vi("y", elem, list(SHAPE))],
                      opset=13, initializers=inits)


@pytest.mark.parametrize("target", [12, 10, 9, 8, 7])
@pytest.mark.parametrize("per_axis", [None, 1, -1])
@pytest.mark.parametrize("out", [np.int8, np.uint8], ids=lambda t: t.__name__)
def test_the_formula_gives_quantize_linears_values(out, per_axis, target):
    m = _quantize(out, per_axis)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    stays = per_axis is None and target >= 10
    assert ("QuantizeLinear" in {n.op_type for n in c.graph.node}) == stays
    x = (np.random.default_rng(3).standard_normal(SHAPE) * 3).astype(np.float32)
    x.flat[:10] = [np.nan, np.inf, -np.inf, 1e10, -1e10, 3.4e38, -0.0, 0.0137 * 2.5,
                   -0.0137 * 0.5, 1e-45]
    assert_conversion_exact(m, c, {"x": x}, output="y")


def test_quantize_without_zero_point_and_of_other_types():
    m = _quantize(np.uint8, 1, zero_point=False)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, 9)
    x = (np.random.default_rng(4).standard_normal(SHAPE) * 300).astype(np.float32)
    assert_conversion_exact(m, c, {"x": x}, output="y")
    with pytest.raises(ConversionError, match=r"its formula is written from opset 7"):
        convert_proto(_quantize(np.uint8, None), 6)


def test_quantize_per_axis_below_13_is_its_formula():
    def q(scale):
        s = numpy_helper.from_array(np.asarray(scale, np.float32), "s")
        return make_model([one("QuantizeLinear", ["x", "s"], ["y"], axis=1)],
                          [vi("x", F, [2, 3])], [vi("y", TensorProto.UINT8, [2, 3])],
                          opset=13, initializers=[s])
    x = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) * 100}
    m = q(0.5)
    roundtrip(m, 13, 10, x)
    assert [n.op_type for n in m.graph.node] == ["QuantizeLinear"]
    m = q([0.5, 1.0, 2.0])
    roundtrip(m, 13, 10, x)
    assert "QuantizeLinear" not in [n.op_type for n in m.graph.node]
