"""ConvTranspose against its definition, written out here as loops: every input position
adds its value times the kernel into the output positions ``i * stride + k * dilation``,
of which the output keeps those the pads (from ``pads``, ``auto_pad`` or ``output_shape``,
as the operator's text states) leave. The loops sum in float64 and round once, as the
kernel does, so the two must agree under the project's policy (``verify.compare``).

Also onnx's own ConvTranspose node tests (hand-written expected outputs) and onnxruntime as
a second opinion; and Col2Im, the same scatter of blocks without the kernel, against
onnx.reference's loops and its node tests.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import assert_onnx_node_tests, by_policy, init, make_model, weighted_model
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate
from opshift.verify import compare

#: opset -> the ConvTranspose version in force
VERSIONS = {10: 1, 17: 11, 22: 22}


def _model(x_shape, w, b, dtype, opset=17, **attrs):
    return weighted_model("ConvTranspose", x_shape, w, b, dtype, opset=opset, name="deconv",
                          **attrs)


def _full(spatial, kernel, attrs):
    """The positions the input's windows reach, output_padding included."""
    n = len(spatial)
    s = attrs.get("strides", [1] * n)
    d = attrs.get("dilations", [1] * n)
    op = attrs.get("output_padding", [0] * n)
    return [s[i] * (spatial[i] - 1) + op[i] + (kernel[i] - 1) * d[i] + 1 for i in range(n)]


