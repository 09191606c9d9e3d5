"""Upsample-7/9 and Resize-10: Resize-11's computation with asymmetric coordinates.

Their specs scale each axis by ``scales`` with output index ``i`` reading input position
``i / scale`` (floor for nearest) and output size ``floor(size * scale)``: Resize-11 with
``coordinate_transformation_mode='asymmetric'`` and ``nearest_mode='floor'``. They run as
exactly that call, on the kernel that runs Resize-11 (onnx.reference's), so the two cannot
drift apart.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ..registry import op


def _scale(ctx, x, scales, mode: str) -> np.ndarray:
    from onnx.reference.ops import load_op

    scales = np.asarray(scales, dtype=np.float32).reshape(-1)
    if len(scales) != x.ndim or not all(s > 0 and math.isfinite(s) for s in scales):
        raise ctx.error(f"scales {scales.tolist()} do not fit X {list(x.shape)} (one positive "
                        "scale per axis)")
    if mode not in ("nearest", "linear"):
        raise ctx.unsupported(f"mode {mode!r} (nearest or linear)")
    node = onnx.helper.make_node("Resize", ["X", "", "scales"], ["Y"], mode=mode,
                                 coordinate_transformation_mode="asymmetric",
                                 nearest_mode="floor")
    kernel = load_op("", "Resize", 11)(node, {"log": lambda *a: None, "opsets": {"": 11},
                                               "verbose": 0, "new_ops": None})
    (y,) = kernel.run(x, None, scales)
    return np.asarray(y, dtype=x.dtype)


@op("Upsample", 7)
def upsample_7(ctx, x):
    return _scale(ctx, x, ctx.attrs["scales"], ctx.attrs.get("mode", "nearest"))


@op("Upsample", 9)
def upsample_9(ctx, x, scales):
    return _scale(ctx, x, scales, ctx.attrs.get("mode", "nearest"))


@op("Resize", 10)
def resize_10(ctx, x, scales):
    return _scale(ctx, x, scales, ctx.attrs.get("mode", "nearest"))
