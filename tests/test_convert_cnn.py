"""The engine's node conversion on a real model: the small CNN exported by PyTorch
(tests/data/export_cnn.py) at opsets 17 and 20 with torch's reference outputs, converted to
every opset with the activations skipped (tests/test_convert.py covers them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import onnxruntime_outputs
from convert_helpers import convert, convert_other_ops, evaluator_outputs
from onnx import helper

from opshift.errors import ConversionError
from opshift.opsets import ACTIVATIONS


def other_ops_change(model, source, target) -> bool:
    """Some node other than the activations changes version (on a copy: the model stays)."""
    work = onnx.ModelProto()
    work.CopyFrom(model)
    return bool(convert_other_ops(work, source, target))


DATA = Path(__file__).resolve().parent / "data"


def load_cnn(opset: int) -> onnx.ModelProto:
    return onnx.load(DATA / f"cnn_opset{opset}.onnx")


def outputs_everywhere(model: onnx.ModelProto, feeds: dict) -> list[list]:
    """The model's outputs by the evaluator and by onnxruntime, each where it can run the
    model; the test is skipped where neither can."""
    res = [evaluator_outputs(model, feeds), onnxruntime_outputs(model, feeds)]
    if res[0] is None and isinstance(res[1], str):
        pytest.skip(f"the evaluator does not implement the model; {res[1]}")
    return [r for r in res if r is not None and not isinstance(r, str)]


REF = np.load(DATA / "cnn_ref.npz")


TARGETS = [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 21, 22, 28]


@pytest.mark.parametrize("source", [17, 20])
@pytest.mark.parametrize("target", TARGETS)
def test_cnn_converts_and_keeps_numbers(source, target):
    model = load_cnn(source)
    names_before = [n.name for n in model.graph.node]
    convert(model, source, target, skip=ACTIVATIONS)
    for ys in outputs_everywhere(model, {"x": REF["x"]}):
        np.testing.assert_allclose(ys[0], REF["y"], rtol=1e-5, atol=1e-6)
    # The model's interface and the converted nodes' names survive.
    assert [i.name for i in model.graph.input] == ["x"]
    assert [o.name for o in model.graph.output] == ["y"]
    kept = {n.name for n in model.graph.node}
    assert {n for n in names_before if "Constant" not in n} <= kept


@pytest.mark.parametrize("source", [17, 20])
def test_cnn_down_to_9_then_back_up(source):
    model = load_cnn(source)
    convert(model, source, 9, skip=ACTIVATIONS)
    ops = {n.op_type for n in model.graph.node}
    assert {"BatchNormalization", "Gemm", "Reshape", "Flatten", "ReduceMean", "Concat",
            "MatMul", "GlobalAveragePool", "Add", "Conv"} <= ops
    # Unsqueeze and ReduceMean carry their axes as attributes below 13 / 18.
    for n in model.graph.node:
        if n.op_type in ("Unsqueeze", "ReduceMean"):
            assert len(n.input) == 1 and any(a.name == "axes" for a in n.attribute)
        if n.op_type == "BatchNormalization":
            assert not any(a.name == "training_mode" for a in n.attribute)
    convert(model, 9, source, skip=ACTIVATIONS)
    for ys in outputs_everywhere(model, {"x": REF["x"]}):
        np.testing.assert_allclose(ys[0], REF["y"], rtol=1e-5, atol=1e-6)


def test_cnn_below_7_is_valid_and_refused_where_inexact():
    model = load_cnn(17)
    changes = convert(model, 17, 6, skip=ACTIVATIONS)
    bn = [n for n in model.graph.node if n.op_type == "BatchNormalization"]
    assert all(helper.get_node_attr_value(n, "is_test") == 1 for n in bn)
    assert any(c.op == "Mul" and "broadcast=1" in c.what for c in changes)
    mul = next(n for n in model.graph.node if n.op_type == "Mul")
    assert helper.get_node_attr_value(mul, "broadcast") == 1
    convert(model, 6, 17, skip=ACTIVATIONS)  # and back up: the legacy forms are undone
    assert all(not n.attribute for n in model.graph.node if n.op_type in ("Mul", "Add"))
    for ys in outputs_everywhere(model, {"x": REF["x"]}):
        np.testing.assert_allclose(ys[0], REF["y"], rtol=1e-5, atol=1e-6)
    # Below 5 the Reshape's shape is computed at run time: no attribute can hold it.
    with pytest.raises(ConversionError, match=r"node '/Reshape' \(Reshape-14 -> 1.*not a "
                                              r"constant"):
        convert_other_ops(load_cnn(17), 17, 4)


def test_nothing_to_do_is_cheap_and_untouched():
    model = load_cnn(17)
    before = model.SerializeToString()
    assert not other_ops_change(model, 17, 16)
    assert convert_other_ops(model, 17, 16) == []
    assert model.SerializeToString() == before
    assert other_ops_change(model, 17, 9)
    assert other_ops_change(model, 17, 18)  # ReduceMean-18


def test_activations_are_left_alone():
    model = load_cnn(17)
    acts = [(n.name, n.SerializeToString()) for n in model.graph.node
            if n.op_type in ACTIVATIONS]
    changes = convert_other_ops(model, 17, 9)
    assert not any(c.op in ACTIVATIONS for c in changes)
    assert [(n.name, n.SerializeToString()) for n in model.graph.node
            if n.op_type in ACTIVATIONS] == acts
