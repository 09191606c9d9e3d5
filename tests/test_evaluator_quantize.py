"""The evaluator's QuantizeLinear to integer types: round(x / scale) + zero point saturated to
the type, for quotients past int32 as well (huge values, infinities), NaN as the type's
lowest value; per tensor, per axis and per block; float8 outputs through onnx.reference. The
meaning is computed here element by element with Python's own rounding (half to even) and
integers."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.evaluator import evaluate

RANGES = {np.uint8: (0, 255), np.int8: (-128, 127), np.uint16: (0, 65535),
          np.int16: (-32768, 32767)}
X = np.array([1e10, -1e10, 3e9, -3e9, np.inf, -np.inf, np.nan, 3.4e38, 0.5, 1.5, 2.5, -0.5,
              -2.5, 127.5, -128.5, 255.49, 1e-45, -0.0, 65535.5, -40000.0], np.float32)


def _meaning(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, dtype) -> np.ndarray:
    lo, hi = RANGES[dtype]
    q = np.empty(x.shape, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        quotient = (x / scale).astype(np.float32)  # the division in x's type
    for i, v in np.ndenumerate(np.broadcast_to(quotient, x.shape)):
        z = int(np.broadcast_to(zp, x.shape)[i])
        q[i] = lo if np.isnan(v) else (hi if v > 0 else lo) if np.isinf(v) else \
            min(max(round(float(v)) + z, lo), hi)
    return q


def _model(opset: int, x_shape, scale: np.ndarray, zp: np.ndarray, **attrs) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(zp.dtype)
    return make_model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], **attrs)],
                      [vi("x", T.FLOAT, list(x_shape))], [vi("y", elem, list(x_shape))],
                      opset=opset, initializers=[numpy_helper.from_array(scale, "s"),
                                                 numpy_helper.from_array(zp, "z")])


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 25])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16],
                         ids=lambda t: t.__name__)
def test_quantize_linear_saturates_every_quotient(dtype, opset):
    if opset < 21 and np.dtype(dtype).itemsize == 2:
        pytest.skip("16-bit outputs exist from QuantizeLinear-21")
    scale, zp = np.array(0.5, np.float32), np.array(3 if dtype in (np.uint8, np.uint16) else -3,
                                                    dtype)
    m = _model(opset, X.shape, scale, zp)
    got = evaluate(m, {"x": X})["y"]
    want = _meaning(X, scale, zp, dtype)
    assert got.dtype == want.dtype and np.array_equal(got, want), (got, want)
    theirs = onnxruntime_outputs(m, {"x": X})
    if not isinstance(theirs, str):  # a second opinion
        assert np.array_equal(theirs[0], want)


def test_quantize_linear_per_axis_and_per_block():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 6)) * 1e3).astype(np.float32)
    x[0, 0], x[1, 5] = 1e12, -np.inf
    per_axis = np.array([0.5, 2.0, 1e-3, 4.0, 0.25, 8.0], np.float32)
    zp_axis = np.arange(6, dtype=np.uint8) * 40
    m = _model(13, x.shape, per_axis, zp_axis, axis=1)
    assert np.array_equal(evaluate(m, {"x": x})["y"],
                          _meaning(x, per_axis.reshape(1, 6), zp_axis.reshape(1, 6), np.uint8))
    blocks = np.array([[0.5, 1e-3, 2.0], [4.0, 0.25, 1e-2]], np.float32)
    zp_blocks = np.array([[1, -7, 100], [0, 5, -128]], np.int8)
    m = _model(21, x.shape, blocks, zp_blocks, axis=1, block_size=2)
    want = _meaning(x, np.repeat(blocks, 2, axis=1), np.repeat(zp_blocks, 2, axis=1), np.int8)
    assert np.array_equal(evaluate(m, {"x": x})["y"], want)


def test_quantize_linear_to_float8_is_onnx_references():
    from onnx.reference import ReferenceEvaluator

    x = np.array([0.0, -0.0, 1.5, -3.0, 1e6, -1e6, 1e-9], np.float32)
    zp = helper.make_tensor("z", T.FLOAT8E4M3FN, [], [0.0])
    m = make_model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
                   [vi("x", T.FLOAT, [7])], [vi("y", T.FLOAT8E4M3FN, [7])], opset=19,
                   initializers=[numpy_helper.from_array(np.array(2.0, np.float32), "s"), zp])
    got = evaluate(m, {"x": x})["y"]
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert got.tobytes() == want.tobytes()
