"""MaxPool, AveragePool and LpPool: onnx's own node tests (expected outputs written out in
the test cases; AveragePool's are float32 sums or 4 decimals, so to a tolerance), and each
against its definition, written here as loops over each window (MaxPool: the maximum of the
positions inside the input, NaN wins, and the first of them in the window as the index;
AveragePool: the exact mean of the counted positions, rounded once; LpPool: the exact Lp norm
of the positions inside, rounded once) on random geometry: 1-D to 3-D, strides, dilations,
pads, auto_pad, ceil_mode, storage_order, count_include_pad, several element types.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from conftest import assert_onnx_node_tests, by_policy, make_model
from onnx import helper

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate
from opshift.verify import compare


@pytest.mark.parametrize("prefix", ["test_maxpool", "test_averagepool", "test_lppool"])
def test_onnx_node_tests_give_their_expected_outputs(prefix):
    if prefix == "test_maxpool":
        assert_onnx_node_tests(prefix, at_least=5, check=by_policy)
    else:  # float32 sums or 4 decimals
        assert_onnx_node_tests(prefix, at_least=5, rtol=1e-4, atol=1e-4)


def _geometry(spatial, kernel, attrs):
    n = len(spatial)
    s = attrs.get("strides", [1] * n)
    d = attrs.get("dilations", [1] * n)
    eff = [(k - 1) * dl + 1 for k, dl in zip(kernel, d)]
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(i / st) for i, st in zip(spatial, s)]
        total = [max((o - 1) * st + e - i, 0) for o, st, e, i in zip(out, s, eff, spatial)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        return begin, out
    pads = attrs.get("pads", [0] * 2 * n) if auto != "VALID" else [0] * 2 * n
    out = []
    for a in range(n):
        span = spatial[a] + pads[a] + pads[n + a] - eff[a]
        o = (math.ceil(span / s[a]) if attrs.get("ceil_mode") else span // s[a]) + 1
        if attrs.get("ceil_mode") and (o - 1) * s[a] >= spatial[a] + pads[a]:
            o -= 1  # a window may not start in the end padding
        out.append(o)
    return pads[:n], out


def _definition(x, kernel, attrs):
    """(values, indices) of MaxPool as loops over every window."""
    spatial = x.shape[2:]
    n = len(spatial)
    s = attrs.get("strides", [1] * n)
    d = attrs.get("dilations", [1] * n)
    begin, out = _geometry(spatial, kernel, attrs)
    y = np.empty(x.shape[:2] + tuple(out), x.dtype)
    idx = np.empty(y.shape, np.int64)
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*map(range, out)):
            best, at = None, None
            for k in itertools.product(*map(range, kernel)):
                p = tuple(o[a] * s[a] + k[a] * d[a] - begin[a] for a in range(n))
                if not all(0 <= p[a] < spatial[a] for a in range(n)):
                    continue
                v = x[(b, c) + p]
                if best is None or (not np.isnan(best) and (np.isnan(v) or v > best)):
                    best, at = v, p
            y[(b, c) + o] = best
            if attrs.get("storage_order"):
                lin = sum(at[a] * math.prod(spatial[:a]) for a in range(n))
            else:
                lin = int(np.ravel_multi_index(at, spatial))
            idx[(b, c) + o] = (b * x.shape[1] + c) * math.prod(spatial) + lin
    return y, idx


def _case(rng, nd, how):
    spatial = [int(rng.integers(3, 9 if nd < 3 else 6)) for _ in range(nd)]
    kernel = [int(rng.integers(1, 4)) for _ in range(nd)]
    attrs = {"kernel_shape": kernel,
             "strides": [int(rng.integers(1, 4)) for _ in range(nd)],
             "dilations": [int(rng.integers(1, 3)) for _ in range(nd)]}
    if how in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        attrs["auto_pad"] = how
    else:
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel * 2]
        if how == "ceil":
            attrs["ceil_mode"] = 1
    eff = [(k - 1) * dl + 1 for k, dl in zip(kernel, attrs["dilations"])]
    spatial = [max(i, e) for i, e in zip(spatial, eff)]  # a window fits
    return spatial, attrs


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("how", ["pads", "ceil", "SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.uint8])
def test_max_pool_matches_its_definition(nd, how, dtype):
    rng = np.random.default_rng([nd, len(how), np.dtype(dtype).num])
    spatial, attrs = _case(rng, nd, how)
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal([2, 3, *spatial]).astype(dtype)
        x.flat[rng.integers(0, x.size, 3)] = np.nan
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, [2, 3, *spatial], endpoint=True).astype(dtype)
    el = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    outs = ["y", "i"] if nd == 2 and "auto_pad" not in attrs else ["y"]
    attrs["storage_order"] = int(rng.integers(0, 2)) if len(outs) == 2 else 0
    m = make_model([helper.make_node("MaxPool", ["x"], outs, **attrs)],
                   [helper.make_tensor_value_info("x", el, list(x.shape))],
                   [helper.make_tensor_value_info(o, 0, None) for o in outs], opset=12)
    got = evaluate(m, {"x": x})
    want, idx = _definition(x, attrs["kernel_shape"], attrs)
    c = compare(want, got["y"])
    assert c.ok, (attrs, c.reason)
    if len(outs) == 2:
        assert got["i"].dtype == np.int64
        assert np.array_equal(got["i"], idx), attrs


def _mean_definition(x, kernel, attrs):
    spatial = x.shape[2:]
    n = len(spatial)
    s = attrs.get("strides", [1] * n)
    d = attrs.get("dilations", [1] * n)
    pads = attrs.get("pads", [0] * 2 * n)
    begin, out = _geometry(spatial, kernel, attrs)
    y = np.empty(x.shape[:2] + tuple(out))
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*map(range, out)):
            vals, count = [], 0
            for k in itertools.product(*map(range, kernel)):
                p = tuple(o[a] * s[a] + k[a] * d[a] - begin[a] for a in range(n))
                if all(0 <= p[a] < spatial[a] for a in range(n)):
                    vals.append(float(x[(b, c) + p]))
                    count += 1
                elif attrs.get("count_include_pad") and all(
                        -pads[a] <= p[a] < spatial[a] + pads[n + a] for a in range(n)):
                    count += 1  # an explicit pad, not the ceil_mode overhang
            y[(b, c) + o] = math.fsum(vals) / count
    return y


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("how", ["pads", "ceil", "SAME_UPPER", "VALID"])
@pytest.mark.parametrize("include", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_average_pool_matches_its_definition(nd, how, include, dtype):
    rng = np.random.default_rng([nd, len(how), include, np.dtype(dtype).num])
    spatial, attrs = _case(rng, nd, how)
    if how in ("pads", "ceil"):
        attrs["count_include_pad"] = include
    # values that nearly cancel: a float32 sum would be many ulps off the mean
    x = (rng.standard_normal([2, 3, *spatial]) * 100).astype(dtype)
    el = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([helper.make_node("AveragePool", ["x"], ["y"], **attrs)],
                   [helper.make_tensor_value_info("x", el, list(x.shape))],
                   [helper.make_tensor_value_info("y", el, None)], opset=19)
    got = evaluate(m, {"x": x})["y"]
    want = _mean_definition(x, attrs["kernel_shape"], attrs)
    if dtype is np.float64:  # a float64 sum rounds as it goes: the classic bound
        bound = math.prod(attrs["kernel_shape"]) * np.finfo(np.float64).eps * \
            _mean_definition(np.abs(x), attrs["kernel_shape"], attrs)
        assert got.dtype == np.float64 and (np.abs(got - want) <= bound).all(), attrs
        return
    c = compare(want.astype(dtype), got)
    assert c.ok, (attrs, c.reason)


def test_global_average_pool_is_the_exact_mean_rounded_once(rng):
    x = (rng.standard_normal((2, 3, 7, 9)) * 1000).astype(np.float32)
    x[..., 0] = -x[..., 1:].sum(axis=-1)  # rows that nearly cancel
    m = make_model([helper.make_node("GlobalAveragePool", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", 1, list(x.shape))],
                   [helper.make_tensor_value_info("y", 1, None)], opset=13)
    want = np.array([[math.fsum(x[b, c].astype(np.float64).ravel()) / 63 for c in range(3)]
                     for b in range(2)]).reshape(2, 3, 1, 1).astype(np.float32)
    c = compare(want, evaluate(m, {"x": x})["y"])
    assert c.ok, c.reason


@pytest.mark.parametrize("dtype", [np.int8, np.float32])
def test_max_pool_index_never_points_into_the_padding(dtype):
    """The padding holds the type's lowest value; where the input holds it too, the index is
    the first such position inside the input, not a padding position before it."""
    low = np.iinfo(dtype).min if np.dtype(dtype).kind == "i" else -np.inf
    x = np.full((1, 1, 3, 3), low, dtype)
    el = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    m = make_model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2],
                                     pads=[1, 1, 1, 1], strides=[2, 2])],
                   [helper.make_tensor_value_info("x", el, [1, 1, 3, 3])],
                   [helper.make_tensor_value_info(o, 0, None) for o in "yi"], opset=12)
    got = evaluate(m, {"x": x})
    assert (got["y"] == low).all()
    assert got["i"].reshape(-1).tolist() == [0, 1, 3, 4]  # (0,0), (0,1), (1,0), (1,1)


def _lp_definition(x, kernel, attrs, p):
    """LpPool as loops: (sum of |x|^p over the window's positions inside the input)^(1/p)."""
    spatial = x.shape[2:]
    n = len(spatial)
    s = attrs.get("strides", [1] * n)
    d = attrs.get("dilations", [1] * n)
    begin, out = _geometry(spatial, kernel, attrs)
    y = np.empty(x.shape[:2] + tuple(out))
    for b, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*map(range, out)):
            terms = [abs(float(x[(b, c) + q])) ** p
                     for k in itertools.product(*map(range, kernel))
                     for q in [tuple(o[a] * s[a] + k[a] * d[a] - begin[a] for a in range(n))]
                     if all(0 <= q[a] < spatial[a] for a in range(n))]
            y[(b, c) + o] = math.fsum(terms) ** (1 / p)
    return y


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("how", ["pads", "ceil", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("p,opset", [(2, 18), (1, 11), (3, 22), (2.5, 1)])
def test_lp_pool_matches_its_definition(nd, how, p, opset):
    """Including windows past the input under ceil_mode, where onnx.reference's kernel scales
    a mean of the positions inside by the kernel's size instead."""
    rng = np.random.default_rng([nd, len(how), int(p * 2), opset])
    spatial, attrs = _case(rng, nd, how)
    if opset < 18:  # dilations and ceil_mode came with LpPool-18
        if how == "ceil":
            pytest.skip("LpPool before 18 has no ceil_mode")
        attrs.pop("dilations")
    attrs["p"] = p
    x = rng.standard_normal([2, 3, *spatial]).astype(np.float32)
    m = make_model([helper.make_node("LpPool", ["x"], ["y"], **attrs)],
                   [helper.make_tensor_value_info("x", 1, list(x.shape))],
                   [helper.make_tensor_value_info("y", 1, None)], opset=opset)
    got = evaluate(m, {"x": x})["y"]
    c = compare(_lp_definition(x, attrs["kernel_shape"], attrs, p).astype(np.float32), got)
    assert c.ok, (attrs, c.reason)


@pytest.mark.parametrize("p,opset", [(2, 2), (3, 22), (1.5, 1)])
def test_global_lp_pool_is_the_exact_norm_rounded_once(p, opset, rng):
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    m = make_model([helper.make_node("GlobalLpPool", ["x"], ["y"], p=p)],
                   [helper.make_tensor_value_info("x", 1, list(x.shape))],
                   [helper.make_tensor_value_info("y", 1, None)], opset=opset)
    want = np.array([[math.fsum(abs(float(v)) ** p for v in x[b, c].ravel()) ** (1 / p)
                      for c in range(3)] for b in range(2)]).reshape(2, 3, 1, 1)
    c = compare(want.astype(np.float32), evaluate(m, {"x": x})["y"])
    assert c.ok, c.reason


def test_lp_pool_p_must_fit_the_version():
    x = np.ones((1, 1, 3, 3), np.float32)
    for opset, p, message in ((11, 0, "p=0 must be a positive integer"),
                              (1, -1.0, "p=-1.0 must be a positive number")):
        m = make_model([helper.make_node("LpPool", ["x"], ["y"], name="lp", kernel_shape=[2, 2],
                                         p=p)],
                       [helper.make_tensor_value_info("x", 1, [1, 1, 3, 3])],
                       [helper.make_tensor_value_info("y", 1, None)], opset=opset)
        with pytest.raises(EvaluationError, match=rf"node 'lp' \(LpPool-\d+, .*{message}"):
            evaluate(m, {"x": x})
