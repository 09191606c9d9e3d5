"""Pad below 11 with pads computed at run time, from 7: each axis cropped where its pads are
negative and filled where positive (constant, edge) or read at reflected positions (reflect,
repeatedly for pads of the axis's size or more), bit for bit Pad-13's values for every sign of
every pad (onnxruntime beside it), integer types included (which Pad-2 lacks); a computed
constant_value and targets below 7 refused."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import assert_exact, converted, make_model, onnxruntime_session, vi
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.convert.engine import convert_proto
from opshift.errors import ConversionError, EvaluationError
from opshift.evaluator import evaluate


def _pad(elem: int, value=None, mode: str = "constant", value_input: bool = False):
    ins, inits, given = ["x", "p"], [], [vi("x", elem, ["a", "b"]), vi("p", T.INT64, [4])]
    if value is not None:
        ins.append("v")
        inits.append(numpy_helper.from_array(
            np.array(value, helper.tensor_dtype_to_np_dtype(elem)), "v"))
    if value_input:
        ins.append("v")
        given.append(vi("v", elem, []))
    return make_model([helper.make_node("Pad", ins, ["y"], name="pad", mode=mode)], given,
                      [vi("y", elem, 2)], opset=13, initializers=inits)


@pytest.mark.parametrize("target", [10, 9, 8, 7])
@pytest.mark.parametrize("elem,value,mode", [(T.FLOAT, None, "constant"),
                                             (T.FLOAT, -2.5, "constant"),
                                             (T.INT32, 7, "constant"), (T.FLOAT, None, "edge"),
                                             (T.INT64, None, "edge"), (T.FLOAT, None, "reflect"),
                                             (T.INT32, None, "reflect")],
                         ids=["float", "float value", "int32 value", "edge", "int64 edge",
                              "reflect", "int32 reflect"])
def test_computed_pads_give_pad_13s_values(elem, value, mode, target):
    m = _pad(elem, value, mode)
    c = converted(m, target)
    assert "Pad" not in {n.op_type for n in c.graph.node}
    assert "v" not in {t.name for t in c.graph.initializer}  # the value is the fills' now
    x = np.arange(12).reshape(3, 4).astype(helper.tensor_dtype_to_np_dtype(elem))
    ort_run = onnxruntime_session(c)
    checked = 0
    for p in itertools.product([0, 2, -1, -3], [0, 1, -2], [0, 3, -1], [0, 1, -4]):
        feeds = {"x": x, "p": np.array(p, np.int64)}
        try:
            want = evaluate(m, feeds)["y"]
        except EvaluationError:  # edge or reflect of an axis cropped empty: no value
            assert mode != "constant"
            with pytest.raises(EvaluationError):
                evaluate(c, feeds)
            continue
        assert_exact(want, evaluate(c, feeds)["y"], f"pads {p}")
        ort = ort_run if isinstance(ort_run, str) else ort_run(feeds)
        if not isinstance(ort, str):
            assert_exact(want, ort[0], f"onnxruntime, pads {p}")
        checked += 1
    assert checked > 80


def test_a_computed_value_and_below_7_are_refused():
    with pytest.raises(ConversionError, match=r"pads \(input 1, 'p'\) is not a constant"):
        convert_proto(_pad(T.FLOAT), 6)
    with pytest.raises(ConversionError, match="is not a constant"):
        convert_proto(_pad(T.FLOAT, value_input=True), 10)
