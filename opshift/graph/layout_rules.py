"""Shape rules of the ops that move or select data (see :mod:`.shape_rules`): Flatten,
Reshape, Transpose, Slice, Squeeze, Unsqueeze, Concat, Shape, Size, Gather, ConstantOfShape,
Expand, Pad, Tile, the resamplers (their rank), DepthToSpace, SpaceToDepth, Split and TopK
(output 0), GatherElements, NonZero."""

from __future__ import annotations

from opshift.graph.shape_rules import (
    Ask,
    Dim,
    Shape,
    axis_index,
    broadcast,
    complete,
    dims_product,
    dims_quotient,
    rule,
    same_shape,
)


@rule("Flatten")
def _flatten(a: Ask) -> Shape | None:
    axis = a.attr("axis", 1)
    x = a.shape(0)
    if x is None:
        return (1, None) if axis == 0 else (None, None)
    k = axis + len(x) if axis < 0 else axis
    if not 0 <= k <= len(x):
        return None
    return dims_product(x[:k]), dims_product(x[k:])


@rule("Reshape")
def _reshape(a: Ask) -> Shape | None:
    target = a.attr("shape") if a.version < 5 else a.ints(1)
    if target is None or (a.version >= 5 and len(a.node.input) < 2):
        s = a.shape(1)  # a computed shape: as many dims as it has entries
        return (None,) * s[0] if s is not None and len(s) == 1 and isinstance(s[0], int) \
            else None
    target = [int(d) for d in target]
    if target.count(-1) > 1:
        return None
    x = a.shape(0)
    zero_copies = not (a.version >= 14 and a.attr("allowzero", 0))
    out: list[Dim] = []
    for i, d in enumerate(target):
        if d == 0 and zero_copies:
            out.append(x[i] if x is not None and i < len(x) else None)
        else:
            out.append(d)
    if -1 in out:
        k = out.index(-1)
        out[k] = dims_quotient(x, out[:k] + out[k + 1:]) if x is not None else None
    return tuple(out)


@rule("Transpose")
def _transpose(a: Ask) -> Shape | None:
    x, perm = a.shape(0), a.attr("perm")
    if perm is None:
        return None if x is None else tuple(reversed(x))
    if x is None:
        return (None,) * len(perm)
    if sorted(perm) != list(range(len(x))):
        return None
    return tuple(x[p] for p in perm)


def slice_range(size: int, start: int, end: int, step: int) -> range:
    """The positions Slice-10 picks on an axis of ``size``: a negative bound counts from
    the end, then both are clamped (not as numpy's slice: a start before 0 with a negative
    step is 0 here, nothing there)."""
    start, end = (v + size if v < 0 else v for v in (start, end))
    lo, hi = (0, size) if step > 0 else (0, size - 1)
    start = min(max(start, lo), hi)
    end = min(max(end, lo if step > 0 else -1), hi)
    return range(start, end, step)


@rule("Slice")
def _slice(a: Ask) -> Shape | None:
    """X's rank; a sliced dim's length where X's dim and the slice are known
    (:func:`slice_range`), unknown otherwise; the dims it does not slice kept."""
    x = a.shape(0)
    if x is None:
        return None
    legacy = a.version < 10
    starts, ends = a.ints(1, "starts" if legacy else None), a.ints(2, "ends" if legacy else None)
    axes = a.ints(3, "axes" if legacy else None)
    steps = [] if legacy else a.ints(4)
    if axes == []:  # the first len(starts) axes
        n = next((len(v) for v in (starts, ends, steps) if v), None)
        if n is None and not legacy:
            s = a.shape(1)
            n = s[0] if s is not None and len(s) == 1 and isinstance(s[0], int) else None
        axes = None if n is None else list(range(n))
    if axes is None:
        return (None,) * len(x)
    ks = [axis_index(k, len(x)) for k in axes]
    if None in ks:
        return None
    out = list(x)
    n = len(ks)
    if starts is None or ends is None or steps is None or len(starts) != n \
            or len(ends) != n or len(steps or [1] * n) != n:
        for i in ks:
            out[i] = None
        return tuple(out)
    for i, b, e, st in zip(ks, starts, ends, steps or [1] * n):
        if st == 0:
            return None
        d = x[i]
        out[i] = len(slice_range(d, b, e, st)) if isinstance(d, int) else None
    return tuple(out)


@rule("Squeeze")
def _squeeze(a: Ask) -> Shape | None:
    x, axes = a.shape(0), a.ints(1, "axes")
    if x is None or axes is None:
        return None
    if not axes:  # every dim of size 1: known only when every dim is
        return tuple(d for d in x if d != 1) if complete(x) else None
    ks = {axis_index(k, len(x)) for k in axes}
    return None if None in ks else tuple(d for i, d in enumerate(x) if i not in ks)


@rule("Unsqueeze")
def _unsqueeze(a: Ask) -> Shape | None:
    x, axes = a.shape(0), a.ints(1, "axes")
    if x is None or not axes:
        return None
    r = len(x) + len(axes)
    ks = {axis_index(k, r) for k in axes}
    if None in ks or len(ks) != len(axes):
        return None
    rest = iter(x)
    return tuple(1 if i in ks else next(rest) for i in range(r))


