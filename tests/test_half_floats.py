"""float16 and bfloat16 PRelu / LeakyRelu / Selu mean "compute in float32, round once" (as
onnxruntime, PyTorch and oneDNN compute them), in the evaluator and in what inline, convert
and fuse write. Each check runs every one of the 65536 values of the 16-bit type against a
NumPy reference written here: widen to float32, apply the formula with the float32
attribute, round once."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx.defs
import pytest
from conftest import assert_exact, make_model, run_onnxruntime
from onnx import TensorProto, helper, numpy_helper

from opshift.evaluator import evaluate

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
ELEM = {F16: TensorProto.FLOAT16, BF16: TensorProto.BFLOAT16}

#: (op, opset) for every schema version of the three ops, with the 16-bit types it accepts
VERSIONS = [("PRelu", 1), ("PRelu", 6), ("PRelu", 7), ("PRelu", 9), ("PRelu", 16),
            ("LeakyRelu", 1), ("LeakyRelu", 6), ("LeakyRelu", 16),
            ("Selu", 1), ("Selu", 6), ("Selu", 22)]


def every_value(dtype: np.dtype) -> np.ndarray:
    """All 65536 bit patterns of a 16-bit float type (NaNs, infinities, subnormals, -0)."""
    return np.arange(1 << 16, dtype=np.uint16).view(dtype)


def accepts(op: str, opset: int, dtype: np.dtype) -> bool:
    s = onnx.defs.get_schema(op, opset)
    name = "float16" if dtype == F16 else "bfloat16"
    return f"tensor({name})" in {t for c in s.type_constraints for t in c.allowed_type_strs}


def cases(dtypes=(F16, BF16)):
    return [pytest.param(op, opset, dt, id=f"{op}-{opset}-{dt.name}")
            for op, opset in VERSIONS for dt in dtypes if accepts(op, opset, dt)]


def default(op: str, opset: int, name: str) -> float:
    a = onnx.defs.get_schema(op, opset).attributes[name].default_value
    return float(helper.get_attribute_value(a))


def reference(op: str, x: np.ndarray, slope=None, **attrs) -> np.ndarray:
    """Widen to float32, compute with float32 attributes, round once to x's type."""
    xf = x.astype(np.float32)
    with np.errstate(all="ignore"):
        if op == "PRelu":
            y = np.where(xf < 0, slope.astype(np.float32) * xf, xf)
        elif op == "LeakyRelu":
            y = np.where(xf < 0, np.float32(attrs["alpha"]) * xf, xf)
        else:
            a, g = np.float32(attrs["alpha"]), np.float32(attrs["gamma"])
            y = np.where(xf > 0, g * xf, g * (a * np.exp(xf) - a))
        return y.astype(np.float32).astype(x.dtype)


def single_op_model(op: str, opset: int, dtype: np.dtype, slope=None, **attrs):
    """One node ``op`` on a 16-bit x (a PRelu slope as an initializer of x's type)."""
    elem = ELEM[dtype]
    inputs = ["x"] + (["slope"] if op == "PRelu" else [])
    inits = [numpy_helper.from_array(slope, "slope")] if op == "PRelu" else []
    node = helper.make_node(op, inputs, ["y"], name="n0", **attrs)
    return make_model([node], [helper.make_tensor_value_info("x", elem, [None])],
                      [helper.make_tensor_value_info("y", elem, [None])], opset=opset,
                      initializers=inits)


def attribute_sets(op: str, opset: int) -> list[dict]:
    """The version's defaults and values no 16-bit type holds (their float32 value counts)."""
    if op == "LeakyRelu":
        return [{}, {"alpha": 0.1}, {"alpha": -1.3}, {"alpha": 3.7}]
    if op == "Selu":
        return [{}, {"alpha": 1.1, "gamma": 1.3}]
    return [{}]


def slopes(dtype: np.dtype, n: int) -> list[np.ndarray]:
    """A shared slope, a per-element one drawn over a wide range, with 0, negatives, > 1."""
    rng = np.random.default_rng(7)
    per_element = (rng.standard_normal(n) * 4).astype(np.float32).astype(dtype)
    return [np.array([0.1], np.float32).astype(dtype), per_element]


def with_defaults(op: str, opset: int, attrs: dict) -> dict:
    out = dict(attrs)
    for name in ("alpha", "gamma"):
        if name not in out and name in onnx.defs.get_schema(op, opset).attributes:
            out[name] = default(op, opset, name)
    return out


@pytest.mark.parametrize("op,opset,dtype", cases())
def test_evaluator_is_float32_rounded_once_on_every_value(op, opset, dtype):
    x = every_value(dtype)
    for attrs in attribute_sets(op, opset):
        for s in slopes(dtype, x.size) if op == "PRelu" else [None]:
            if op == "PRelu" and opset < 7 and s.size != 1:
                continue  # legacy per-channel placement: the shared slope covers it
            m = single_op_model(op, opset, dtype, s, **attrs)
            want = reference(op, x, s, **with_defaults(op, opset, attrs))
            assert_exact(want, evaluate(m, {"x": x})["y"], f"{op}-{opset} {attrs}")


def test_selu_near_zero_keeps_its_digits():
    """The case of issue 15: per-step bfloat16 gives 0 at x = -0.00195, float32 -0.00343."""
    x = np.array([-0.001953125], BF16)
    y = evaluate(single_op_model("Selu", 22, BF16), {"x": x})["y"]
    assert float(y[0]) == pytest.approx(-0.00343, rel=0.01)


@pytest.mark.parametrize("op,opset", [("PRelu", 16), ("LeakyRelu", 16), ("Selu", 22),
                                      ("Selu", 6)])
def test_onnxruntime_second_opinion_float16(op, opset):
    """onnxruntime (where it runs the op on float16) agrees to float16 precision on N(0, 2)
    inputs; its float32 exp is its own, so only closeness is asked."""
    x = (np.random.default_rng(0).standard_normal(1000) * 2).astype(F16)
    s = np.array([0.1], F16) if op == "PRelu" else None
    m = single_op_model(op, opset, F16, s)
    got = run_onnxruntime(m, {"x": x})[0]
    np.testing.assert_allclose(got.astype(np.float32),
                               evaluate(m, {"x": x})["y"].astype(np.float32),
                               rtol=2 ** -10, atol=2 ** -24)
