"""GridSample and AffineGrid against onnx.reference's kernels on random cases (every mode,
padding mode and corner rule; 1-3 spatial axes; versions 16, 20, 22; points inside, near and
far outside the borders), onnx's node tests, onnxruntime as a second opinion, other element
types and errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_onnx_node_tests, make_model, run_onnxruntime, vi, vi_of
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError, UnsupportedError
from opshift.evaluator import evaluate


def _grid_model(x, grid, opset, **attrs):
    node = helper.make_node("GridSample", ["x", "g"], ["y"], name="gs", **attrs)
    return make_model([node], [vi_of("x", x), vi_of("g", grid)],
                      [vi("y", helper.np_dtype_to_tensor_dtype(x.dtype))], opset=opset)


_NAMES = {16: {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}}


def _grid_case(seed: int):
    rng = np.random.default_rng([11, seed])
    opset = int(rng.choice([16, 20, 22]))
    k = 2 if opset == 16 else int(rng.choice([1, 2, 2, 3]))
    mode = str(rng.choice(["linear", "nearest", "cubic"]))
    attrs = {"mode": _NAMES.get(opset, {}).get(mode, mode),
             "padding_mode": str(rng.choice(["zeros", "border", "reflection"])),
             "align_corners": int(rng.integers(0, 2))}
    dtype = np.float64 if rng.random() < 0.25 else np.float32
    n, c = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    spatial = [int(rng.integers(1, 6)) for _ in range(k)]
    out = [int(rng.integers(1, 5)) for _ in range(k)]
    x = rng.standard_normal([n, c, *spatial]).astype(dtype)
    spread = float(rng.choice([1.0, 1.5, 4.0]))  # inside, near and far outside the borders
    grid = rng.uniform(-spread, spread, [n, *out, k]).astype(np.float32)
    # onnx.reference's kernel knows version 20's mode names only
    reference = _grid_model(x, grid, max(opset, 20), **{**attrs, "mode": mode})
    return _grid_model(x, grid, opset, **attrs), reference, {"x": x, "g": grid}, mode


@pytest.mark.parametrize("seed", range(120))
def test_grid_sample_matches_onnx_reference(seed):
    m, reference, feeds, mode = _grid_case(seed)
    attrs = {a.name: helper.get_attribute_value(a) for a in m.graph.node[0].attribute}
    if mode == "cubic" and attrs["padding_mode"] != b"zeros" and np.abs(feeds["g"]).max() > 1:
        pytest.skip("onnx.reference moves a cubic point inside the borders first "
                    "(test_grid_sample_cubic_pads_its_taps)")
    if attrs["padding_mode"] == b"reflection" and attrs["align_corners"] and \
            1 in feeds["x"].shape[2:]:
        pytest.skip("onnx.reference cannot reflect off the borders of one pixel (0 and 0)")
    got = evaluate(m, feeds)["y"]
    want = ReferenceEvaluator(reference).run(None, feeds)[0]
    assert got.dtype == feeds["x"].dtype and got.shape == want.shape
    if mode == "nearest":  # the same pixels
        np.testing.assert_array_equal(got, want)
    else:  # the same points and weights; theirs adds in float32 axis by axis, opshift's not
        scale = float(np.abs(feeds["x"]).max())
        np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.finfo(np.float32).eps * scale)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_cubic_pads_its_taps(padding, align):
    """Bicubic as PyTorch's grid_sample defines it: the point is not moved; each of its 4 x 4
    taps reads the pixel padding_mode gives for it, weighted by Keys' kernel (a = -0.75)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 1, 4, 5)).astype(np.float64)
    grid = rng.uniform(-1.8, 1.8, (1, 3, 4, 2))
    m = _grid_model(x, grid, 20, mode="cubic", padding_mode=padding, align_corners=align)
    got = evaluate(m, {"x": x, "g": grid})["y"][0, 0]
    h, w = x.shape[2:]

    def pixel(r, c):
        if padding == "zeros":
            return x[0, 0, r, c] if 0 <= r < h and 0 <= c < w else 0.0
        if padding == "border":
            return x[0, 0, min(max(r, 0), h - 1), min(max(c, 0), w - 1)]
        return x[0, 0, _mirror(r, h, align), _mirror(c, w, align)]

    def keys(t):
        t, a = abs(t), -0.75
        return (a + 2) * t**3 - (a + 3) * t**2 + 1 if t <= 1 else \
            a * t**3 - 5 * a * t**2 + 8 * a * t - 4 * a if t < 2 else 0.0

    for (i, j), want in np.ndenumerate(got):
        gx, gy = grid[0, i, j]
        px = (gx + 1) / 2 * (w - 1) if align else ((gx + 1) * w - 1) / 2
        py = (gy + 1) / 2 * (h - 1) if align else ((gy + 1) * h - 1) / 2
        bx, by = int(np.floor(px)), int(np.floor(py))
        value = sum(keys(py - r) * keys(px - c) * pixel(r, c)
                    for r in range(by - 1, by + 3) for c in range(bx - 1, bx + 3))
        assert want == pytest.approx(value, rel=1e-12, abs=1e-12), (i, j)


