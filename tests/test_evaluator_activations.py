"""PRelu / LeakyRelu / Selu per schema version, against straight NumPy formulas written here."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx.defs
import pytest
from conftest import assert_exact, make_model, run_onnxruntime
from onnx import helper, numpy_helper

from opshift.errors import EvaluationError, UnsupportedError
from opshift.evaluator import evaluate

BF16 = np.dtype(ml_dtypes.bfloat16)
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3.0, -3.0, -1e-3,
                    np.finfo(np.float32).max, -np.finfo(np.float32).max], dtype=np.float32)


def _elem(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _run(op, opset, x, slope=None, slope_as_input=False, **attrs):
    node_inputs = ["x"] + (["slope"] if slope is not None else [])
    inputs = [helper.make_tensor_value_info("x", _elem(x.dtype), list(x.shape))]
    inits = []
    feeds = {"x": x}
    if slope is not None:
        if slope_as_input:
            inputs.append(helper.make_tensor_value_info("slope", _elem(slope.dtype),
                                                        list(slope.shape)))
            feeds["slope"] = slope
        else:
            inits.append(numpy_helper.from_array(slope, "slope"))
    node = helper.make_node(op, node_inputs, ["y"], name="n0", **attrs)
    m = make_model([node], inputs, [helper.make_tensor_value_info("y", _elem(x.dtype), None)],
                   opset=opset, initializers=inits)
    return evaluate(m, feeds)["y"]


def _prelu_ref(x, slope_b):
    return np.where(x < 0, slope_b * x, x).astype(x.dtype)


# -- PRelu ------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [1, 6])
def test_prelu_legacy_per_channel_axis1(opset, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)  # [C]: numpy would refuse (3 vs 5)
    got = _run("PRelu", opset, x, slope)
    assert_exact(_prelu_ref(x, slope.reshape(1, 3, 1, 1)), got)


@pytest.mark.parametrize("opset", [1, 6])
def test_prelu_legacy_shared_and_numpy_fallback(opset, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for slope in (np.array([0.3], np.float32), np.full((1, 1), 0.3, np.float32)):
        assert_exact(_prelu_ref(x, np.float32(0.3)), _run("PRelu", opset, x, slope))
    slope = rng.random((4, 5)).astype(np.float32)  # not per-channel: numpy broadcasting
    assert_exact(_prelu_ref(x, slope), _run("PRelu", opset, x, slope))


@pytest.mark.parametrize("opset", [1, 6])
def test_prelu_legacy_error(opset, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    with pytest.raises(EvaluationError, match=rf"node 'n0' \(PRelu-{opset}\b.*does not broadcast"):
        _run("PRelu", opset, x, np.ones(7, np.float32))


@pytest.mark.parametrize("opset,version", [(7, 7), (8, 7), (9, 9), (15, 9), (16, 16),
                                           (onnx.defs.onnx_opset_version(), 16)])
def test_prelu_numpy_broadcast(opset, version, rng):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for shape in [(5,), (4, 1), (3, 1, 1), (1, 3, 4, 5), ()]:
        slope = (rng.random(shape) - 0.5).astype(np.float32)
        assert_exact(_prelu_ref(x, slope), _run("PRelu", opset, x, slope, slope_as_input=True))
    # the legacy per-channel reading is gone: [C] with C != last dim does not broadcast
    with pytest.raises(EvaluationError, match=rf"'n0' \(PRelu-{version}\b.*does not\s+broadcast"):
        _run("PRelu", opset, x, np.ones(3, np.float32))
    with pytest.raises(EvaluationError, match=rf"PRelu-{version}\b"):  # unidirectional only
        _run("PRelu", opset, np.ones((3, 1), np.float32), np.ones((3, 4), np.float32))


@pytest.mark.parametrize("opset", [6, 7, 16])
@pytest.mark.parametrize("slope_value", [0.25, 1.0, 2.5, 0.0, -0.5, np.inf, np.nan])
def test_prelu_special_values(opset, slope_value):
    x = SPECIAL
    slope = np.full((1,), slope_value, np.float32)
    with np.errstate(all="ignore"):
        want = _prelu_ref(x, slope)
    assert_exact(want, _run("PRelu", opset, x, slope))


@pytest.mark.parametrize("dtype,opset", [(np.float16, 16), (np.float64, 16), (BF16, 16),
                                         (np.int32, 9), (np.int64, 16), (np.int32, 16),
                                         (np.uint32, 16), (np.uint64, 16)])
def test_prelu_dtypes(dtype, opset, rng):
    if np.dtype(dtype).kind in "iu":
        x = rng.integers(-50 if np.dtype(dtype).kind == "i" else 0, 50, (2, 3, 4)).astype(dtype)
        slope = np.array([2, 3, 1 if np.dtype(dtype).kind == "u" else -1, 0], dtype)
    else:
        x = rng.standard_normal((2, 3, 4)).astype(np.float32).astype(dtype)
        slope = np.array([0.25, 0.5, 1.5, -2.0], np.float32).astype(dtype)
    got = _run("PRelu", opset, x, slope)
    want = np.where(x < 0, slope * x, x).astype(dtype)
    assert_exact(want, got)


def test_prelu_type_not_allowed_at_version():
    x = np.ones((2, 3), np.int32)  # ints arrive at PRelu-9
    with pytest.raises(UnsupportedError, match=r"'n0' \(PRelu-7\b.*tensor\(int32\)"):
        _run("PRelu", 8, x, np.ones(3, np.int32))


def test_prelu_large_blocked_matches_formula(rng):
    """Inputs above the block size take the blocked path; same numbers as the formula."""
    x = rng.standard_normal((2, 8, 64, 130)).astype(np.float32)
    x.flat[::97] = -0.0
    x.flat[5::101] = np.nan
    for slope in (np.linspace(0.05, 1, 8, dtype=np.float32).reshape(8, 1, 1),
                  np.linspace(-1, 2, 8, dtype=np.float32).reshape(8, 1, 1),
                  rng.random((64, 130)).astype(np.float32)):
        assert_exact(_prelu_ref(x, slope), _run("PRelu", 16, x, slope))
    assert_exact(_prelu_ref(x, np.float32(3.0)), _run("PRelu", 6, x, np.full(8, 3.0, np.float32)))


@pytest.mark.parametrize("values", [[0.5, np.nan, 0.25, 1.0], [2.0, np.inf, 3.0, 1.5],
                                    [2.0, 3.0, np.nan, 1.5], [0.5, 1.0, 0.0, 0.25],
                                    [1.0, 1.0, 1.0, 1.0], [1.5, 2.0, 0.5, 3.0]])
@pytest.mark.parametrize("shape", [(1, 4, 3, 3), (2, 4, 64, 130)])
def test_prelu_per_channel_slopes_with_special_values(values, shape, rng):
    """One NaN, infinite or zero slope among ordinary ones decides the formulation for all of
    them (max(x, s*x) is exact only for 0 < s <= 1, min(x, s*x) only for finite s > 1):
    small and blocked inputs, +-0 and NaN among the x, same numbers as the formula."""
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[::7] = 0.0
    x.flat[3::11] = -0.0
    x.flat[5::13] = np.nan
    slope = np.array(values, np.float32).reshape(4, 1, 1)
    with np.errstate(all="ignore"):
        want = _prelu_ref(x, slope)
    assert_exact(want, _run("PRelu", 16, x, slope))


# -- LeakyRelu --------------------------------------------------------------------------------

def _default(op, version, name):
    a = onnx.defs.get_schema(op, version).attributes[name].default_value
    return helper.get_attribute_value(a)


@pytest.mark.parametrize("opset,version", [(1, 1), (6, 6), (15, 6), (16, 16), (22, 16)])
@pytest.mark.parametrize("alpha", [None, 0.1, 2.0, -0.3, 0.0])
def test_leaky_relu(opset, version, alpha):
    x = SPECIAL
    attrs = {} if alpha is None else {"alpha": alpha}
    a = np.float32(_default("LeakyRelu", version, "alpha") if alpha is None else alpha)
    with np.errstate(all="ignore"):
        want = np.where(x < 0, a * x, x).astype(np.float32)
    assert_exact(want, _run("LeakyRelu", opset, x, **attrs))


@pytest.mark.parametrize("dtype", [np.float16, np.float64, BF16])
def test_leaky_relu_dtypes(dtype, rng):
    x = rng.standard_normal(50).astype(np.float32).astype(dtype)
    # a FLOAT attribute: float32 0.01, widened for float64; 16-bit x computes in float32
    wide = np.float64 if dtype == np.float64 else np.float32
    a, xw = wide(np.float32(0.01)), x.astype(wide)
    assert_exact(np.where(xw < 0, a * xw, xw).astype(dtype), _run("LeakyRelu", 16, x))


def test_leaky_relu_bfloat16_needs_16():
    x = np.ones(3, BF16)
    with pytest.raises(UnsupportedError, match=r"LeakyRelu-6.*bfloat16"):
        _run("LeakyRelu", 15, x)


# -- Selu -------------------------------------------------------------------------------------

def _selu_ref(x, alpha, gamma):
    t = x.dtype.type
    with np.errstate(all="ignore"):
        return (np.where(x > 0, x, np.exp(x) * t(alpha) - t(alpha)) * t(gamma)).astype(x.dtype)


def test_selu_defaults_differ_between_1_and_6():
    a1, g1 = _default("Selu", 1, "alpha"), _default("Selu", 1, "gamma")
    a6, g6 = _default("Selu", 6, "alpha"), _default("Selu", 6, "gamma")
    assert (a1, g1) != (a6, g6)
    x = np.array([-1.0, -2.0, 3.0], np.float32)
    y1, y6 = _run("Selu", 1, x), _run("Selu", 6, x)
    assert_exact(_selu_ref(x, a1, g1), y1)
    assert_exact(_selu_ref(x, a6, g6), y6)
    assert not np.array_equal(y1, y6)


@pytest.mark.parametrize("opset,version", [(1, 1), (5, 1), (6, 6), (21, 6), (22, 22)])
def test_selu_versions_special_values(opset, version):
    x = SPECIAL
    want = _selu_ref(x, _default("Selu", version, "alpha"), _default("Selu", version, "gamma"))
    assert_exact(want, _run("Selu", opset, x))
    assert_exact(_selu_ref(x, 2.0, 3.0), _run("Selu", opset, x, alpha=2.0, gamma=3.0))


@pytest.mark.parametrize("dtype", [np.float16, np.float64, BF16])
def test_selu_dtypes(dtype, rng):
    x = rng.standard_normal(200).astype(np.float32).astype(dtype)
    wide = x if dtype == np.float64 else x.astype(np.float32)  # 16-bit: float32, round once
    want = _selu_ref(wide, _default("Selu", 22, "alpha"),
                     _default("Selu", 22, "gamma")).astype(dtype)
    assert_exact(want, _run("Selu", 22, x))


def test_selu_large_blocked(rng):
    x = rng.standard_normal((3, 70000)).astype(np.float32)
    x[0, :10] = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1e-40, -1e-40, 100.0, -100.0, 89.0]
    assert_exact(_selu_ref(x, _default("Selu", 6, "alpha"),
                                       _default("Selu", 6, "gamma")), _run("Selu", 6, x))


# -- attributes -------------------------------------------------------------------------------

@pytest.mark.parametrize("op,opset", [("PRelu", 1), ("LeakyRelu", 1), ("Selu", 1)])
def test_consumed_inputs_accepted_at_version_1(op, opset):
    x = np.array([-1.0, 2.0], np.float32)
    slope = np.array([0.5], np.float32) if op == "PRelu" else None
    plain = _run(op, opset, x, slope)
    assert_exact(plain, _run(op, opset, x, slope, consumed_inputs=[0]))


@pytest.mark.parametrize("op,opset,version", [("PRelu", 6, 6), ("PRelu", 7, 7),
                                              ("LeakyRelu", 6, 6), ("LeakyRelu", 16, 16),
                                              ("Selu", 6, 6), ("Selu", 22, 22)])
def test_consumed_inputs_rejected_after_version_1(op, opset, version):
    x = np.array([-1.0, 2.0], np.float32)
    slope = np.array([0.5], np.float32) if op == "PRelu" else None
    with pytest.raises(UnsupportedError,
                       match=rf"node 'n0' \({op}-{version}\b.*'consumed_inputs' is not defined"):
        _run(op, opset, x, slope, consumed_inputs=[0])


def test_unknown_and_mistyped_attributes_rejected():
    x = np.array([-1.0, 2.0], np.float32)
    with pytest.raises(UnsupportedError, match=r"'n0' \(LeakyRelu-16\b.*'beta'"):
        _run("LeakyRelu", 16, x, beta=1.0)
    with pytest.raises(UnsupportedError, match=r"'n0' \(Selu-6\b.*'alpha' has type INT"):
        _run("Selu", 6, x, alpha=2)


def test_registered_versions_are_real_since_versions():
    from opshift import opsets
    from opshift.evaluator import supported_ops

    for (domain, name), versions in supported_ops().items():
        for v in versions:
            s = opsets.schema(name, v, domain)
            assert s is not None and s.since_version == v, (name, v)
    table = supported_ops()
    for op in ("PRelu", "LeakyRelu", "Selu"):
        assert table[("", op)] == opsets.versions(op)
    # the primitives a decomposition needs, in every version onnx has
    for op in ("Cast", "Relu", "Neg", "Add", "Sub", "Mul", "Div", "Max", "Min", "Abs",
               "Greater", "Less", "LessOrEqual", "GreaterOrEqual", "Equal", "Not", "Identity",
               "Reshape", "Unsqueeze", "Squeeze", "Shape", "Expand", "Elu", "Exp", "Where",
               "CastLike", "Constant", "If", "Loop"):
        assert table[("", op)] == opsets.versions(op), op


@pytest.mark.parametrize("op,opset", [("PRelu", 7), ("PRelu", 9), ("PRelu", 16),
                                      ("PRelu", 22), ("LeakyRelu", 7), ("LeakyRelu", 16),
                                      ("Selu", 7), ("Selu", 21), ("Selu", 22)])
def test_activations_match_onnxruntime(op, opset, rng):
    x = (rng.standard_normal((2, 3, 5, 7)) * 4).astype(np.float32)
    x.flat[:len(SPECIAL)] = SPECIAL
    slope = np.float32([0.25, 1.5, -0.5]).reshape(3, 1, 1) if op == "PRelu" else None
    attrs = {"alpha": 0.3} if op == "LeakyRelu" else {}
    node_inputs = ["x"] + (["slope"] if slope is not None else [])
    inits = [numpy_helper.from_array(slope, "slope")] if slope is not None else []
    m = make_model([helper.make_node(op, node_inputs, ["y"], **attrs)],
                   [helper.make_tensor_value_info("x", _elem(x.dtype), list(x.shape))],
                   [helper.make_tensor_value_info("y", _elem(x.dtype), None)], opset=opset,
                   initializers=inits)
    got = evaluate(m, {"x": x})["y"]
    want = run_onnxruntime(m, {"x": x})[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-6 if op == "Selu" else 0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
