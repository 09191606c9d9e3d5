"""DepthToSpace mode 'CRD' below 11 (from 7): Reshape -> Transpose -> Reshape, with constant
shapes where X's dims are known and shapes read at run time where not; the same values as
DepthToSpace-13 bit for bit (a data movement), onnxruntime beside it; below 7 refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, make_model, onnxruntime_outputs, vi
from onnx import TensorProto as T
from onnx import helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate


def _model(x_shape, mode: str = "CRD", b: int = 2) -> onnx.ModelProto:
    return make_model([helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=b,
                                        mode=mode)],
                      [vi("x", T.FLOAT, x_shape)], [vi("y", T.FLOAT, 4)], opset=13)


@pytest.mark.parametrize("target", [10, 9, 7])
@pytest.mark.parametrize("x_shape", [[2, 12, 3, 5], ["n", 12, "h", "w"]],
                         ids=["static", "dynamic"])
def test_crd_is_reshape_transpose_reshape(x_shape, target):
    m = _model(x_shape)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    ops = [n.op_type for n in c.graph.node]
    assert "DepthToSpace" not in ops and ops.count("Reshape") == 2 and "Transpose" in ops
    assert ("Shape" in ops) == isinstance(x_shape[0], str)
    sizes = [(2, 3, 5)] if isinstance(x_shape[0], int) else [(2, 3, 5), (1, 1, 1), (3, 4, 2)]
    for n, h, w in sizes:
        x = np.random.default_rng(n * h * w).standard_normal((n, 12, h, w)).astype(np.float32)
        want = evaluate(m, {"x": x})["y"]
        # CRD by its definition: channel c*b*b + i*b + j goes to row h*b + i, column w*b + j
        assert_exact(x.reshape(n, 3, 2, 2, h, w).transpose(0, 1, 4, 2, 5, 3)
                     .reshape(n, 3, h * 2, w * 2), want, "definition")
        assert_exact(want, evaluate(c, {"x": x})["y"], f"{n}x{h}x{w} at {target}")
        ort = onnxruntime_outputs(c, {"x": x})
        if not isinstance(ort, str):
            assert_exact(want, ort[0], f"onnxruntime {n}x{h}x{w} at {target}")


def test_dcr_stays_a_depth_to_space_and_crd_below_7_is_refused():
    c = _model([1, 8, 2, 2], mode="DCR")
    convert_proto(c, 9)
    assert [n.op_type for n in c.graph.node] == ["DepthToSpace"]
    with pytest.raises(ConversionError, match=r"mode 'CRD' below 11 is a Reshape and "
                                              r"Transpose .* written from opset 7"):
        convert_proto(_model([1, 8, 2, 2]), 6)
    with pytest.raises(ConversionError, match=r"10 channels are not a multiple of "
                                              r"blocksize\*\*2 = 4"):
        convert_proto(_model([1, 10, 2, 2]), 9)
