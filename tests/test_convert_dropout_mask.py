"""Dropout's mask across opset 10 (conversion/steps/training.py): X's type before 10, bool
from 10; all ones in inference. A mask read by nothing is dropped, a read one is cast back
to the type its readers had, both ways; every result checked on the evaluator."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import make_model
from onnx import TensorProto as T
from onnx import helper

import opshift
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.verify import compare

X = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
LATEST = onnx.defs.onnx_opset_version()


def _dropout(opset: int, mask_read: bool, mask_type: int = T.FLOAT) -> onnx.ModelProto:
    attrs = {"ratio": 0.25} if opset < 12 else {}
    if opset < 7:
        attrs["is_test"] = 1
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"], **attrs)]
    outputs = [helper.make_tensor_value_info("y", T.FLOAT, list(X.shape))]
    if mask_read:  # the mask feeds a node and is a graph output
        nodes.append(helper.make_node("Not" if mask_type == T.BOOL else "Neg", ["mask"],
                                      ["m2"]))
        outputs += [helper.make_tensor_value_info("mask", mask_type, list(X.shape)),
                    helper.make_tensor_value_info("m2", mask_type, list(X.shape))]
    return make_model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, list(X.shape))],
                      outputs, opset=opset)


def _same(a: onnx.ModelProto, b: onnx.ModelProto) -> None:
    ra, rb = evaluate(a, {"x": X}), evaluate(b, {"x": X})
    assert list(ra) == list(rb)
    for name in ra:
        c = compare(ra[name], rb[name])
        assert c.ok, (name, c.reason)


@pytest.mark.parametrize("source", [6, 7, 9])
def test_unread_mask_is_dropped_going_up(source):
    m = _dropout(source, mask_read=False)
    for target in (10, 12, 13, LATEST):
        out = opshift.convert(m, target)
        (d,) = out.graph.node
        assert d.op_type == "Dropout" and list(d.output) == ["y"], target
        _same(m, out)


@pytest.mark.parametrize("source", [6, 9])
def test_read_mask_is_cast_to_its_old_type_going_up(source):
    m = _dropout(source, mask_read=True)
    out = opshift.convert(m, 13)
    onnx.checker.check_model(out, full_check=True)
    ops = [n.op_type for n in out.graph.node]
    assert ops == ["Dropout", "Cast", "Neg"]
    cast = out.graph.node[1]
    assert list(cast.output) == ["mask"] and cast.attribute[0].i == T.FLOAT
    _same(m, out)
    ra = evaluate(out, {"x": X})
    assert ra["mask"].dtype == np.float32 and np.all(ra["mask"] == 1)


@pytest.mark.parametrize("target", [9, 7, 6, 1])
def test_bool_mask_comes_down_as_a_cast(target):
    m = _dropout(13, mask_read=True, mask_type=T.BOOL)
    out = opshift.convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    assert [n.op_type for n in out.graph.node] == ["Dropout", "Cast", "Not"]
    _same(m, out)
    assert evaluate(out, {"x": X})["mask"].dtype == np.bool_


def test_mask_of_unknown_type_is_refused_where_read():
    m = _dropout(9, mask_read=True)
    del m.graph.input[:]
    m.graph.input.append(helper.make_tensor_value_info("x", T.UNDEFINED, None))
    before = m.SerializeToString()
    with pytest.raises(ConversionError,
                       match=r"Dropout-7 -> Dropout-10.*mask 'mask' is read.*type of X"):
        opshift.convert(m, 13)
    assert m.SerializeToString() == before
