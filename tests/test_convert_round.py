"""Round below 11 (from 7): Floor(|x|) plus 1 past a half or at an odd half, x's sign put
back; float16 through float. Bit for bit against Round-11 on the evaluator, with numpy's
round (half to even) as the meaning, and on onnxruntime where it runs: ties, signed zeros,
the x in (-0.5, 0) that round to -0.0, subnormals, values about 2**(p-1) and 2**p, the
largest values, infinities and NaN."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError


def _model(elem: int, opset: int = 11) -> onnx.ModelProto:
    return make_model([helper.make_node("Round", ["x"], ["y"])], [vi("x", elem, ["n"])],
                      [vi("y", elem, ["n"])], opset=opset)


def _values(dtype) -> np.ndarray:
    fi = np.finfo(dtype)
    m = 2.0 ** fi.nmant  # 2**(p-1)
    edge = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.3, -0.5000001,
            np.inf, -np.inf, np.nan, fi.max, -fi.max, fi.tiny, -fi.tiny,
            fi.smallest_subnormal, -fi.smallest_subnormal, m, m - 0.5, m - 1.5, m + 1,
            -(m - 0.5), 0.75 * m + 0.5, 2 * m + 2, 4 * m + 4]
    rng = np.random.default_rng(0)
    scale = rng.choice([1.0, 10.0, 1000.0, m, 2 * m], 2000)
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(edge).astype(dtype),
                               (rng.standard_normal(2000) * scale).astype(dtype),
                               (np.floor(rng.standard_normal(1000) * 100) + 0.5).astype(dtype)])


@pytest.mark.parametrize("target", [7, 8, 9, 10])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64], ids=lambda t: t.__name__)
def test_round_below_11_rounds_half_to_even(dtype, target):
    m = _model(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    c = converted(m, target)
    assert "Round" not in {n.op_type for n in c.graph.node}
    x = _values(dtype)
    assert_conversion_exact(m, c, {"x": x}, np.round(x), output="y")


def test_round_below_7_and_of_other_types_is_refused():
    with pytest.raises(ConversionError, match=r"below opset 7 the ops it is written with"):
        convert_proto(_model(T.FLOAT), 6)
    with pytest.raises(ConversionError, match=r"tensor\(bfloat16\), not allowed at Round-11"):
        convert_proto(_model(T.BFLOAT16, opset=22), 10)
