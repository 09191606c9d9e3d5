"""Sign below 9 (from 7): (x > 0) - (x < 0) in x's type, NaN added back for floats (-0.0
gives +0.0, as Sign does); integers compared as float64, 8- and 16-bit ones through int32;
unsigned as x > 0. Bit for bit against Sign-13 on the evaluator, with numpy's sign as the
meaning, and on onnxruntime where it runs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_conversion_exact, converted, make_model, vi
from onnx import helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError

TYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64,
         np.uint8, np.uint16, np.uint32, np.uint64]


def _model(dtype):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return make_model([helper.make_node("Sign", ["x"], ["y"])], [vi("x", elem, ["n"])],
                      [vi("y", elem, ["n"])], opset=13)


def _values(dtype) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        fi = np.finfo(dtype)
        return np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, fi.max, -fi.max,
                         fi.smallest_subnormal, -fi.smallest_subnormal, 2.5, -0.5], dtype)
    ii = np.iinfo(dtype)
    return np.array(sorted({ii.min, ii.min + 1, -1 if ii.min else 0, 0, 1, ii.max - 1, ii.max,
                            2 ** 53 + 1 if ii.max > 2 ** 53 else 1}), dtype)


@pytest.mark.parametrize("target", [7, 8])
@pytest.mark.parametrize("dtype", TYPES, ids=lambda t: t.__name__)
def test_sign_below_9(dtype, target):
    m = _model(dtype)
    c = converted(m, target)
    assert "Sign" not in {n.op_type for n in c.graph.node}
    x = _values(dtype)
    assert_conversion_exact(m, c, {"x": x}, np.sign(x), output="y")


def test_sign_below_7_is_refused():
    with pytest.raises(ConversionError, match="below opset 7 the comparisons"):
        convert_proto(_model(np.float32), 6)
