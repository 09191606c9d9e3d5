"""Detection heads: NonMaxSuppression, RoiAlign and MaxRoiPool.

NonMaxSuppression: per batch and class, the boxes in order of score (highest first, the
lower index first among equal scores), each kept unless its intersection over union with a
box kept before it is greater than ``iou_threshold``; at most ``max_output_boxes_per_class``
per class; ``score_threshold`` drops boxes whose score is not above it.

The overlap is computed as onnx.reference's kernel and onnxruntime's do, in the boxes' own
type, operation by operation (corner ordering, intersection, areas, union, ratio), so that a
box near the threshold falls on the same side. Only the loop over kept boxes is Python: each
kept box is compared with all the remaining candidates at once (or, for up to 1024 boxes and
several classes, every pair is judged once per batch and shared by its classes). A NaN score
sorts as -inf (onnx.reference's sort leaves its place undefined).

RoiAlign: each output bin of an RoI samples a grid of points (``sampling_ratio`` per axis, or
ceil(bin size)) by bilinear interpolation and averages them (``avg``) or takes their maximum
(``max``: of each point's four weighted corner values, as onnxruntime and onnx.reference
compute it). Sample coordinates and weights are computed in the RoIs' type operation by
operation as those kernels do, so that every point lands where theirs do; a point more than
one pixel off the map weighs 0. One RoI at a time, all channels and points at once: the
corner values times their weights (exact in float64), averaged in float64 and rounded once.

MaxRoiPool: Fast R-CNN's RoI pooling, the maximum of each of an RoI's bins (see its kernel).
"""

from __future__ import annotations

import numpy as np

from opshift.evaluator.registry import op


def _corners(boxes: np.ndarray, center: bool):
    """(y_min, x_min, y_max, x_max) of each box, as the kernels order them."""
    if center:  # [x_center, y_center, width, height]
        half_w, half_h = boxes[:, 2] / 2, boxes[:, 3] / 2
        return (boxes[:, 1] - half_h, boxes[:, 0] - half_w, boxes[:, 1] + half_h,
                boxes[:, 0] + half_w)
    y0, x0, y1, x1 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    # max_min(lhs, rhs): (rhs, lhs) where lhs >= rhs, else (lhs, rhs)
    swap_y, swap_x = y0 >= y1, x0 >= x1
    return (np.where(swap_y, y1, y0), np.where(swap_x, x1, x0), np.where(swap_y, y0, y1),
            np.where(swap_x, x0, x1))


#: Boxes up to which every pair's verdict is computed once per batch (a table of up to 1M
#: pairs, ~50 MB while it is built) rather than each kept box's against its class's rest.
_PAIRS = 1024


def _suppressed(c, k, rest, iou_threshold) -> np.ndarray:
    """Whether each box of ``rest`` (indices into the corner arrays ``c``) overlaps box(es)
    ``k`` (an index, or a column of indices) by more than the threshold."""
    ymin, xmin, ymax, xmax = c
    # (a NaN corner makes an area NaN, so NaN never suppresses, whichever max is taken)
    ix0, ix1 = np.maximum(xmin[rest], xmin[k]), np.minimum(xmax[rest], xmax[k])
    iy0, iy1 = np.maximum(ymin[rest], ymin[k]), np.minimum(ymax[rest], ymax[k])
    inter = (ix1 - ix0) * (iy1 - iy0)
    area1 = (xmax[rest] - xmin[rest]) * (ymax[rest] - ymin[rest])
    area2 = (xmax[k] - xmin[k]) * (ymax[k] - ymin[k])
    union = area1 + area2 - inter
    overlap = ((ix1 > ix0) & (iy1 > iy0) & (inter > 0) & (area1 > 0) & (area2 > 0)
               & (union > 0))
    return overlap & (inter / np.where(overlap, union, 1) > iou_threshold)


def _scalar(v, default):
    return default if v is None or v.size == 0 else v.reshape(-1)[0]


