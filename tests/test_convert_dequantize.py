"""DequantizeLinear where it cannot stay itself -- per-axis scales below 13, anything below 10
-- written from opset 7 as (Cast(x) - Cast(zero_point)) * scale in float32: bit for bit the
op's values for int8, uint8 and int32 (per tensor and per axis, any axis), onnxruntime beside
it; below 7 and for other types refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.conversion.engine import convert_proto
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
