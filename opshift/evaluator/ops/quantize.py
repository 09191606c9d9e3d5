"""QuantizeLinear to an integer type: ``saturate(round(x / y_scale) + y_zero_point)``.

The division in x's type (or ``precision``'s, from 23), rounded half to even, then the zero
point added and the sum clipped to the output type in float64, which holds every rounded
quotient: huge quotients saturate to the type's bounds, as the operator says. (onnx.reference
rounds into int32 first, which wraps a quotient of 2**31 or more: 1e10 quantized to 0.) The
operator leaves NaN undefined; it quantizes to the type's lowest value here: x86's
float-to-int32 conversion gives INT32_MIN for NaN, which saturates there (onnxruntime's
result too). Scale and zero point are per tensor, per axis (from 13) or
per block (from 21). Float outputs (float8, float6, float4) run onnx.reference's kernel.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from opshift.evaluator import onnx_reference
from opshift.evaluator.registry import op

#: the integer output types and their ranges
_RANGES = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127),
           TensorProto.UINT16: (0, 65535), TensorProto.INT16: (-32768, 32767),
           TensorProto.UINT4: (0, 15), TensorProto.INT4: (-8, 7),
           TensorProto.UINT2: (0, 3), TensorProto.INT2: (-2, 1)}


@op("QuantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def quantize_linear(ctx, x, y_scale, y_zero_point=None):
    out = (helper.np_dtype_to_tensor_dtype(y_zero_point.dtype) if y_zero_point is not None
           else ctx.attrs.get("output_dtype") or TensorProto.UINT8)
    if out not in _RANGES:
        return onnx_reference.run(ctx, *[v for v in (x, y_scale, y_zero_point)
                                          if v is not None])
    axis = ctx.attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    block = ctx.attrs.get("block_size", 0)
    scale = _shaped(ctx, y_scale, x.shape, axis, block)
    precision = ctx.attrs.get("precision", 0)
    if precision:
        dtype = helper.tensor_dtype_to_np_dtype(precision)
        x, scale = x.astype(dtype), scale.astype(dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.rint(x / scale).astype(np.float64)
    if y_zero_point is not None:
        q += _shaped(ctx, y_zero_point, x.shape, axis, block).astype(np.float64)
    lo, hi = _RANGES[out]
    q = np.clip(q, lo, hi)
    q[np.isnan(q)] = lo
    return q.astype(np.int32).astype(helper.tensor_dtype_to_np_dtype(out))


def _shaped(ctx, v: np.ndarray, shape: tuple, axis: int, block: int) -> np.ndarray:
    """A scale or zero point made to broadcast to ``shape``: one value, one per position of
    ``axis``, or (``block``) one per block of ``block`` positions along it."""
    if v.size == 1 and (v.ndim <= 1 or not block):
        return v.reshape(())
    if not 0 <= axis < len(shape):
        raise ctx.error(f"axis {axis} is outside X's rank {len(shape)}")
    if block:
        if v.ndim != len(shape):
            raise ctx.error(f"blocked scale or zero point of shape {list(v.shape)} does not "
                            f"fit X {list(shape)}")
        v = np.repeat(v, block, axis=axis).take(range(shape[axis]), axis=axis)
        if v.shape != tuple(shape):
            raise ctx.error(f"blocked scale or zero point does not fit X {list(shape)} with "
                            f"block_size {block}")
        return v
    if v.ndim != 1 or v.size != shape[axis]:
        raise ctx.error(f"scale or zero point of shape {list(v.shape)} does not fit X "
                        f"{list(shape)} on axis {axis}")
    dims = [1] * len(shape)
    dims[axis] = v.size
    return v.reshape(dims)