def _mirror(i: int, n: int, align: int) -> int:
    """Index i reflected off the borders (pixel centres 0 and n - 1 with align_corners, the
    pixel edges -0.5 and n - 0.5 without), whole pixels only."""
    lo, hi = (0.0, n - 1.0) if align else (-0.5, n - 0.5)
    v = float(i)
    while not lo <= v <= hi and hi > lo:
        v = 2 * lo - v if v < lo else 2 * hi - v
    return int(lo) if hi == lo else int(v)


def test_grid_sample_node_tests():
    # some expected values are written to 4 decimals
    assert_onnx_node_tests("test_gridsample", at_least=15, atol=1e-4)


@pytest.mark.parametrize("mode,padding", [
    ("bilinear", "zeros"), ("bilinear", "border"), ("bilinear", "reflection"),
    ("nearest", "zeros"), ("nearest", "border"), ("nearest", "reflection"),
    ("bicubic", "zeros")])
def test_grid_sample_against_onnxruntime(mode, padding):
    """onnxruntime computes in float32: within a few ulps of the input's scale. (Not bicubic
    with border or reflection padding: onnxruntime's releases disagree there.)"""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 9, 11)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (1, 6, 7, 2)).astype(np.float32)
    m = _grid_model(x, grid, 16, mode=mode, padding_mode=padding)
    got = evaluate(m, {"x": x, "g": grid})["y"]
    (want,) = run_onnxruntime(m, {"x": x, "g": grid})
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.abs(x).max()))


def test_grid_sample_nearest_copies_any_type_and_pads_zeros():
    x = np.array([[[["a", "b"], ["c", "d"]]]], dtype=object)
    grid = np.float32([[[[-0.5, -0.5], [0.5, 0.5], [3.0, 0.0]]]])  # the last is outside
    m = _grid_model(x, grid, 20, mode="nearest")
    np.testing.assert_array_equal(evaluate(m, {"x": x, "g": grid})["y"], [[[["a", "d", ""]]]])
    xi = np.int32([[[[1, 2], [3, 4]]]])
    m = _grid_model(xi, grid, 20, mode="nearest", padding_mode="border")
    np.testing.assert_array_equal(evaluate(m, {"x": xi, "g": grid})["y"], [[[[1, 4, 2]]]])


def test_grid_sample_reflection_of_a_single_pixel_axis():
    """With align_corners both borders of a length-1 axis are 0: every point reads it."""
    x = np.float32([[[[5.0, 7.0]]]])
    grid = np.float32([[[[-1.0, 3.0], [1.0, -2.5]]]])
    m = _grid_model(x, grid, 20, mode="nearest", padding_mode="reflection", align_corners=1)
    np.testing.assert_array_equal(evaluate(m, {"x": x, "g": grid})["y"], [[[[5.0, 7.0]]]])


