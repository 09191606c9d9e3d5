"""Resize (10, 11, 13, 18, 19) and Upsample (7, 9): each output position of an axis is a
weighted sum of the input positions in a window around its source coordinate, one axis after
another.

Per axis, the source coordinate of every output index (``coordinate_transformation_mode``),
its window and the window's weights (``mode``, ``antialias``, ``exclude_outside``) are worked
out once, as arrays of the output's length, by the operator's formulas written as onnx's
reference writes them (in float64: onnx.reference's cubic weights come out float32 under
NumPy 2's promotion; onnx's node tests expect the float64 ones). The values are gathered one
window column at a time, weighted and summed in float64, a block at a time (blocks shared
among threads when large), and rounded once to X's type after the last axis (integers half to
even and clipped, as onnx.reference does); shrinking axes go first. An axis whose every
output index maps onto its own input index is left as it is. Nearest selects its one input
position instead of weighting two, so it copies values exactly: -0.0 stays -0.0, and a
neighbour's inf or NaN does not reach it through a weight of 0 (onnx.reference weights both).

``length_resized`` in the formulas is scale x input length (fractional when computed from a
scale, as onnx's node tests expect), or the size asked for; pytorch_half_pixel maps a length-1
output to 0, as its formula states (onnx.reference: -0.5). Upsample-7/9 and Resize-10 are
Resize with asymmetric coordinates and nearest rounding down, as is the experimental
Upsample-1 (NCHW, scales of H and W, its bilinear mode being linear).
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from opshift.evaluator.ops.common import is_float, made, normalize_axes, requantized
from opshift.evaluator.parallel import in_parallel
from opshift.evaluator.registry import op

#: coordinate_transformation_mode -> the Resize versions that have it
_COORDINATES = {
    "half_pixel": (11, 13, 18, 19), "pytorch_half_pixel": (11, 13, 18, 19),
    "align_corners": (11, 13, 18, 19), "asymmetric": (11, 13, 18, 19),
    "tf_crop_and_resize": (11, 13, 18, 19), "tf_half_pixel_for_nn": (11,),
    "half_pixel_symmetric": (19,),
}
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass(frozen=True)
class _Rule:
    """How a node resizes: its attributes, with their defaults."""

    mode: str = "nearest"
    coordinates: str = "half_pixel"
    nearest: str = "round_prefer_floor"
    cubic_a: float = -0.75
    antialias: bool = False
    exclude_outside: bool = False
    fill: float = 0.0  # extrapolation_value
    policy: str = "stretch"  # keep_aspect_ratio_policy

    @classmethod
    def of(cls, ctx) -> _Rule:
        a = ctx.attrs
        rule = cls(a.get("mode", "nearest"),
                   a.get("coordinate_transformation_mode", "half_pixel"),
                   a.get("nearest_mode", "round_prefer_floor"), a.get("cubic_coeff_a", -0.75),
                   bool(a.get("antialias", 0)), bool(a.get("exclude_outside", 0)),
                   a.get("extrapolation_value", 0.0),
                   a.get("keep_aspect_ratio_policy", "stretch"))
        if rule.mode not in ("nearest", "linear", "cubic"):
            raise ctx.error(f"unknown mode {rule.mode!r}")
        if ctx.version not in _COORDINATES.get(rule.coordinates, ()):
            raise ctx.error(f"coordinate_transformation_mode {rule.coordinates!r} is not "
                            f"Resize-{ctx.version}'s")
        if rule.nearest not in _NEAREST:
            raise ctx.error(f"unknown nearest_mode {rule.nearest!r}")
        if rule.policy not in ("stretch", "not_larger", "not_smaller"):
            raise ctx.error(f"unknown keep_aspect_ratio_policy {rule.policy!r}")
        return rule


@dataclass
class _Axis:
    axis: int
    size: int  # the output's length
    scale: float
    width: float  # length_resized: scale x input length, or the size asked for
    roi: tuple[float, float] | None  # (start, end) for tf_crop_and_resize


def _source(rule: _Rule, a: _Axis, n_in: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Each output index's coordinate in the input (float64); for tf_crop_and_resize, also
    which of them fall outside [0, n_in - 1]."""
    y = np.arange(a.size, dtype=np.float64)
    mode = rule.coordinates
    if mode == "half_pixel":
        return (y + 0.5) / a.scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - a.size / a.width)
        return offset + (y + 0.5) / a.scale - 0.5, None
    if mode == "pytorch_half_pixel":
        return ((y + 0.5) / a.scale - 0.5 if a.width > 1 else np.zeros(a.size)), None
    if mode == "align_corners":
        return (y * (n_in - 1) / (a.width - 1) if a.width > 1 else np.zeros(a.size)), None
    if mode == "asymmetric":
        return y / a.scale, None
    if mode == "tf_half_pixel_for_nn":
        return (y + 0.5) / a.scale, None
    start, end = a.roi
    if a.width > 1:
        x = y * (end - start) * (n_in - 1) / (a.width - 1) + start * (n_in - 1)
    else:
        x = np.full(a.size, 0.5 * (start + end) * (n_in - 1))
    return x, (x < 0) | (x > n_in - 1)


