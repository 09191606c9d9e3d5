"""Every (op version, target opset) pair: the converted model passes the full checker and
computes the same outputs, by the bundled evaluator and (where it runs both) onnxruntime."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import onnx
import pytest
from conftest import assert_exact, legacy_model, make_model, run_onnxruntime
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opshift import opsets
from opshift.convert import convert
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

TARGETS = range(1, opsets.MAX_OPSET + 1)
X_SHAPE = [2, 3, 2, 2]


def activation_model(op: str, version: int, elem: int = TP.FLOAT) -> onnx.ModelProto:
    """One ``op`` node of schema ``version`` (the model's opset is ``version``)."""
    x = helper.make_tensor_value_info("x", elem, X_SHAPE)
    y = helper.make_tensor_value_info("y", elem, X_SHAPE)
    inits = []
    attrs = {}
    inputs = ["x"]
    if op == "PRelu":
        dtype = helper.tensor_dtype_to_np_dtype(elem)
        shape = [3] if version < 7 else [3, 1, 1]  # per channel in both rules
        vals = np.array([0.25, -0.5, 2.0], np.float32) if elem in (TP.FLOAT, TP.BFLOAT16) \
            else np.array([2, -3, 1])
        inits.append(numpy_helper.from_array(vals.astype(dtype).reshape(shape), "slope"))
        inputs.append("slope")
    if version == 1:
        attrs["consumed_inputs"] = [0] * len(inputs)
    if op == "LeakyRelu":
        attrs["alpha"] = 0.3
    node = helper.make_node(op, inputs, ["y"], name=f"{op.lower()}_node", **attrs)
    return legacy_model(make_model([node], [x], [y], opset=version, initializers=inits))


def x_value(elem: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    if np.dtype(dtype).kind in "iu":
        v = rng.integers(-50, 50, X_SHAPE)
        if np.dtype(dtype).kind == "u":
            v = np.abs(v)
        return v.astype(dtype)
    v = rng.standard_normal(X_SHAPE).astype(np.float32)
    v.flat[:4] = [0.0, -0.0, -3.5, 7.25]
    return v.astype(dtype)


@functools.cache
def reference(op: str, version: int, elem: int) -> np.ndarray:
    return evaluate(activation_model(op, version, elem), {"x": x_value(elem)})["y"]


def cases():
    for op in opsets.ACTIVATIONS:
        for v in opsets.versions(op):
            yield op, v, TP.FLOAT


@pytest.mark.parametrize("op,version,elem", list(cases()))
def test_every_target_opset_same_numbers(op, version, elem):
    model = activation_model(op, version, elem)
    ref = reference(op, version, elem)
    xv = x_value(elem)
    for target in TARGETS:
        out = convert(model, target)
        assert opsets.opset_of(out) == target
        assert out.ir_version == opsets.ir_version_for_opset(target) or target > version
        onnx.checker.check_model(out, full_check=True)
        got = evaluate(out, {"x": xv})["y"]
        assert_exact(ref, got, f"{op}-{version} to opset {target}")


@pytest.mark.parametrize("op,version,elem", list(cases()))
@pytest.mark.parametrize("target", TARGETS)
def test_every_target_opset_runs_the_same_in_onnxruntime(op, version, elem, target):
    """The second opinion on the converted models (where onnxruntime can run them)."""
    got = run_onnxruntime(convert(activation_model(op, version, elem), target),
                          {"x": x_value(elem)})[0]
    np.testing.assert_allclose(got, reference(op, version, elem), rtol=1e-6, atol=0)


def _ort_run(model: onnx.ModelProto, xv: np.ndarray) -> np.ndarray:
    return run_onnxruntime(model, {"x": xv})[0]


NARROW = [
    ("PRelu", 16, TP.BFLOAT16, 13),
    ("LeakyRelu", 16, TP.BFLOAT16, 13),
    ("Selu", 22, TP.BFLOAT16, 13),
    ("PRelu", 9, TP.INT32, 6),
    ("PRelu", 16, TP.INT64, 6),
    ("PRelu", 9, TP.UINT32, 1),
    ("PRelu", 9, TP.UINT64, 1),
]


@pytest.mark.parametrize("op,version,elem,lowest", NARROW)
def test_types_not_allowed_at_target(op, version, elem, lowest):
    """bfloat16 runs in float32 between Casts (Cast takes bfloat16 from opset 13); 32-bit
    ints run in float64; unsigned PRelu is the identity. Below ``lowest``: a clear error."""
    model = activation_model(op, version, elem)
    ref = reference(op, version, elem)
    xv = x_value(elem)
    allowed = opsets.allowed_types(op, version)
    for target in TARGETS:
        if target < lowest:
            with pytest.raises(ConversionError, match=f"{op.lower()}_node.*{op}"):
                convert(model, target)
            continue
        out = convert(model, target)
        onnx.checker.check_model(out, full_check=True)
        got = evaluate(out, {"x": xv})["y"]
        assert got.dtype == ref.dtype
        tv = opsets.since_version(op, target)
        if f"tensor({opsets.tensor_type_name(elem)})" not in opsets.allowed_types(op, tv):
            assert any(n.op_type in ("Cast", "Identity", "Less") for n in out.graph.node)
            if op == "Selu" and elem == TP.BFLOAT16:
                _assert_selu_bf16(got, xv)
                continue
        else:
            assert [n.op_type for n in out.graph.node] == [op]
        assert_exact(ref, got, f"{op}-{version} to opset {target}")
        assert allowed  # the source version allows the type


@pytest.mark.parametrize("op,elem,target", [("PRelu", TP.BFLOAT16, 13),
                                            ("LeakyRelu", TP.BFLOAT16, 15),
                                            ("Selu", TP.BFLOAT16, 21),
                                            ("PRelu", TP.INT32, 8),
                                            ("PRelu", TP.INT32, 7),
                                            ("PRelu", TP.INT64, 7),
                                            ("PRelu", TP.UINT32, 8)])
def test_type_downgrades_run_in_onnxruntime(op, elem, target):
    version = {"PRelu": 16, "LeakyRelu": 16, "Selu": 22}[op]
    model = activation_model(op, version, elem)
    out = convert(model, target)
    xv = x_value(elem)
    if elem == TP.BFLOAT16:  # onnxruntime's Python API has no bfloat16 arrays: float I/O
        out = _float_io(out)
        got = _ort_run(out, xv.astype(np.float32)).astype(ml_dtypes.bfloat16)
    else:
        got = _ort_run(out, xv)
    ref = reference(op, version, elem)
    assert got.dtype == ref.dtype
    if op == "Selu":
        _assert_selu_bf16(got, xv)
    else:
        assert_exact(ref, got)


def _assert_selu_bf16(got: np.ndarray, xv: np.ndarray) -> None:
    """bfloat16 Selu computed in float32 and rounded once is within one bfloat16 ulp of the
    float64 truth. (The evaluator's reference rounds after every step of Selu's function
    body, so it is itself up to a few ulps off; exp is not exactly specified anyway.)"""
    x = xv.astype(np.float64)
    alpha = float(np.float32(1.6732631921768188).astype(ml_dtypes.bfloat16))
    gamma = float(np.float32(1.0507010221481323).astype(ml_dtypes.bfloat16))
    truth = np.where(x > 0, gamma * x, gamma * (alpha * np.exp(x) - alpha))
    np.testing.assert_allclose(got.astype(np.float64), truth, rtol=2**-7, atol=2**-12)


def _float_io(model: onnx.ModelProto) -> onnx.ModelProto:
    """Wrap a bfloat16 model's input and output in Casts from/to float32."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in m.graph.node:
        n.input[:] = ["x_bf16" if i == "x" else i for i in n.input]
        n.output[:] = ["y_bf16" if o == "y" else o for o in n.output]
    m.graph.node.insert(0, helper.make_node("Cast", ["x"], ["x_bf16"], to=TP.BFLOAT16))
    m.graph.node.append(helper.make_node("Cast", ["y_bf16"], ["y"], to=TP.FLOAT))
    m.graph.input[0].type.tensor_type.elem_type = TP.FLOAT
    m.graph.output[0].type.tensor_type.elem_type = TP.FLOAT
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("elem", [TP.INT64, TP.INT32])
def test_int_prelu_exact_at_6_to_8_and_refused_below(elem):
    """Integer downgrades to 6..8 stay in integer arithmetic (exact for every value, including
    products that wrap); below 6 nothing computes in integers and float64 cannot reproduce
    the products: refused."""
    model = activation_model("PRelu", 9, elem)
    info = np.iinfo(helper.tensor_dtype_to_np_dtype(elem))
    big = [info.min, info.min + 1, -(2**30), -7, 0, 5, 2**30, info.max]
    xv = np.array(big * 3, helper.tensor_dtype_to_np_dtype(elem)).reshape(X_SHAPE)
    with np.errstate(over="ignore"):
        ref = evaluate(model, {"x": xv})["y"]
    for target in (6, 7, 8):
        out = convert(model, target)
        onnx.checker.check_model(out, full_check=True)
        with np.errstate(over="ignore"):
            assert_exact(ref, evaluate(out, {"x": xv})["y"], f"opset {target}")
    with pytest.raises(ConversionError, match=r"prelu_node.*2\*\*53"):
        convert(model, 5)
    for target in (7, 8):  # the second opinion, where onnxruntime can run it
        assert_exact(ref, _ort_run(convert(model, target), xv), f"onnxruntime, opset {target}")


def test_bfloat16_is_exact_against_float32_rounding():
    """bf16 PRelu computed in float32 and rounded once equals bf16 arithmetic."""
    model = activation_model("PRelu", 16, TP.BFLOAT16)
    out = convert(model, 15)
    xv = (np.random.default_rng(3).standard_normal(X_SHAPE) * 100).astype(ml_dtypes.bfloat16)
    a = evaluate(model, {"x": xv})["y"]
    b = evaluate(out, {"x": xv})["y"]
    assert_exact(a, b)
