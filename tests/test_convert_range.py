"""Range below 11 (from 7): its count in double, float values added up
by a Loop, integer values start + i * delta (the positions a Loop's iteration numbers below
9), each checked bit for bit against Range-11 on the evaluator for
ordinary, empty, non-finite and wrapping ranges, and against onnxruntime where it runs."""

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

RANGES = {
    np.float32: [(0, 10, 1), (0.1, 1, 0.1), (1, -1, -0.3), (-2.5, 7.25, 0.01), (5, 5, 1),
                 (3, 0, 1), (0, np.inf, 1), (np.nan, 3, 1), (0, 3, np.nan), (0, 1, np.inf),
                 (16777216, 16777230, 1)],  # (past 2**24 the additions round: all 16777216)
    np.float64: [(0, 10, 1), (0.1, 1, 0.1), (1e300, 1.0000001e300, 1e293), (0, 0, 1)],
    np.int32: [(0, 10, 3), (10, -10, -3), (2**31 - 5, 2**31 - 1, 1), (5, 0, 1),
               (-2**31, -2**31 + 10, 2), (2**31 - 3, -2**31, -2**30)],
    np.int64: [(0, 10, 3), (2**62, 2**62 + 20, 7), (-7, 7, 2), (2**63 - 4, 2**63 - 1, 1),
               (3, 3, 1)],
}


def _range(elem: int) -> onnx.ModelProto:
    return make_model([helper.make_node("Range", ["s", "l", "d"], ["y"])],
                      [vi(n, elem, []) for n in "sld"], [vi("y", elem, 1)], opset=13)


@pytest.mark.parametrize("target", [10, 9, 8, 7])
@pytest.mark.parametrize("dtype", list(RANGES), ids=lambda t: t.__name__)
def test_range_below_11_computes_range_11s_values(dtype, target):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = _range(elem)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    ops = {n.op_type for n in c.graph.node}
    assert "Range" not in ops
    # floats add up in a Loop; integers' positions are a Loop's iteration numbers below 9
    assert ("Loop" in ops) == (dtype in (np.float32, np.float64) or target < 9)
    for start, limit, delta in RANGES[dtype]:
        feeds = {k: np.array(v, dtype) for k, v in zip("sld", (start, limit, delta))}
        want = evaluate(m, feeds)["y"]
        assert_exact(want, evaluate(c, feeds)["y"], f"Range({start}, {limit}, {delta})")
        ort = onnxruntime_outputs(c, feeds)
        if not isinstance(ort, str):  # a second opinion: what it cannot run is not asserted
            assert_exact(want, ort[0], f"onnxruntime, Range({start}, {limit}, {delta})")


def test_range_below_7_and_int16_are_refused():
    with pytest.raises(ConversionError, match=r"below opset 7 Mul and Add broadcast"):
        convert_proto(_range(T.INT64), 6)
    with pytest.raises(ConversionError, match=r"its type is INT16; below 11 it is written"):
        convert_proto(_range(T.INT16), 10)


def test_range_loop_body_names_are_its_own():
    """The Loop's body reads delta from the graph around it: its own names are fresh, so a
    delta (or start, limit) named like them is still read."""
    m = make_model([helper.make_node("Range", ["last", "more", "next"], ["value"])],
                   [vi(n, T.FLOAT, []) for n in ("last", "more", "next")],
                   [vi("value", T.FLOAT, 1)], opset=13)
    c = onnx.ModelProto()
    c.CopyFrom(m)
    convert_proto(c, 9)
    onnx.checker.check_model(c, full_check=True)
    feeds = {"last": np.float32(1), "more": np.float32(4), "next": np.float32(0.5)}
    assert_exact(evaluate(m, feeds)["value"], evaluate(c, feeds)["value"])
    assert evaluate(c, feeds)["value"].tolist() == [1, 1.5, 2, 2.5, 3, 3.5]
