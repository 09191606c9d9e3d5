"""Features that exist only from a newer version and have no older exact form
(conversion/steps/refused.py): refused going down, the model untouched."""

from __future__ import annotations

import pytest
from conftest import make_model, vi
from convert_helpers import I64, F, convert_other_ops, one
from onnx import TensorProto

from opshift.errors import ConversionError


def test_more_refusals():
    cases = [
        (one("OneHot", ["i", "d", "v"], ["y"]),
         [vi("i", I64, [2]), vi("d", I64, [1]), vi("v", F, [2])], 11, 9,
         r"OneHot-11 -> OneHot-9.*negative indices"),
        (one("ScatterElements", ["x", "i", "u"], ["y"], reduction="max"),
         [vi("x", F, [3]), vi("i", I64, [1]), vi("u", F, [1])], 18, 16,
         r"ScatterElements-18 -> ScatterElements-16.*reduction"),
        (one("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=1),
         [vi("x", F, [1, 2, 3]), vi("s", F, [2]), vi("b", F, [2])], 21, 18,
         r"GroupNormalization-21 -> GroupNormalization-18.*per channel"),
        (one("Pad", ["x", "p"], ["y"], mode="wrap"), [vi("x", F, [3]), vi("p", I64, [2])],
         19, 18, r"Pad-19 -> Pad-18.*wrap"),
        (one("Dropout", ["x", "r", "t"], ["y"]),
         [vi("x", F, [3]), vi("r", F, []), vi("t", TensorProto.BOOL, [])], 13, 10,
         r"Dropout-12 -> Dropout-10.*training_mode.*not a constant"),
        (one("Gemm", ["a", "b", "c"], ["y"]),
         [vi("a", F, [2, 3]), vi("b", F, [3, 4]), vi("c", F, [2, 1])], 13, 6,
         r"Gemm-7 -> Gemm-6.*C of shape \(2, 1\)"),
        (one("Upsample", ["x", "s"], ["y"]), [vi("x", F, [1, 4]), vi("s", F, [2])], 9, 7,
         r"Upsample-9 -> Upsample-7.*scales \(input 1, 's'\) is not a constant"),
        (one("Tile", ["x", "t", "a"], ["y"]),
         [vi("x", F, [3]), vi("t", F, [1]), vi("a", F, [1])], 1, 6,
         r"Tile-1 -> Tile-6.*3 inputs"),
    ]
    for n, inputs, src, tgt, pattern in cases:
        m = make_model([n], inputs, [vi("y", F, None)], opset=src)
        before = m.SerializeToString()
        with pytest.raises(ConversionError, match=pattern):
            convert_other_ops(m, src, tgt)
        assert m.SerializeToString() == before