def _spec_pads(spatial, kernel, attrs):
    """(begin pads, output shape) as the operator's text gives them."""
    n = len(spatial)
    s = attrs.get("strides", [1] * n)
    full = _full(spatial, kernel, attrs)
    auto = attrs.get("auto_pad", "NOTSET")
    shape = attrs.get("output_shape")
    if shape is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        shape = [spatial[i] * s[i] for i in range(n)]
    if shape is not None:
        total = [full[i] - shape[i] for i in range(n)]
        if auto == "SAME_UPPER":
            return [t // 2 for t in total], list(shape)
        return [t - t // 2 for t in total], list(shape)
    pads = attrs.get("pads", [0] * 2 * n) if auto != "VALID" else [0] * 2 * n
    return pads[:n], [full[i] - pads[i] - pads[n + i] for i in range(n)]


def _definition(x, w, b, attrs):
    n_, c = x.shape[:2]
    g = attrs.get("group", 1)
    cg, mg = c // g, w.shape[1]
    spatial, kernel = x.shape[2:], w.shape[2:]
    nd = len(spatial)
    s = attrs.get("strides", [1] * nd)
    d = attrs.get("dilations", [1] * nd)
    begin, out = _spec_pads(spatial, kernel, attrs)
    y = np.zeros((n_, mg * g, *out))
    for ni, ci, mi in itertools.product(range(n_), range(c), range(mg)):
        oc = (ci // cg) * mg + mi
        for ip in itertools.product(*map(range, spatial)):
            v = float(x[(ni, ci) + ip])
            for kp in itertools.product(*map(range, kernel)):
                o = tuple(ip[a] * s[a] + kp[a] * d[a] - begin[a] for a in range(nd))
                if all(0 <= o[a] < out[a] for a in range(nd)):
                    y[(ni, oc) + o] += v * float(w[(ci, mi) + kp])
    if b is not None:
        y += b.astype(np.float64).reshape((-1,) + (1,) * nd)
    return y


def _case(rng, nd, *, group=1, batch=1, bias=True, how="pads"):
    spatial = [int(rng.integers(2, 6 if nd < 3 else 4)) for _ in range(nd)]
    kernel = [int(rng.integers(1, 4)) for _ in range(nd)]
    c = group * int(rng.integers(1, 3))
    mg = int(rng.integers(1, 3))
    attrs = {"strides": [int(rng.integers(1, 4)) for _ in range(nd)],
             "dilations": [int(rng.integers(1, 3)) for _ in range(nd)]}
    if group != 1:
        attrs["group"] = group
    attrs["output_padding"] = [int(rng.integers(0, max(s, dl)))
                               for s, dl in zip(attrs["strides"], attrs["dilations"])]
    if how == "pads":
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel * 2]
    elif how == "output_shape":
        full = [s * (i - 1) + e + (k - 1) * dl + 1 for i, s, e, k, dl in zip(
            spatial, attrs["strides"], attrs["output_padding"], kernel, attrs["dilations"])]
        # up to 3 positions fewer, or 1 more (the output reaches past the input's reach)
        attrs["output_shape"] = [f - int(rng.integers(-1, min(f, 4))) for f in full]
    else:
        attrs["auto_pad"] = how
    x = rng.standard_normal([batch, c, *spatial])
    w = rng.standard_normal([c, mg, *kernel])
    b = rng.standard_normal(mg * group) if bias else None
    return x, w, b, attrs


def _check(x, w, b, attrs, dtype=np.float32, opset=17):
    xd = x.astype(dtype)
    got = evaluate(_model(x.shape, w, b, dtype, opset, **attrs), {"x": xd})["y"]
    want = _definition(xd, w.astype(dtype), None if b is None else b.astype(dtype), attrs)
    c = compare(want.astype(dtype), got)
    assert c.ok, (attrs, c.reason)
    return got


HOWS = ["pads", "output_shape", "SAME_UPPER", "SAME_LOWER", "VALID"]
CASES = [(nd, how, kw) for nd in (1, 2, 3) for how in HOWS
         for kw in ({}, {"group": 2}, {"batch": 2, "bias": False})]


@pytest.mark.parametrize("nd,how,kw", CASES)
@pytest.mark.parametrize("opset", sorted(VERSIONS))
def test_conv_transpose_matches_its_definition(nd, how, kw, opset):
    rng = np.random.default_rng([CASES.index((nd, how, kw)), opset])
    _check(*_case(rng, nd, how=how, **kw), opset=opset)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_other_float_types(dtype, rng):
    x, w, b, attrs = _case(rng, 2, group=3)
    assert _check(x, w, b, attrs, dtype).dtype == dtype


def test_depthwise_and_a_kernel_wider_than_the_output(rng):
    x, w = rng.standard_normal((1, 4, 3, 3)), rng.standard_normal((4, 1, 5, 5))
    _check(x, w, None, {"group": 4, "strides": [2, 2], "pads": [3, 3, 4, 4]})


def test_onnx_node_tests_give_their_expected_outputs():
    """onnx's ConvTranspose node tests (expected outputs written by hand) run exactly."""
    assert_onnx_node_tests("test_convtranspose", at_least=8, check=by_policy)


def test_onnxruntime_agrees(rng):
    """A second opinion: onnxruntime's float32 sums differ from the exact result in their last
    bits, so this compares to a tolerance; a case it cannot run is skipped. Its cases keep
    output_padding below the stride and an output within the input's reach (onnxruntime
    refuses the one and, for SAME_*, clamps the other to that reach)."""
    ort = pytest.importorskip("onnxruntime")
    for how in HOWS:
        while True:
            x, w, b, attrs = _case(rng, 2, group=2, how=how)
            attrs["output_padding"] = [min(e, s - 1) for e, s in zip(attrs["output_padding"],
                                                                     attrs["strides"])]
            if "output_shape" in attrs:
                attrs["output_shape"] = [min(o, f) for o, f in zip(
                    attrs["output_shape"], _full(x.shape[2:], w.shape[2:], attrs))]
            begin, out = _spec_pads(x.shape[2:], w.shape[2:], attrs)
            full = _full(x.shape[2:], w.shape[2:], attrs)
            if min(begin) >= 0 and all(bg + o <= f for bg, o, f in zip(begin, out, full)):
                break
        m = _model(x.shape, w, b, np.float32, **attrs)
        xf = x.astype(np.float32)
        try:
            want = ort.InferenceSession(m.SerializeToString(),
                                        providers=["CPUExecutionProvider"]).run(None,
                                                                                {"x": xf})[0]
        except Exception as e:
            pytest.skip(f"onnxruntime cannot run {attrs}: {str(e)[:100]}")
        np.testing.assert_allclose(evaluate(m, {"x": xf})["y"], want, rtol=1e-4, atol=1e-5,
                                   err_msg=str(attrs))


@pytest.mark.parametrize("attrs,match", [
    ({"output_shape": [0, 4]}, r"output_shape \[0, 4\] must be positive"),
    ({"pads": [1, 1, 1]}, r"pads \[1, 1, 1\] must be 4 values >= 0"),
    ({"pads": [4, 0, 4, 0]}, r"leave no output"),
    ({"group": 3}, r"group=3"),
    ({"strides": [0, 1]}, r"must be positive"),
    ({"auto_pad": "SAME"}, r"unknown auto_pad 'SAME'"),
])
def test_bad_attributes_are_named(attrs, match):
    x = np.zeros((1, 4, 3, 3), np.float32)
    w = np.zeros((4, 2, 3, 3), np.float32)
    where = r"node 'deconv' \(ConvTranspose-11, graph 'g'\): "
    with pytest.raises(EvaluationError, match=where + ".*" + match):
        evaluate(_model(x.shape, w, None, np.float32, **attrs), {"x": x})


# -- Col2Im -----------------------------------------------------------------------------------


def _col2im(x, image, block, **attrs):
    node = helper.make_node("Col2Im", ["x", "i", "b"], ["y"], name="c2i", **attrs)
    return make_model([node], [helper.make_tensor_value_info("x", 1, list(x.shape))],
                      [helper.make_tensor_value_info("y", 1, None)], opset=18,
                      initializers=[init("i", np.int64(image)), init("b", np.int64(block))])


@pytest.mark.parametrize("seed", range(24))
def test_col2im_matches_onnx_reference(seed):
    rng = np.random.default_rng([31, seed])
    k = int(rng.integers(1, 4))
    block = [int(rng.integers(1, 4)) for _ in range(k)]
    attrs = {"strides": [int(rng.integers(1, 3)) for _ in range(k)],
             "dilations": [int(rng.integers(1, 3)) for _ in range(k)],
             "pads": [int(rng.integers(0, 2)) for _ in range(2 * k)]}
    image = [max(int(rng.integers(2, 7)), (b - 1) * d + 1) for b, d in
             zip(block, attrs["dilations"])]
    out = [(i + attrs["pads"][a] + attrs["pads"][k + a] - (b - 1) * d - 1) // s + 1
           for a, (i, b, d, s) in enumerate(zip(image, block, attrs["dilations"],
                                                attrs["strides"]))]
    x = rng.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(out)))).astype(np.float32)
    m = _col2im(x, image, block, **attrs)
    got = evaluate(m, {"x": x})["y"]
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert got.dtype == np.float32 and got.shape == want.shape == (2, 3, *image)
    # theirs adds in float32 block by block, opshift's in float64 rounded once
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * np.prod(block) * 6e-8 * 4)


def test_col2im_node_tests_and_errors():
    assert_onnx_node_tests("test_col2im", at_least=4, rtol=1e-6, atol=1e-6)
    x = np.zeros((1, 4, 5), np.float32)
    with pytest.raises(EvaluationError, match=r"node 'c2i' \(Col2Im-18, graph 'g'\): input "
                                              r"\[1, 4, 5\] has 5 blocks"):
        evaluate(_col2im(x, [3, 3], [2, 2]), {"x": x})
