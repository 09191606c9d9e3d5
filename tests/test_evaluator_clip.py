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