def test_grid_sample_errors():
    x = np.zeros((1, 1, 2, 2), np.int32)
    grid = np.zeros((1, 1, 1, 2), np.float32)
    with pytest.raises(UnsupportedError, match=r"node 'gs' \(GridSample-20, graph 'g'\): "
                                               "linear sampling of int32 values"):
        evaluate(_grid_model(x, grid, 20), {"x": x, "g": grid})
    xf = x.astype(np.float32)
    for opset, attrs, message in ((16, {"mode": "linear"}, "unknown mode 'linear'"),
                                  (20, {"padding_mode": "wrap"}, "unknown padding_mode")):
        with pytest.raises(EvaluationError, match=message):
            evaluate(_grid_model(xf, grid, opset, **attrs), {"x": xf, "g": grid})
    bad = np.zeros((1, 1, 1, 3), np.float32)
    with pytest.raises(EvaluationError, match=r"must be \[N, C, \*spatial\]"):
        evaluate(_grid_model(xf, bad, 20), {"x": xf, "g": bad})


# -- AffineGrid -------------------------------------------------------------------------------


def _affine_model(theta, size, **attrs):
    node = helper.make_node("AffineGrid", ["t", "s"], ["y"], name="ag", **attrs)
    elem = helper.np_dtype_to_tensor_dtype(theta.dtype)
    return make_model([node], [vi("t", elem, list(theta.shape)), vi("s", T.INT64, [len(size)])],
                      [vi("y", elem)], opset=20)


@pytest.mark.parametrize("size", [[1, 3, 4, 5], [2, 1, 3, 2], [1, 2, 3, 4, 5], [3, 1, 2, 1, 4]])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_matches_onnx_reference(size, align):
    """A batch of one too, which the operator's function body cannot run (its Squeeze of the
    batch's rows drops the batch axis as well)."""
    rng = np.random.default_rng(len(size) * 10 + size[0] + align)
    k = len(size) - 2
    theta = rng.standard_normal((size[0], k, k + 1)).astype(np.float32)
    m = _affine_model(theta, size, align_corners=align)
    feeds = {"t": theta, "s": np.int64(size)}
    got = evaluate(m, feeds)["y"]
    with np.errstate(divide="ignore"):  # its step 2 / (1 - 1) for a length-1 axis: -1 there
        want = ReferenceEvaluator(m).run(None, feeds)[0]
    assert got.dtype == np.float32 and got.shape == want.shape == (size[0], *size[2:], k)
    np.testing.assert_allclose(got, want, rtol=0, atol=4e-7 * float(np.abs(theta).sum(-1).max()))


def test_affine_grid_is_theta_times_the_base_grid_in_its_type():
    theta = np.float64([[[2.0, 0.0, 0.5], [0.0, -1.0, 0.25]]])
    m = _affine_model(theta, [1, 1, 2, 4])
    y = evaluate(m, {"t": theta, "s": np.int64([1, 1, 2, 4])})["y"]
    xs = np.float64([-0.75, -0.25, 0.25, 0.75])
    ys = np.float64([-0.5, 0.5])
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y[0, :, :, 0], np.broadcast_to(2 * xs + 0.5, (2, 4)))
    np.testing.assert_array_equal(y[0, :, :, 1], np.broadcast_to(-ys[:, None] + 0.25, (2, 4)))


def test_affine_grid_node_tests():
    assert_onnx_node_tests("test_affine_grid", at_least=8, atol=1e-6)


def test_affine_grid_errors():
    theta = np.zeros((2, 2, 3), np.float32)
    m = _affine_model(theta, [1, 1, 2, 2])
    with pytest.raises(EvaluationError, match=r"node 'ag' \(AffineGrid-20, graph 'g'\): "
                                              r"theta \[2, 2, 3\] and size \[1, 1, 2, 2\]"):
        evaluate(m, {"t": theta, "s": np.int64([1, 1, 2, 2])})


# -- DeformConv -------------------------------------------------------------------------------


def _deform_model(x, w, offset, b=None, mask=None, opset=19, **attrs):
    names = ["x", "w", "o", "b" if b is not None else "", "m" if mask is not None else ""]
    while names[-1] == "":
        names.pop()
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    ins = [vi(name, elem, list(a.shape)) for name, a in
           (("x", x), ("w", w), ("o", offset), ("b", b), ("m", mask)) if a is not None]
    node = helper.make_node("DeformConv", names, ["y"], name="dc", **attrs)
    feeds = {i.name: a for i, a in zip(ins, [a for a in (x, w, offset, b, mask)
                                             if a is not None])}
    return make_model([node], ins, [vi("y", elem)], opset=opset), feeds


