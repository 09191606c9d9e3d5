"""Shape rules of the ops that move or select data (see :mod:`.shape_rules`): Flatten,
Reshape, Transpose, Slice, Squeeze, Unsqueeze, Concat, Shape, Size, Gather, ConstantOfShape,
Expand."""

from __future__ import annotations

from .shape_rules import (
    Ask,
    Dim,
    Shape,
    _axis,
    _product,
    _quotient,
    _same,
    broadcast,
    complete,
    rule,
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
    return _product(x[:k]), _product(x[k:])


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
        out[k] = _quotient(x, out[:k] + out[k + 1:]) if x is not None else None
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


@rule("Slice")
def _slice(a: Ask) -> Shape | None:
    """X's rank; a sliced dim's length where X's dim and the slice are known (numpy's
    clamping, which Slice states), unknown otherwise; the dims it does not slice kept."""
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
    ks = [_axis(k, len(x)) for k in axes]
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
        out[i] = len(range(*slice(b, e, st).indices(d))) if isinstance(d, int) else None
    return tuple(out)


@rule("Squeeze")
def _squeeze(a: Ask) -> Shape | None:
    x, axes = a.shape(0), a.ints(1, "axes")
    if x is None or axes is None:
        return None
    if not axes:  # every dim of size 1: known only when every dim is
        return tuple(d for d in x if d != 1) if complete(x) else None
    ks = {_axis(k, len(x)) for k in axes}
    return None if None in ks else tuple(d for i, d in enumerate(x) if i not in ks)


@rule("Unsqueeze")
def _unsqueeze(a: Ask) -> Shape | None:
    x, axes = a.shape(0), a.ints(1, "axes")
    if x is None or not axes:
        return None
    r = len(x) + len(axes)
    ks = {_axis(k, r) for k in axes}
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
    k = _axis(a.attr("axis", 1), len(known[0]))
    if k is None:
        return None
    out = list(_same([s[:k] + (None,) + s[k + 1:] for s in known]) or ())
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
    k = _axis(a.attr("axis", 0), len(x))
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
