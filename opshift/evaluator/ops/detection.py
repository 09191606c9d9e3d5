"""NonMaxSuppression: per batch and class, the boxes in order of score (highest first, the
lower index first among equal scores), each kept unless its intersection over union with a
box kept before it is greater than ``iou_threshold``; at most ``max_output_boxes_per_class``
per class; ``score_threshold`` drops boxes whose score is not above it.

The overlap is computed as onnx.reference's kernel and onnxruntime's do, in the boxes' own
type, operation by operation (corner ordering, intersection, areas, union, ratio), so that a
box near the threshold falls on the same side. Only the loop over kept boxes is Python: each
kept box is compared with all the remaining candidates at once (or, for up to 1024 boxes and
several classes, every pair is judged once per batch and shared by its classes). A NaN score
sorts as -inf (onnx.reference's sort leaves its place undefined).
"""

from __future__ import annotations

import numpy as np

from ..registry import op


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