def _deform_case(seed: int, k: int = 2, offsets: float = 1.5, masked: bool | None = None):
    rng = np.random.default_rng([13, seed])
    g, og = int(rng.choice([1, 2])), int(rng.choice([1, 2]))
    c, m = 2 * int(rng.integers(1, 3)), g * int(rng.integers(1, 3))
    kernel = [int(rng.integers(1, 4)) for _ in range(k)]
    strides = [int(rng.integers(1, 3)) for _ in range(k)]
    dil = [int(rng.integers(1, 3)) for _ in range(k)]
    pads = [int(rng.integers(0, 2)) for _ in range(2 * k)]
    spatial = [max(int(rng.integers(4, 7)), (q - 1) * d + 1) for q, d in zip(kernel, dil)]
    out = [(s + pads[a] + pads[k + a] - (q - 1) * d - 1) // st + 1
           for a, (s, q, d, st) in enumerate(zip(spatial, kernel, dil, strides))]
    n, kk = int(rng.integers(1, 3)), int(np.prod(kernel))
    x = rng.standard_normal((n, c, *spatial)).astype(np.float32)
    w = rng.standard_normal((m, c // g, *kernel)).astype(np.float32)
    offset = (rng.standard_normal((n, og * kk * k, *out)) * offsets).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if rng.random() < 0.5 else None
    masked = rng.random() < 0.5 if masked is None else masked
    mask = rng.uniform(0, 1, (n, og * kk, *out)).astype(np.float32) if masked else None
    return _deform_model(x, w, offset, b, mask, group=g, offset_group=og, strides=strides,
                         dilations=dil, pads=pads, kernel_shape=kernel)


@pytest.mark.parametrize("seed", range(16))
def test_deform_conv_matches_onnx_reference(seed):
    m, feeds = _deform_case(seed)
    got = evaluate(m, feeds)["y"]
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    # theirs rounds each sample point to float32 and adds in float32
    scale = float(np.abs(feeds["x"]).max() * np.abs(feeds["w"]).sum(axis=tuple(
        range(1, feeds["w"].ndim))).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.finfo(np.float32).eps * scale)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_deform_conv_with_whole_pixel_offsets_is_conv(k):
    """Offsets of whole pixels read the input's pixels themselves: with all offsets 0 and no
    mask, DeformConv is Conv (1-3 spatial axes; onnx.reference's kernel has 2 only)."""
    m, feeds = _deform_case(k, k=k, offsets=0.0, masked=False)
    node = m.graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute
             if a.name != "offset_group"}
    names = ["x", "w"] + (["b"] if "b" in feeds else [])
    conv = make_model([helper.make_node("Conv", names, ["y"], **attrs)],
                      [i for i in m.graph.input if i.name in names], [vi("y")], opset=19)
    got = evaluate(m, feeds)["y"]
    want = evaluate(conv, {name: feeds[name] for name in names})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_deform_conv_of_a_mask_of_zeros_is_the_bias():
    m, feeds = _deform_case(3)
    feeds["m"] = np.zeros((feeds["x"].shape[0], m.graph.input[2].type.tensor_type.shape.dim[1]
                           .dim_value // 2, *feeds["o"].shape[2:]), np.float32)
    feeds.setdefault("b", np.float32([0.5] * feeds["w"].shape[0]))
    m, feeds = _deform_model(feeds["x"], feeds["w"], feeds["o"], feeds["b"], feeds["m"],
                             **{a.name: helper.get_attribute_value(a)
                                for a in m.graph.node[0].attribute})
    y = evaluate(m, feeds)["y"]
    np.testing.assert_array_equal(y, np.broadcast_to(feeds["b"].reshape(1, -1, 1, 1), y.shape))


def test_deform_conv_errors():
    x = np.zeros((1, 2, 4, 4), np.float32)
    w = np.zeros((2, 2, 3, 3), np.float32)
    m, feeds = _deform_model(x, w, np.zeros((1, 17, 2, 2), np.float32))
    with pytest.raises(EvaluationError, match=r"node 'dc' \(DeformConv-19, graph 'g'\): "
                                              r"offset \[1, 17, 2, 2\] must be \[1, 18, 2, 2\]"):
        evaluate(m, feeds)
