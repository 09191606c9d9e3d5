"""Clip with an omitted bound clamps to the type's lowest/largest finite value (Clip-11+)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from opshift.evaluator import evaluate


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_clip_omitted_bound_clamps_infinities_to_the_type_limits(dtype):
    x = np.array([-np.inf, -1, 0.5, np.inf], dtype=dtype)
    lo = np.array(-1, dtype=dtype)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Clip", ["x", "lo"], ["y"])], "g",
        [helper.make_tensor_value_info("x", t, [4]), helper.make_tensor_value_info("lo", t, [])],
        [helper.make_tensor_value_info("y", t, [4])]),
        opset_imports=[helper.make_opsetid("", 13)])
    y = evaluate(m, {"x": x, "lo": lo})["y"]
    assert y.dtype == dtype
    assert y.tolist() == [-1, -1, 0.5, float(np.finfo(dtype).max)]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("opset", [6, 13])
def test_clip_keeps_x_where_it_equals_a_bound(dtype, opset):
    """Clip keeps x where it equals a bound, -0.0 at a bound of +0.0 and +0.0 at -0.0 (as
    numpy's clip, onnx.reference's kernel, and onnxruntime do; numpy's maximum gives either
    zero depending on the type); NaN stays NaN, a NaN bound makes every value NaN."""
    from onnx.reference import ReferenceEvaluator

    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    x = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, -2, 2], dtype=dtype)
    for lo, hi in ((0.0, 1.0), (-0.0, 0.0), (-1.0, -0.0), (np.nan, 1.0)):
        if opset == 6:
            if np.isnan(lo):
                continue  # (an attribute)
            node = helper.make_node("Clip", ["x"], ["y"], min=lo, max=hi)
            inputs = [helper.make_tensor_value_info("x", t, [7])]
            feeds = {"x": x}
        else:
            node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
            inputs = [helper.make_tensor_value_info(n, t, s) for n, s in
                      (("x", [7]), ("lo", []), ("hi", []))]
            feeds = {"x": x, "lo": np.array(lo, dtype), "hi": np.array(hi, dtype)}
        m = helper.make_model(helper.make_graph([node], "g", inputs,
                                                [helper.make_tensor_value_info("y", t, [7])]),
                              opset_imports=[helper.make_opsetid("", opset)])
        y = evaluate(m, feeds)["y"]
        want = np.clip(x, dtype(lo), dtype(hi))
        assert y.dtype == dtype
        np.testing.assert_array_equal(np.signbit(y), np.signbit(want), f"{lo}, {hi}")
        np.testing.assert_array_equal(y, want)
        (ref,) = ReferenceEvaluator(m).run(None, feeds)
        np.testing.assert_array_equal(np.signbit(y), np.signbit(ref), f"{lo}, {hi}")