def _sequential_sum(w: np.ndarray) -> np.ndarray:
    """Each row of ``w`` summed left to right (as onnx.reference sums a window)."""
    s = w[:, 0].copy()
    for k in range(1, w.shape[1]):
        s += w[:, k]
    return s


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """The cubic convolution kernel of Keys (1981) at distance ``t``."""
    t = np.abs(t)
    t2 = t * t
    t3 = t * t2
    near = (a + 2) * t3 - (a + 3) * t2 + 1
    far = a * t3 - 5 * a * t2 + 8 * a * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _weights(rule: _Rule, x: np.ndarray, scale: float) -> np.ndarray:
    """Linear's and cubic's window weights [outputs, n] for source coordinates ``x``; each
    window is the n input indices from ceil(x) - n / 2."""
    r = x - np.floor(x)
    r[r == 0] = 1.0  # an integer coordinate is the right one of the window's middle two
    a = rule.cubic_a
    if rule.antialias:
        s = min(scale, 1.0)  # the filter is stretched by 1 / scale when downsampling
        start = math.floor((-1 if rule.mode == "linear" else -2) / s) + 1
        t = (np.arange(start, 2 - start)[None, :] - r[:, None]) * s
        w = np.clip(1 - np.abs(t), 0, 1) if rule.mode == "linear" else _cubic(t, a)
        return w / _sequential_sum(w)[:, None]
    if rule.mode == "linear":
        return np.stack([1 - r, r], axis=1)
    q = 1 - r
    return np.stack([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                     ((a + 2) * r - (a + 3)) * r * r + 1,
                     ((a + 2) * q - (a + 3)) * q * q + 1,
                     ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a], axis=1)


def _nearest(rule: _Rule, x: np.ndarray) -> np.ndarray:
    lo, hi = np.floor(x), np.ceil(x)
    if rule.nearest == "floor":
        return lo
    if rule.nearest == "ceil":
        return hi
    up = x - lo > 0.5 if rule.nearest == "round_prefer_floor" else x - lo >= 0.5
    return np.where(up, hi, lo)


def _resize_axis(rule: _Rule, v: np.ndarray, a: _Axis, fill, dtype: np.dtype) -> np.ndarray:
    """v resized along one axis; linear and cubic sums rounded to ``dtype`` (X's type after
    the last axis, else float64), nearest in v's type."""
    n_in = v.shape[a.axis]
    x, outside = _source(rule, a, n_in)
    if a.size == n_in and outside is None and np.array_equal(x, np.arange(n_in)):
        return v
    shape = (1,) * a.axis + (a.size,) + (1,) * (v.ndim - a.axis - 1)
    if rule.mode == "nearest":
        pos = _nearest(rule, x)
        out = np.take(v, np.clip(pos, 0, n_in - 1).astype(np.intp), axis=a.axis)
        if rule.exclude_outside:  # its one weight renormalized: none inside, 0
            np.copyto(out, out.dtype.type(0), where=((pos < 0) | (pos > n_in - 1)).reshape(shape))
    else:
        w = _weights(rule, x, a.scale)
        pos = np.ceil(x)[:, None] - w.shape[1] // 2 + np.arange(w.shape[1])
        if rule.exclude_outside:
            w = np.where((pos < 0) | (pos > n_in - 1), 0.0, w)
            total = _sequential_sum(w)
            w = w / np.where(total == 0, 1.0, total)[:, None]
        idx = np.clip(pos, 0, n_in - 1).astype(np.intp)
        out = _weighted_sum(v, a.axis, idx, w, dtype)
    if outside is not None and outside.any():
        np.copyto(out, _rounded(fill, out.dtype), where=outside.reshape(shape))
    return out


