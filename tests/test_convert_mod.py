"""Mod below 10 (from 7), for integers: C's remainder a - b * (a / b), given the divisor's sign
for fmod=0, 8- and 16-bit types through int32; bit for bit against Mod-10 on the evaluator at
signs, extremes and INT_MIN mod -1 (which the converted model divides by 1, never by -1), and
on onnxruntime where it runs. Mod-28's floored remainder of floats (fmod=0) refused below 28."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, make_model, onnxruntime_outputs, vi
from convert_helpers import F, convert_other_ops, one, roundtrip
from onnx import TensorProto, helper
from onnx import TensorProto as T

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _mod(elem: int, fmod: int) -> onnx.ModelProto:
    return make_model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
                      [vi("a", elem, [12]), vi("b", elem, [12])], [vi("y", elem, [12])],
                      opset=13)


def _operands(dtype) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    if info.min < 0:
        return (np.array([7, -7, 7, -7, 0, info.min, info.max, info.min, 5, -1, 3, info.max],
                         dtype),
                np.array([3, 3, -3, -3, 5, -1, 7, 3, 1, 2, -2, -1], dtype))
    return (np.array([7, 7, 0, info.max, 5, 1, 3, info.max, 0, 2, 9, 4], dtype),
            np.array([3, info.max, 5, 1, 7, 3, 1, 2, 2, info.max, 4, 4], dtype))


@pytest.mark.parametrize("target", [9, 8, 7])
@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", TYPES, ids=lambda t: t.__name__)
def test_integer_mod_below_10(dtype, fmod, target):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = _mod(elem, fmod)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    assert "Mod" not in {n.op_type for n in c.graph.node}
    a, b = _operands(dtype)
    with np.errstate(all="ignore"):
        want = evaluate(m, {"a": a, "b": b})["y"]
        assert_exact(want, evaluate(c, {"a": a, "b": b})["y"])
    theirs = onnxruntime_outputs(c, {"a": a, "b": b})
    if not isinstance(theirs, str):  # a second opinion: what it cannot run is not asserted
        assert_exact(want, theirs[0], "onnxruntime")


def test_float_mod_and_mod_below_7_are_refused():
    with pytest.raises(ConversionError, match=r"its inputs are FLOAT: below 10 it is written "
                                              r"for integers only"):
        convert_proto(_mod(T.FLOAT, 1), 9)
    with pytest.raises(ConversionError, match=r"below opset 7 the ops it is written with"):
        convert_proto(_mod(T.INT32, 0), 6)


def test_mod_28_floored_remainder_of_floats_is_refused_below_28():
    """Mod-28 takes fmod=0 on floats (the floored remainder); before, fmod=0 is for integers:
    refused going down (a model that computes it cannot be written), integers cross."""
    def mod(elem, **kw):
        return make_model([one("Mod", ["a", "b"], ["y"], **kw)],
                          [vi("a", elem, [3]), vi("b", elem, [3])], [vi("y", elem, [3])],
                          opset=28)
    with pytest.raises(ConversionError, match=r"Mod-28 -> 13.*fmod=0 on floating-point "
                                              r"values"):
        convert_other_ops(mod(F), 28, 13)
    roundtrip(mod(F, fmod=1), 28, 13, {"a": np.float32([7.5, -7, 5]),
                                       "b": np.float32([3, 2.5, -2])})
    m = mod(TensorProto.INT32)
    roundtrip(m, 28, 13, {"a": np.int32([7, -7, 5]), "b": np.int32([3, 3, -2])})