@op("NonMaxSuppression", 10, 11)
def non_max_suppression(ctx, boxes, scores, max_per_class=None, iou_threshold=None,
                        score_threshold=None):
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or \
            scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ctx.error(f"boxes {list(boxes.shape)} and scores {list(scores.shape)} must be "
                        "[batches, boxes, 4] and [batches, classes, boxes]")
    limit = max(int(_scalar(max_per_class, 0)), 0)
    iou = _scalar(iou_threshold, 0)
    threshold = _scalar(score_threshold, None)
    center = bool(ctx.attrs.get("center_point_box", 0))
    selected: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0] if limit else 0):
        c = _corners(boxes[b], center)
        n = boxes.shape[1]
        # table[k, i]: box i (considered) is suppressed by box k (kept)
        table = _suppressed(c, np.arange(n)[:, None], np.arange(n)[None, :], iou) \
            if n <= _PAIRS and scores.shape[1] > 1 else None
        for cls in range(scores.shape[1]):
            s = scores[b, cls]
            order = np.arange(s.size)
            if threshold is not None:
                order = order[s > threshold]
            ranked = s[order]
            # highest score first, the lower index first among equals, NaN as -inf
            order = order[np.lexsort((order, -np.where(ranked != ranked, -np.inf, ranked)))]
            kept = 0
            while order.size and kept < limit:
                k = int(order[0])
                selected.append((b, cls, k))
                kept += 1
                rest = order[1:]
                hit = table[k, rest] if table is not None else _suppressed(c, k, rest, iou)
                order = rest[~hit]
    return np.array(selected, np.int64).reshape(-1, 3)


#: Values of one product term (points x channels) computed at once: channels of an RoI go in
#: blocks of at most this many (a large RoI with an adaptive grid samples many points)
_TERM = 1 << 22


def _axis_samples(start, bin_size, grid: int, pooled: int, length: int, t):
    """For one axis of one RoI, per sample point (bin, then point in the bin): the low and
    high pixel, the weights of the two, and whether the point is off the map."""
    p = np.repeat(np.arange(pooled), grid).astype(np.float64)
    i = np.tile(np.arange(grid), pooled) + 0.5
    if type(bin_size) is float:  # (a Python float: a 1 x 1 RoI's, as their kernels have it)
        pos = start + (p * bin_size).astype(t) + (i * bin_size / grid).astype(t)
    else:
        pos = start + p.astype(t) * bin_size + i.astype(t) * bin_size / t.type(grid)
    off = (pos < -1.0) | (pos > length)
    pos = np.where(pos < 0, t.type(0), pos)
    low = pos.astype(np.int64)  # pos >= 0: truncation is the floor
    edge = low >= length - 1
    low = np.where(edge, length - 1, low)
    high = np.where(edge, length - 1, low + 1)
    lw = np.where(edge, t.type(0), pos - low.astype(t))
    return low, high, t.type(1) - lw, lw, off


