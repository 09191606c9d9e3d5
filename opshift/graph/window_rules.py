"""Shape rules of the sliding-window ops (see :mod:`.shape_rules`): Conv, ConvInteger,
QLinearConv, ConvTranspose, the pools and the global pools; and the window arithmetic of one
axis (:func:`window_axis`), which the evaluator runs these ops by."""

from __future__ import annotations

import math

from opshift.graph.shape_rules import Ask, Dim, Shape, rule


def window_axis(size: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                pad_end: int, auto_pad: str = "NOTSET", ceil_mode: bool = False
                ) -> tuple[int, int, int, int]:
    """(pad_begin, pad_end, extra_end, out) of windows of ``kernel`` dilated by ``dilation``
    sliding by ``stride`` over an axis of ``size``: the pads as given, or as SAME_UPPER and
    SAME_LOWER split them (VALID: none), and the number of windows. ``extra_end`` is the
    padding beyond ``pad_end`` that ceil_mode needs (never counted as padding by
    AveragePool). Raises ValueError when the window is larger than the padded axis."""
    eff = (kernel - 1) * dilation + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        total = max((math.ceil(size / stride) - 1) * stride + eff - size, 0)
        small = total // 2
        pad_begin = small if auto_pad == "SAME_UPPER" else total - small
        pad_end = total - pad_begin
    elif auto_pad == "VALID":
        pad_begin = pad_end = 0
    span = size + pad_begin + pad_end - eff
    if span < 0:
        raise ValueError(f"window {eff} is larger than the padded input "
                         f"{size + pad_begin + pad_end}")
    out = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1  # the last window would start in the end padding only
    extra = max((out - 1) * stride + eff - (size + pad_begin + pad_end), 0)
    return pad_begin, pad_end, extra, out


@rule("Conv", "ConvInteger", "QLinearConv", "ConvTranspose", "AveragePool", "MaxPool",
      "LpPool")
def _window(a: Ask) -> Shape | None:
    """Rank kept; batch from X, channels from W (or X for pooling); spatial dims by the
    window arithmetic where the sizes, kernel and attributes fix them (not ConvTranspose's,
    nor a pool's with ceil_mode)."""
    op = a.node.op_type
    x = a.shape(0)
    w = a.shape(3 if op == "QLinearConv" else 1) if "Conv" in op else None
    rank = len(x) if x is not None else len(w) if w is not None else None
    if rank is None or rank < 2:
        return None
    n = x[0] if x is not None else None
    if "Conv" not in op:
        c = x[1] if x is not None else None
    elif w is None:
        c = None
    elif op == "ConvTranspose":
        c = w[1] * a.attr("group", 1) if isinstance(w[1], int) else None
    else:
        c = w[0]
    spatial = None
    if x is not None and op != "ConvTranspose" and not a.attr("ceil_mode", 0):
        kernel = a.attr("kernel_shape") or (w[2:] if w is not None else None)
        spatial = _window_sizes(a, x[2:], kernel)
    return (n, c, *(spatial or (None,) * (rank - 2)))


def _window_sizes(a: Ask, sizes: Shape, kernel) -> list[Dim] | None:
    """The output sizes of windows ``kernel`` sliding over ``sizes`` by the node's strides,
    dilations and pads (or auto_pad); None where the attributes do not fit."""
    k = len(sizes)
    kernel = list(kernel or ())
    strides = list(a.attr("strides") or [1] * k)
    dil = list(a.attr("dilations") or [1] * k)
    if not (len(kernel) == len(strides) == len(dil) == k) or min(strides + dil, default=1) < 1:
        return None
    auto = a.attr("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    pads = list(a.attr("pads") or [0] * (2 * k)) if auto == "NOTSET" else [0] * (2 * k)
    if len(pads) != 2 * k or auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        return None
    out: list[Dim] = []
    for i, (d, kk, s, dd) in enumerate(zip(sizes, kernel, strides, dil)):
        try:
            out.append(window_axis(d, kk, s, dd, pads[i], pads[k + i], auto)[3]
                       if isinstance(d, int) and isinstance(kk, int) else None)
        except ValueError:  # the window is larger than the padded input
            out.append(None)
    return out


@rule("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(a: Ask) -> Shape | None:
    x = a.shape(0)
    return None if x is None or len(x) < 2 else (x[0], x[1], *(1,) * (len(x) - 2))