@rule("Concat")
def _concat(a: Ask) -> Shape | None:
    shapes = [a.shape(i) for i in range(len(a.node.input))]
    known = [s for s in shapes if s is not None]
    if not known or any(len(s) != len(known[0]) for s in known):
        return None
    k = axis_index(a.attr("axis", 1), len(known[0]))
    if k is None:
        return None
    out = list(same_shape([s[:k] + (None,) + s[k + 1:] for s in known]) or ())
    along = [s[k] if s is not None else None for s in shapes]
    out[k] = sum(along) if all(isinstance(d, int) for d in along) else None
    return tuple(out)


@rule("Shape")
def _shape(a: Ask) -> Shape:
    x = a.shape(0)
    if x is None:
        return (None,)
    start, end = a.attr("start", 0), a.attr("end", len(x))
    lo, hi = (min(max(v + len(x) if v < 0 else v, 0), len(x)) for v in (start, end))
    return (max(hi - lo, 0),)


@rule("Size")
def _size(a: Ask) -> Shape:
    return ()


@rule("Gather")
def _gather(a: Ask) -> Shape | None:
    x, idx = a.shape(0), a.shape(1)
    if x is None or idx is None:
        return None
    k = axis_index(a.attr("axis", 0), len(x))
    return None if k is None else (*x[:k], *idx, *x[k + 1:])


@rule("ConstantOfShape")
def _constant_of_shape(a: Ask) -> Shape | None:
    dims = a.ints(0)
    if dims is not None:
        return tuple(dims)
    s = a.shape(0)
    return (None,) * s[0] if s is not None and len(s) == 1 and isinstance(s[0], int) else None


@rule("Expand")
def _expand(a: Ask) -> Shape | None:
    dims = a.ints(1)
    if dims is not None:
        return broadcast([a.shape(0), tuple(dims)])
    x, s = a.shape(0), a.shape(1)
    if x is None or s is None or len(s) != 1 or not isinstance(s[0], int):
        return None
    return (None,) * max(len(x), s[0])


@rule("Pad")
def _pad(a: Ask) -> Shape | None:
    """X's rank; a padded dim grows by its pads where they and the dim are known."""
    x = a.shape(0)
    if x is None:
        return None
    r = len(x)
    pads = a.ints(1, "pads" if a.version >= 2 else "paddings") if a.version < 11 else a.ints(1)
    axes = a.ints(3) if a.version >= 18 else []
    if pads is None or axes is None:
        return (None,) * r
    ks = [axis_index(k, r) for k in axes] if axes else list(range(r))
    if None in ks or len(pads) != 2 * len(ks):
        return None
    out = list(x)
    for j, k in enumerate(ks):
        d = x[k]
        out[k] = d + pads[j] + pads[j + len(ks)] if isinstance(d, int) else None
    return tuple(out)


@rule("Tile")
def _tile(a: Ask) -> Shape | None:
    x, reps = a.shape(0), a.ints(1)
    if x is None:
        return None
    if a.version < 6 or reps is None or len(reps) != len(x):  # (Tile-1: tiles along an axis)
        return (None,) * len(x)
    return tuple(d * k if isinstance(d, int) else (d if k == 1 else None)
                 for d, k in zip(x, reps))


@rule("Resize", "Upsample", "CenterCropPad")
def _resample(a: Ask) -> Shape | None:
    """X's rank (the sizes depend on modes, roi and rounding: left unknown)."""
    x = a.shape(0)
    return None if x is None else (None,) * len(x)


@rule("DepthToSpace", "SpaceToDepth")
def _depth_space(a: Ask) -> Shape | None:
    x, b = a.shape(0), a.attr("blocksize")
    if x is None or len(x) != 4 or not isinstance(b, int) or b < 1:
        return None
    n, c, h, w = x
    up = a.node.op_type == "DepthToSpace"

    def scaled(d: Dim, mul: int, div: int) -> Dim:
        return d * mul // div if isinstance(d, int) and (d * mul) % div == 0 else None
    return (n, scaled(c, 1, b * b), scaled(h, b, 1), scaled(w, b, 1)) if up else \
        (n, scaled(c, b * b, 1), scaled(h, 1, b), scaled(w, 1, b))


@rule("Split")
def _split(a: Ask) -> Shape | None:
    """Output 0: X's dims but along the axis, its size from a constant split."""
    x = a.shape(0)
    if x is None:
        return None
    k = axis_index(a.attr("axis", 0), len(x))
    if k is None:
        return None
    split = a.ints(1, "split") if a.version >= 2 else a.attr("split")
    first = split[0] if split else None
    return tuple(first if i == k else d for i, d in enumerate(x))


@rule("TopK")
def _topk(a: Ask) -> Shape | None:
    """Output 0: X's dims but along the axis, k of them."""
    x = a.shape(0)
    if x is None:
        return None
    k = axis_index(a.attr("axis", -1), len(x))
    ks = [a.attr("k")] if a.version < 10 else a.ints(1)
    if k is None:
        return None
    n = ks[0] if ks and len(ks) == 1 and isinstance(ks[0], int) else None
    return tuple(n if i == k else d for i, d in enumerate(x))


@rule("GatherElements")
def _gather_elements(a: Ask) -> Shape | None:
    return a.shape(1)


@rule("NonZero")
def _nonzero(a: Ask) -> Shape | None:
    x = a.shape(0)
    return None if x is None else (len(x), None)