def _roi_bins(plane, roi, attrs, half_pixel: bool, out_h: int, out_w: int) -> np.ndarray:
    """One RoI's output [C, out_h, out_w] (float64) from its image's ``plane`` [C, H, W]."""
    t = roi.dtype
    offset = t.type(0.5 if half_pixel else 0.0)
    start_w, start_h, end_w, end_h = roi * t.type(attrs.get("spatial_scale", 1.0)) - offset
    width, height = end_w - start_w, end_h - start_h
    if not half_pixel:  # RoIs smaller than a pixel are taken as 1 x 1 (Python's max, as theirs)
        width, height = max(width, 1.0), max(height, 1.0)
    bin_h, bin_w = height / out_h, width / out_w
    ratio = int(attrs.get("sampling_ratio", 0))
    gh = ratio if ratio > 0 else int(np.ceil(height / out_h))
    gw = ratio if ratio > 0 else int(np.ceil(width / out_w))
    c, h, w = plane.shape
    out = np.zeros((c, out_h, out_w))
    if gh <= 0 or gw <= 0:
        return out
    yl, yh, wy0, wy1, y_off = _axis_samples(start_h, bin_h, gh, out_h, h, t)
    xl, xh, wx0, wx1, x_off = _axis_samples(start_w, bin_w, gw, out_w, w, t)
    off = y_off[:, None] | x_off[None, :]
    corners = []
    for rows, wy in ((yl, wy0), (yh, wy1)):
        for cols, wx in ((xl, wx0), (xh, wx1)):
            weight = np.where(off, t.type(0), wy[:, None] * wx[None, :])  # in t, as theirs
            corners.append((np.where(off, 0, rows[:, None]), np.where(off, 0, cols[None, :]),
                            weight))
    step = max(1, _TERM // off.size)
    for c0 in range(0, c, step):
        block = plane[c0:c0 + step]
        terms = [block[:, r, k].astype(np.float64) for r, k, _ in corners]
        for term, (_, _, wt) in zip(terms, corners):
            term *= wt
        out[c0:c0 + step] = _pool(terms, attrs.get("mode", "avg"), (gh, gw), (out_h, out_w))
    return out


def _pool(terms, mode: str, grid, bins) -> np.ndarray:
    """Each bin's points (the four corner terms of each) averaged, or their maximum."""
    shape = (terms[0].shape[0], bins[0], grid[0], bins[1], grid[1])
    if mode == "avg":
        total = terms[0] + terms[1] + terms[2] + terms[3]
        return total.reshape(shape).sum(axis=(2, 4)) / (grid[0] * grid[1])
    # max, as Python's max: a later value replaces the one kept only when greater
    best = terms[0]
    for v in terms[1:]:
        best = np.where(v > best, v, best)
    points = best.reshape(shape).transpose(0, 1, 3, 2, 4).reshape(shape[0], *bins, -1)
    out = points[..., 0]
    for k in range(1, points.shape[-1]):
        out = np.where(points[..., k] > out, points[..., k], out)
    return out


@op("RoiAlign", 10, 16, 22)
def roi_align(ctx, x, rois, batch_indices):
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 4 or batch_indices.ndim != 1 or \
            batch_indices.shape[0] != rois.shape[0]:
        raise ctx.error(f"X {list(x.shape)}, rois {list(rois.shape)} and batch_indices "
                        f"{list(batch_indices.shape)} must be [N, C, H, W], [R, 4] and [R]")
    bad = (batch_indices < 0) | (batch_indices >= x.shape[0])
    if bad.any():
        raise ctx.error(f"batch index {int(batch_indices[bad][0])} is out of range for X "
                        f"{list(x.shape)}")
    mode = ctx.attrs.get("mode", "avg")
    if mode not in ("avg", "max"):
        raise ctx.error(f"unknown mode {mode!r}")
    coords = "output_half_pixel" if ctx.version < 16 else \
        ctx.attrs.get("coordinate_transformation_mode", "half_pixel")
    if coords not in ("half_pixel", "output_half_pixel"):
        raise ctx.error(f"unknown coordinate_transformation_mode {coords!r}")
    out_h, out_w = ctx.attrs.get("output_height", 1), ctx.attrs.get("output_width", 1)
    if out_h < 1 or out_w < 1:
        raise ctx.error(f"output_height {out_h} and output_width {out_w} must be positive")
    y = np.empty((rois.shape[0], x.shape[1], out_h, out_w), x.dtype)
    for r in range(rois.shape[0]):
        y[r] = _roi_bins(x[int(batch_indices[r])], rois[r], ctx.attrs,
                         coords == "half_pixel", out_h, out_w)
    return y


@op("MaxRoiPool", 1, 22)
def max_roi_pool(ctx, x, rois):
    """Fast R-CNN's RoI pooling, as Caffe and onnxruntime compute it: each RoI's corners
    scaled and rounded half away from zero, its inclusive extent cut into pooled_shape bins
    (floor of each start, ceil of each end, in X's type), clipped to the map; each bin's
    maximum (NaN wins, as MaxPool's), 0 for an empty bin."""
    shape = ctx.attrs.get("pooled_shape")
    if not shape or len(shape) != 2 or min(shape) < 1:
        raise ctx.error(f"pooled_shape {shape} must be two positive sizes")
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
        raise ctx.error(f"X {list(x.shape)} and rois {list(rois.shape)} must be [N, C, H, W] "
                        "and [R, 5]")
    t = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    scale = t.type(ctx.attrs.get("spatial_scale", 1.0))
    (ph, pw), (h, w) = shape, x.shape[2:]
    y = np.zeros((rois.shape[0], x.shape[1], ph, pw), x.dtype)
    for r, roi in enumerate(rois.astype(t)):
        b = int(roi[0])
        if not 0 <= b < x.shape[0]:
            raise ctx.error(f"RoI {r}: batch index {roi[0]} is out of range for X "
                            f"{list(x.shape)}")
        x0, y0, x1, y1 = (int(np.sign(v) * np.floor(np.abs(v) + 0.5)) for v in roi[1:] * scale)
        rows = _bins(y0, max(y1 - y0 + 1, 1), ph, h, t)
        cols = _bins(x0, max(x1 - x0 + 1, 1), pw, w, t)
        for i, (r0, r1) in enumerate(rows):
            for j, (c0, c1) in enumerate(cols):
                if r1 > r0 and c1 > c0:
                    y[r, :, i, j] = x[b, :, r0:r1, c0:c1].max(axis=(1, 2))
    return y


def _bins(start: int, extent: int, pooled: int, length: int, t) -> list[tuple[int, int]]:
    """Each bin's [begin, end) along one axis of an RoI, clipped to [0, length]."""
    size = t.type(extent) / t.type(pooled)
    out = []
    for p in range(pooled):
        lo = int(np.floor(t.type(p) * size)) + start
        hi = int(np.ceil(t.type(p + 1) * size)) + start
        out.append((min(max(lo, 0), length), min(max(hi, 0), length)))
    return out