#: float64 elements of a block of a weighted sum: small enough for the cache, and for the
#: allocator to reuse (a fresh large array costs its page faults on every use)
_BLOCK = 1 << 17
#: BLAS multiply-adds that cost what one term of a weighted sum does (a gathered value
#: widened, weighted and added: ~2 ns, measured), to judge whether threads are worth it
_TAP = 64


def _weighted_sum(v: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray,
                  dtype: np.dtype) -> np.ndarray:
    """The sum over k of v's positions ``idx[:, k]`` along ``axis`` times ``w[:, k]``, in
    float64 (complex128 for complex v) and in order of k, rounded to ``dtype``; a block of
    rows (or of columns, for few rows) at a time."""
    outer, n_in, size = math.prod(v.shape[:axis]), v.shape[axis], idx.shape[0]
    inner = math.prod(v.shape[axis + 1:])
    src = v.reshape(outer, n_in, inner)
    out = np.empty((outer, size, inner), dtype)
    if out.size == 0:
        return out.reshape(v.shape[:axis] + (size,) + v.shape[axis + 1:])
    acc = np.result_type(v.dtype, np.float64)
    rows = max(1, _BLOCK // max(size * inner, 1))
    cols = inner if rows > 1 or size * inner <= _BLOCK else max(1, _BLOCK // size)
    ws = [w[:, k].reshape(1, size, 1) for k in range(w.shape[1])]

    def run(blocks: Iterator[tuple[int, int]]) -> None:
        buffers: dict[tuple, tuple] = {}  # per block shape: the sum, a term, a gather in v's type
        for r, c in blocks:
            part = src[r:r + rows, :, c:c + cols]
            shape = (part.shape[0], size, part.shape[2])
            if shape not in buffers:
                buffers[shape] = (np.empty(shape, acc), np.empty(shape, acc),
                                  None if v.dtype == acc else np.empty(shape, v.dtype))
            total, term, raw = buffers[shape]
            for k, wk in enumerate(ws):
                dest = term if k else total
                np.take(part, idx[:, k], axis=1, out=dest if raw is None else raw, mode="clip")
                np.multiply(dest if raw is None else raw, wk, out=dest)
                if k:
                    total += term
            target = out[r:r + rows, :, c:c + cols]
            if dtype.kind in "iu":
                target[...] = _rounded(total, dtype)
            else:
                np.copyto(target, total, casting="unsafe")  # rounded once to X's type

    in_parallel([(r, c) for r in range(0, outer, rows) for c in range(0, inner, cols)], run,
                out.size * len(ws) * _TAP)
    return out.reshape(v.shape[:axis] + (size,) + v.shape[axis + 1:])


def _rounded(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 sums in X's type: integers half to even and clipped, as onnx.reference's."""
    return requantized(np.asarray(v), None, dtype) if dtype.kind in "iu" else v.astype(dtype)


def _axes(ctx, rule: _Rule, x, roi, scales, sizes) -> list[_Axis]:
    """One entry per axis named by ``axes`` (all axes by default) with its output length."""
    names = normalize_axes(ctx.attrs.get("axes", range(x.ndim)), x.ndim, ctx)
    if len(set(names)) != len(names):
        raise ctx.error(f"axes {ctx.attrs['axes']} repeat an axis")
    scales = None if scales is None or scales.size == 0 else scales.reshape(-1)
    sizes = None if sizes is None or sizes.size == 0 else sizes.reshape(-1)
    if (scales is None) == (sizes is None):
        raise ctx.error("needs exactly one of scales and sizes (non-empty)")
    given = scales if sizes is None else sizes
    if len(given) != len(names):
        raise ctx.error(f"{'scales' if sizes is None else 'sizes'} {given.tolist()} must have "
                        f"one entry per axis resized ({len(names)})")
    n_in = [x.shape[d] for d in names]
    if sizes is None:
        if not all(s > 0 and math.isfinite(s) for s in scales.tolist()):
            raise ctx.error(f"scales {scales.tolist()} must be positive")
        plan = [(math.floor(n * float(s)), float(s), n * float(s))
                for n, s in zip(n_in, scales)]
    else:
        want = [int(s) for s in sizes]
        if min(want) < 0 or (0 in n_in and max(want) > 0):
            raise ctx.error(f"cannot resize {list(x.shape)} to sizes {want}")
        if rule.policy == "stretch":
            plan = [(s, s / n if n else 1.0, float(s)) for n, s in zip(n_in, want)]
        else:
            pick = min if rule.policy == "not_larger" else max
            s = pick(w / n for n, w in zip(n_in, want))
            plan = [(int(s * n + 0.5), s, s * n) for n in n_in]
    bounds = None
    if rule.coordinates == "tf_crop_and_resize":
        if roi is None or roi.size != 2 * len(names):
            raise ctx.error(f"tf_crop_and_resize needs roi of {2 * len(names)} values "
                            f"(starts, then ends), got {0 if roi is None else roi.size}")
        bounds = [float(r) for r in roi.reshape(-1)]
        if not all(math.isfinite(b) for b in bounds):
            raise ctx.error(f"roi {bounds} is not finite")
    return [_Axis(d, size, scale, width,
                  None if bounds is None else (bounds[i], bounds[len(names) + i]))
            for i, (d, (size, scale, width)) in enumerate(zip(names, plan))]


def resize(ctx, rule: _Rule, x: np.ndarray, roi=None, scales=None, sizes=None) -> np.ndarray:
    """X resized by ``rule`` to ``scales`` or ``sizes`` (errors through ``ctx``)."""
    numeric = is_float(x) or x.dtype.kind in "iuc"
    if not numeric and (rule.mode != "nearest" or rule.coordinates == "tf_crop_and_resize"):
        raise ctx.unsupported(f"{rule.mode} resizing ({rule.coordinates}) of {x.dtype} "
                              "values")
    plan = _axes(ctx, rule, x, roi, scales, sizes)
    sized = {a.axis: a.size for a in plan}
    made(ctx, [sized.get(i, d) for i, d in enumerate(x.shape)])
    fill = np.float64(rule.fill)
    if rule.mode == "nearest" and numeric:
        fill = _rounded(fill, x.dtype)  # nearest keeps X's type throughout
    v = x
    # shrinking axes first, then growing ones, the last (whose gathers are the slowest)
    # first among equals: the least data moved (the sums differ in float64 rounding only)
    plan.sort(key=lambda a: (a.size / max(x.shape[a.axis], 1), -a.axis))
    acc = np.result_type(x.dtype, np.float64) if numeric else x.dtype
    for i, a in enumerate(plan):
        v = _resize_axis(rule, v, a, fill, x.dtype if i == len(plan) - 1 else acc)
    if v is x:
        return x.copy()
    return v if v.dtype == x.dtype else _rounded(v, x.dtype)


@op("Resize", 11, absent=(1, 2))
def resize_11(ctx, x, roi=None, scales=None, sizes=None):
    """Models in use leave Resize-11's roi out, and its scales when sizes are given (both are
    required, roi is unused but by tf_crop_and_resize): taken as absent."""
    return resize(ctx, _Rule.of(ctx), x, roi, scales, sizes)


@op("Resize", 13, 18, 19)
def resize_13(ctx, x, roi=None, scales=None, sizes=None):
    return resize(ctx, _Rule.of(ctx), x, roi, scales, sizes)


def _asymmetric(ctx, x, scales, mode: str) -> np.ndarray:
    """Upsample-1/7/9 and Resize-10: Resize-11 with asymmetric coordinates, nearest rounding
    down, and a scale for every axis."""
    if mode not in ("nearest", "linear"):
        raise ctx.error(f"unknown mode {mode!r} (nearest or linear)")
    scales = np.asarray(scales, dtype=np.float32).reshape(-1)
    if len(scales) != x.ndim:
        raise ctx.error(f"scales {scales.tolist()} do not fit X {list(x.shape)} (one per "
                        "axis)")
    return resize(ctx, _Rule(mode, "asymmetric", "floor"), x, None, scales, None)


@op("Upsample", 1)
def upsample_1(ctx, x):
    """The experimental Upsample: NCHW, height_scale and width_scale, bilinear for linear."""
    mode = ctx.attrs.get("mode", "nearest")
    return _asymmetric(ctx, x, [1, 1, ctx.attrs["height_scale"], ctx.attrs["width_scale"]],
                       "linear" if mode == "bilinear" else mode)


@op("Upsample", 7)
def upsample_7(ctx, x):
    return _asymmetric(ctx, x, ctx.attrs["scales"], ctx.attrs.get("mode", "nearest"))


@op("Upsample", 9, 10)  # 10 deprecates the op, unchanged
def upsample_9(ctx, x, scales):
    return _asymmetric(ctx, x, scales, ctx.attrs.get("mode", "nearest"))


@op("Resize", 10)
def resize_10(ctx, x, scales):
    return _asymmetric(ctx, x, scales, ctx.attrs.get("mode", "nearest"))
