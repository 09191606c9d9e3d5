"""Facts answers a shape the model fully declares without onnx shape inference, and asks
inference only for shapes the declarations leave open."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opshift
from opshift.graph.facts import Facts


@pytest.fixture
def inference_calls(monkeypatch) -> list[int]:
    """Counts the runs of onnx shape inference."""
    calls: list[int] = []
    real = onnx.shape_inference.infer_shapes

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counted)
    return calls


def _model(y_dims: list, opset: int = 6) -> onnx.ModelProto:
    """x [1, 4, 3, 3] -> Add(x, x) = y (declared ``y_dims``) -> PRelu(y, slope [4]) = z."""
    slope = numpy_helper.from_array(np.linspace(0.1, 0.4, 4, dtype=np.float32), "slope")
    nodes = [helper.make_node("Add", ["x", "x"], ["y"], name="add"),
             helper.make_node("PRelu", ["y", "slope"], ["z"], name="prelu")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3]),
                     helper.make_tensor_value_info("slope", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 3, 3])], [slope],
        value_info=[helper.make_tensor_value_info("y", TensorProto.FLOAT, y_dims)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 3
    return m


def test_a_fully_declared_shape_needs_no_inference(inference_calls):
    facts = Facts(_model([1, 4, 3, 3]))
    assert facts.shape("y") == (1, 4, 3, 3)
    assert facts.shape("slope") == (4,)  # the initializer's dims
    assert inference_calls == []


def test_a_symbolic_dim_is_left_to_inference(inference_calls):
    facts = Facts(_model(["N", 4, 3, 3]))
    assert facts.shape("y") == (1, 4, 3, 3)  # inference knows N from x
    assert facts.shape("z") == (1, 4, 3, 3)
    assert inference_calls == [1]  # once per model


def test_an_undeclared_value_is_inferred(inference_calls):
    m = _model([1, 4, 3, 3])
    del m.graph.value_info[:]
    assert Facts(m).shape("y") == (1, 4, 3, 3)
    assert inference_calls == [1]


def test_convert_of_a_fully_declared_model_runs_no_inference(inference_calls):
    out = opshift.convert(_model([1, 4, 3, 3]), 17)
    slope = next(t for t in out.graph.initializer if t.name == "slope")
    assert list(slope.dims) == [4, 1, 1]  # per channel: it read y's declared rank
    assert inference_calls == []
